"""The command line's jobs: a ``run``, ``sweep`` or session step (``session run`` /
``rerun``) whose child of the run server outlives its client (``--detach``).

A job is a command the server's child (:mod:`.child`) answers at once with its job id, then
runs on its own: it lets go of the client (its connection, its streams), waits for a place
(at most :data:`MAX_RUNNING` jobs of the user run at once, one per core; the others are
``queued``), then runs the command line's own code on its command line (``--detach`` left
out, ``--json`` added): the same run, records and catalog rows as without ``--detach``.

A job keeps its state in files of the server's private folder (``<key>-j/``, see
:class:`.paths.ServerFiles`), so that they outlive the server:

- ``<id>.json``: the job's state (:func:`read_state`), written whole at each change (its
  status, the cell it is in, its result dict once it ended, its exit status as ``run``'s);
  a session's step runs in the session's holder (another child): its state names the run's
  liveness lock instead, which says the cell
  (:func:`notebook_executor._catalog.liveness.read_cell`);
- ``<id>.log``: its output (standard error, cells' outputs as ``--log-output`` shows them,
  secrets masked), at most :data:`LOG_BYTES` (the older half is dropped, as ``<id>.log.1``);
- ``<id>.lock``: held (``flock``) by the job's process for its whole life: a job said to be
  queued or running whose lock is free has died without saying so, and reads as
  ``interrupted``.

When the server stops or dies, its children are sent SIGTERM (``PR_SET_PDEATHSIG``): a job's
run is recorded as ``interrupted``, naming the cell that was running, and its state says so.
Ended jobs are forgotten (their files removed; their run records stay) after
:data:`KEEP_ENV` seconds (default a day), and beyond the newest :data:`MAX_KEPT`.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..._dispatch.jobs import MAX_RUNNING, TAIL_CHARS, TAIL_LINES, JobCancel, new_job_id
from ..._types import JobState, JobStatus
from .client import served_command
from .paths import ServerFiles, private_folder, write_private

__all__ = [
    "KEEP_ENV",
    "LOG_BYTES",
    "MAX_KEPT",
    "cancel",
    "detach",
    "job_ids",
    "log_text",
    "read_state",
    "status",
]

#: Seconds an ended job is remembered (``$NOTEBOOK_EXECUTOR_JOB_KEEP``; default a day).
KEEP_ENV = "NOTEBOOK_EXECUTOR_JOB_KEEP"
_DEFAULT_KEEP = 86400.0
#: Ended jobs remembered at most (the newest).
MAX_KEPT = 200
#: Bytes of a job's log kept at most (two halves: ``.log.1`` and ``.log``).
LOG_BYTES = 2 << 20
_ENDED = ("success", "error", "cancelled", "interrupted")


def folder(files: ServerFiles) -> Path:
    """The jobs' folder, made private when missing."""
    path = Path(files.folder) / f"{files.key}-j"
    private_folder(path)
    return path


def _lock_held(path: Path) -> bool:
    """Whether a process holds the ``flock`` of ``path``."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def read_state(files: ServerFiles, job_id: str) -> dict[str, Any] | None:
    """A job's state (None when unknown): a job said to be going whose process is gone reads
    as ``interrupted``."""
    if not (job_id.startswith("j") and job_id[1:].isalnum() and len(job_id) <= 40):
        return None
    base = folder(files) / job_id
    try:
        state: dict[str, Any] = json.loads(base.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None
    if state.get("status") not in _ENDED and not _lock_held(base.with_suffix(".lock")):
        state.update(status="interrupted", cell=None, gone=True)
        state.setdefault("finished", state.get("updated", time.time()))
    return state


def job_ids(files: ServerFiles) -> list[str]:
    """The jobs the server remembers, oldest first."""
    found = []
    for path in folder(files).glob("j*.json"):
        with contextlib.suppress(OSError):
            found.append((path.stat().st_mtime, path.stem))
    return [job_id for _, job_id in sorted(found)]


def log_text(files: ServerFiles, job_id: str, limit: int | None = None) -> str:
    """The job's log (its last ``limit`` bytes, if given)."""
    base = folder(files) / job_id
    data = b""
    for part in (Path(f"{base}.log.1"), base.with_suffix(".log")):
        with contextlib.suppress(OSError):
            data += part.read_bytes()
    if limit is not None:
        data = data[-limit:]
    return data.decode("utf-8", "replace")


