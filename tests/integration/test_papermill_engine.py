"""Papermill beside us on real kernels: our engine plugin through papermill's CLI and API, and
the same outcomes as papermill's own engine on the same notebooks."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import papermill as pm
import pytest
from papermill.exceptions import PapermillExecutionError

from notebook_executor import NotebookExecutor
from support import failed_cell

pytestmark = pytest.mark.kernel

PAPERMILL = [sys.executable, "-m", "papermill"]


def _write(path: Path, cells: list[str | tuple[str, str]], parameters: str | None) -> Path:
    """Code cells from strings, markdown from ("md", text); a parameters cell first if given."""
    v4 = nbformat.v4
    nb_cells = []
    if parameters is not None:
        cell = v4.new_code_cell(parameters)
        cell.metadata["tags"] = ["parameters"]
        nb_cells.append(cell)
    for item in cells:
        nb_cells.append(
            v4.new_markdown_cell(item[1]) if isinstance(item, tuple) else v4.new_code_cell(item)
        )
    nb = v4.new_notebook(cells=nb_cells)
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    nbformat.write(nb, path)
    return path


CASES: dict[str, tuple[list[str | tuple[str, str]], str | None, dict[str, int]]] = {
    "success": (["x = 1", "print(x)"], None, {}),
    "error_in_cell_2": (["x = 1", "y = 2", "raise KeyError('k')", "z = 3"], None, {}),
    "markdown_before": ([("md", "# a"), ("md", "b"), "x = 1", "1 / 0", "w = 1"], None, {}),
    "parameters_error": (["assert a < 3, a", "q = 1"], "a = 1", {"a": 5}),
    "parameters_success": (["assert a == 5, a"], "a = 1", {"a": 5}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_outcome_as_papermill(executor: NotebookExecutor, tmp_path: Path, case: str) -> None:
    cells, parameters_cell, parameters = CASES[case]
    source = _write(tmp_path / f"{case}.ipynb", cells, parameters_cell)
    papermill_error: PapermillExecutionError | None = None
    try:
        pm.execute_notebook(
            str(source), str(tmp_path / "pm.ipynb"), parameters=parameters, progress_bar=False
        )
    except PapermillExecutionError as exc:
        papermill_error = exc
    ours = executor.execute(source, parameters=parameters)
    assert ours["status"] == ("success" if papermill_error is None else "error")
    if papermill_error is None:
        assert ours["failed_cell"] is None
        return
    failed = failed_cell(ours)
    assert ours["error_kind"] == "cell_error"
    assert (failed["ename"], failed["evalue"]) == (papermill_error.ename, papermill_error.evalue)
    # Papermill counts its injected cell: its index is one more past the parameters cell.
    injected = 1 if parameters else 0
    assert failed["index"] == papermill_error.cell_index - injected
    assert failed["source"] == papermill_error.source


# -- the notebook_executor engine inside papermill --------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _close_plugin_kernels() -> Iterator[None]:
    """The API tests run the plugin in this process: stop its kernels after them."""
    yield
    from notebook_executor._faces.papermill_engine import NotebookExecutorEngine

    NotebookExecutorEngine.close()


def test_papermill_cli_runs_on_our_kernels(tmp_path: Path) -> None:
    source = _write(
        tmp_path / "hello.ipynb",
        [
            "import os\nparent = open(f'/proc/{os.getppid()}/cmdline').read()",
            "print('ppid', os.getppid())\nprint('template', '__nbx_template__' in parent)",
            "print('name is', name)",
        ],
        "name = 'x'",
    )
    out = tmp_path / "out.ipynb"
    process = subprocess.Popen(
        [*PAPERMILL, "--engine", "notebook_executor", str(source), str(out), "-p", "name", "Ada"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    nb = nbformat.read(out, as_version=4)
    texts = ["".join(o.get("text", "")) for c in nb.cells for o in c.get("outputs", [])]
    # Kernels forked from our template: their parent is the template, not papermill's
    # process (nbclient's kernels are papermill's children).
    assert any("template True" in t for t in texts), texts
    ppid = next(int(t.split()[1]) for t in texts if t.startswith("ppid"))
    assert ppid != process.pid
    assert "name is Ada\n" in texts
    assert nb.cells[1].metadata["tags"] == ["injected-parameters"]
    assert nb.metadata["papermill"]["parameters"] == {"name": "Ada"}
    assert {c.metadata["papermill"]["status"] for c in nb.cells} == {"completed"}
    assert all(c.metadata["papermill"]["duration"] > 0 for c in nb.cells)


def test_papermill_api_error_names_the_same_cell(tmp_path: Path) -> None:
    source = _write(tmp_path / "bad.ipynb", ["x = 1", ("md", "m"), "1 / 0", "y = 2"], "a = 1")
    errors = []
    for engine in (None, "notebook_executor"):
        with pytest.raises(PapermillExecutionError) as caught:
            pm.execute_notebook(
                str(source),
                str(tmp_path / f"{engine}.ipynb"),
                parameters={"a": 2},
                engine_name=engine,
                progress_bar=False,
            )
        errors.append(caught.value)
    theirs, ours = errors
    assert (ours.cell_index, ours.exec_count, ours.ename, ours.evalue) == (
        theirs.cell_index,
        theirs.exec_count,
        theirs.ename,
        theirs.evalue,
    )
    nb = nbformat.read(tmp_path / "notebook_executor.ipynb", as_version=4)
    # Papermill's error banner and anchor cells carry no papermill metadata.
    statuses = [c.metadata["papermill"]["status"] for c in nb.cells if "papermill" in c.metadata]
    assert statuses == ["completed", "completed", "completed", "completed", "failed", "pending"]
    assert nb.metadata["papermill"]["exception"] is True


def test_papermill_api_timeout_names_the_cell(tmp_path: Path) -> None:
    source = _write(tmp_path / "slow.ipynb", ["x = 1", "import time\ntime.sleep(60)", "y"], None)
    with pytest.raises(PapermillExecutionError) as caught:
        pm.execute_notebook(
            str(source),
            str(tmp_path / "out.ipynb"),
            engine_name="notebook_executor",
            execution_timeout=1,
            progress_bar=False,
        )
    assert caught.value.cell_index == 1
    assert caught.value.ename == "TimeoutError"
    assert "cell_timeout of 1 s" in caught.value.evalue
