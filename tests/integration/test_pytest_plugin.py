"""``pytest --notebooks`` (docs/how-to/review.md), proven by running pytest in a subprocess on a
real
temporary project: real kernels, the real plugin loaded through its ``pytest11`` entry point,
pytest-xdist's real workers. And ``check``'s parameter sets (issue 36, item 4) on the same
notebooks, so the two are seen to agree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import nbformat
import pytest

from notebook_executor import NotebookExecutor

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]

PASSES = """\
# %%
total = sum(range(5))
print("total", total)
"""

FAILS = """\
# %% [markdown]
# A notebook whose third cell fails.

# %%
prices = {"apple": 3}

# %%
import json

def lookup(name):
    return json.loads("{'" + name + "': 1}")[name]

lookup("pear")
"""

SKIPPED_CELL = """\
# %%
# NBVAL_SKIP
raise RuntimeError("never runs")

# %%
print("after the skipped cell")
"""

RAISES = """\
# %% tags=["raises-exception"]
1 / 0

# %%
# NBVAL_RAISES_EXCEPTION
{}["missing"]

# %%
print("the run went on")
"""

RAISES_NOTHING = """\
# %% tags=["raises-exception"]
print("no exception here")
"""

NEEDS = """\
---
parameters:
  station: ...   # required
  unit: "mm"
---

# A logbook

```python
print(f"station {station} in {unit}")
```
"""

NOT_A_NOTEBOOK = '''\
"""A plain module: no cell marker, no jupytext header."""

VALUE = 1
'''

SWEEP = """\
# %% tags=["parameters"]
n: int = 1  # how many

# %%
assert n < 10, f"n is {n}"
print("n", n)
"""


def _project(root: Path) -> Path:
    nbs = root / "notebooks"
    nbs.mkdir(parents=True)
    for name, text in {
        "passes.py": PASSES,
        "fails.py": FAILS,
        "skipped_cell.py": SKIPPED_CELL,
        "raises.py": RAISES,
        "raises_nothing.py": RAISES_NOTHING,
        "needs.md": NEEDS,
    }.items():
        (nbs / name).write_text(text, encoding="utf-8")
    (root / "helper.py").write_text(NOT_A_NOTEBOOK, encoding="utf-8")
    return nbs


def _pytest(root: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GREETING"))}
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _outcomes(out: str) -> dict[str, str]:
    """``{item id: PASSED/FAILED/SKIPPED}`` from pytest's ``-rA`` summary."""
    found: dict[str, str] = {}
    for line in out.splitlines():
        match = re.match(r"(PASSED|FAILED|ERROR) (\S+)", line)
        if match:
            found[match.group(2)] = match.group(1)
        match = re.match(r"SKIPPED \[\d+\] ([^:]+):\d+: (.*)", line)
        if match:
            found[match.group(1)] = "SKIPPED"
    return found


