"""The ``notebook_executor`` engine for papermill: papermill's run, on this library's kernels.

Installing the package registers :class:`NotebookExecutorEngine` in papermill's
``papermill.engine`` entry point group, so ``papermill -e notebook_executor IN OUT -p ...`` and
``papermill.execute_notebook(..., engine_name="notebook_executor")`` run on kernels forked from
a warm template (see docs/explanation/kernels.md), with truthful per-cell and whole-run limits.

Papermill keeps everything else: reading and writing the notebooks, injecting parameters,
its metadata, progress bar and its ``PapermillExecutionError``. The engine drives papermill's
notebook manager as papermill's own engine does: ``cell_start`` and ``cell_complete`` around
every cell (markdown ones too), ``cell_exception`` on the cell that stopped the run (``sys.exit()``
included, as papermill marks it), ``autosave_cell`` as outputs arrive; so the manager writes
papermill's metadata, saves, logs (``log_output``) and moves the progress bar itself. On a
timeout or a dead kernel, the cell that was running gets an error output (``TimeoutError`` or
``DeadKernelError`` with the reason), so papermill's error names that cell.

Only papermill imports this module (through the entry point, each time papermill is imported):
it costs what ``import notebook_executor`` costs, and kernels, templates and the engine's modules
wait for a run that asks for this engine. Papermill's engines are classes, not objects: the
kernels live in one engine per process, created at the first run and closed when the process
exits (or by :meth:`NotebookExecutorEngine.close`).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from papermill.engines import Engine

from .._kernels.kernel_engine import KernelEngine
from .._kernels.launch import choose_kernel, kernel_environment
from ..engine import CellHooks, EngineOutcome, RunJob

__all__ = ["NotebookExecutorEngine"]

_papermill_log = logging.getLogger("papermill")

_lock = threading.Lock()
_engines: list[KernelEngine] = []  # at most one: the process's kernels


def _engine() -> KernelEngine:
    """The process's kernel engine, created at the first run and closed at exit."""
    from .._kernels.kernel_engine import KernelEngine

    with _lock:
        if not _engines:
            engine = KernelEngine()
            _at_exit(engine.close)
            # The first kernel too is forked from a template (its imports overlap with the
            # reading of the notebook's kernelspec).
            engine.prepare_kernel()
            _engines.append(engine)
        return _engines[0]


def _at_exit(close: Callable[[], None]) -> None:
    """Run ``close`` as the interpreter exits, while threads can still be started.

    Stopping kernels needs the asyncio default executor; ``atexit`` handlers run after
    ``concurrent.futures`` has shut down, the hooks of :mod:`threading` before it, latest
    first. ``concurrent.futures.thread`` registers its own hook when it is first imported,
    which may be after this one (nothing may have imported it yet): import it first.
    """
    import concurrent.futures.thread  # noqa: F401

    register = getattr(threading, "_register_atexit", None)
    if register is None:  # pragma: no cover - CPython has had it since 3.9
        atexit.register(close)
    else:
        register(close)


