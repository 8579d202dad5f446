"""Authoring and review on real kernels: validate with nbval's markers, the check gate, diff of
real runs, and the edit-and-rerun loop on every source format."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import nbformat
import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._faces.cli import main
from support import failed_cell

pytestmark = pytest.mark.kernel

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"
FORMATS = ["unit_basic.ipynb", "unit_basic.py", "unit_basic.md", "unit_myst.md", "unit_logbook.md"]


def _options(name: str) -> dict[str, Any]:
    return {"parameters": {"station": "S1"}} if "logbook" in name else {}


def _errors(verdict: Mapping[str, Any]) -> list[tuple[int | None, str]]:
    return [(p["cell"], p["message"]) for p in verdict["problems"] if p["severity"] == "error"]


@pytest.mark.parametrize("name", FORMATS)
def test_validate_runs_every_format(executor: NotebookExecutor, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    shutil.copy(DATA / name, path)
    assert executor.validate(path, execute=True, **_options(name)) == {
        "valid": True,
        "problems": [],
    }
    # A cell that fails at run time (it compiles) is reported with its index.
    executor.edit_cell(path, 2, "raise ValueError('broken on purpose')")
    verdict = executor.validate(path, execute=True, **_options(name))
    assert verdict["valid"] is False
    assert _errors(verdict) == [(2, "cell_error: ValueError: broken on purpose")]
    # A validation run is not recorded.
    assert executor.runs() == []


def _cell(source: str, tags: list[str] | None = None, outputs: list[Any] | None = None) -> Any:
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": tags} if tags else {})
    cell.outputs = [nbformat.from_dict(o) for o in outputs or []]
    return cell


def _stream(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _marked(tmp_path: Path, *, stored: str = "2\n", raising: str = "1 / 0") -> Path:
    nb = nbformat.v4.new_notebook(
        cells=[
            _cell("x = 1", tags=["parameters"]),
            _cell("# NBVAL_SKIP\nraise RuntimeError('a skipped cell ran')"),
            _cell("raise RuntimeError('a skipped cell ran')", tags=["skip-execution"]),
            _cell("raise RuntimeError('a skipped cell ran')", tags=["nbval-skip"]),
            _cell(raising, tags=["raises-exception"]),
            _cell(
                "# NBVAL_CHECK_OUTPUT\nprint(object())\nprint('\\x1b[31mred\\x1b[0m')",
                outputs=[_stream("<object object at 0x7f5e0c9a4f30>\nred\n")],
            ),
            _cell("# NBVAL_CHECK_OUTPUT\nprint(x + 1)", outputs=[_stream(stored)]),
            _cell("print('not compared')", outputs=[_stream("something else\n")]),
            _cell("# NBVAL_RAISES_EXCEPTION\nraise KeyError('expected')"),
            _cell("print('after the expected error')"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    path = tmp_path / "marked.ipynb"
    nbformat.write(nb, path)
    return path


def test_nbval_markers_are_honoured(executor: NotebookExecutor, tmp_path: Path) -> None:
    assert executor.validate(_marked(tmp_path), execute=True) == {"valid": True, "problems": []}


def test_check_output_compares_with_the_stored_outputs(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    verdict = executor.validate(_marked(tmp_path, stored="3\n"), execute=True)
    [(cell, message)] = _errors(verdict)
    assert cell == 6
    assert message.startswith("outputs differ from the stored ones")
    # The parameters given to the run count: with x = 2 the stored "3" is right.
    assert executor.validate(_marked(tmp_path, stored="3\n"), execute=True, parameters={"x": 2})[
        "valid"
    ]


def test_raises_exception_needs_an_exception(executor: NotebookExecutor, tmp_path: Path) -> None:
    verdict = executor.validate(_marked(tmp_path, raising="y = 0"), execute=True)
    assert _errors(verdict) == [(4, "marked raises-exception but raised no exception")]


PERCENT_MARKED = """\
# %% tags=["parameters"]
x = 1

# %% tags=["skip-execution"]
raise RuntimeError("a skipped cell ran")

# %%
# NBVAL_SKIP
raise RuntimeError("a skipped cell ran")

# %% tags=["raises-exception"]
{}["missing"]