def status(state: dict[str, Any], files: ServerFiles) -> JobStatus:
    """The status object (docs/how-to/jobs.md) of a job's state."""
    end = state.get("finished") or time.time()
    lines = log_text(files, state["job_id"], TAIL_LINES * TAIL_CHARS * 2).splitlines()
    return {
        "job_id": state["job_id"],
        "status": state["status"],
        "cell": _cell(state) if state["status"] == "running" else None,
        "elapsed_seconds": round(max(0.0, end - state["created"]), 3),
        "tail": [line[:TAIL_CHARS] for line in lines[-TAIL_LINES:]],
        "result": state.get("result"),
    }


def _cell(state: dict[str, Any]) -> int | None:
    """The cell a running job is in: as its state says, or (a session's step, run by the
    session's holder) as the run's liveness lock says."""
    lock = state.get("lock")
    if isinstance(lock, str):
        from ..._catalog.liveness import read_cell

        return read_cell(Path(lock))
    cell = state.get("cell")
    return cell if isinstance(cell, int) else None


def cancel(files: ServerFiles, job_id: str) -> bool:
    """Interrupt the job's process (SIGINT, as Ctrl-C): the running cell stops and the run is
    recorded as cancelled. False when the job is not going."""
    state = read_state(files, job_id)
    if state is None or state["status"] in _ENDED:
        return False
    pid = state.get("pid")
    if not isinstance(pid, int) or pid <= 1:
        return False
    # The lock is held: the pid is still the job's (its process holds the lock till it dies).
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGINT)
        return True
    return False


def _keep_seconds() -> float:
    try:
        return float(os.environ.get(KEEP_ENV) or _DEFAULT_KEEP)
    except ValueError:
        return _DEFAULT_KEEP


def forget_old(files: ServerFiles) -> None:
    """Forget ended jobs older than :data:`KEEP_ENV` seconds, and beyond the newest
    :data:`MAX_KEPT`."""
    ended = []
    for job_id in job_ids(files):
        state = read_state(files, job_id)
        if state is not None and state["status"] in _ENDED:
            ended.append((float(state.get("finished") or 0), job_id))
    ended.sort()
    old = time.time() - _keep_seconds()
    for at, (finished, job_id) in enumerate(ended):
        if finished < old or at < len(ended) - MAX_KEPT:
            base = folder(files) / job_id
            for suffix in (".json", ".log", ".log.1", ".lock"):
                with contextlib.suppress(OSError):
                    Path(f"{base}{suffix}").unlink()


class _State:
    """The job's own state file, written whole at each change."""

    def __init__(self, files: ServerFiles, job_id: str, argv: list[str]) -> None:
        self.path = str(folder(files) / f"{job_id}.json")
        self.lock = threading.Lock()
        now = time.time()
        self.data: dict[str, Any] = {
            "job_id": job_id,
            "pid": os.getpid(),
            "status": "queued",
            "command": argv[:1],
            "cwd": str(Path.cwd()),
            "created": now,
            "updated": now,
            "cell": None,
            "result": None,
            "exit": None,
        }
        self.write()

    def write(self, **changes: Any) -> None:
        with self.lock:
            self.data.update(changes, updated=time.time())
            with contextlib.suppress(OSError):
                write_private(self.path, json.dumps(self.data, default=str))