def test_notebooks_pass_fail_skip_raise_and_are_recorded(tmp_path: Path) -> None:
    _project(tmp_path)
    done = _pytest(tmp_path, "--notebooks", "--notebook-runs-dir", "runs")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert _outcomes(out) == {
        "notebooks/passes.py": "PASSED",
        "notebooks/fails.py": "FAILED",
        "notebooks/skipped_cell.py": "PASSED",
        "notebooks/raises.py": "PASSED",
        "notebooks/raises_nothing.py": "FAILED",
        "notebooks/needs.md": "SKIPPED",
    }, out
    # The plain module is no notebook, and is not collected.
    assert "helper.py" not in out
    # The failure: the cell (as failed_cell.index), its code, the traceback.
    failure = out.split("notebook notebooks/fails.py", 1)[1].split("\n", 1)[1]
    failure = re.split(r"\n(?:_{4}|={4})", failure, maxsplit=1)[0]
    assert "cell 2: cell_error: JSONDecodeError: Expecting property name" in failure
    assert '    lookup("pear")' in failure and "def lookup(name):" in failure
    assert "Traceback" in failure and '----> 6 lookup("pear")' in failure
    # Library frames (json's) are collapsed, the cell's own frames kept.
    assert "frame(s) in library code omitted]" in failure
    assert "json/decoder.py" not in failure
    assert "cell 0: marked raises-exception but raised no exception" in out
    assert "notebooks/needs.md:1: needs parameter station, not given" in out
    # Recorded as runs, in the catalog `runs` and `search` read.
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        runs = ex.runs()
        by_notebook = {run["notebook"]: run for run in runs}
        assert by_notebook["notebooks/fails.py"]["status"] == "error"
        failed_cell = by_notebook["notebooks/fails.py"]["failed_cell"]
        assert failed_cell is not None and failed_cell["index"] == 2
        assert by_notebook["notebooks/passes.py"]["status"] == "success"
        assert len(runs) == 5  # the skipped notebook never ran
    assert re.search(r"run \d{8}T\d{6}Z-fails-", failure)
    # Not recorded when told so.
    shutil.rmtree(tmp_path / "runs")
    done = _pytest(tmp_path, "--notebooks", "--notebook-no-record", "notebooks/passes.py")
    assert done.returncode == 0, done.stdout
    assert not (tmp_path / "runs").exists()


