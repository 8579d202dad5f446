"""A parameters cell that is not valid Python: the run fails there and is recorded, as
papermill's run does; a session's step likewise."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import papermill
import pytest
from papermill.exceptions import PapermillExecutionError

from notebook_executor import NotebookExecutor, NotebookSourceError

pytestmark = pytest.mark.kernel

BROKEN = '# %% [markdown]\n# Title\n\n# %% tags=["parameters"]\nx = 1\ny = (2\n\n# %%\nprint(x)\n'


def test_the_run_fails_at_the_parameters_cell_as_papermills(
    tmp_path: Path, executor: NotebookExecutor
) -> None:
    path = tmp_path / "broken.py"
    path.write_text(BROKEN, encoding="utf-8")
    result = executor.execute(path, parameters={"x": 5})
    assert result["status"] == "error" and result["error_kind"] == "cell_error"
    failed = result["failed_cell"]
    assert failed is not None and failed["index"] == 1 and failed["ename"] == "SyntaxError"
    assert executor.get_run(result["run_id"])["status"] == "error"
    with pytest.raises(NotebookSourceError, match=r"parameters cell \(cell 1\).*line 2"):
        executor.inspect_parameters(path)

    nb = jupytext.read(path)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python", "language": "python"}
    source = tmp_path / "broken.ipynb"
    nbformat.write(nb, source)
    with pytest.raises(PapermillExecutionError) as caught:
        papermill.execute_notebook(
            str(source), str(tmp_path / "out.ipynb"), parameters={"x": 5}, progress_bar=False
        )
    assert caught.value.ename == failed["ename"]
    theirs = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    [failing] = [
        cell
        for cell in theirs.cells
        if any(output.get("output_type") == "error" for output in cell.get("outputs", []))
    ]
    assert "parameters" in failing.metadata.get("tags", [])
    assert failing.source == failed["source"]


def test_a_session_step_fails_at_the_parameters_cell(
    tmp_path: Path, executor: NotebookExecutor
) -> None:
    path = tmp_path / "broken.py"
    path.write_text(BROKEN, encoding="utf-8")
    with executor.open_session(path) as session:
        step = session.run()
    assert step["status"] == "error" and step["error_kind"] == "cell_error"
    assert step["failed_cell"] is not None and step["failed_cell"]["index"] == 1
    assert step["failed_cell"]["ename"] == "SyntaxError"
