"""Which files a notebook reads and writes: an audit hook on ``open`` events, in the kernel.

Loaded by path in the kernel (``kernel_main.sibling("file_audit")``); standard library only.
:func:`install` adds a :func:`sys.addaudithook` hook that notes each file opened (builtin
``open``, ``os.open``, ``io.open_code``: a module imported from the notebook's folder counts)
by absolute path, with whether it was read, written or both; files of the interpreter, its
packages, the system and the kernel's own folders are not noted. What is new since the last
reply rides on the next ``execute_reply``'s metadata under :data:`FILES_KEY`, as
``{"files": [[path, "r" | "w" | "rw"], ...], "dropped": n}``: the host's cell loop gathers it
(``notebook_executor._records.files``), and hashes the files after the run. At most
:data:`MAX_FILES` paths are noted; beyond them, only a count. ``NOTEBOOK_EXECUTOR_TRACK_FILES=0``
in the kernel's environment turns the hook off.
"""

from __future__ import annotations

# Called on every open: os.path on strings, no Path objects.
# ruff: noqa: PTH100, PTH109, PTH111, PTH118, PTH120
import os
import sys
from typing import Any

#: The key of the execute reply's metadata that carries the files (as in ``_records/files.py``).
FILES_KEY = "notebook_executor.files"

#: Most distinct paths noted per kernel (as in ``_records/files.py``).
MAX_FILES = 1000

#: The environment variable that turns the hook off when ``0``.
TRACK_VAR = "NOTEBOOK_EXECUTOR_TRACK_FILES"

#: The audit of this kernel, once installed (durable checkpoints read what it noted).
AUDIT: FileAudit | None = None

_WRITES = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


class FileAudit:
    """The files noted, and those not yet reported."""

    def __init__(self, ignored: tuple[str, ...]) -> None:
        self.ignored = ignored
        self.seen: dict[str, str] = {}
        self.pending: dict[str, str] = {}
        self.dropped = 0

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "open":
            return
        try:
            path, mode, flags = args
            if path is None or isinstance(path, int):
                return
            name = os.path.abspath(os.fsdecode(os.fspath(path)))
            if name.startswith(self.ignored) or "/__pycache__/" in name:
                return
            wrote = bool((flags or 0) & _WRITES) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            read = not wrote or "+" in (mode or "") or bool((flags or 0) & os.O_RDWR)
            access = ("r" if read else "") + ("w" if wrote else "")
            known = self.seen.get(name)
            merged = access if known is None else "".join(c for c in "rw" if c in known + access)
            if merged == known:
                return
            if known is None and len(self.seen) >= MAX_FILES:
                self.dropped += 1
                return
            self.seen[name] = merged
            self.pending[name] = merged
        except Exception:  # never fail the notebook's own open
            return

    def take(self) -> dict[str, Any] | None:
        """What is new since the last call (None: nothing)."""
        if not self.pending and not self.dropped:
            return None
        taken = {"files": [[p, a] for p, a in list(self.pending.items())], "dropped": self.dropped}
        self.pending.clear()
        self.dropped = 0
        return taken


def _ignored(own_folder: str | None) -> tuple[str, ...]:
    """Folders whose files are the kernel's machinery, not the notebook's inputs or outputs."""
    import site
    import sysconfig

    home = os.path.expanduser("~")
    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["purelib"]}
    folders.update(getattr(site, "getsitepackages", list)())
    folders.add(site.getusersitepackages())
    folders.update(os.path.join(home, name) for name in (".ipython", ".cache", ".config"))
    folders.add(os.path.join(home, ".local", "share", "jupyter"))
    folders.update(("/proc", "/sys", "/dev", "/usr/lib", "/usr/share", "/etc"))
    # Where modules come from (an editable install's source folder too), but the notebook's.
    here = os.getcwd()
    folders.update(entry for entry in sys.path if entry and os.path.abspath(entry) != here)
    folders.add(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if own_folder:
        folders.add(own_folder)
    return tuple(os.path.join(folder, "") for folder in folders if folder)


def install(kernel: Any, connection_file: str | None = None) -> FileAudit | None:
    """Note the files the notebook opens from now on, reported with ``kernel``'s execute
    replies; None (nothing installed) when :data:`TRACK_VAR` is ``0``."""
    if os.environ.get(TRACK_VAR) == "0":
        return None
    own = os.path.dirname(os.path.abspath(connection_file)) if connection_file else None
    audit = FileAudit(_ignored(own))
    finish = kernel.finish_metadata

    def finish_metadata(parent: Any, metadata: Any, reply_content: Any) -> Any:
        metadata = finish(parent, metadata, reply_content)
        taken = audit.take()
        if taken is not None and isinstance(metadata, dict):
            metadata[FILES_KEY] = taken
        return metadata

    kernel.finish_metadata = finish_metadata
    sys.addaudithook(audit.hook)
    global AUDIT
    AUDIT = audit
    return audit
