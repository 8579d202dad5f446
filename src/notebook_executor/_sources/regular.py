"""Reading a file that must be a regular file, within a bound: the one way every reader opens
what it did not make (sources, run records, the report's pages, ``-f`` files, ``.env``).

A named pipe (FIFO) in place of a notebook or a run record blocks ``open()`` until a writer
comes, which may be never; a device or a socket may block, or stream without end. So the file
is checked before it is opened (``stat``, which follows a symlink as the open will), opened
with ``O_NONBLOCK`` (opening a FIFO then returns at once) and ``O_NOCTTY``, and checked again
on the open descriptor (``fstat``: what was checked may have been swapped in between). Only a
regular file is read, and never more than ``limit`` bytes.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["NotRegularFileError", "read_regular", "read_regular_text", "regular_head"]

_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegularFileError(OSError):
    """What was to be read is not a regular file (a FIFO, a device, a socket, a folder), or
    is larger than the reader's bound. An ``OSError``: every reader already turns one into
    its own typed error; ``strerror`` says what the file is, in one line."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _check(mode: int, path: str) -> None:
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(
            errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL,
            f"it is {_kind(mode)}, not a regular file",
            path,
        )


def read_regular(
    path: str | os.PathLike[str], limit: int | None = None, *, cut: bool = False
) -> bytes:
    """The bytes of the regular file at ``path``; at most ``limit`` bytes (with ``cut``, the
    first ``limit`` bytes of a larger file, for a reader that refuses it by its own rule).

    Raises
    ------
    FileNotFoundError, PermissionError, OSError
        As ``open`` would.
    NotRegularFileError
        ``path`` is not a regular file, or holds more than ``limit`` bytes.
    """
    name = os.fspath(path)
    _check(Path(name).stat().st_mode, name)
    fd = os.open(name, _FLAGS)
    try:
        info = os.fstat(fd)
        _check(info.st_mode, name)
        if limit is not None and info.st_size > limit and not cut:
            raise NotRegularFileError(
                errno.EFBIG, f"it is too large ({info.st_size:,} bytes; at most {limit:,})", name
            )
        chunks = []
        left = limit + (0 if cut else 1) if limit is not None else None
        while left is None or left > 0:
            chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if left is not None:
                left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if limit is not None and len(data) > limit and not cut:  # it grew while read
        raise NotRegularFileError(errno.EFBIG, f"it is too large (more than {limit:,} bytes)", name)
    return data


def read_regular_text(
    path: str | os.PathLike[str],
    limit: int | None = None,
    *,
    encoding: str = "utf-8",
    errors: str = "strict",
    chars: int | None = None,
) -> str:
    """The text of the regular file at ``path`` (at most ``limit`` bytes), decoded; as
    :func:`read_regular`, plus ``UnicodeDecodeError`` (with ``errors="strict"``).

    With ``chars``, ``limit`` is ignored: the text is read no further than its first
    ``chars`` characters need, and cut there (the caller refuses a text that long).
    """
    if chars is None:
        return read_regular(path, limit).decode(encoding, errors)
    # At most 4 bytes a character: a file cut there holds at least ``chars`` characters (a
    # character cut in two at the end is past them).
    data = read_regular(path, 4 * chars, cut=True)
    if len(data) < 4 * chars:
        return data.decode(encoding, errors)[:chars]
    return data.decode(encoding, "replace")[:chars]


def regular_head(path: Path, count: int) -> bytes:
    """The first ``count`` bytes of the regular file at ``path`` (for sniffing a format);
    as :func:`read_regular` for what is not one."""
    name = os.fspath(path)
    _check(Path(name).stat().st_mode, name)
    fd = os.open(name, _FLAGS)
    try:
        _check(os.fstat(fd).st_mode, name)
        return os.read(fd, count)
    finally:
        os.close(fd)
