"""Jobs in this process: a run started at once on a thread of its own, looked at, waited for,
cancelled (``NotebookExecutor.submit``; the MCP server's ``wait: false``).

A :class:`Job` runs ``execute`` on a daemon thread. At most :data:`MAX_RUNNING` jobs of the
process run at once (one per core): the others wait, ``queued``, in the order they came. Its
:meth:`Job.status` is the status object of docs/how-to/jobs.md (:class:`JobStatus`): the cell it
is in (as ``failed_cell.index`` counts: the source's cells), the seconds since it was
submitted, the last lines of its output (at most :data:`TAIL_LINES` lines of
:data:`TAIL_CHARS` characters), and the result dict once it finished. It answers from memory,
under a lock: no file is read.

The cell and the output come from the run's own hooks (:func:`watch`, which
:func:`.foreground.run_in_foreground` calls): a job's ``cancel`` event is a :class:`JobCancel`,
which carries them. Secrets are masked in the tail as ``--log-output`` masks them.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._types import JobState, JobStatus, RunResult

if TYPE_CHECKING:
    from .._run.plan import Plan
    from ..engine import CellOutput, CellStart

__all__ = [
    "MAX_RUNNING",
    "PROCESS_JOB",
    "TAIL_CHARS",
    "TAIL_LINES",
    "Job",
    "JobCancel",
    "end_jobs",
    "job_status_of",
    "new_job_id",
    "submit",
    "watch",
]

#: Jobs of one process that run at once; the others are ``queued``.
MAX_RUNNING = max(1, os.cpu_count() or 1)
#: Lines of output a status object shows at most, and characters of each.
TAIL_LINES = 20
TAIL_CHARS = 200

_SLOTS = threading.Semaphore(MAX_RUNNING)


def new_job_id() -> str:
    """A new job id: ``j`` and 12 hexadecimal digits (filesystem-safe)."""
    return "j" + secrets.token_hex(6)


def job_status_of(result: Mapping[str, Any]) -> JobState:
    """A finished job's status, from its result dict."""
    kind = result.get("error_kind")
    if kind == "cancelled":
        return "cancelled"
    if kind == "interrupted":
        return "interrupted"
    return "success" if result.get("status") == "success" else "error"


class Tail:
    """The last lines of a stream of text (bounded), secrets masked; thread-safe."""

    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._open = ""
        self._lock = threading.Lock()
        self.mask: Callable[[str], str] = str

    def write(self, text: str) -> None:
        with self._lock:
            parts = (self._open + text).split("\n")
            self._open = parts.pop()[-4 * TAIL_CHARS :]
            self._lines.extend(self.mask(line)[:TAIL_CHARS] for line in parts[-TAIL_LINES:])

    def line(self, text: str) -> None:
        """Add ``text`` as a line of its own."""
        self.write(("\n" if self._open else "") + text + "\n")

    def lines(self) -> list[str]:
        with self._lock:
            last = [self.mask(self._open)[:TAIL_CHARS]] if self._open else []
            return [*self._lines, *last][-TAIL_LINES:]


