"""A fake engine for the unit tier: runs code cells in-process, with no kernel.

This is a **test double** for :class:`notebook_executor.Engine`. It is honest enough for tests of
everything around the engine (validation, injection, result building, run records, redaction,
the CLI), not a Python kernel:

- it is the public :class:`~notebook_executor.engine.ScriptedEngine` whose handler ``exec``-s
  each code cell in one namespace shared by the run, so the cells are taken by the engine
  contract's rules (tests/engine_contract.py): markdown, ``skip-execution`` and blank cells
  are not run, counts start at 1, an error output stops the run;
  IPython magics and shell escapes (lines starting with ``%`` or ``!``) are ignored;
- each write to ``sys.stdout`` or ``sys.stderr`` (``print`` included) becomes a ``stream`` output
  of its own, as each IOPub message does on a kernel (a secret printed in two writes lands in two
  outputs); the value of a last bare expression becomes an ``execute_result``; each cell gets an
  ``execution_count``;
- ``sys.exit()``, ``sys.exit(0)`` and ``raise SystemExit`` end the run early and successfully
  (an ``error`` output ``SystemExit``, as IPython shows it); other exit codes are cell errors;
  ``input()`` raises ``StdinNotImplementedError`` (no one can answer);
- an exception becomes an ``error`` output with an ANSI-coloured traceback and a
  :class:`CellFailure` of kind ``"cell_error"``; the run stops there;
- ``import scrapbook as sb`` gives a fake module whose ``glue`` writes outputs in scrapbook's exact
  format, built with scrapbook's own encoders (``display=True`` adds the display output too);
- raising :class:`SimulatedTimeout` or :class:`SimulatedKernelDeath` in a cell simulates a cell
  timeout or a dead kernel; a cell that takes longer than ``job.cell_timeout`` (measured after the
  fact: the fake cannot preempt) is reported as a timeout; :class:`SimulatedInterrupt` makes
  ``run`` raise ``KeyboardInterrupt`` as the real engine does when the caller presses Ctrl-C;
- a cell's ``import os`` gives a view of :mod:`os` whose ``environ`` (and ``getenv``) is
  ``job.env``, so a notebook reading its secrets or environment behaves as on a kernel. Nothing
  process-wide changes: output is captured per thread and the process environment is untouched,
  so runs of ``execute_many`` on threads stay apart. The working directory is not changed.

Every job is kept in :attr:`FakeEngine.jobs`, so a test can assert that bad input never reached
the engine.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import io
import os
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import nbformat

from notebook_executor.engine import (
    CellFailure,
    CellReply,
    CheckpointError,
    ErrorKind,
    RunJob,
    ScriptedEngine,
    ScriptedKernel,
)

__all__ = [
    "FakeEngine",
    "FakeKernel",
    "SimulatedInterrupt",
    "SimulatedKernelDeath",
    "SimulatedTimeout",
    "scrap_output",
]


class SimulatedTimeout(Exception):
    """Raised by a cell to simulate a cell that hit its timeout."""


class SimulatedKernelDeath(Exception):
    """Raised by a cell to simulate the kernel dying while the cell runs."""


class SimulatedInterrupt(Exception):
    """Raised by a cell to simulate the caller interrupting the run (Ctrl-C)."""


_RED, _RESET = "\x1b[0;31m", "\x1b[0m"


def scrap_output(
    name: str, value: Any, encoder: str | None = None, *, display: bool = False
) -> list[Any]:
    """The outputs ``scrapbook.glue(name, value, encoder, display)`` produces, built with
    scrapbook's own encoder registry and payload helpers."""
    from scrapbook.api import _prepare_ipy_data_format, _prepare_ipy_display_format
    from scrapbook.encoders import registry
    from scrapbook.scraps import Scrap, scrap_to_payload

    outputs: list[Any] = []
    if encoder is None:
        try:
            encoder = str(registry.determine_encoder_name(value))
        except NotImplementedError:
            if not display:
                raise
            encoder = "display"
    if encoder != "display":
        payload = scrap_to_payload(registry.encode(Scrap(name, value, encoder)))
        data, metadata = _prepare_ipy_data_format(name, payload, encoder)
        outputs.append(nbformat.v4.new_output("display_data", data=data, metadata=metadata))
    if display:
        data, metadata = _prepare_ipy_display_format(name, {"text/plain": repr(value)}, {})
        outputs.append(nbformat.v4.new_output("display_data", data=data, metadata=metadata))
    return outputs