# %%
# NBVAL_CHECK_OUTPUT
print(x)
"""


def test_markers_in_a_percent_script(executor: NotebookExecutor, tmp_path: Path) -> None:
    path = tmp_path / "marked.py"
    path.write_text(PERCENT_MARKED)
    verdict = executor.validate(path, execute=True)
    assert verdict["valid"] is True
    # A text source stores no outputs to compare: said as a warning.
    [problem] = verdict["problems"]
    assert problem["cell"] == 4 and problem["severity"] == "warning"


@pytest.mark.parametrize("name", FORMATS)
def test_edit_the_failed_cell_and_rerun(
    executor: NotebookExecutor, tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    shutil.copy(DATA / name, path)
    broken = executor.read_notebook(path).cells[2].source
    executor.edit_cell(path, 2, "undefined_name_here", expect=broken)
    failed = executor.execute(path, **_options(name))
    assert failed["status"] == "error"
    index = failed_cell(failed)["index"]
    assert index == 2
    executor.edit_cell(path, index, broken, expect="undefined_name_here")
    assert path.read_bytes() == (DATA / name).read_bytes()
    fixed = executor.execute(path, **_options(name))
    assert fixed["status"] == "success"


def test_diff_runs_of_one_notebook(executor: NotebookExecutor, tmp_path: Path) -> None:
    path = tmp_path / "unit_basic.py"
    shutil.copy(DATA / "unit_basic.py", path)
    first = executor.execute(path, parameters={"name": "Ada"})
    second = executor.execute(path, parameters={"name": "Bo"})
    again = executor.execute(path, parameters={"name": "Ada"})
    difference = executor.diff_runs(first["run_id"], second["run_id"])
    assert difference["status"] == ["success", "success"]
    assert difference["parameters"] == {"name": ["Ada", "Bo"]}
    assert difference["scraps"] == {"greeting": ["Hello, Ada!", "Hello, Bo!"]}
    changed = [(c["op"], c["index_a"], c["outputs_changed"]) for c in difference["cells"]]
    assert (("modified", 2, True)) in changed
    # Two runs with the same parameters produce the same notebook, timings aside.
    assert executor.diff_notebooks(first["run_id"], again["run_id"], outputs=True)["identical"]
    same = executor.diff_runs(first["run_id"], again["run_id"])
    assert dict(same) == {
        "status": ["success", "success"],
        "parameters": {},
        "scraps": {},
        "packages": {},
        "inputs": {},
        "cells": [],
    }
    # A run compared with its source: same cells (the injected parameters cell is left out).
    assert executor.diff_notebooks(path, first["run_id"])["cells"] == []


def test_check_execute_in_parallel_with_junit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("unit_basic.ipynb", "unit_basic.py", "unit_myst.md"):
        shutil.copy(DATA / name, folder / name)
    (folder / "fails.py").write_text('# %%\nx = 1\n\n# %%\nraise KeyError("no such key")\n')
    code = main(["check", "notebooks", "--execute", "-j", "2", "--junit-xml", "out/junit.xml"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[-1] == "3 passed, 1 failed"
    assert "FAIL  notebooks/fails.py: cell 1: cell_error: KeyError: 'no such key'" in out
    suite = ElementTree.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    failures = [case.find("failure") for case in suite.findall("testcase")]
    messages = [f.get("message") for f in failures if f is not None]
    assert messages == ["cell 1: cell_error: KeyError: 'no such key'"]
    (folder / "fails.py").unlink()
    assert main(["check", "notebooks", "--execute", "-j", "2"]) == 0


def test_check_output_problems_never_quote_a_secret(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    secret = "hunter2secretvalue"
    nb = nbformat.v4.new_notebook(
        cells=[
            _cell(
                "# NBVAL_CHECK_OUTPUT\nimport os, sys\ns = os.environ['TOK']\n"
                "sys.stdout.write(s[:4]); sys.stdout.flush(); print(s[4:])",
                outputs=[_stream("expected text\n")],
            ),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    path = tmp_path / "chk.ipynb"
    nbformat.write(nb, path)
    verdict = executor.validate(path, execute=True, secrets={"TOK": secret})
    [(cell, message)] = _errors(verdict)
    assert cell == 0
    assert message.startswith("outputs differ from the stored ones")
    assert "[secret TOK]" in message
    assert secret not in str(verdict)
    assert "hunt" not in str(verdict)