class NotebookExecutorEngine(Engine):  # type: ignore[misc]
    """Papermill engine running notebooks on notebook_executor's kernels."""

    @classmethod
    def close(cls) -> None:
        """Stop the process's kernels now rather than at exit; a later run starts afresh."""
        with _lock:
            engines = list(_engines)
            _engines.clear()
        for engine in engines:
            engine.close()

    @classmethod
    def execute_managed_notebook(
        cls,
        nb_man: Any,
        kernel_name: str | None,
        log_output: bool = False,
        stdout_file: IO[str] | None = None,
        stderr_file: IO[str] | None = None,
        start_timeout: float = 60,
        execution_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        """Execute ``nb_man.nb`` in place; papermill's engine interface.

        ``execution_timeout`` limits each cell and ``start_timeout`` the kernel's start
        (papermill's meanings); the kernel works in the current directory (papermill's ``cwd``
        has been entered).
        """

        nb = nb_man.nb
        notebook = str(kwargs.get("input_path") or "notebook")
        kernel = choose_kernel(notebook, kernel_name, nb.metadata.get("kernelspec"))
        manager = _Manager(nb_man, _output_logger(log_output, stdout_file, stderr_file))
        job = RunJob(
            nb=nb,
            kernel=kernel,
            cwd=Path.cwd().resolve(),
            env=kernel_environment(None),
            cell_timeout=execution_timeout or None,
            start_timeout=start_timeout or None,
            hooks=CellHooks(
                on_cell_start=[lambda event: manager.start(event.index)],
                on_output=[lambda event: manager.output(event.index, event.output)],
                on_cell_executed=[
                    lambda ran: manager.complete(ran.index) if ran.completed else None
                ],
            ),
        )
        # Papermill's own engine says so before the first cell, log_output or not.
        _papermill_log.info(f"Executing notebook with kernel: {kernel_name or kernel.name}")
        from .._run.cell_loop import run_job

        outcome = run_job(_engine(), job)
        manager.finish(outcome)


class _Manager:
    """Papermill's notebook manager, told of each cell as papermill's own engine tells it.

    The engine reports code cells only; the cells it passes over (markdown, raw, skipped) are
    started and completed in order before the next one, as papermill does with every cell.
    """

    def __init__(self, nb_man: Any, log: Callable[[Mapping[str, Any]], None] | None) -> None:
        self.nb_man = nb_man
        self.cells = nb_man.nb.cells
        self.log = log
        self.reached = 0  # the first cell not yet started

    def _pass_over(self, stop: int) -> None:
        while self.reached < stop:
            cell = self.cells[self.reached]
            self.nb_man.cell_start(cell, self.reached)
            self.nb_man.cell_complete(cell, cell_index=self.reached)
            self.reached += 1

    def start(self, index: int) -> None:
        self._pass_over(index)
        self.nb_man.cell_start(self.cells[index], index)
        self.reached = index + 1

    def complete(self, index: int) -> None:
        cell = self.cells[index]
        if _exited(cell):
            # nbclient raises for SystemExit too: papermill marks the cell failed, and the
            # cells after it stay pending (without raising: its error is a clean exit).
            self.nb_man.cell_exception(cell, cell_index=index)
        self.nb_man.cell_complete(cell, cell_index=index)

    def output(self, index: int, output: Mapping[str, Any]) -> None:
        self.nb_man.autosave_cell()
        if self.log is not None:
            self.log(output)

    def finish(self, outcome: EngineOutcome) -> None:
        """The run is over: the cell that stopped it, or the cells after the last code cell."""
        failure = outcome.failure
        if failure is None:
            if outcome.exited is None:
                self._pass_over(len(self.cells))
            return
        cell = self.cells[failure.index]
        if self.reached <= failure.index:  # the kernel never started: no cell ran
            self.start(failure.index)
        if failure.kind != "cell_error":
            from nbformat.v4 import new_output

            cell.outputs.append(
                new_output(
                    "error", ename=failure.ename, evalue=failure.evalue, traceback=failure.traceback
                )
            )
        self.nb_man.cell_exception(cell, cell_index=failure.index)
        self.nb_man.cell_complete(cell, cell_index=failure.index)


def _exited(cell: Any) -> bool:
    """Whether ``cell`` ended the run with ``sys.exit()`` (an error output the engine took
    for a clean exit); a cell tagged ``raises-exception`` may fail and go on."""
    tags = cell.get("metadata", {}).get("tags", [])
    if isinstance(tags, list) and "raises-exception" in tags:
        return False
    return any(
        output.get("output_type") == "error" and output.get("ename") == "SystemExit"
        for output in cell.get("outputs", [])
    )


def _output_logger(
    log_output: bool, stdout_file: IO[str] | None, stderr_file: IO[str] | None
) -> Callable[[Mapping[str, Any]], None] | None:
    """Papermill's ``log_output``, ``stdout_file`` and ``stderr_file``, with its meanings:
    streams to the files and the log (stderr as warnings), results' plain text to the log."""
    if not (log_output or stdout_file is not None or stderr_file is not None):
        return None

    def log(output: Mapping[str, Any]) -> None:
        if output.get("output_type") == "stream":
            text = _joined(output.get("text", ""))
            stderr = output.get("name") == "stderr"
            if log_output:
                (_papermill_log.warning if stderr else _papermill_log.info)(text)
            target = stderr_file if stderr else stdout_file
            if target is not None:
                target.write(text)
                target.flush()
        elif log_output and "text/plain" in output.get("data", {}):
            _papermill_log.info(_joined(output["data"]["text/plain"]))

    return log


def _joined(text: Any) -> str:
    return "".join(text) if isinstance(text, list) else str(text)
