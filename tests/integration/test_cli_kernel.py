"""The command line on real kernels: ``python -m notebook_executor`` and the console script.

Each command runs in its own process, as a user at a shell would run it, so what lands on stdout
and stderr is what a shell would see (including anything a kernel writes to its own file
descriptors). Converted notebooks are checked by running them through one module-wide executor.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

from notebook_executor import NotebookExecutor, read_notebook
from support import RESULT_KEYS

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "notebooks"
MODULE = [sys.executable, "-m", "notebook_executor"]
SCRIPT = [os.fspath(Path(sys.executable).parent / "notebook-executor")]
PROG = "notebook-executor: error: "


def cli(
    *args: str,
    cwd: Path,
    command: Sequence[str] = MODULE,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_json(stdout: str) -> Any:
    """The single JSON document that is the whole of ``stdout``."""
    assert stdout.endswith("\n")
    assert stdout.count("\n") == 1, stdout
    return json.loads(stdout)


def run_files(runs_dir: Path) -> set[Path]:
    if not runs_dir.exists():
        return set()
    return {p for p in runs_dir.rglob("*") if p.suffix in (".ipynb", ".md")}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotebookExecutor]:
    executor = NotebookExecutor(runs_dir=tmp_path_factory.mktemp("api-runs"))
    try:
        yield executor
    finally:
        executor.close()


# -- run: success, --json, noise from the kernel ----------------------------------------------

NOISY = """# %% tags=["parameters"]
name: str = "world"  # who to greet

# %%
import os
import subprocess
import sys

import scrapbook as sb

print("printed by a cell")
sys.stdout.write("written to sys.stdout\\n")
print("printed to stderr", file=sys.stderr)
os.system("echo hi")
subprocess.run(["echo", "from a child process"], check=True)
os.write(1, b"raw write to fd 1\\n")
os.write(2, b"raw write to fd 2\\n")

# %%
sb.glue("greeting", f"Hello, {name}!")
sb.glue("numbers", [1, 2.5, None])
sb.glue("cwd", os.getcwd())
"""


@pytest.mark.parametrize("command", [MODULE, SCRIPT], ids=["python-m", "console-script"])
def test_run_json_prints_one_document(tmp_path: Path, command: list[str]) -> None:
    write(tmp_path / "nb", "noisy.py", NOISY)
    done = cli(
        "run", "nb/noisy.py", "-p", "name", "Ada", "--request", "say hi", "--json",
        "--runs-dir", "runs",
        cwd=tmp_path,
        command=command,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = one_json(done.stdout)
    assert list(result) == RESULT_KEYS
    assert result["status"] == "success"
    assert result["error_kind"] is None
    assert result["failed_cell"] is None
    assert result["notebook"] == "nb/noisy.py"
    assert result["parameters"] == {"name": "Ada"}
    assert result["request"] == "say hi"
    assert result["cells_total"] == result["cells_executed"] == 3
    assert result["scraps"] == {
        "greeting": "Hello, Ada!",
        "numbers": [1, 2.5, None],
        # The kernel works in the notebook's folder.
        "cwd": os.fspath((tmp_path / "nb").resolve()),
    }
    assert result["duration_seconds"] > 0
    for noise in ("hi\n", "printed", "written", "child", "raw write"):
        assert noise not in done.stdout
    assert "Traceback" not in done.stderr

    output = tmp_path / result["output_path"]
    day = result["started_at"][:10]
    assert output == tmp_path / "runs" / day / f"{result['run_id']}.ipynb"
    executed = nbformat.read(output, as_version=4)
    assert executed.metadata["notebook_executor"]["request"] == "say hi"
    texts = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    assert "printed by a cell" in texts
    assert "written to sys.stdout" in texts
    front = yaml.safe_load(output.with_suffix(".md").read_text(encoding="utf-8").split("---\n")[1])
    assert front["run_id"] == result["run_id"]
    assert front["status"] == "success"
    assert front["parameters"] == {"name": "Ada"}

    shown = cli("show", result["run_id"], "--json", "--runs-dir", "runs", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    record = one_json(shown.stdout)
    for key in ("run_id", "status", "parameters", "request", "scraps", "cells_executed"):
        assert record[key] == result[key]


def test_run_text_output(tmp_path: Path) -> None:
    done = cli(
        "run", os.fspath(EXAMPLES / "hello.py"), "-p", "name", "Bo", "--runs-dir", "runs",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("success: ")
    assert 'scrap greeting = "Hello, Bo!"' in done.stdout
    assert "scrap length = 10" in done.stdout
    assert len(run_files(tmp_path / "runs")) == 2


# -- run: the notebook fails -------------------------------------------------------------------

FAILING = """# %% [markdown]
# # Fails

