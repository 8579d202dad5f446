"""``pytest --notebooks`` as a newcomer meets it (issue 46, item 3): golden outputs per
parameter set in every format, one rule for a checked cell with no golden outputs yet, and
test runs recorded where pytest keeps its state, not in the project.

Each test runs pytest in a subprocess on a real temporary project (real kernels, the plugin
loaded through its entry point), as ``test_pytest_plugin.py`` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from notebook_executor import NotebookExecutor

from .test_pytest_plugin import _outcomes

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

SETS = """\
sets.ipynb:
  - {n: 1}
  - {n: 2}
sets.py:
  - {n: 1}
  - {n: 2}
"""

SETS_PY = """\
# %% tags=["parameters"]
n = 0

# %%
# NBVAL_CHECK_OUTPUT
print("n is", n)
"""


def _pytest(root: Path, *args: str, cache: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["NO_COLOR"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *([] if cache else ["-p", "no:cacheprovider"]),
            "-rA",
            f"--basetemp={root.parent / (root.name + '-basetemp')}",
            *args,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )


def _sets_ipynb(path: Path) -> None:
    parameters = nbformat.v4.new_code_cell("n = 0", metadata={"tags": ["parameters"]})
    checked = nbformat.v4.new_code_cell('# NBVAL_CHECK_OUTPUT\nprint("n is", n)')
    nbformat.write(nbformat.v4.new_notebook(cells=[parameters, checked]), path)


def test_golden_outputs_are_kept_per_parameter_set_in_every_format(tmp_path: Path) -> None:
    _sets_ipynb(tmp_path / "sets.ipynb")
    (tmp_path / "sets.py").write_text(SETS_PY, encoding="utf-8")
    (tmp_path / "sets.yaml").write_text(SETS, encoding="utf-8")
    options = ("--notebooks", "--notebook-parameter-sets", "sets.yaml", "--notebook-no-record")
    done = _pytest(tmp_path, *options, "--notebook-update-golden")
    assert done.returncode == 0, done.stdout + done.stderr
    # Each set's outputs kept, the .ipynb's as the .py's.
    done = _pytest(tmp_path, *options)
    assert _outcomes(done.stdout) == {
        "sets.ipynb[n=1]": "PASSED",
        "sets.ipynb[n=2]": "PASSED",
        "sets.py[n=1]": "PASSED",
        "sets.py[n=2]": "PASSED",
    }, done.stdout
    assert "no golden outputs" not in done.stdout
    for name in ("sets.ipynb", "sets.py"):
        golden = json.loads((tmp_path / f"{name}.golden.json").read_text(encoding="utf-8"))
        assert golden["sets"]["n=1"]["1"][0]["text"] == "n is 1\n"
        assert golden["sets"]["n=2"]["1"][0]["text"] == "n is 2\n"
    # A change in one set's output fails that set only.
    golden_file = tmp_path / "sets.ipynb.golden.json"
    golden = json.loads(golden_file.read_text(encoding="utf-8"))
    golden["sets"]["n=2"]["1"][0]["text"] = "n is 3\n"
    golden_file.write_text(json.dumps(golden), encoding="utf-8")
    done = _pytest(tmp_path, *options)
    outcomes = _outcomes(done.stdout)
    assert outcomes["sets.ipynb[n=1]"] == "PASSED", done.stdout
    assert outcomes["sets.ipynb[n=2]"] == "FAILED", done.stdout
    assert "-n is 3" in done.stdout and "+n is 2" in done.stdout


def test_a_checked_cell_without_golden_outputs_warns_in_every_format(tmp_path: Path) -> None:
    # Never run: no outputs and no execution count, in the .ipynb as in a .py with no
    # .golden.json.
    checked = nbformat.v4.new_code_cell('# NBVAL_CHECK_OUTPUT\nprint("fresh")')
    nbformat.write(nbformat.v4.new_notebook(cells=[checked]), tmp_path / "fresh.ipynb")
    (tmp_path / "fresh.py").write_text('# %%\n# NBVAL_CHECK_OUTPUT\nprint("fresh")\n')
    done = _pytest(tmp_path, "--notebooks", "--notebook-no-record")
    assert _outcomes(done.stdout) == {"fresh.ipynb": "PASSED", "fresh.py": "PASSED"}, done.stdout
    assert "fresh.ipynb: cell 0: outputs not compared: no golden outputs stored" in done.stdout
    assert "fresh.py: cell 0: outputs not compared: no golden outputs stored" in done.stdout

    # A cell run and saved with no output has golden outputs: none. Stored by the update
    # (which keeps the run's execution count), then compared.
    quiet = nbformat.v4.new_code_cell("# NBVAL_CHECK_OUTPUT\nx = 1")
    nbformat.write(nbformat.v4.new_notebook(cells=[quiet]), tmp_path / "quiet.ipynb")
    done = _pytest(tmp_path, "--notebooks", "--notebook-no-record", "--notebook-update-golden")
    assert done.returncode == 0, done.stdout
    assert nbformat.read(tmp_path / "quiet.ipynb", as_version=4).cells[0].execution_count == 1
    nb = nbformat.read(tmp_path / "quiet.ipynb", as_version=4)
    nb.cells[0].source = '# NBVAL_CHECK_OUTPUT\nprint("loud")'
    nbformat.write(nb, tmp_path / "quiet.ipynb")
    done = _pytest(tmp_path, "--notebooks", "--notebook-no-record", "quiet.ipynb")
    assert _outcomes(done.stdout) == {"quiet.ipynb": "FAILED"}, done.stdout
    assert "+loud" in done.stdout


def _runs_in(folder: Path) -> list[str]:
    with NotebookExecutor(runs_dir=folder) as ex:
        return [run["notebook"] for run in ex.runs()]


def test_test_runs_are_recorded_where_pytest_keeps_its_state(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.py").write_text('# %%\nprint("hello")\n', encoding="utf-8")
    # The cache provider on: its folder.
    done = _pytest(project, "--notebooks", cache=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in project.iterdir()) == [".pytest_cache", "hello.py"]
    assert _runs_in(project / ".pytest_cache" / "d" / "notebook-executor-runs") == ["hello.py"]
    # Off: pytest's temporary folder (the base temp, which pytest keeps a few of).
    done = _pytest(project, "--notebooks")
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in project.iterdir()) == [".pytest_cache", "hello.py"]
    basetemp = tmp_path / "project-basetemp"
    assert _runs_in(basetemp / "notebook-executor-runs") == ["hello.py"]
    # Asked: the option, or the ini setting.
    done = _pytest(project, "--notebooks", "--notebook-runs-dir", "mine")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _runs_in(project / "mine") == ["hello.py"]
    (project / "pytest.ini").write_text("[pytest]\nnotebook_runs_dir = kept\n", encoding="utf-8")
    done = _pytest(project, "--notebooks")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _runs_in(project / "kept") == ["hello.py"]