class _Log:
    """The job's standard output and error: a pipe read by a thread into the log file, at
    most :data:`LOG_BYTES` kept."""

    def __init__(self, path: Path) -> None:
        self.path = path
        read, write = os.pipe()
        self.reader = read
        for target in (1, 2):
            os.dup2(write, target)
        os.close(write)
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        out = os.open(self.path, flags, 0o600)
        size = 0
        try:
            while chunk := os.read(self.reader, 65536):
                if size + len(chunk) > LOG_BYTES // 2:
                    os.close(out)
                    self.path.replace(f"{self.path}.1")
                    out = os.open(self.path, flags, 0o600)
                    size = 0
                size += os.write(out, chunk)
        finally:
            os.close(out)
            os.close(self.reader)

    def close(self) -> None:
        """Flush and end the log (the standard streams go to /dev/null)."""
        import sys

        with contextlib.suppress(Exception):
            sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        for target in (1, 2):
            os.dup2(null, target)
        os.close(null)
        self.thread.join(5)


def _take_place(files: ServerFiles) -> int:
    """Wait for one of :data:`MAX_RUNNING` places; the lock held (its descriptor)."""
    base = folder(files)
    while True:
        for number in range(MAX_RUNNING):
            path = base / f"place-{number}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            return fd
        time.sleep(0.1)


def detach(
    files: ServerFiles,
    argv: list[str],
    announce: Callable[[str], None],
    let_go: Callable[[], None],
    command: Callable[[list[str]], int],
) -> int:
    """Run ``argv`` (a command line holding ``--detach``) as a job of this process.

    ``announce(job_id)`` prints the job id to the client; ``let_go()`` answers it (exit
    status 0) and lets go of its connection and streams; then the command runs with its
    output in the job's log. Returns the command's exit status.
    """
    job_id = new_job_id()
    base = folder(files) / job_id
    lock = os.open(base.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # held till this process ends, however it ends
    state = _State(files, job_id, argv)
    announce(job_id)
    let_go()
    forget_old(files)  # after the answer: it reads every job remembered
    log = _Log(base.with_suffix(".log"))
    words = [w for w in argv if not (len(w) > 4 and "--detach".startswith(w))]
    words.append("--json")
    if served_command(words) == "run":
        words.append("--log-output")  # the cells' outputs, in the log
    watcher = JobCancel(
        on_cell=lambda index: state.write(cell=index), on_lock=lambda path: state.write(lock=path)
    )
    from ..._dispatch.jobs import PROCESS_JOB

    PROCESS_JOB[:] = [watcher]
    import sys

    captured = io.StringIO()
    code = 2
    final: dict[str, Any] = {}
    try:
        place = _take_place(files)
        try:
            state.write(status="running", started=time.time())
            real, sys.stdout = sys.stdout, captured
            try:
                code = command(words)
            finally:
                sys.stdout = real
        finally:
            os.close(place)
        result = _result(captured.getvalue())
        final = {"status": _ended(code, result), "result": result, "exit": code}
    except KeyboardInterrupt:  # cancelled, or the server's end, while queued
        ended = "interrupted" if _server_gone() else "cancelled"
        print(f"notebook-executor: error: the job was {ended} before it started", file=sys.stderr)
        code = 130
        final = {"status": ended, "exit": code}
    finally:
        log.close()  # all of its output in the log before its end is said
        state.write(cell=None, finished=time.time(), **final)
    return code


def _server_gone() -> bool:
    from . import served

    return served.server_gone()


def _result(printed: str) -> Any:
    """The result the command printed with ``--json`` (None when it printed none)."""
    try:
        return json.loads(printed) if printed.strip() else None
    except ValueError:
        return None


def _ended(code: int, result: Any) -> JobState:
    """A job's status, from its command's exit status and the result it printed."""
    from ..._dispatch.jobs import job_status_of

    if isinstance(result, dict):
        return job_status_of(result)
    if isinstance(result, list) and result:
        kinds = {job_status_of(item) for item in result if isinstance(item, dict)}
        for kind in ("interrupted", "cancelled", "error"):
            if kind in kinds:
                return kind  # type: ignore[return-value]
    if code == 130 and result is None:  # Ctrl-C (job cancel) or the server's end, told
        return "interrupted" if _server_gone() else "cancelled"
    return "success" if code == 0 else "error"