# %% tags=["parameters"]
divisor: int = 0

# %%
print("dividing", flush=True)
ratio = 1 / divisor

# %%
print("never")
"""


def test_run_exit_1_when_the_notebook_fails(tmp_path: Path) -> None:
    write(tmp_path, "failing.py", FAILING)
    done = cli("run", "failing.py", "--json", "--runs-dir", "runs", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    result = one_json(done.stdout)
    assert list(result) == RESULT_KEYS
    assert result["status"] == "error"
    assert result["error_kind"] == "cell_error"
    failed = result["failed_cell"]
    assert failed["index"] == 2
    assert failed["ename"] == "ZeroDivisionError"
    assert failed["evalue"] == "division by zero"
    assert "\x1b" not in done.stdout
    assert result["cells_executed"] == 1
    assert (tmp_path / result["output_path"]).is_file()

    # Injected parameters do not shift the index; the text report names the cell too.
    done = cli("run", "failing.py", "-p", "divisor", "0", "--runs-dir", "runs", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("error: failing.py (1/3 code cells")
    assert "failed cell 2 (cell_error): ZeroDivisionError: division by zero" in done.stdout
    assert "\x1b" not in done.stdout


def test_run_cell_timeout(tmp_path: Path) -> None:
    write(tmp_path, "slow.py", "# %%\nx = 1\n\n# %%\nimport time\ntime.sleep(60)\n")
    done = cli(
        "run", "slow.py", "--cell-timeout", "2", "--json", "--runs-dir", "runs", cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    result = one_json(done.stdout)
    assert result["error_kind"] == "timeout"
    assert result["failed_cell"]["index"] == 1
    assert result["duration_seconds"] < 30


# -- run: bad input ----------------------------------------------------------------------------

PARAMS = """# %% tags=["parameters"]
name: str = "world"  # who to greet
count: int = 1  # how many
ratio: float = 0.5
flag: bool = False
items: list = []
options: dict = {}
label: str = "x"
anything = None
needed: int = ...  # required

# %%
import scrapbook as sb

keys = ("name", "count", "ratio", "flag", "items", "options", "label", "anything", "needed")
for key in keys:
    sb.glue(key, globals()[key])
    sb.glue(key + "_type", type(globals()[key]).__name__)