class _Glue:
    """The fake ``scrapbook`` module a cell imports; glue appends to the running cell."""

    def __init__(self) -> None:
        self.cell: Any = None

    def module(self) -> types.ModuleType:
        module = types.ModuleType("scrapbook")
        module.glue = self.glue  # type: ignore[attr-defined]
        return module

    def glue(
        self, name: str, data: Any, encoder: str | None = None, display: bool | None = None
    ) -> None:
        streams = getattr(_targets, "streams", None)
        if streams is not None:
            streams[0].flush()
        self.cell.outputs.extend(scrap_output(name, data, encoder, display=bool(display)))


class FakeEngine(ScriptedEngine):
    """Runs a job's code cells with ``exec`` in this process; see the module docstring.

    Its kernels are :class:`~notebook_executor.engine.ScriptedKernel` objects whose answer is what
    ``exec`` of the cell's source gives, in a namespace of the kernel's own; driven by the
    executor's cell loop, as real kernels are. They take checkpoints (a deep copy of the
    namespace), so sessions run on this engine too.

    Parameters
    ----------
    before_cell : callable, optional
        Called with ``(job, index)`` before each code cell runs (to observe or to break things).
    unsupported : str, optional
        Every checkpoint is refused with this reason.
    keep : int, optional
        Checkpoints beyond this many are evicted, oldest first (as the memory limit does).
    broken_restores : bool
        Every restore fails.
    """

    def __init__(
        self,
        before_cell: Callable[[RunJob, int], None] | None = None,
        *,
        unsupported: str | None = None,
        keep: int | None = None,
        broken_restores: bool = False,
    ) -> None:
        super().__init__()
        #: Calls of :meth:`prepare_kernel`, with the number of jobs run before each.
        self.prepared: list[int] = []
        self.before_cell = before_cell
        self.unsupported = unsupported
        self.keep = keep
        self.broken_restores = broken_restores
        #: Every kernel opened, in order.
        self.kernels: list[FakeKernel] = []

    def prepare_kernel(self) -> None:
        """Record that the caller asked for a head start (the optional hook of
        :class:`notebook_executor.engine.SupportsPrepare`)."""
        self.prepared.append(len(self.jobs))

    def open(self, job: RunJob) -> FakeKernel:
        """A kernel of its own namespace for ``job``."""
        self.jobs.append(job)
        kernel = FakeKernel(self, job)
        self.kernels.append(kernel)
        return kernel

    @property
    def kernel(self) -> FakeKernel | None:
        """The last kernel opened (a session's current one)."""
        return self.kernels[-1] if self.kernels else None