class JobCancel(threading.Event):
    """A job's ``cancel`` event, which also hears of the cell that starts (``on_cell``, if
    given, is told too) and of outputs; or, for a session's step run by another process, of
    the run's liveness lock, which says the cell (``on_lock``, told its path)."""

    def __init__(
        self,
        on_cell: Callable[[int], None] | None = None,
        on_lock: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self.cell: int | None = None
        self.tail = Tail()
        self.on_cell = on_cell
        self.on_lock = on_lock

    def in_run_of(self, lock: str) -> None:
        """The job's cell is the one the run lock at ``lock`` says (a session's step)."""
        if self.on_lock is not None:
            self.on_lock(lock)

    def cell_started(self, index: int) -> None:
        self.cell = index
        if self.on_cell is not None:
            self.on_cell(index)


#: The job this process is (a run server's child running a command line's job): its runs'
#: cells and outputs are heard by it, whatever ``cancel`` they were given.
PROCESS_JOB: list[JobCancel] = []


def watch(plan: Plan, cancel: threading.Event | None) -> None:
    """Let a job's ``cancel`` (a :class:`JobCancel`) hear of ``plan``'s cells and outputs."""
    if not isinstance(cancel, JobCancel):
        if not PROCESS_JOB:
            return
        cancel = PROCESS_JOB[0]
    from .._records.redaction import Redactor
    from .live_output import output_text

    cell_map = plan.cell_map
    heard, tail = cancel, cancel.tail
    if plan.secrets:
        tail.mask = Redactor(plan.secrets).text

    def started(event: CellStart) -> None:
        heard.cell_started(cell_map.to_source(event.index))

    def output(event: CellOutput) -> None:
        shown = output_text(event.output)
        if shown is not None:
            tail.write(shown[1])

    plan.job.hooks.on_cell_start.append(started)
    plan.job.hooks.on_output.append(output)


class Job:
    """A run started at once (:meth:`NotebookExecutor.submit
    <notebook_executor.NotebookExecutor.submit>`): look at it, wait for it, cancel it.

    ``run(cancel)`` is the run itself (``execute`` with the job's ``cancel`` event); it starts
    on a thread of its own once one of :data:`MAX_RUNNING` places is free.
    """

    def __init__(self, run: Callable[[JobCancel], RunResult], job_id: str | None = None) -> None:
        self.job_id = job_id or new_job_id()
        self._run = run
        self._cancel = JobCancel()
        self._done = threading.Event()
        self._state: JobState = "queued"
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._submitted = time.monotonic()
        self._finished: float | None = None
        self._thread = threading.Thread(target=self._work, name=f"job-{self.job_id}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<Job {self.job_id} {self._state}>"

    def _work(self) -> None:
        with _SLOTS:
            if self._cancel.is_set():
                self._end("cancelled")
                return
            self._state = "running"
            try:
                result = self._run(self._cancel)
            except KeyboardInterrupt as exc:  # cancelled: recorded, its result attached
                ended = getattr(exc, "result", None)
                self._result = ended if isinstance(ended, dict) else None  # type: ignore[assignment]
                self._end(job_status_of(ended) if isinstance(ended, dict) else "cancelled")
            except BaseException as exc:  # bad input: raised again by wait()
                self._error = exc
                self._cancel.tail.line(f"{type(exc).__name__}: {str(exc)[:TAIL_CHARS]}")
                self._end("error")
            else:
                self._result = result
                self._end(job_status_of(result))

    def _end(self, state: JobState) -> None:
        self._finished = time.monotonic()
        self._state = state
        self._done.set()

    @property
    def finished_at(self) -> float | None:
        """``time.monotonic()`` when the job ended, or None."""
        return self._finished

    def done(self) -> bool:
        """Whether the job ended (whatever its status)."""
        return self._done.is_set()

    def status(self) -> JobStatus:
        """The status object: status, the running cell, elapsed seconds, the output's tail,
        the result dict once finished."""
        state = self._state
        end = self._finished if self._finished is not None else time.monotonic()
        return {
            "job_id": self.job_id,
            "status": state,
            "cell": self._cancel.cell if state == "running" else None,
            "elapsed_seconds": round(end - self._submitted, 3),
            "tail": self._cancel.tail.lines(),
            "result": dict(self._result) if self._result is not None else None,
        }

    def wait(self, timeout: float | None = None) -> RunResult:
        """The result dict, once the job finished (a cancelled run's too).

        Raises
        ------
        TimeoutError
            ``timeout`` seconds passed first (the job goes on).
        NotebookExecutorError
            The run was refused (bad input), as ``execute`` would have raised it.
        RunCancelled
            The job was cancelled before its run started (no record).
        """
        if not self._done.wait(timeout):
            raise TimeoutError(f"job {self.job_id} is still {self._state} after {timeout} s")
        if self._error is not None:
            raise self._error
        if self._result is None:
            from ..engine import RunCancelled

            raise RunCancelled
        return self._result

    def cancel(self) -> bool:
        """Cancel the job: its running cell stops (the kernel is stopped) and the run is
        recorded as cancelled; a queued job never starts. False when it had ended already."""
        if self._done.is_set():
            return False
        self._cancel.set()
        return True


def submit(
    jobs: list[Job], execute: Callable[..., RunResult], notebook: Any, options: dict[str, Any]
) -> Job:
    """A :class:`Job` running ``execute(notebook, **options, cancel=...)``, kept in ``jobs``
    (those that ended are let go)."""
    if "cancel" in options:
        from .._errors import InvalidArgumentError

        raise InvalidArgumentError("submit: a job has its own cancel (Job.cancel())")
    jobs[:] = [job for job in jobs if not job.done()]
    job = Job(lambda cancel: execute(notebook, **options, cancel=cancel))
    jobs.append(job)
    return job


def end_jobs(jobs: list[Job], seconds: float = 30.0) -> None:
    """Cancel ``jobs`` and wait for them (at most ``seconds``): their runs are recorded as
    cancelled before the executor closes."""
    for job in jobs:
        job.cancel()
    deadline = time.monotonic() + seconds
    for job in jobs:
        job._done.wait(max(0.0, deadline - time.monotonic()))
    jobs.clear()
