"""A fake engine for the unit tier: runs code cells in-process, with no kernel.

This is a **test double** for :class:`notebook_executor.Engine`. It is honest enough for tests of
everything around the engine (validation, injection, result building, run files, redaction,
the CLI), not a Python kernel:

- every code cell of the job notebook is ``exec``-ed in one namespace shared by the run, in order;
  IPython magics and shell escapes (lines starting with ``%`` or ``!``) are ignored;
- ``print`` output becomes a ``stream`` output (stdout and stderr separately), the value of a last
  bare expression becomes an ``execute_result``; each cell gets an ``execution_count``;
- an exception becomes an ``error`` output with an ANSI-coloured traceback and a
  :class:`CellFailure` of kind ``"cell_error"``; the run stops there;
- ``import scrapbook as sb`` gives a fake module whose ``glue`` writes outputs in scrapbook's exact
  format, built with scrapbook's own encoders (``display=True`` adds the display output too);
- raising :class:`SimulatedTimeout` or :class:`SimulatedKernelDeath` in a cell simulates a cell
  timeout or a dead kernel; a cell that takes longer than ``job.cell_timeout`` (measured after the
  fact: the fake cannot preempt) is reported as a timeout; :class:`SimulatedInterrupt` makes
  ``run`` raise ``KeyboardInterrupt`` as the real engine does when the caller presses Ctrl-C;
- while cells run, ``os.environ`` is ``job.env`` (restored afterwards), so a notebook reading its
  secrets or environment behaves as on a kernel. The working directory is not changed.

Every job is kept in :attr:`FakeEngine.jobs`, so a test can assert that bad input never reached
the engine.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import os
import time
import traceback
import types
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

import nbformat

from notebook_executor.engine import CellFailure, EngineOutcome, ErrorKind, RunCancelled, RunJob

__all__ = [
    "FakeEngine",
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
        self.cell.outputs.extend(scrap_output(name, data, encoder, display=bool(display)))


class FakeEngine:
    """Runs a job's code cells with ``exec`` in this process; see the module docstring.

    Parameters
    ----------
    before_cell : callable, optional
        Called with ``(job, index)`` before each code cell runs (to observe or to break things).
    """

    def __init__(self, before_cell: Callable[[RunJob, int], None] | None = None) -> None:
        self.jobs: list[RunJob] = []
        self.outcomes: list[EngineOutcome] = []
        self.closed = 0
        #: Calls of :meth:`prepare_kernel`, with the number of jobs run before each.
        self.prepared: list[int] = []
        self.before_cell = before_cell

    def prepare_kernel(self) -> None:
        """Record that the caller asked for a head start (the optional hook of
        :class:`notebook_executor.engine.SupportsPrepare`)."""
        self.prepared.append(len(self.jobs))

    def run(self, job: RunJob) -> EngineOutcome:
        """Execute ``job.nb`` in place and return what happened."""
        self.jobs.append(job)
        outcome = EngineOutcome()
        self.outcomes.append(outcome)
        glue = _Glue()
        namespace: dict[str, Any] = {
            "__name__": "__main__",
            "__builtins__": _builtins_with(glue.module()),
            "SimulatedTimeout": SimulatedTimeout,
            "SimulatedKernelDeath": SimulatedKernelDeath,
            "SimulatedInterrupt": SimulatedInterrupt,
        }
        count = 0
        with _environ(job.env):
            for index, cell in enumerate(job.nb.cells):
                if cell.cell_type != "code":
                    continue
                if self.before_cell is not None:
                    self.before_cell(job, index)
                count += 1
                cell.outputs = []
                cell.execution_count = count
                glue.cell = cell
                outcome.cell_started[index] = _now_iso()
                began = time.monotonic()
                failure = _run_cell(cell, index, namespace)
                elapsed = time.monotonic() - began
                outcome.cell_seconds[index] = round(elapsed, 6)
                if failure is None and job.cell_timeout is not None and elapsed > job.cell_timeout:
                    failure = _failure(index, "timeout", "TimeoutError", "cell_timeout exceeded")
                if failure is not None and failure.kind == "cancelled":
                    outcome.failure = failure
                    raise RunCancelled(outcome)
                if failure is not None:
                    outcome.failure = failure
                    return outcome
                outcome.completed.append(index)
                job.cell_done(index)
        return outcome

    def close(self) -> None:
        """Nothing to release; counts the calls."""
        self.closed += 1


def _run_cell(cell: Any, index: int, namespace: dict[str, Any]) -> CellFailure | None:
    source = "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines()
    )
    stdout, stderr = _CellStream(cell, "stdout"), _CellStream(cell, "stderr")
    failure: CellFailure | None = None
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):  # type: ignore[type-var]
            value = _exec(source, namespace)
    except SimulatedTimeout as exc:
        failure = _failure(index, "timeout", "TimeoutError", str(exc) or "the cell timed out")
    except SimulatedKernelDeath as exc:
        failure = _failure(index, "kernel_died", "DeadKernelError", str(exc) or "kernel died")
    except SimulatedInterrupt:
        failure = _failure(index, "cancelled", "KeyboardInterrupt", "the run was cancelled")
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


class _CellStream(io.TextIOBase):
    """A text stream that writes into the cell's outputs as the kernel would: consecutive
    writes to the same stream merge into one ``stream`` output, in order with other outputs."""

    def __init__(self, cell: Any, name: str) -> None:
        self.cell = cell
        self.name = name

    def write(self, text: str) -> int:
        outputs = self.cell.outputs
        if outputs and outputs[-1].output_type == "stream" and outputs[-1].name == self.name:
            outputs[-1].text += text
        elif text:
            outputs.append(nbformat.v4.new_output("stream", name=self.name, text=text))
        return len(text)


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


def _builtins_with(scrapbook: types.ModuleType) -> dict[str, Any]:
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "scrapbook":
            return scrapbook
        return real_import(name, *args, **kwargs)

    namespace = dict(vars(builtins))
    namespace["__import__"] = fake_import
    return namespace


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