class FakeKernel(ScriptedKernel):
    """One fake kernel: cells ``exec``-ed in its namespace; every call counted in
    :attr:`calls`."""

    def __init__(self, engine: FakeEngine, job: RunJob) -> None:
        super().__init__(job, self._execute)
        self.engine = engine
        self.glue = _Glue()
        self.namespace: dict[str, Any] = self._fresh()
        self.calls: list[tuple[str, Any]] = [("start", None)]
        self.dropped: dict[int, str] = {}
        #: Whether :meth:`close` was called.
        self.closed = False

    def _fresh(self) -> dict[str, Any]:
        return {
            "__name__": "__main__",
            "__builtins__": _builtins_with(self.glue.module(), _os_view(self.job.env)),
            "SimulatedTimeout": SimulatedTimeout,
            "SimulatedKernelDeath": SimulatedKernelDeath,
            "SimulatedInterrupt": SimulatedInterrupt,
        }

    def run_cell(self, nb: Any, index: int, limit: float | None) -> Any:
        self.calls.append(("execute", index))
        with _captured():
            return super().run_cell(nb, index, limit)

    def _execute(self, job: RunJob, index: int) -> CellReply:
        """One cell: its outputs go into the cell as they are made (a failure keeps them)."""
        if self.engine.before_cell is not None:
            self.engine.before_cell(job, index)
        cell = job.nb.cells[index]
        self.glue.cell = cell
        began = time.monotonic()
        failure = _run_cell(cell, index, self.namespace)
        elapsed = time.monotonic() - began
        if failure is None and job.cell_timeout is not None and elapsed > job.cell_timeout:
            return _failure(index, "timeout", "TimeoutError", "cell_timeout exceeded")
        if failure is not None and failure.kind != "cell_error":
            return failure
        return ()

    # -- checkpoints: deep copies of the namespace ------------------------------------------

    def snapshot(self) -> Any:
        return _copy(self.namespace)

    def reinstate(self, state: Any) -> None:
        self.namespace = _copy(state)

    def checkpoint_unsupported(self) -> str | None:
        return self.engine.unsupported or super().checkpoint_unsupported()

    def checkpoint(self, key: int) -> None:
        self.calls.append(("checkpoint", key))
        if self.engine.unsupported is not None:
            raise CheckpointError(self.engine.unsupported)
        super().checkpoint(key)
        keep = self.engine.keep
        while keep is not None and len(self._saved) > keep:
            oldest = next(iter(self._saved))
            del self._saved[oldest]
            self.dropped[oldest] = "evicted to stay within checkpoint_memory"

    def restore(self, key: int) -> None:
        self.calls.append(("restore", key))
        if self.engine.broken_restores:
            raise CheckpointError("the new kernel did not start")
        super().restore(key)

    def lost(self) -> dict[int, str]:
        return dict(self.dropped)

    def stop(self) -> None:
        self.calls.append(("stop", None))
        super().stop()

    def close(self, *, clean: bool) -> None:
        self.calls.append(("shutdown", None))
        self.closed = True
        super().close(clean=clean)


def _copy(namespace: dict[str, Any]) -> dict[str, Any]:
    copied = {}
    for name, value in namespace.items():
        try:
            copied[name] = copy.deepcopy(value)
        except Exception:
            copied[name] = value
    return copied


def _run_cell(cell: Any, index: int, namespace: dict[str, Any]) -> CellFailure | None:
    source = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines()
    )
    cell_streams = _CellStreams(cell)
    streams = cell_streams.stream("stdout"), cell_streams.stream("stderr")
    failure: CellFailure | None = None
    try:
        _targets.streams = streams
        try:
            value = _exec(source, namespace)
        finally:
            _targets.streams = None
            cell_streams.flush()
    except SimulatedTimeout as exc:
        failure = _failure(index, "timeout", "TimeoutError", str(exc) or "the cell timed out")
    except SimulatedKernelDeath as exc:
        failure = _failure(index, "kernel_died", "DeadKernelError", str(exc) or "kernel died")
    except SimulatedInterrupt:
        failure = _failure(index, "cancelled", "KeyboardInterrupt", "the run was cancelled")
    except SystemExit as exc:
        code = "" if exc.code is None else str(exc.code)
        lines = ["An exception has occurred, use %tb to see the full traceback.\n"]
        failure = CellFailure(
            index, "cell_error", "SystemExit", code, [*lines, f"SystemExit: {code}\n"]
        )
        value = None
    except Exception as exc:
        lines = [
            f"{_RED}{'-' * 40}{_RESET}",
            *(line.rstrip("\n") for line in traceback.format_tb(exc.__traceback__)[1:]),
            f"{_RED}{type(exc).__name__}{_RESET}: {exc}",
        ]
        failure = CellFailure(index, "cell_error", type(exc).__name__, str(exc), lines)
        value = None
    if failure is not None:
        if failure.kind == "cell_error":
            cell.outputs.append(
                nbformat.v4.new_output(
                    "error",
                    ename=failure.ename,
                    evalue=failure.evalue,
                    traceback=failure.traceback,
                )
            )
        return failure
    if value is not None:
        cell.outputs.append(
            nbformat.v4.new_output(
                "execute_result",
                data={"text/plain": repr(value)},
                execution_count=cell.execution_count,
            )
        )
    return None


