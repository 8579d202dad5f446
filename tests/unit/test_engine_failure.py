"""A failure of the engine itself ends the run as failed, recorded; bad hooks are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError
from notebook_executor.engine import CellReply, RunJob, ScriptedEngine
from support import failed_cell

NOTEBOOK = "# %% [markdown]\n# title\n\n# %%\nx = 1\n\n# %%\ny = 2\n"
SECRET = "hunter2-very-secret-token"


class BrokenEngine(ScriptedEngine):
    """An engine whose machinery fails (not a cell): running a cell raises."""

    def __init__(self) -> None:
        super().__init__(self._broken)

    @staticmethod
    def _broken(job: RunJob, index: int) -> CellReply:
        raise RuntimeError(f"socket closed while sending {SECRET}")


def test_an_engine_failure_finishes_the_run_as_failed(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs, engine=BrokenEngine()) as ex:
        result = ex.execute(tmp_path / "nb.py", secrets={"TOKEN": SECRET})
        listed = ex.runs()
    assert result["status"] == "error"
    assert result["error_kind"] == "kernel_died"
    error = failed_cell(result)
    assert error["ename"] == "RuntimeError"
    assert "socket closed" in error["evalue"]
    assert error["index"] == 1  # the first code cell (cell 0 is markdown)
    assert SECRET not in json.dumps(result)
    # The record is final: not running, with its readable .md, and the catalog agrees.
    [row] = listed
    assert row["run_id"] == result["run_id"]
    assert row["status"] == "error"
    [executed] = runs.rglob("*.ipynb")
    record = json.loads(executed.read_text(encoding="utf-8"))["metadata"]["notebook_executor"]
    assert record["status"] == "error"
    assert list(runs.rglob("*.md"))
    for path in runs.rglob("*"):
        if path.is_file() and path.suffix in {".md", ".ipynb", ".json"}:
            assert SECRET not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "value"),
    [("cancel", True), ("cancel", "yes"), ("cancel", object()), ("on_cell", 5), ("on_cell", "f")],
)
def test_bad_cancel_or_on_cell_is_refused_before_anything_starts(
    tmp_path: Path, name: str, value: Any
) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    engine = ScriptedEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(NotebookExecutorError, match=name),
    ):
        ex.execute(tmp_path / "nb.py", **{name: value})
    assert engine.jobs == []
    assert not (tmp_path / "runs").exists()


def test_an_engine_failure_after_some_cells_keeps_what_completed(tmp_path: Path) -> None:
    def fails_at_the_second(job: RunJob, index: int) -> CellReply:
        if index == 2:
            raise RuntimeError("the connection dropped")
        return []

    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    with NotebookExecutor(
        runs_dir=tmp_path / "runs", engine=ScriptedEngine(fails_at_the_second)
    ) as ex:
        result = ex.execute(tmp_path / "nb.py")
    assert result["status"] == "error" and result["error_kind"] == "kernel_died"
    assert failed_cell(result)["index"] == 2
    assert result["cells_executed"] == 1