def test_dash_k_dash_x_timeout_and_parameter_sets(tmp_path: Path) -> None:
    nbs = _project(tmp_path)
    (nbs / "sweep.py").write_text(SWEEP, encoding="utf-8")
    (nbs / "slow.py").write_text("# %%\nimport time\ntime.sleep(60)\n", encoding="utf-8")
    sets = tmp_path / "notebook-parameters.yaml"
    sets.write_text(
        "notebooks/sweep.py:\n"
        "  - id: small\n    parameters: {n: 2}\n"
        "  - id: large\n    parameters: {n: 40}\n"
        "notebooks/needs.md:\n  station: north-3\n",
        encoding="utf-8",
    )
    done = _pytest(
        tmp_path, "--notebooks", "--notebook-parameter-sets", str(sets), "-k", "sweep or needs"
    )
    assert _outcomes(done.stdout) == {
        "notebooks/sweep.py[small]": "PASSED",
        "notebooks/sweep.py[large]": "FAILED",
        "notebooks/needs.md": "PASSED",
    }, done.stdout
    assert "AssertionError: n is 40" in done.stdout
    # -x: the first failure stops the session.
    done = _pytest(tmp_path, "--notebooks", "-x", "notebooks/fails.py", "notebooks/passes.py")
    assert done.returncode == 1
    assert "stopping after 1 failures" in done.stdout
    # A notebook named on the command line is run as a notebook, never imported as a module.
    assert _outcomes(done.stdout) == {"notebooks/fails.py": "FAILED"}, done.stdout
    assert "error during collection" not in done.stdout
    # --timeout (pytest-timeout's option here): the run stops, and says so.
    done = _pytest(tmp_path, "--notebooks", "--timeout", "3", "notebooks/slow.py")
    assert _outcomes(done.stdout) == {"notebooks/slow.py": "FAILED"}, done.stdout
    assert "timeout" in done.stdout.split("FAILURES", 1)[1]
    # Without pytest-timeout, --timeout is the plugin's own option.
    done = _pytest(
        tmp_path, "--notebooks", "-p", "no:timeout", "--timeout", "3", "notebooks/slow.py"
    )
    assert _outcomes(done.stdout) == {"notebooks/slow.py": "FAILED"}, done.stdout + done.stderr
    assert "timeout" in done.stdout.split("FAILURES", 1)[1]
    # check reads the same file and gives the same verdicts.
    check = subprocess.run(
        [
            *(sys.executable, "-m", "notebook_executor", "check", "notebooks/sweep.py"),
            *("notebooks/needs.md", "--execute", "--parameter-sets", str(sets), "-j", "1"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert check.returncode == 1
    lines = check.stdout.splitlines()
    assert lines[0] == "ok    notebooks/sweep.py[small]"
    assert lines[1].startswith("FAIL  notebooks/sweep.py[large]: cell 1: cell_error: Assertion")
    assert lines[2] == "ok    notebooks/needs.md"


def _golden_notebook(path: Path, printed: str) -> None:
    cell = nbformat.v4.new_code_cell(
        "# NBVAL_CHECK_OUTPUT\nimport datetime, uuid\n"
        "class Thing: pass\n"
        "print('value', 42)\nprint(uuid.uuid4(), datetime.datetime.now(), 'id=', id(1))\nThing()"
    )
    cell.outputs = [
        nbformat.v4.new_output(
            "stream",
            name="stdout",
            text=f"{printed}\n0b7a1c3e-1111-2222-3333-444455556666 2020-01-01 10:00:00.5 id= 77\n",
        ),
        nbformat.v4.new_output(
            "execute_result",
            data={"text/plain": "<__main__.Thing at 0x7f00deadbeef>"},
            execution_count=1,
        ),
    ]
    free = nbformat.v4.new_code_cell("print('not compared', 'anything')")
    free.outputs = [nbformat.v4.new_output("stream", name="stdout", text="something else\n")]
    nbformat.write(nbformat.v4.new_notebook(cells=[cell, free]), path)


def test_output_regression_diff_and_regenerated_goldens(tmp_path: Path) -> None:
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    _golden_notebook(nbs / "same.ipynb", "value 42")
    _golden_notebook(nbs / "changed.ipynb", "value 41")
    (nbs / "text.py").write_text("# %%\n# NBVAL_CHECK_OUTPUT\nprint('run', 7)\n", encoding="utf-8")
    sanitize = tmp_path / "sanitize.cfg"
    sanitize.write_text("[ids]\nregex: id= \\d+\nreplace: id= ID\n", encoding="utf-8")
    done = _pytest(tmp_path, "--notebooks", "--notebook-sanitize-with", str(sanitize))
    # Timestamps, uuids, memory addresses and the user's rule normalised: only the value differs.
    assert _outcomes(done.stdout) == {
        "notebooks/same.ipynb": "PASSED",
        "notebooks/changed.ipynb": "FAILED",
        "notebooks/text.py": "PASSED",
    }, done.stdout
    failure = done.stdout.split("FAILURES", 1)[1]
    assert "cell 0: outputs differ from the stored ones" in failure
    assert "-value 41" in failure and "+value 42" in failure
    assert "no golden outputs stored in notebooks/text.py.golden.json" in done.stdout
    # Without the rule, id(1) differs from the stored 77.
    done = _pytest(tmp_path, "--notebooks", "notebooks/same.ipynb")
    assert _outcomes(done.stdout) == {"notebooks/same.ipynb": "FAILED"}, done.stdout
    # Every cell compared: the second cell's stored output is not what it prints.
    done = _pytest(
        tmp_path,
        "--notebooks",
        "--notebook-check-outputs",
        "--notebook-sanitize-with",
        str(sanitize),
        "notebooks/same.ipynb",
    )
    assert "cell 1: outputs differ" in done.stdout, done.stdout
    # Regenerated: the .ipynb's own outputs, a .golden.json beside the text source.
    done = _pytest(tmp_path, "--notebooks", "--notebook-update-golden")
    assert done.returncode == 0, done.stdout
    stored = nbformat.read(nbs / "changed.ipynb", as_version=4)
    assert stored.cells[0].outputs[0]["text"].startswith("value 42\n")
    assert stored.cells[1].outputs[0]["text"] == "something else\n"  # not a compared cell
    golden = json.loads((nbs / "text.py.golden.json").read_text(encoding="utf-8"))
    assert golden["sets"][""]["0"][0]["text"] == "run 7\n"
    (nbs / "text.py").write_text("# %%\n# NBVAL_CHECK_OUTPUT\nprint('run', 8)\n")
    done = _pytest(tmp_path, "--notebooks", "--notebook-sanitize-with", str(sanitize))
    assert _outcomes(done.stdout)["notebooks/changed.ipynb"] == "PASSED", done.stdout
    assert _outcomes(done.stdout)["notebooks/text.py"] == "FAILED", done.stdout
    assert "-run 7" in done.stdout and "+run 8" in done.stdout
    # check compares with the same goldens, by the same code.
    check = subprocess.run(
        [sys.executable, "-m", "notebook_executor", "check", "notebooks/text.py", "--execute"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert check.returncode == 1
    assert "FAIL  notebooks/text.py: cell 0: outputs differ from the stored ones" in check.stdout


def test_xdist_workers_each_with_warm_kernels_share_one_runs_folder(tmp_path: Path) -> None:
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    for number in range(6):
        (nbs / f"nb_{number}.py").write_text(
            f"# %%\nvalue = {number}\nprint(value)\n", encoding="utf-8"
        )
    (nbs / "fails.py").write_text(FAILS, encoding="utf-8")
    done = _pytest(tmp_path, "--notebooks", "-n", "2", "--notebook-runs-dir", "runs")
    outcomes = _outcomes(done.stdout)
    assert outcomes == {
        **{f"notebooks/nb_{n}.py": "PASSED" for n in range(6)},
        "notebooks/fails.py": "FAILED",
    }, done.stdout + done.stderr
    assert "2 workers [7 items]" in done.stdout
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        runs = ex.runs()
        assert len(runs) == 7
        assert sorted(run["notebook"] for run in runs) == sorted(
            ["notebooks/fails.py", *(f"notebooks/nb_{n}.py" for n in range(6))]
        )
        # Both workers ran notebooks: the records name two pytest processes.
        pids = {
            json.loads((tmp_path / run["output_path"]).read_text(encoding="utf-8"))["metadata"][
                "notebook_executor"
            ]["pid"]
            for run in runs
        }
        assert len(pids) == 2
        # The catalog agrees with the files it indexes.
        ex.reindex()
        assert len(ex.runs()) == 7


#: Records, per pytest process, what its executor did: whether its kernel template was asked
#: to start by the end of the collection, and its pool's counts at the end (before it closes).
PROBE_CONFTEST = """\
import json
import os

import pytest

from notebook_executor._faces.pytest_plugin import _STATE


def _write(config, key, value):
    name = getattr(config, "workerinput", {}).get("workerid", "controller")
    path = config.rootpath / f"probe-{name}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = value
    path.write_text(json.dumps(data))


def pytest_collection_finish(session):
    state = session.config.stash.get(_STATE, None)
    made = state is not None and state._executor is not None
    _write(session.config, "prepared", made and state.prepared)


def _parent(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


# Before the plugin's own teardown of each item: after a process's last notebook, the plugin
# stops its kernels (and its executor) at once.
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    state = item.config.stash.get(_STATE, None)
    executor = None if state is None else state._executor
    pool = None if executor is None else executor._engine.pool
    _write(item.config, "stats", None if pool is None else pool.stats)
    first = None if pool is None else pool.starts.first
    if first is not None and first.pid is not None:
        # The process the kernels fork from, and whose child it is.
        _write(item.config, "template", [first.pid, _parent(first.pid), os.getppid()])
"""

ENVIRONMENT_PROBE = """\
# %%
import os

assert "PYTEST_CURRENT_TEST" not in os.environ, os.environ["PYTEST_CURRENT_TEST"]
print(os.getpid())
"""


def test_each_process_prepares_while_collecting_and_later_notebooks_take_warm_kernels(
    tmp_path: Path,
) -> None:
    """The kernel template starts during the collection (in each process that runs notebooks,
    not in pytest-xdist's controller, nor with --collect-only); no kernel is launched, and
    notebooks after the first take warm kernels: the kernels' environment is the same for
    every item (PYTEST_CURRENT_TEST, which names the item, is not passed on)."""
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    for number in range(6):
        (nbs / f"nb_{number}.py").write_text(ENVIRONMENT_PROBE, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(PROBE_CONFTEST, encoding="utf-8")

    def probes() -> dict[str, dict[str, object]]:
        found = {
            path.name[len("probe-") : -len(".json")]: json.loads(path.read_text())
            for path in tmp_path.glob("probe-*.json")
        }
        for path in tmp_path.glob("probe-*.json"):
            path.unlink()
        return found

    done = _pytest(tmp_path, "--notebooks", "--collect-only", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert probes() == {"controller": {"prepared": False}}

    done = _pytest(tmp_path, "--notebooks", "notebooks")
    assert done.returncode == 0, done.stdout + done.stderr
    found = probes()
    assert found["controller"]["prepared"] is True
    stats = found["controller"]["stats"]
    assert isinstance(stats, dict)
    assert stats["launched"] == 0, stats
    # One kernel per notebook, and the pool's two warm ones left at the end (and perhaps one
    # on its way): none thrown away for an environment that did not match the next item's.
    assert 6 <= stats["forked"] <= 6 + 3, stats
    assert stats["taken_warm"] + stats["started_cold"] == 6, stats

    done = _pytest(tmp_path, "--notebooks", "-n", "2", "notebooks")
    assert done.returncode == 0, done.stdout + done.stderr
    found = probes()
    # (pytest-xdist's controller collects nothing: its probe may hold no "prepared".)
    controller = found.pop("controller", {})
    assert controller.get("stats") is None and not controller.get("prepared"), controller
    assert sorted(found) == ["gw0", "gw1"]
    for worker in found.values():
        assert worker["prepared"] is True
        stats = worker["stats"]
        assert isinstance(stats, dict)
        assert stats["launched"] == 0, stats
    # One template for both workers, a child of their parent (the controller): neither
    # worker started its own.
    templates = [worker["template"] for worker in found.values()]
    assert all(isinstance(t, list) and len(t) == 3 for t in templates), found
    assert len({json.dumps(t) for t in templates}) == 1, found
    for template in templates:
        assert isinstance(template, list)
        _template, its_parent, workers_parent = template
        assert its_parent == workers_parent, found


def test_the_docs_ci_example_passes_on_the_repository_notebooks(tmp_path: Path) -> None:
    """The GitHub Actions step of docs/how-to/review.md, its commands as written, in a copy of
    the repository's notebooks/ (no secret set, as on a pull request from a fork)."""
    page = (REPO / "docs" / "how-to" / "review.md").read_text(encoding="utf-8")
    block = page.split("```yaml\n- name: Notebooks still run", 1)[1].split("```", 1)[0]
    commands = [
        line.strip()
        for line in block.split("run: |", 1)[1].split("- name:", 1)[0].splitlines()
        if line.strip().startswith(("notebook-executor ", "pytest "))
    ]
    assert len(commands) == 2, commands
    shutil.copytree(REPO / "notebooks", tmp_path / "notebooks")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GREETING"))}
    bin_dir = Path(sys.executable).parent
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    for command in commands:
        done = subprocess.run(
            command,
            shell=True,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
            check=False,
        )
        assert done.returncode == 0, command + "\n" + done.stdout + done.stderr
    suite = ElementTree.parse(tmp_path / "reports" / "notebooks.xml").getroot()
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert "notebooks/dataframe.py[small]" in cases and "notebooks/logbook.md" in cases
    skipped = cases["notebooks/logbook_placeholders.md"].find("skipped")
    assert skipped is not None
    assert skipped.get("message") == "needs environment variable GREETING_TOKEN, not given"
