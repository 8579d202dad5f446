"""Sessions run on the executor's engine, through the cell loop of runs (issue: one path for
every cell): a scripted engine serves them with no kernel process, and what the loop does for a
run (the "output lost" marker, a dead kernel's account, Ctrl-C) it does for a step."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import KernelStartError, NotebookExecutor
from notebook_executor._run.cell_loop import OUTPUT_LOST_MARKER
from notebook_executor.engine import CellEnd, CellFailure, RunJob, ScriptedEngine, ScriptedKernel
from support import descendants, failed_cell

NOTEBOOK = "# %%\na = 1\n\n# %%\nb = a + 1\n\n# %%\nprint(b)\n"


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    path = tmp_path / "nb.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    return path


def test_a_session_on_a_scripted_engine_starts_no_kernel_process(
    notebook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_process(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    before = set(descendants(os.getpid()))
    engine = ScriptedEngine(
        lambda job, index: [{"output_type": "stream", "name": "stdout", "text": f"cell {index}\n"}]
    )
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        ex.open_session(notebook) as session,
    ):
        step = session.run()
        assert step["status"] == "success" and step["cells_run"] == [0, 1, 2]
        assert [o["text"] for o in step["outputs"]] == ["cell 0\n", "cell 1\n", "cell 2\n"]
        again = session.rerun_from(1)
        assert again["status"] == "success" and again["cells_run"][-2:] == [1, 2]
        assert session.evaluate("b")["status"] == "success"
    assert set(descendants(os.getpid())) == before
    # The session's kernel was opened for a job that asks for checkpoints.
    assert [job.checkpoints for job in engine.jobs] == [True]


class _LosingKernel(ScriptedKernel):
    """A kernel whose cell 1 replies, but whose output for it never ends."""

    def run_cell(self, nb: Any, index: int, limit: float | None) -> CellEnd:
        end = super().run_cell(nb, index, limit)
        if index == 1:
            end.idle = False
        return end


class _LosingEngine(ScriptedEngine):
    def open(self, job: RunJob) -> ScriptedKernel:
        self.jobs.append(job)
        return _LosingKernel(job, self.handler)


def test_a_step_marks_output_lost_as_a_run_does(notebook: Path, tmp_path: Path) -> None:
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=_LosingEngine()) as ex:
        ran = ex.execute(notebook)
        with ex.open_session(notebook) as session:
            step = session.run()
            run_id = session.run_id
    assert ran["status"] == step["status"] == "success"
    marker = OUTPUT_LOST_MARKER.split("{")[0]
    [record] = (tmp_path / "runs").rglob(f"{run_id}.ipynb")
    cells = json.loads(record.read_text(encoding="utf-8"))["cells"]
    texts = ["".join(o.get("text", "")) for o in cells[1]["outputs"]]
    assert any(text.startswith(marker) for text in texts), texts
    [run_record] = (tmp_path / "runs").rglob(f"{ran['run_id']}.ipynb")
    run_cells = json.loads(run_record.read_text(encoding="utf-8"))["cells"]
    assert ["".join(o.get("text", "")) for o in run_cells[1]["outputs"]] == texts


def test_a_dead_kernel_fails_a_step_as_it_fails_a_run(notebook: Path, tmp_path: Path) -> None:
    def dies(job: RunJob, index: int) -> Any:
        if index == 1:
            return CellFailure(index, "kernel_died", "DeadKernelError", "gone", ["last words"])
        return []

    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine(dies)) as ex:
        ran = ex.execute(notebook)
        with ex.open_session(notebook) as session:
            step = session.run()
    for result in (ran, step):
        assert result["status"] == "error" and result["error_kind"] == "kernel_died"
        assert failed_cell(result)["index"] == 1


def test_a_session_whose_engine_cannot_start_a_kernel_raises_kernel_start_error(
    notebook: Path, tmp_path: Path
) -> None:
    class NoKernel(ScriptedEngine):
        def open(self, job: RunJob) -> ScriptedKernel:
            raise RuntimeError("the kernel died before answering")

    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=NoKernel()) as ex:
        result = ex.execute(notebook)
        assert result["status"] == "error" and result["error_kind"] == "kernel_died"
        with pytest.raises(KernelStartError, match="the kernel did not start"):
            ex.open_session(notebook)


@pytest.mark.parametrize(
    ("stop", "kind"),
    [
        (RuntimeError("the kernel died before answering"), "kernel_died"),
        (KeyboardInterrupt(), "cancelled"),
    ],
)
def test_a_session_that_never_started_is_recorded_as_failed_not_as_a_success(
    notebook: Path, tmp_path: Path, stop: BaseException, kind: str
) -> None:
    """A session whose kernel did not start, or whose opening was cut off (Ctrl-C, the run
    server gone), ran no cell: its record and catalog row say so (they said ``success``)."""

    class NoKernel(ScriptedEngine):
        def open(self, job: RunJob) -> ScriptedKernel:
            raise stop

    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=NoKernel()) as ex:
        with pytest.raises((KernelStartError, KeyboardInterrupt)):
            ex.open_session(notebook)
        (row,) = ex.runs()
        record = ex.get_run(row["run_id"])
    assert row["status"] == record["status"] == "error"
    assert row["error_kind"] == record["error_kind"] == kind
    assert failed_cell(record)["index"] == 0  # the first code cell
