"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["atomic_write_text", "missing_folder"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


def missing_folder(target: Path) -> str | None:
    """Why ``target``'s folder cannot take it (missing, or not a folder), or None.

    The one rule for every file a caller names (``output_path``, ``run OUT``, ``convert DST``,
    ``export --out``, ``write_notebook``): its folder must exist; it is never created, so a
    typo in a path does not leave new folders behind.
    """
    folder = target.parent
    if not folder.exists():
        return f"the folder {os.fspath(folder)!r} does not exist (create it first)"
    if not folder.is_dir():
        return f"{os.fspath(folder)!r} is not a folder"
    return None


def atomic_write_text(target: Path, text: str, *, private: bool = True) -> None:
    """Write ``text`` to ``target`` so readers see the old file or the new one, never half.

    The text goes to a new temporary file beside ``target`` (created with ``O_EXCL``), which
    then replaces ``target`` in one rename; a failure removes it. ``target``'s folder is
    created when missing. ``private`` files (run records) get mode 0600; others the usual mode
    of a new file (0666 less the umask), or the mode of the file they replace.
    """
    data = text.encode("utf-8")
    try:
        fd, tmp_name = _open_private(target) if private else _open_usual(target)
    except FileNotFoundError:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = _open_private(target) if private else _open_usual(target)
    tmp = Path(tmp_name)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _open_private(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target``, mode 0600 (as ``tempfile.mkstemp`` makes it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY
    for _ in range(100):
        name = str(target.parent / f".{target.name}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(name, flags, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


def _open_usual(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target`` with the mode ``target`` has or would get."""
    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except OSError:
        mode = None
    for _ in range(100):
        name = str(target.parent / f".{target.name}.{os.urandom(4).hex()}.tmp")
        try:
            # The OS applies the umask to 0666, as for any new file.
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            with contextlib.suppress(OSError):
                os.fchmod(fd, mode)
        return fd, name
    raise FileExistsError(f"no free temporary name beside {target}")