"""

BAD_INPUT = [
    ("unknown-parameter", ["-p", "needed", "1", "-p", "colour", "red"], ["colour", "count: int"]),
    ("missing-required", ["-p", "name", "Ada"], ["needed"]),
    ("bad-p-value", ["-p", "needed", "abc"], ["needed", "int"]),
    ("raw-for-int", ["-p", "needed", "1", "-r", "count", "5"], ["count", "int"]),
    ("bad-list", ["-p", "needed", "1", "-p", "items", "{a: 1}"], ["items", "list"]),
    ("bad-yaml", ["-y", "needed: [1"], ["-y", "YAML"]),
    ("yaml-not-mapping", ["-y", "[1, 2]"], ["-y", "mapping"]),
    ("missing-params-file", ["-f", "nowhere.yaml"], ["nowhere.yaml"]),
    ("bad-timeout", ["-p", "needed", "1", "--timeout", "-3"], ["--timeout"]),
    ("unknown-option", ["-p", "needed", "1", "--bogus"], ["--bogus"]),
    ("missing-notebook", ["@missing.py"], ["missing.py"]),
    ("unsupported-format", ["@notes.txt"], ["notes.txt"]),
    ("malformed-ipynb", ["@broken.ipynb"], ["broken.ipynb"]),
]


@pytest.mark.parametrize(
    ("args", "mentions"), [case[1:] for case in BAD_INPUT], ids=[case[0] for case in BAD_INPUT]
)
def test_run_exit_2_on_bad_input(tmp_path: Path, args: list[str], mentions: list[str]) -> None:
    write(tmp_path, "params.py", PARAMS)
    write(tmp_path, "notes.txt", "not a notebook\n")
    write(tmp_path, "broken.ipynb", '{"cells": [')
    notebook = "params.py"
    if args and args[0].startswith("@"):
        notebook, args = args[0][1:], args[1:]
    done = cli("run", notebook, *args, "--runs-dir", "runs", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(PROG)
    assert "Traceback" not in done.stderr
    for mention in mentions:
        assert mention in lines[0]
    assert run_files(tmp_path / "runs") == set()


# -- run: papermill-style parameters -----------------------------------------------------------


def test_run_parameters_from_every_option(tmp_path: Path) -> None:
    write(tmp_path, "params.py", PARAMS)
    write(tmp_path, "params.yaml", "name: From file\ncount: 5\noptions: {a: 1, b: [x, y]}\n")
    done = cli(
        "run", "params.py",
        "-f", "params.yaml",
        "-y", "count: 6\nflag: true",
        "-p", "ratio", "2",
        "-p", "items", "[1, two, 3.5]",
        "-p", "label", "007",
        "-p", "needed", "42",
        "-r", "anything", "12",
        "--json", "--runs-dir", "runs",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = one_json(done.stdout)
    expected = {
        "name": "From file",
        "count": 6,
        "ratio": 2.0,
        "flag": True,
        "items": [1, "two", 3.5],
        "options": {"a": 1, "b": ["x", "y"]},
        "label": "007",
        "anything": "12",
        "needed": 42,
    }
    types = {
        "name": "str",
        "count": "int",
        "ratio": "float",
        "flag": "bool",
        "items": "list",
        "options": "dict",
        "label": "str",
        "anything": "str",
        "needed": "int",
    }
    assert result["parameters"] == expected
    assert {key: result["scraps"][key] for key in expected} == expected
    assert {key: result["scraps"][key + "_type"] for key in types} == types


def test_run_papermill_conversions(tmp_path: Path) -> None:
    write(tmp_path, "params.py", PARAMS)
    done = cli(
        "run", "params.py",
        "-p", "needed", "7",
        "-p", "flag", "True",
        "-p", "anything", "1.5",
        "-p", "name", "Zoë 🚀 None and 'quotes'; import os",
        "-p", "options", '{"k": [1, 2]}',
        "--json", "--runs-dir", "runs",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    scraps = one_json(done.stdout)["scraps"]
    assert scraps["needed"] == 7
    assert scraps["flag"] is True
    assert scraps["anything"] == 1.5
    assert scraps["anything_type"] == "float"
    assert scraps["name"] == "Zoë 🚀 None and 'quotes'; import os"
    assert scraps["options"] == {"k": [1, 2]}


# -- inspect -------------------------------------------------------------------------------------


def test_inspect(tmp_path: Path) -> None:
    write(tmp_path, "params.py", PARAMS)
    done = cli("inspect", "params.py", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert one_json(done.stdout) == {
        "name": {"name": "name", "type": "str", "default": "world", "help": "who to greet",
                 "required": False},
        "count": {"name": "count", "type": "int", "default": 1, "help": "how many",
                  "required": False},
        "ratio": {"name": "ratio", "type": "float", "default": 0.5, "help": "", "required": False},
        "flag": {"name": "flag", "type": "bool", "default": False, "help": "", "required": False},
        "items": {"name": "items", "type": "list", "default": [], "help": "", "required": False},
        "options": {"name": "options", "type": "dict", "default": {}, "help": "",
                    "required": False},
        "label": {"name": "label", "type": "str", "default": "x", "help": "", "required": False},
        "anything": {"name": "anything", "type": "any", "default": None, "help": "",
                     "required": False},
        "needed": {"name": "needed", "type": "int", "default": None, "help": "required",
                   "required": True},
    }  # fmt: skip

    done = cli("inspect", os.fspath(EXAMPLES / "logbook.md"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "station: any (required)  # station id to summarise (required)",
        "readings: list = [3.1, 4.7, 5.2]  # raw readings for the day",
        "unit: str = 'mm'  # unit of the readings",
    ]

    done = cli("inspect", "missing.md", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert "missing.md" in done.stderr


# -- convert ---------------------------------------------------------------------------------------


def test_convert_round_trip_runs_the_same(ex: NotebookExecutor, tmp_path: Path) -> None:
    steps = [
        (EXAMPLES / "hello.py", tmp_path / "hello.ipynb"),
        (tmp_path / "hello.ipynb", tmp_path / "hello.md"),
        (tmp_path / "hello.md", tmp_path / "again.py"),
        (EXAMPLES / "logbook.md", tmp_path / "logbook.ipynb"),
        (tmp_path / "logbook.ipynb", tmp_path / "logbook.py"),
    ]
    for src, dst in steps:
        done = cli("convert", os.fspath(src), os.fspath(dst), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
        assert dst.is_file()
    nbformat.validate(nbformat.read(tmp_path / "hello.ipynb", as_version=4))

    def outcome(path: Path, parameters: dict[str, Any]) -> dict[str, Any]:
        result = ex.execute(path, parameters=parameters)
        assert result["status"] == "success", (path.name, result["failed_cell"])
        kept = ("status", "parameters", "cells_total", "cells_executed", "scraps")
        return {key: value for key, value in result.items() if key in kept}

    hello = {"name": "Ada", "times": 2}
    original = outcome(EXAMPLES / "hello.py", hello)
    assert original["scraps"] == {"greeting": "Hello, Ada!", "length": 11}
    for name in ("hello.ipynb", "hello.md", "again.py"):
        converted = tmp_path / name
        assert outcome(converted, hello) == original, name
        assert ex.inspect_parameters(converted) == ex.inspect_parameters(EXAMPLES / "hello.py")
        cells = read_notebook(converted).cells
        assert [c.cell_type for c in cells] == ["markdown", "code", "code", "code"]

    logbook = {"station": "S9", "readings": [1.0, 2.0]}
    original = outcome(EXAMPLES / "logbook.md", logbook)
    assert original["scraps"] == {"station": "S9", "mean": 1.5, "total": 3.0}
    # The logbook's parameters come from its front matter, no code cell of the .md; converted,
    # they are a code cell of the .ipynb and the .py: one more code cell, the same run.
    assert (original.pop("cells_total"), original.pop("cells_executed")) == (2, 2)
    for name in ("logbook.ipynb", "logbook.py"):
        ran = outcome(tmp_path / name, logbook)
        assert (ran.pop("cells_total"), ran.pop("cells_executed")) == (3, 3)
        assert ran == original, name


def test_convert_bad_input(tmp_path: Path) -> None:
    source = write(tmp_path, "hello.py", (EXAMPLES / "hello.py").read_text(encoding="utf-8"))
    for args, mention in [
        (["hello.py", "hello.txt"], "hello.txt"),
        (["hello.py", "hello.py"], "same file"),
        (["nowhere.py", "out.ipynb"], "nowhere.py"),
    ]:
        done = cli("convert", *args, cwd=tmp_path)
        assert done.returncode == 2, args
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(PROG)
        assert mention in lines[0]
    assert source.read_text(encoding="utf-8") == (EXAMPLES / "hello.py").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hello.py"]


# -- records hold no home path; --output ------------------------------------------------------


def test_records_hold_no_home_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    source = write(home / "work", "hello.py", (EXAMPLES / "hello.py").read_text(encoding="utf-8"))
    output = home / "out" / "executed.ipynb"
    output.parent.mkdir()
    done = cli(
        "run", os.fspath(source), "-p", "name", "Ada",
        "--runs-dir", os.fspath(home / "runs"), "--output", os.fspath(output), "--json",
        cwd=elsewhere,
        env={**os.environ, "HOME": os.fspath(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = one_json(done.stdout)
    assert result["scraps"] == {"greeting": "Hello, Ada!", "length": 11}
    assert Path(result["output_path"]) == output
    record = nbformat.read(output, as_version=4).metadata["notebook_executor"]
    assert record["run_id"] == result["run_id"]
    # Named relative to the project (the runs folder's parent): no home path either way.
    assert record["notebook"] == record["source"]["path"] == "work/hello.py"
    files = run_files(home / "runs")
    assert len(files) == 2
    for path in [*files, output]:
        assert os.fspath(home) not in path.read_text(encoding="utf-8"), path.name


#: Modules a command running a text notebook must not import: nbformat's schema validator
#: (jsonschema, and next to JupyterLab its slow format checkers), nbclient, jupytext, papermill.
HEAVY = ("nbformat", "nbclient", "jupytext", "jsonschema", "papermill")

IMPORTS_AFTER_RUN = f"""
import json, sys
from notebook_executor._faces.cli import main
status = main(sys.argv[1:])
print(json.dumps({{"status": status, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


@pytest.mark.parametrize(
    "source",
    [EXAMPLES / "hello.py", None],
    ids=["hello.py (markdown, tags)", "plain percent script"],
)
def test_running_a_percent_script_imports_neither_nbformat_nor_nbclient(
    tmp_path: Path, source: Path | None
) -> None:
    if source is None:
        source = tmp_path / "plain.py"
        source.write_text('# %% tags=["parameters"]\nx = 1\n\n# %%\nprint(x + 1)\n')
        argv = [os.fspath(source), "-p", "x", "41"]
    else:
        argv = [os.fspath(source), "-p", "name", "Ada"]
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS_AFTER_RUN, "run", *argv, "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"status": 0, "heavy": []}, done.stderr
    # The run record it wrote without nbformat is a valid notebook that nbformat reads back.
    (written,) = tmp_path.glob("*/*.ipynb")
    nb = nbformat.read(written, as_version=4)
    nbformat.validate(nb)
    printed = [output.get("text") for cell in nb.cells for output in cell.get("outputs", [])]
    assert ("42\n" if argv[-1] == "41" else "Hello, Ada!\n") in printed