class _CellStreams:
    """A cell's stdout and stderr as ipykernel's streams behave: writes gather until a flush
    (``flush()``, output of another kind or stream, the end of the cell), and each flush is a
    ``stream`` output of its own, as each IOPub message is on a kernel."""

    def __init__(self, cell: Any) -> None:
        self.cell = cell
        self.name = ""
        self.pending: list[str] = []

    def write(self, name: str, text: str) -> int:
        if name != self.name:
            self.flush()
            self.name = name
        self.pending.append(text)
        return len(text)

    def flush(self) -> None:
        text = "".join(self.pending)
        self.pending.clear()
        if text:
            self.cell.outputs.append(nbformat.v4.new_output("stream", name=self.name, text=text))

    def stream(self, name: str) -> _CellStream:
        return _CellStream(self, name)


class _CellStream(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` of a running cell."""

    def __init__(self, streams: _CellStreams, name: str) -> None:
        self.streams = streams
        self.name = name

    def write(self, text: str) -> int:
        return self.streams.write(self.name, text)

    def flush(self) -> None:
        self.streams.flush()


class _ThreadStream(io.TextIOBase):
    """Stands in for ``sys.stdout`` or ``sys.stderr`` while fake runs are in progress: a thread
    running a cell writes to that cell; any other thread to the stream it replaced."""

    def __init__(self, which: int, original: Any) -> None:
        self.which = which
        self.original = original

    def write(self, text: str) -> int:
        streams = getattr(_targets, "streams", None)
        if streams is None:
            written: int = self.original.write(text)
            return written
        return int(streams[self.which].write(text))

    def flush(self) -> None:
        streams = getattr(_targets, "streams", None)
        if streams is None:
            self.original.flush()
        else:
            streams[self.which].flush()


_targets = threading.local()
_capture_lock = threading.Lock()
_capture_users = 0


@contextlib.contextmanager
def _captured() -> Iterator[None]:
    """Route ``sys.stdout``/``sys.stderr`` per thread while any fake run is in progress."""
    global _capture_users
    with _capture_lock:
        if _capture_users == 0:
            sys.stdout = _ThreadStream(0, sys.stdout)
            sys.stderr = _ThreadStream(1, sys.stderr)
        _capture_users += 1
    try:
        yield
    finally:
        with _capture_lock:
            _capture_users -= 1
            if _capture_users == 0:
                if isinstance(sys.stdout, _ThreadStream):
                    sys.stdout = sys.stdout.original
                if isinstance(sys.stderr, _ThreadStream):
                    sys.stderr = sys.stderr.original


def _exec(source: str, namespace: dict[str, Any]) -> Any:
    tree = ast.parse(source)
    last: ast.Expression | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        del tree.body[-1]
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is None:
        return None
    return eval(compile(last, "<cell>", "eval"), namespace)


def _failure(index: int, kind: ErrorKind, ename: str, evalue: str) -> CellFailure:
    return CellFailure(index, kind, ename, evalue, [])


def _builtins_with(scrapbook: types.ModuleType, os_view: types.ModuleType) -> dict[str, Any]:
    real_import = builtins.__import__
    replaced = {"scrapbook": scrapbook, "os": os_view}

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in replaced:
            return replaced[name]
        return real_import(name, *args, **kwargs)

    def no_input(prompt: object = "") -> str:
        raise StdinNotImplementedError(
            "raw_input was called, but this frontend does not support input requests."
        )

    namespace = dict(vars(builtins))
    namespace["__import__"] = fake_import
    namespace["input"] = no_input
    return namespace


class StdinNotImplementedError(RuntimeError):
    """What IPython raises when a notebook asks for input no one can give."""


def _os_view(env: Mapping[str, str]) -> types.ModuleType:
    """:mod:`os` as a cell of this job sees it: ``environ`` and ``getenv`` read ``env``."""
    view = types.ModuleType("os")
    view.__dict__.update(vars(os))
    environ = dict(env)
    view.environ = environ  # type: ignore[attr-defined]
    view.getenv = environ.get  # type: ignore[attr-defined]
    return view
