"""Run liveness: whether the process of a run the catalog still calls ``running`` is gone.

While a run goes, its process holds an exclusive ``flock`` on ``runs/.locks/<run_id>.lock``
(:meth:`RunLocks.take`); the kernel drops it when the process dies, however it dies. A run of
this host whose lock is free is over. With no lock file to test (a run begun by an older
version, or where locking failed), the run is over when its ``pid`` is gone, a zombie, or now
belongs to a process started after the run. Runs of other hosts are always taken as alive:
their liveness cannot be known from here. Where ``flock`` does not exist (Windows), no lock is
taken and every run is taken as alive.

The lock file also says which code cell the run is in (:meth:`RunLocks.note_cell`, written as
each cell starts: a dozen bytes over the file's first ones, on the descriptor held, nothing
synced): ``runs`` shows it for a run still going, and a job's status for a session's step.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._times import epoch

__all__ = ["LOCKS_DIR", "RunLocks", "flocked", "read_cell"]

logger = logging.getLogger(__name__)

#: The folder of ``runs/`` that holds the lock files.
LOCKS_DIR = ".locks"
#: Bytes of the cell written in a lock file (its index, padded: each write covers the last).
_CELL_BYTES = 12
#: Slack between a process's start time as the kernel reports it and the run's ``started_at``.
_CLOCK_SLACK_SECONDS = 2.0


class RunLocks:
    """This process's liveness locks on runs under ``runs_dir``, and the test for dead runs.

    Not thread-safe on its own: the :class:`~notebook_executor._catalog.store.Catalog` owning it
    serialises every call.

    Parameters
    ----------
    runs_dir : Path
        The runs directory; lock files live in ``runs_dir / ".locks"``.
    """

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self.host = socket.gethostname()
        self._held: dict[str, int] = {}

    def __contains__(self, run_id: object) -> bool:
        """Whether this process holds the lock of ``run_id``."""
        return run_id in self._held

    def path(self, run_id: str) -> Path:
        """The lock file of a run."""
        return self.runs_dir / LOCKS_DIR / f"{run_id}.lock"

    def is_alive(self, row: Mapping[str, Any]) -> bool:
        """Whether a ``running`` row's process may still be running it (True when unknown)."""
        if row.get("host") != self.host:
            return True
        held = _lock_held(self.path(row["run_id"]))
        if held is not None:
            return held
        return _pid_alive(row.get("pid"), epoch(row.get("started_at")))

    def note_cell(self, run_id: str, index: int | None) -> None:
        """Say in the lock of ``run_id`` (when held here) that it is in code cell ``index``
        (as ``failed_cell.index`` counts; None: in none)."""
        fd = self._held.get(run_id)
        if fd is not None:
            shown = "" if index is None else str(index)
            with contextlib.suppress(OSError):
                os.pwrite(fd, shown.ljust(_CELL_BYTES).encode(), 0)

    def cell(self, run_id: str) -> int | None:
        """The code cell a run of this host still going is in, as its lock says (None when
        unknown)."""
        return read_cell(self.path(run_id))

    def forget(self, run_id: str) -> None:
        """Remove the lock file a dead run left behind."""
        with contextlib.suppress(OSError):
            self.path(run_id).unlink()

    def take(self, run_id: str) -> None:
        """Lock ``run_id`` until :meth:`release`; a lock that cannot be taken is skipped."""
        if sys.platform == "win32" or run_id in self._held:
            return
        import fcntl

        target = self.path(run_id)
        # Lock a private file, then move it into place: the lock file never exists unlocked.
        staging = target.with_name(f".{run_id}.{os.getpid()}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            logger.debug("no liveness lock for run %s: %s", run_id, exc)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            staging.replace(target)
        except OSError as exc:
            logger.debug("no liveness lock for run %s: %s", run_id, exc)
            os.close(fd)
            with contextlib.suppress(OSError):
                staging.unlink()
            return
        self._held[run_id] = fd

    def release(self, run_id: str) -> None:
        """Drop the lock of ``run_id`` and its file (nothing when not held)."""
        fd = self._held.pop(run_id, None)
        if fd is None:
            return
        # Unlink while still holding it, so no one finds a free lock for a finished run.
        with contextlib.suppress(OSError):
            self.path(run_id).unlink()
        with contextlib.suppress(OSError):
            os.close(fd)

    def release_all(self) -> None:
        """Release every lock this process holds."""
        for run_id in list(self._held):
            self.release(run_id)

    def abandon(self) -> None:
        """Forget the locks inherited across ``fork`` without releasing the parent's.

        Closing the child's copies of the descriptors leaves the parent's locks in place.
        """
        for fd in self._held.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._held.clear()


@contextlib.contextmanager
def flocked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a no-op where ``flock`` does not exist)."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_cell(path: Path) -> int | None:
    """The code cell the lock file at ``path`` says its run is in (None when it says none)."""
    try:
        with path.open("rb") as file:
            shown = file.read(_CELL_BYTES).strip()
    except OSError:
        return None
    return int(shown) if shown.isdigit() else None


def _lock_held(path: Path) -> bool | None:
    """Whether some process holds the run lock at ``path``; None when there is none to test."""
    if sys.platform == "win32":
        return None
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)
    return False


def _pid_alive(pid: Any, run_started: float | None) -> bool:
    """Whether ``pid`` may still be the process that started a run at ``run_started``."""
    if sys.platform == "win32" or not isinstance(pid, int) or pid <= 0:
        return True  # unknown (on Windows, os.kill(pid, 0) would send CTRL_C_EVENT)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # it exists, owned by someone else
    started = _process_start(pid)
    if started is None:
        return True
    state, began = started
    if state == "Z":
        return False
    # A process started after the run is a new one that reuses the pid.
    return run_started is None or began <= run_started + _CLOCK_SLACK_SECONDS


def _process_start(pid: int) -> tuple[str, float] | None:
    """``(state, start time as epoch seconds)`` of a process, from /proc (Linux only)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        fields = stat.rsplit(")", 1)[1].split()
        return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
