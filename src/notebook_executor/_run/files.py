"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_text"]


def atomic_write_text(target: Path, text: str, *, private: bool = True) -> None:
    """Write ``text`` to ``target`` so readers see the old file or the new one, never half.

    ``private`` files (run files) get mode 0600; others the usual mode of a new file (0666
    less the umask), or the mode of the file they replace.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    if private:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    else:
        fd, tmp_name = _open_usual(target)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _open_usual(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target`` with the mode ``target`` has or would get."""
    import secrets

    try:
        mode: int | None = target.stat().st_mode & 0o7777
    except OSError:
        mode = None
    for _ in range(100):
        name = str(target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            # The OS applies the umask to 0666, as for any new file.
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            with contextlib.suppress(OSError):
                os.fchmod(fd, mode)
        return fd, name
    raise FileExistsError(f"no free temporary name beside {target}")
