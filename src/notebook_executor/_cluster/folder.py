"""The notebook's folder, packed to travel to the workers of a cluster run.

A run on a cluster without ``cwd=`` runs in a copy of the notebook's folder on its worker, so
files beside the notebook (data, helper modules) are there as they are on the caller's
machine. The copy is made once per sweep; what a run writes there stays on the worker and is
removed when the sweep ends. Hidden entries (``.git``, ``.venv``...), ``__pycache__``, the
run records folder and symbolic links are left out; a folder above :data:`MAX_FOLDER_BYTES`
is refused before anything is submitted: pass ``cwd=`` a folder every worker can read.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from .._errors import ClusterError

__all__ = ["MAX_FOLDER_BYTES", "pack_folder"]

#: Largest notebook folder (sum of the file sizes) shipped to the workers.
MAX_FOLDER_BYTES = 10 * 1024 * 1024


def pack_folder(folder: Path, exclude: Path | None = None) -> bytes:
    """A gzipped tar of ``folder``'s files, leaving out ``exclude`` (the runs folder).

    Raises
    ------
    NotebookExecutorError
        The folder holds more than :data:`MAX_FOLDER_BYTES`.
    """
    root = folder.resolve()
    skipped = exclude.resolve() if exclude is not None else None
    files: list[tuple[Path, str]] = []
    total = 0
    for current, dirs, names in os.walk(root):
        here = Path(current)
        dirs[:] = sorted(
            d
            for d in dirs
            if not _hidden(d)
            and not (here / d).is_symlink()
            and (skipped is None or (here / d).resolve() != skipped)
        )
        for name in sorted(names):
            path = here / name
            if _hidden(name) or path.is_symlink() or not path.is_file():
                continue
            total += path.stat().st_size
            if total > MAX_FOLDER_BYTES:
                raise ClusterError(
                    f"the notebook's folder {os.fspath(folder)!r} holds more than "
                    f"{MAX_FOLDER_BYTES // (1024 * 1024)} MB, too much to send to every worker: "
                    "pass cwd= a folder every worker can read (a shared path)"
                )
            files.append((path, path.relative_to(root).as_posix()))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for path, name in files:
            info = tar.gettarinfo(os.fspath(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    return buffer.getvalue()


def _hidden(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"
