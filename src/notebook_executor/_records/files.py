"""The files a run read and wrote: gathered from its kernel, hashed, as its record holds them.

One tracker for every user of this data (a run's provenance, ``diff``, ``reproduce``, lineage,
incremental runs): the kernel's audit hook (``_kernels/inside/file_audit.py``) reports each file
the notebook opens with its execute replies; :func:`note_files` gathers them in the cell loop,
and :func:`file_records` describes them once the run is over: path as records show paths,
``read``/``written``, size and sha256. Hashing is bounded: at most :data:`MAX_FILES` files,
:data:`HASH_SECONDS` of hashing per run, none over :data:`MAX_HASH_BYTES` (their ``sha256`` is
null, with ``unhashed`` saying why); a file's hash is cached by path, size and mtime for the
process's life, so an unchanged data file is hashed once however many runs read it.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from .provenance import display_path

__all__ = [
    "FILES_KEY",
    "HASH_SECONDS",
    "MAX_FILES",
    "MAX_HASH_BYTES",
    "file_hash",
    "file_records",
    "note_files",
]

#: The execute reply's metadata key the kernel's hook reports files under.
FILES_KEY = "notebook_executor.files"

#: Most files a record lists (the kernel's hook notes no more either).
MAX_FILES = 1000

#: Longest a run's files may take to hash, in all (seconds); the rest are listed unhashed.
HASH_SECONDS = 2.0

#: Files larger than this are listed with their size, unhashed.
MAX_HASH_BYTES = 2 * 1024**3

_CACHE_SIZE = 4096
_cache: OrderedDict[tuple[str, int, int], str] = OrderedDict()
_cache_lock = threading.Lock()


def note_files(files: dict[str, str], reply: Mapping[str, Any]) -> None:
    """Add to ``files`` (``{path: "r" | "w" | "rw"}``) those an execute reply reports."""
    metadata = reply.get("metadata") if isinstance(reply, Mapping) else None
    taken = metadata.get(FILES_KEY) if isinstance(metadata, Mapping) else None
    if not isinstance(taken, Mapping):
        return
    for entry in taken.get("files") or ():
        if not (isinstance(entry, list | tuple) and len(entry) == 2):
            continue
        path, access = entry
        if not isinstance(path, str) or not isinstance(access, str):
            continue
        known = files.get(path, "")
        files[path] = "".join(c for c in "rw" if c in known + access)
    dropped = taken.get("dropped")
    if isinstance(dropped, int) and dropped > 0:
        files["\0dropped"] = str(int(files.get("\0dropped", "0")) + dropped)


def file_hash(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of ``path`` (hex), cached by path, size and mtime."""
    key = (path, size, mtime_ns)
    with _cache_lock:
        known = _cache.get(key)
        if known is not None:
            _cache.move_to_end(key)
            return known
    digest = hashlib.sha256()
    with open(path, "rb") as handle:  # noqa: PTH123 (a path string, as the kernel gave it)
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _cache_lock:
        _cache[key] = value
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return value


def file_records(files: Mapping[str, str], *, budget: float = HASH_SECONDS) -> dict[str, Any]:
    """What a record holds of ``files`` (:func:`note_files`): ``{"files": [...], "dropped": n}``,
    each file ``{"path", "read", "written", "size", "sha256"}``, sorted by path; files gone by
    the end of the run (a temporary file) and folders are left out."""
    ends = time.monotonic() + budget
    listed: list[dict[str, Any]] = []
    dropped = int(files.get("\0dropped", "0"))
    for path in sorted(p for p in files if not p.startswith("\0")):
        if len(listed) >= MAX_FILES:
            dropped += 1
            continue
        try:
            stat = os.stat(path)  # noqa: PTH116
        except OSError:
            continue
        if not _regular(stat.st_mode):
            continue
        access = files[path]
        entry: dict[str, Any] = {
            "path": display_path(path),
            "read": "r" in access,
            "written": "w" in access,
            "size": stat.st_size,
            "sha256": None,
        }
        if stat.st_size > MAX_HASH_BYTES:
            entry["unhashed"] = "too large"
        elif time.monotonic() > ends:
            entry["unhashed"] = "time"
        else:
            try:
                entry["sha256"] = file_hash(path, stat.st_size, stat.st_mtime_ns)
            except OSError as exc:
                entry["unhashed"] = exc.strerror or type(exc).__name__
        listed.append(entry)
    return {"files": listed, "dropped": dropped}


def _regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)
