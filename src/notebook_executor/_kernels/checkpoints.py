"""A checkpoint process seen from the host, and the memory checkpoints hold.

The host side of checkpoints (the kernel side is ``inside/checkpoint_server.py``): a
:class:`Checkpoint` is the connection to one copy of a kernel, which forks kernels with its
state on request (a :class:`~.forkserver.ForkChannel`, as the template is).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

from .._types import TIMEOUTS
from ..engine import CheckpointError
from .forkserver import ForkChannel
from .workdirs import Workdir

__all__ = ["Checkpoint", "CheckpointError", "held_memory", "hello", "smaps_rollup"]

#: Longest a checkpoint may take to answer a request (it answers a fork at once).
REPLY_TIMEOUT = TIMEOUTS.checkpoint


class Checkpoint(ForkChannel):
    """A checkpoint process: a copy of the kernel that forks kernels with its state."""

    def __init__(
        self, key: int, pid: int, connection: socket.socket, kernel_ids: list[str]
    ) -> None:
        super().__init__(kernel_ids)
        self.key = key
        self.pid = pid
        self.pidfd: int | None = os.pidfd_open(pid)
        self.workdir: Workdir | None = None
        # A checkpoint answers at once, or not at all (stopped, or stuck): never wait forever.
        connection.settimeout(REPLY_TIMEOUT)
        self._socket = connection
        self._reader = connection.makefile("rb")

    def alive(self) -> bool:
        """True while the process runs."""
        if self.pidfd is None:
            return False
        import select

        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return not poller.poll(0)

    def close(self) -> None:
        """End the process (it kills the kernels it made on its way) and forget it."""
        with self._lock:
            if self._socket is not None:
                with contextlib.suppress(OSError):
                    self._socket.shutdown(socket.SHUT_RDWR)
            self._close_socket_locked()
        fd, self.pidfd = self.pidfd, None
        if fd is not None:
            # Its socket closed, it would exit by itself: the signal makes it certain, now.
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.workdir is not None:
            self.workdir.remove()
            self.workdir = None


def smaps_rollup(pid: int) -> dict[str, int]:
    """``/proc/<pid>/smaps_rollup``'s sizes, in bytes (empty once the process is gone)."""
    try:
        data = Path(f"/proc/{pid}/smaps_rollup").read_bytes()
    except OSError:
        return {}
    sizes = {}
    for line in data.splitlines()[1:]:
        name, _, rest = line.partition(b":")
        fields = rest.split()
        if len(fields) == 2 and fields[1] == b"kB":
            sizes[name.decode()] = int(fields[0]) * 1024
    return sizes


async def hello(loop: asyncio.AbstractEventLoop, connection: socket.socket) -> dict[str, Any]:
    """The first line a checkpoint sends: ``{"key", "pid"}``."""
    line = b""
    while not line.endswith(b"\n"):
        data = await loop.sock_recv(connection, 4096)
        if not data:
            raise ValueError("no hello")
        line += data
    said = json.loads(line)
    if not isinstance(said, dict):
        raise ValueError("not a hello")
    return said


def held_memory(kernel: int | None, checkpoints: list[int]) -> int:
    """Bytes the ``checkpoints`` processes hold beyond what ``kernel`` alone would use: the
    proportional set sizes of the anonymous memory of all of them, less the kernel's anonymous
    resident size (blocking: reads every process's page tables, milliseconds per gigabyte).

    Anonymous memory only (``Pss_Anon``, ``Anonymous``; swap with it): file pages (the
    libraries) are shared with every other process that maps them, so their proportional
    size in the kernel and its checkpoints is less than the kernel's resident size, and
    counting them took a quarter of a 40 MB version off what two checkpoints held (more with
    more Python processes on the machine), which let a step exceed the limit. Kernels older
    than 5.8 give no ``Pss_Anon``: the whole ``Pss`` and ``Rss`` then.
    """
    if not checkpoints:
        return 0
    own = smaps_rollup(kernel) if kernel is not None else {}
    sizes = [smaps_rollup(pid) for pid in checkpoints]
    anon = "Pss_Anon" in own or any("Pss_Anon" in each for each in sizes)
    pss, rss = ("Pss_Anon", "Anonymous") if anon else ("Pss", "Rss")
    total = own.get(pss, 0) + own.get("SwapPss", 0)
    for each in sizes:
        total += each.get(pss, 0) + each.get("SwapPss", 0)
    return max(0, total - own.get(rss, 0) - own.get("Swap", 0))
