"""``execute``'s progress hook and cancel event, on the scripted engine."""

from __future__ import annotations

import threading
from pathlib import Path

from notebook_executor import NotebookExecutor
from notebook_executor.engine import CellReply, RunJob, ScriptedEngine

NOTEBOOK = (
    '# %% tags=["parameters"]\nx = 1\n\n# %%\ny = x + 1\n\n# %% [markdown]\n# note\n\n# %%\n1 / 0\n'
)


def divide_by_zero(job: RunJob, index: int) -> CellReply:
    """The kernel's answer to the notebook's cells: ``1 / 0`` fails."""
    if job.nb.cells[index].source == "1 / 0":
        return [
            {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "", "traceback": []}
        ]
    return []


def test_on_cell_is_told_completed_cells_and_the_total(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    seen: list[tuple[int, int]] = []
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine(divide_by_zero)) as ex:
        result = ex.execute(
            tmp_path / "nb.py", parameters={"x": 2}, on_cell=lambda *a: seen.append(a)
        )
    assert result["status"] == "error"
    # Four code cells run (the injected one included); the last fails, so three completed.
    assert seen == [(1, 4), (2, 4), (3, 4)]


def test_a_failing_on_cell_hook_does_not_fail_the_run(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK.replace("1 / 0", "z = 3"), encoding="utf-8")

    def broken(done: int, total: int) -> None:
        raise RuntimeError("display went away")

    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine(divide_by_zero)) as ex:
        assert ex.execute(tmp_path / "nb.py", on_cell=broken)["status"] == "success"


def test_the_cancel_event_reaches_the_engine(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    cancel = threading.Event()
    given: list[threading.Event | None] = []

    def observe(job: RunJob, index: int) -> CellReply:
        given.append(job.cancel)
        return divide_by_zero(job, index)

    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine(observe)) as ex:
        ex.execute(tmp_path / "nb.py", cancel=cancel)
        ex.execute(tmp_path / "nb.py")
    assert given[0] is cancel
    assert given[-1] is None
