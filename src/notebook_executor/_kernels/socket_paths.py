"""Unix socket paths are short: the folder to put sockets in when the usual one is too long.

A socket's path is limited (``sun_path``: 107 bytes on Linux, 103 on macOS and the BSDs). A
long ``$TMPDIR`` leaves no room for the sockets of a kernel's folder, or of the run server: the
folder then goes in the first of :data:`SHORT_TEMP_DIRS` that fits and can be written. Kernel
folders (:mod:`.workdirs`) and the run server's folder (``notebook_executor._faces.server``)
both ask :func:`socket_base`; each then makes its own private folder there.

Imports only ``os`` and ``sys``: the command line's client imports this before it hands a
command to the run server.
"""

from __future__ import annotations

import os
import sys

# os.path, not pathlib (and the re module it brings): the client's start-up pays for imports.
# ruff: noqa: PTH112, PTH118

__all__ = ["MAX_SOCKET_PATH", "SHORT_TEMP_DIRS", "fits", "socket_base"]

#: Longest socket path in bytes, without the final NUL: ``sun_path`` holds 108 bytes on Linux,
#: 104 on macOS and the BSDs.
MAX_SOCKET_PATH = 107 if sys.platform.startswith("linux") else 103

#: Temporary folders tried, in order, when the preferred one is too long for socket paths.
SHORT_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def fits(folder: str, tail: int) -> bool:
    """Whether socket paths ``tail`` bytes longer than ``folder`` fit in ``sun_path``."""
    return len(os.fsencode(folder)) + tail <= MAX_SOCKET_PATH


def socket_base(
    preferred: str, name: str, tail: int, candidates: tuple[str, ...] = SHORT_TEMP_DIRS
) -> str | None:
    """The folder to make ``name`` in, for sockets ``tail`` bytes longer than ``name``'s path.

    ``preferred`` when ``preferred/name`` leaves room for them, else the first of
    ``candidates`` that does, is a folder and can be written; None when none can.
    """
    if fits(os.path.join(preferred, name), tail):
        return preferred
    for candidate in candidates:
        if (
            fits(os.path.join(candidate, name), tail)
            and os.path.isdir(candidate)
            and os.access(candidate, os.W_OK | os.X_OK)
        ):
            return candidate
    return None
