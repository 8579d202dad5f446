"""One rule for which cells run: the loop, the failure of an engine, progress and a session's
steps all pass over a ``skip-execution`` cell alike."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._notebook import code_cell_indices
from notebook_executor._run.runner import first_unfinished_cell
from notebook_executor._sources.formats import load_source
from notebook_executor._types import TIMEOUTS
from notebook_executor.engine import (
    CellReply,
    RunCancelled,
    RunJob,
    ScriptedEngine,
    ScriptedKernel,
)

#: Cell 0 runs, cell 1 is skipped, cell 2 is where the engine fails.
NOTEBOOK = '# %%\nx = 1\n\n# %% tags=["skip-execution"]\nskipped = 1\n\n# %%\ny = 2\n'


def _failing_on_y(job: RunJob, index: int) -> CellReply:
    if "y = 2" in job.nb.cells[index].source:
        raise RuntimeError("the engine broke")
    return ()


def test_an_engine_failure_after_a_skipped_cell_names_the_cell_that_was_running(
    tmp_path: Path,
) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine(_failing_on_y)) as ex:
        result = ex.execute(tmp_path / "nb.py")
    assert result["status"] == "error"
    assert result["error_kind"] == "kernel_died"
    failed = result["failed_cell"]
    assert failed is not None
    assert (failed["index"], failed["source"], failed["ename"]) == (2, "y = 2", "RuntimeError")


def test_progress_reaches_its_total_with_a_skipped_cell(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    seen: list[tuple[int, int]] = []
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine()) as ex:
        result = ex.execute(
            tmp_path / "nb.py", on_cell=lambda done, total: seen.append((done, total))
        )
    assert result["status"] == "success"
    assert seen == [(1, 2), (2, 2)]


def test_the_rule_is_one_function(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    nb = load_source(tmp_path / "nb.py").nb
    assert code_cell_indices(nb) == [0, 2]
    assert first_unfinished_cell(nb, [0]) == 2
    assert first_unfinished_cell(nb, [0, 2]) == 2


class _CancelledWhileStarting(ScriptedEngine):
    """An engine whose kernel start is cut short by the job's cancel: it gives up with an
    error of its own, as an engine that does not raise ``KeyboardInterrupt`` does."""

    def open(self, job: RunJob) -> ScriptedKernel:
        assert job.cancel is not None
        job.cancel.set()
        raise RuntimeError("gave up waiting for the kernel")


def test_a_start_cut_short_by_cancel_is_recorded_cancelled(tmp_path: Path) -> None:
    """The loop owns start cancellation: whatever the engine raises once the job's cancel is
    set, the run is cancelled (not a dead kernel)."""
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    engine = _CancelledWhileStarting()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(RunCancelled) as raised,
    ):
        ex.execute(tmp_path / "nb.py", cancel=threading.Event())
    result = raised.value.result  # type: ignore[attr-defined]
    assert (result["status"], result["error_kind"]) == ("error", "cancelled")
    assert result["failed_cell"]["index"] == 0


def test_the_loop_gives_the_engine_its_start_limit(tmp_path: Path) -> None:
    """The start limit is the loop's: the default, or what is left of the run's timeout."""
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    engine = ScriptedEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        ex.execute(tmp_path / "nb.py")
        ex.execute(tmp_path / "nb.py", timeout=5)
    first, second = engine.jobs
    assert first.start_timeout == TIMEOUTS.kernel_start
    assert second.start_timeout is not None and 4 < second.start_timeout <= 5
