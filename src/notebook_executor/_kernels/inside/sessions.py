"""Kernels' process sessions: what a notebook starts is killed with its kernel, however it ends.

Every kernel leads a process session of its own (launched ones by jupyter_client, forked ones
by ``setsid``), and whatever a notebook starts stays in it (``subprocess.Popen``, a
``multiprocessing`` worker, a shell's ``sleep &`` whose shell exited), unless it starts a
session of its own (``setsid``, a daemon): that is beyond reach. A session is killed:

- by the host when it stops a kernel (:func:`kill_sessions`), and by the kernel itself as it
  exits (a host killed between the kernel's exit and its own kill would leave it running);
- by the template of forked kernels when the host dies (its parent-death signal);
- by a launched kernel itself when its parent, the host, dies (it watches it);
- failing those (the template killed outright, a kernel that cannot run), by the next
  executor's start, from what the host recorded in the kernel's folder (:func:`sweep`).

While any process is in a session, Linux does not reuse its leader's id, so killing a live
session hits nothing else. A recorded session is another matter: its leader's id may have been
reused since, so :func:`sweep` kills a process only if it started after the kernel, the kernel's
id is not now another process's, and the process carries one of the kernel's identifiers in the
environment it started with (:data:`KERNEL_ID`, set for each kernel and each template).

Linux only (``/proc``); elsewhere only the process group is killed. Standard library only, no
package imports: the kernel-side programs (``kernel_main.py``) load this file by path.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection, Iterator
from pathlib import Path

__all__ = ["KERNEL_ID", "kill_sessions", "start_time", "sweep"]

#: Environment variable holding a kernel's (or a template's) identifier: inherited by whatever
#: it starts, it tells a recorded session's processes from those of a reused id.
KERNEL_ID = "NOTEBOOK_EXECUTOR_KERNEL_ID"

#: Most passes over /proc while killing: each catches what the previous pass's victims started
#: just before they died.
_PASSES = 10


def _stat(pid: str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, pgrp, session,
    ...), read as plain bytes: this runs after every kernel."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    return data.rpartition(b")")[2].split()


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none."""
    fields = _stat(str(pid))
    if fields is None or len(fields) < 20:
        return None
    return int(fields[19])


def _members(sessions: set[bytes]) -> Iterator[tuple[int, list[bytes]]]:
    """Live processes in any of ``sessions`` (ids as bytes), but this one, with their stat."""
    me = os.getpid()
    try:
        entries = os.scandir("/proc")
    except OSError:
        return
    with entries:
        for entry in entries:
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            fields = _stat(entry.name)
            if fields is None or len(fields) < 20 or fields[0] == b"Z":
                continue
            if fields[3] in sessions:
                yield int(entry.name), fields


def kill_sessions(leaders: Collection[int], *, own: bool = False) -> None:
    """SIGKILL every process in the sessions led by ``leaders``: their process groups, then
    each member found in /proc, pass after pass until a pass finds no new one.

    Never this process, and never this process's own session or group unless ``own`` (a
    kernel killing what its notebook started, on its way out).
    """
    mine = {os.getsid(0), os.getpgrp()}
    targets = {leader for leader in leaders if leader > 1 and (own or leader not in mine)}
    if not targets:
        return
    for leader in targets - mine:
        with contextlib.suppress(OSError):
            os.killpg(leader, signal.SIGKILL)
    wanted = {str(leader).encode() for leader in targets}
    killed: set[int] = set()
    for _ in range(_PASSES):
        found = {pid for pid, _ in _members(wanted)} - killed
        if not found:
            return
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        killed |= found


def _environment_holds(pid: int, marks: set[bytes]) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return not marks.isdisjoint(environ.split(b"\0"))


def sweep(leader: int, started: int, ids: Collection[str]) -> list[int]:
    """Kill what is left of a recorded kernel session; return the pids killed.

    ``leader`` is the kernel's pid (its session's id), ``started`` its :func:`start_time`,
    ``ids`` the :data:`KERNEL_ID` values of the kernel and of its template. A process is killed
    only if it is in that session, started no earlier than the kernel, and carries one of
    ``ids`` in its environment; and nothing is if ``leader`` is now another process.
    """
    now = start_time(leader)
    if leader <= 1 or (now is not None and now != started) or not ids:
        return []
    marks = {f"{KERNEL_ID}={value}".encode() for value in ids}
    session = {str(leader).encode()}
    killed: list[int] = []
    for _ in range(_PASSES):
        found = [
            pid
            for pid, fields in _members(session)
            if pid not in killed and int(fields[19]) >= started and _environment_holds(pid, marks)
        ]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed
