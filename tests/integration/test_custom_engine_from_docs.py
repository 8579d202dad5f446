"""A custom engine written from docs/reference/engine.md alone, run on a notebook and a session.

Everything below comes from that page: ``open(job)`` and ``close()``; a kernel with ``info``,
``run_cell(nb, index, limit)`` writing the execution count and outputs into the cell and
returning a ``CellEnd``, outputs told to ``job.hooks.output_hook()``, ``save_widgets``, ``stop``
and ``close(clean=...)``; no checkpoints (a session's restore then replays). The kernel is
this process's Python, run with ``exec`` in a namespace of its own; nothing private is
imported.
"""

from __future__ import annotations

import contextlib
import io
import traceback
from pathlib import Path
from typing import Any

from notebook_executor import NotebookExecutor
from notebook_executor.engine import (
    CellEnd,
    CellRan,
    EngineKernel,
    NotebookNode,
    RunJob,
)

NOTEBOOK = (
    "# %%\nx = 2\n\n# %% [markdown]\n# a note\n\n"
    '# %% tags=["skip-execution"]\nraise SystemError("skipped cells never run")\n\n'
    "# %%\nprint(x * 21)\n\n# %%\nx += 1\n"
)


class ExecKernel:
    """A Python "kernel" in this process: ``exec`` in a namespace of its own."""

    def __init__(self, job: RunJob) -> None:
        self.job = job
        self.info: dict[str, Any] = {"language_info": {"name": "python"}}
        self.namespace: dict[str, Any] = {}
        self.count = 0
        self.alive = True

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        if not self.alive:
            return CellEnd("dead")
        cell = nb.cells[index]
        self.count += 1
        cell["execution_count"] = self.count
        cell["outputs"] = []
        told = self.job.hooks.output_hook()
        printed = io.StringIO()
        how = "ok"
        with contextlib.redirect_stdout(printed):
            try:
                exec(compile(str(cell["source"]), f"<cell {index}>", "exec"), self.namespace)
            except Exception as exc:
                how = "error"
                error = {
                    "output_type": "error",
                    "ename": type(exc).__name__,
                    "evalue": str(exc),
                    "traceback": traceback.format_exception_only(exc),
                }
        outputs: list[dict[str, Any]] = []
        if printed.getvalue():
            outputs.append({"output_type": "stream", "name": "stdout", "text": printed.getvalue()})
        if how == "error":
            outputs.append(error)
        for output in outputs:
            cell["outputs"].append(output)
            if told is not None:
                told(index, output)
        return CellEnd(how, idle=True)  # type: ignore[arg-type]

    def save_widgets(self, nb: NotebookNode) -> None:
        pass

    def stop(self) -> None:
        self.alive = False

    def close(self, *, clean: bool) -> None:
        self.alive = False
        self.namespace.clear()


class ExecEngine:
    """``open(job)`` and ``close()``: one fresh namespace per kernel."""

    def __init__(self) -> None:
        self.jobs: list[RunJob] = []
        self.kernels: list[ExecKernel] = []

    def open(self, job: RunJob) -> EngineKernel:
        self.jobs.append(job)
        self.kernels.append(ExecKernel(job))
        return self.kernels[-1]

    def close(self) -> None:
        pass


def test_a_custom_engine_from_the_docs_runs_a_notebook(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    engine = ExecEngine()
    progress: list[tuple[int, int]] = []
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        result = ex.execute(
            tmp_path / "nb.py", on_cell=lambda done, total: progress.append((done, total))
        )
    assert result["status"] == "success", result["failed_cell"]
    # cells_total counts the source's code cells, the skipped one too (SPEC).
    assert (result["cells_total"], result["cells_executed"]) == (4, 3)
    assert progress == [(1, 3), (2, 3), (3, 3)]
    # The loop gave the engine its start limit; the kernel was closed when the run ended.
    assert engine.jobs[0].start_timeout == 60.0
    assert not engine.kernels[0].alive
    from notebook_executor import read_notebook

    cells = read_notebook(result["output_path"]).cells
    assert cells[3].outputs[0]["text"] == "42\n"
    assert cells[2].get("execution_count") is None


def test_a_custom_engine_from_the_docs_reports_a_failing_cell(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text("# %%\nx = 1\n\n# %%\nprint(x)\n1 / 0\n\n# %%\nx = 3\n")
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ExecEngine()) as ex:
        result = ex.execute(tmp_path / "nb.py")
    assert (result["status"], result["error_kind"]) == ("error", "cell_error")
    failed = result["failed_cell"]
    assert failed is not None
    assert (failed["index"], failed["ename"]) == (1, "ZeroDivisionError")
    assert result["cells_executed"] == 1


def test_a_custom_engine_from_the_docs_runs_a_session(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    engine = ExecEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        session = ex.open_session(tmp_path / "nb.py")
        try:
            first = session.run(until=3)
            assert first["status"] == "success"
            assert first["cells_run"] == [0, 3]
            assert "42" in first["outputs"][-1]["text"]
            rest = session.run()
            assert rest["cells_run"] == [4]
            assert session.evaluate("print(x)")["output"].strip() == "3"
            # No checkpoints: going back replays the cells on a fresh kernel.
            again = session.rerun_from(3)
            assert again["restored"] == "replay"
            assert session.evaluate("print(x)")["output"].strip() == "3"
        finally:
            session.close()
    assert len(engine.kernels) == 2
    assert not any(kernel.alive for kernel in engine.kernels)


def test_the_hooks_of_a_custom_engines_job_hear_each_cell(tmp_path: Path) -> None:
    """What the page says of ``job.hooks``: a start, the outputs, and an end per cell."""
    from notebook_executor._run.cell_loop import run_job  # the loop the executor runs
    from notebook_executor._sources.formats import load_source

    (tmp_path / "nb.py").write_text(NOTEBOOK)
    job = RunJob(load_source(tmp_path / "nb.py").nb, _python(), tmp_path, {})
    heard: list[tuple[str, int]] = []
    job.hooks.on_cell_start.append(lambda event: heard.append(("start", event.index)))
    job.hooks.on_output.append(lambda event: heard.append(("output", event.index)))
    ended: list[CellRan] = []
    job.hooks.on_cell_executed.append(ended.append)
    run_job(ExecEngine(), job)
    assert heard == [("start", 0), ("start", 3), ("output", 3), ("start", 4)]
    assert [(ran.index, ran.completed) for ran in ended] == [(0, True), (3, True), (4, True)]


def _python() -> Any:
    import sys

    from notebook_executor.engine import KernelChoice

    return KernelChoice("python3", "python", native=True, interpreter=sys.executable)
