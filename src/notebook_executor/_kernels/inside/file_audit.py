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

CPython calls the hook on every audit event, not only ``open``: ``builtins.id`` alone fires
about 4,000 times for each matplotlib figure drawn (``copy.deepcopy``, pyparsing), 40,000 times
in a run of ipython's "Custom Display Logic" example. So the hook added is a plain function
that tests the event's name before anything else: a bound method costs an event some 0.5 us
more (0.74 us against 0.2 us on 2026-11-28, benchmarks/bench_provenance.py). With
:data:`TIMING_VAR` set, the hook's own cost is measured too (:class:`HookTiming`, for that
benchmark; the hook installed otherwise is the same).
"""

from __future__ import annotations

# Called on every open: os.path on strings, no Path objects.
# ruff: noqa: PTH100, PTH105, PTH109, PTH111, PTH118, PTH120, PTH123
import os
import sys
import time
from collections.abc import Callable
from typing import Any

#: The key of the execute reply's metadata that carries the files (as in ``_records/files.py``).
FILES_KEY = "notebook_executor.files"

#: Most distinct paths noted per kernel (as in ``_records/files.py``).
MAX_FILES = 1000

#: The environment variable that turns the hook off when ``0``.
TRACK_VAR = "NOTEBOOK_EXECUTOR_TRACK_FILES"

#: The environment variable naming a folder: when set, the hook's own cost in this kernel is
#: written there (:class:`HookTiming`); benchmarks/bench_provenance.py sets it.
TIMING_VAR = "NOTEBOOK_EXECUTOR_AUDIT_TIMING"

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

    def hook(self) -> Callable[[str, tuple[Any, ...]], None]:
        """The function to add with :func:`sys.addaudithook` (a plain function: see the
        module's docstring)."""
        opened = self.opened

        def hook(event: str, args: tuple[Any, ...]) -> None:
            if event == "open":
                opened(args)

        return hook

    def opened(self, args: tuple[Any, ...]) -> None:
        """Note the file of an ``open`` event (its arguments: path, mode, flags)."""
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


class HookTiming:
    """The hook's own cost in this kernel, for a benchmark (:data:`TIMING_VAR`): the audit
    events the hook was called for, by name, the nanoseconds spent installing it, in it and in
    adding the files to the replies' metadata, written to ``<folder>/<pid>.json`` after each execute
    reply and as the kernel exits (then with ``"final": true``: a checkpoint written after the
    last cell counts), once the kernel has run a cell (a request that stores its history: a
    kernel that only warmed up writes nothing, so the one file a run adds is its kernel's).
    What the interpreter spends on an event before calling the hook (its name and arguments
    made into objects) is not seen from inside the hook: the benchmark counts the events, and
    measures that cost apart. What the clock adds to each event's time is written too
    (``window_ns``, the median of empty timings), for the benchmark to take off."""

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, f"{os.getpid()}.json")
        self.events: dict[str, int] = {}
        clock = time.perf_counter_ns
        windows = []
        for _ in range(201):
            began = clock()
            windows.append(clock() - began)
        self.window_ns = sorted(windows)[100]
        self.install_ns = 0
        self.hook_ns = 0
        self.reply_ns = 0
        self.replies = 0
        self.ran = False

    def timed(self, hook: Callable[[str, tuple[Any, ...]], None]) -> Callable[..., None]:
        """``hook``, counted and timed."""
        clock = time.perf_counter_ns
        events = self.events

        def timed_hook(event: str, args: tuple[Any, ...]) -> None:
            began = clock()
            hook(event, args)
            self.hook_ns += clock() - began
            events[event] = events.get(event, 0) + 1

        return timed_hook

    def write(self, *, final: bool = False) -> None:
        import json

        if not self.ran:
            return
        data = {
            "final": final,
            "events": dict(self.events),
            "install_ns": self.install_ns,
            "hook_ns": self.hook_ns,
            "window_ns": self.window_ns,
            "reply_ns": self.reply_ns,
            "replies": self.replies,
        }
        temporary = f"{self.path}.tmp"
        with open(temporary, "w") as out:
            json.dump(data, out)
        os.replace(temporary, self.path)


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
    folder = os.environ.get(TIMING_VAR)
    began = time.perf_counter_ns() if folder else 0
    own = os.path.dirname(os.path.abspath(connection_file)) if connection_file else None
    audit = FileAudit(_ignored(own))
    finish = kernel.finish_metadata

    def finish_metadata(parent: Any, metadata: Any, reply_content: Any) -> Any:
        metadata = finish(parent, metadata, reply_content)
        taken = audit.take()
        if taken is not None and isinstance(metadata, dict):
            metadata[FILES_KEY] = taken
        return metadata

    hook = audit.hook()
    if folder:
        installed = time.perf_counter_ns() - began
        kernel.finish_metadata, hook = _timed(audit, finish_metadata, hook, folder, installed)
    else:
        kernel.finish_metadata = finish_metadata
    sys.addaudithook(hook)
    global AUDIT
    AUDIT = audit
    return audit


def _timed(
    audit: FileAudit,
    finish_metadata: Callable[[Any, Any, Any], Any],
    hook: Callable[[str, tuple[Any, ...]], None],
    folder: str,
    installed: int,
) -> tuple[Callable[[Any, Any, Any], Any], Callable[..., None]]:
    """``finish_metadata`` and ``hook`` measured by a :class:`HookTiming` writing to
    ``folder`` (left out of the files noted); ``installed``: the nanoseconds :func:`install`
    took."""
    import atexit

    timing = HookTiming(folder)
    timing.install_ns = installed
    audit.ignored = (*audit.ignored, os.path.join(os.path.abspath(folder), ""))
    atexit.register(lambda: timing.write(final=True))

    def timed_finish(parent: Any, metadata: Any, reply_content: Any) -> Any:
        began = time.perf_counter_ns()
        metadata = finish_metadata(parent, metadata, reply_content)
        timing.reply_ns += time.perf_counter_ns() - began
        timing.replies += 1
        content = parent.get("content") if isinstance(parent, dict) else None
        timing.ran = timing.ran or bool(isinstance(content, dict) and content.get("store_history"))
        timing.write()
        return metadata

    return timed_finish, timing.timed(hook)
