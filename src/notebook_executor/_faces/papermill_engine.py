"""The ``notebook_executor`` engine for papermill: papermill's run, on this library's kernels.

Installing the package registers :class:`NotebookExecutorEngine` in papermill's
``papermill.engine`` entry point group, so ``papermill -e notebook_executor IN OUT -p ...`` and
``papermill.execute_notebook(..., engine_name="notebook_executor")`` run on kernels forked from
a warm template (see the README), with truthful per-cell and whole-run limits.

Papermill keeps everything else: reading and writing the notebooks, injecting parameters,
its metadata, progress bar and its ``PapermillExecutionError``. On a timeout or a dead kernel,
the cell that was running gets an error output (``TimeoutError`` or ``DeadKernelError`` with
the reason), so papermill's error names that cell.

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
from .._progress import output_text
from .._run.papermill_meta import annotate_papermill_cells
from ..engine import EngineOutcome, RunJob

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
    ``concurrent.futures`` has shut down, the hooks of :mod:`threading` before it.
    """
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

        ``execution_timeout`` limits each cell (papermill's meaning); the kernel works in the
        current directory (papermill's ``cwd`` has been entered).
        """

        nb = nb_man.nb
        notebook = str(kwargs.get("input_path") or "notebook")
        kernel = choose_kernel(notebook, kernel_name, nb.metadata.get("kernelspec"))
        job = RunJob(
            nb=nb,
            kernel=kernel,
            cwd=Path.cwd().resolve(),
            env=kernel_environment(None),
            cell_timeout=execution_timeout or None,
        )
        if nb_man.pbar is not None:
            job.on_cell = lambda index: nb_man.pbar.update(1)
        if log_output or stdout_file is not None or stderr_file is not None:
            job.on_output = _output_logger(log_output, stdout_file, stderr_file)
        outcome = _engine().run(job)
        _report(nb_man, outcome)


def _report(nb_man: Any, outcome: EngineOutcome) -> None:
    """Tell papermill's manager what ran, so its metadata and error name the right cell."""

    nb = nb_man.nb
    annotate_papermill_cells(nb, outcome)
    failure = outcome.failure
    if failure is None:
        return
    cell = nb.cells[failure.index]
    if failure.kind != "cell_error":
        from nbformat.v4 import new_output

        cell.outputs.append(
            new_output(
                "error", ename=failure.ename, evalue=failure.evalue, traceback=failure.traceback
            )
        )
    nb_man.cell_exception(cell, cell_index=failure.index)


def _output_logger(
    log_output: bool, stdout_file: IO[str] | None, stderr_file: IO[str] | None
) -> Any:
    """Papermill's ``log_output``, ``stdout_file`` and ``stderr_file``, with its meanings."""

    def on_output(index: int, output: Mapping[str, Any]) -> None:
        shown = output_text(output)
        if shown is None:
            return
        stream, text = shown
        target = stderr_file if stream == "stderr" else stdout_file
        if output.get("output_type") == "stream" and target is not None:
            target.write(text)
            target.flush()
        if log_output:
            (_papermill_log.warning if stream == "stderr" else _papermill_log.info)(text)

    return on_output
