"""Checkpoints, kernel side: a copy of the kernel process at a cell end, and kernels made from it.

Loaded by path (``kernel_main.sibling``) in a kernel when the host first asks for a
checkpoint, never imported by the library; it imports nothing from ``notebook_executor``.

The host asks with a shell message of its own (``kernel_main.CHECKPOINT_REQUEST``), handled
between two messages on the kernel's main thread: no cell runs. Unless
:func:`unsupported` gives a reason (raised as :class:`CheckpointRefused`: the reply carries it),
the kernel forks and returns at once. The copy, the checkpoint:

- touches none of the kernel's zmq objects, threads or output streams (they belong to the
  kernel, and its copies of their descriptors are shared with it): it only stops the signal
  wake-up descriptor, points descriptors 0-2 away from the kernel's output pipes, and keeps
  every object of the old kernel alive so that no finalizer runs;
- starts a session of its own (a restore kills the kernel's session, not its checkpoints),
  connects to the host's socket ``address``, says ``{"key", "pid"}``, and serves
  ``fork_serving.serve``'s requests there: each ``fork`` makes a kernel from this state
  (:func:`_restored_child`). When the host closes the socket or dies, it kills the kernels it
  made, and their sessions, and exits.

A kernel made from a checkpoint keeps the process's state as it was (working directory,
environment, user namespace, modules, random generators, IPython's shell with its history,
execution count, hidden names and event callbacks), and replaces only the messaging layer: it
clears the application and kernel singletons, zmq's context instance and the running event
loop, and initializes a new application on its own connection file, which takes the old shell.
The debugger stays off (its stream would stall the start). It watches the checkpoint, its
parent, as every kernel watches its parent.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

#: Device files of GPU drivers: a process holding one open holds a GPU context.
GPU_DEVICES = ("/dev/nvidia", "/dev/dri/", "/dev/kfd")

#: Objects of the old kernels, kept alive in each copy so that no finalizer of theirs runs.
_KEPT: list[Any] = []

#: In a copy: the kernel's output streams (``sys.stdout``, ``sys.stderr``) at the fork.
_OLD_STREAMS: list[Any] = []

#: What a kernel made from a copy passes on from the old output streams to its own: the
#: notebook may hold them (a logging handler made in a cell).
_STREAM_METHODS = ("write", "writelines", "flush")

#: In a kernel: the checkpoints it forked (not the notebook's processes).
_FORKED: set[int] = set()


class CheckpointRefused(Exception):
    """A checkpoint of this kernel would not be safe to restore; the message says why."""


def _kernel() -> Any:
    return sys.modules["_notebook_executor_kernel"]


def _serving() -> Any:
    return _kernel().sibling("fork_serving")


def _app() -> Any:
    return _kernel().kernel_app_class().instance()


def _kernel_threads(app: Any) -> set[threading.Thread]:
    """The threads of the kernel itself (not the notebook's), pyzmq's garbage collector's
    among them (it tracks messages sent without a copy: any large output starts it)."""
    own: set[Any] = {threading.main_thread()}
    iopub = getattr(app, "iopub_thread", None)
    own.add(getattr(iopub, "thread", None))
    for name in ("control_thread", "shell_channel_thread", "heartbeat", "poller"):
        own.add(getattr(app, name, None))
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        own.add(getattr(stream, "watch_fd_thread", None))
    garbage = sys.modules.get("zmq.utils.garbage")
    own.add(getattr(getattr(garbage, "gc", None), "thread", None))
    return {thread for thread in own if isinstance(thread, threading.Thread)}


def notebook_threads(app: Any) -> list[threading.Thread]:
    """The live threads this kernel's notebook started."""
    own = _kernel_threads(app)
    return [t for t in threading.enumerate() if t not in own and t.is_alive()]


@functools.cache
def _gpu_devices_exist(prefixes: tuple[str, ...]) -> bool:
    """Whether this machine has any GPU device file (none: none can be open)."""
    for prefix in prefixes:
        folder, _, name = prefix.rpartition("/")
        with contextlib.suppress(OSError):
            if any(entry.name.startswith(name) for entry in Path(folder or "/").iterdir()):
                return True
    return False


def gpu_devices(prefixes: tuple[str, ...] = GPU_DEVICES) -> list[str]:
    """The GPU device files this process holds open."""
    if not _gpu_devices_exist(prefixes):
        return []
    found = []
    try:
        fds = list(Path("/proc/self/fd").iterdir())
    except OSError:
        return []
    for fd in fds:
        with contextlib.suppress(OSError):
            target = str(fd.readlink())
            if target.startswith(prefixes):
                found.append(target)
    return sorted(set(found))


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:
        return False


def child_processes() -> list[int]:
    """The running processes this kernel started (not its checkpoints)."""
    me = os.getpid()
    try:
        text = Path(f"/proc/{me}/task/{me}/children").read_text(encoding="ascii")
        pids = [int(value) for value in text.split()]
    except (OSError, ValueError):
        return []
    alive = []
    for pid in pids:
        if pid in _FORKED:
            continue
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            alive.append(pid)
    return alive


def open_comms() -> int:
    """How many comms (widgets, mostly) are open: they send through the kernel's sockets."""
    manager = getattr(sys.modules.get("ipykernel.ipkernel"), "_comm_manager", None)
    comms = getattr(manager, "comms", None)
    return len(comms) if isinstance(comms, dict) else 0


#: Native threads (not Python's) that a copy may lack: those of libraries that end their
#: threads before a fork and start them again when next used (OpenBLAS, with its
#: ``pthread_atfork`` handlers; jemalloc's background thread, by its name), and those of zmq's
#: contexts (the kernel's own), by their name and by their library: a thread libzmq has just
#: started is not named yet (it names itself as it first runs: under load, a checkpoint right
#: after a forked kernel's first cell was refused for "libzmq: 1"). Any other native thread
#: (an OpenMP pool, libgomp's above all, which waits forever in a copy for workers it no
#: longer has) refuses the checkpoint.
FORK_SAFE_LIBRARIES = ("openblas", "libzmq")
FORK_SAFE_THREAD_NAMES = ("jemalloc_bg_thd", "ZMQbg/")

#: Libraries every thread's stack passes through, that say nothing of who started it.
_COMMON_LIBRARIES = ("libc.", "libc-", "ld-linux", "libpthread", "libgcc_s", "libstdc++")

#: How long native threads running on a CPU (a pool spinning after its work) are waited for,
#: in all, to sleep, so that their stacks can be read.
_RUNNING_WAIT = 0.3


def foreign_threads() -> dict[str, int]:
    """The native threads of this process that a copy would lack and miss: library (or
    ``"unknown"``) -> threads. Neither Python's threads (see :func:`notebook_threads`) nor
    those of :data:`FORK_SAFE_LIBRARIES` and :data:`FORK_SAFE_THREAD_NAMES`.

    Each thread is told by the process's own task list (``/proc/self/task``), and its library
    by its stack: the innermost return address into a shared library other than the C
    library's (read from ``/proc/self/mem``, which answers an error, never a crash, for memory
    that is gone).
    """
    try:
        tids = [int(entry.name) for entry in Path("/proc/self/task").iterdir()]
    except (OSError, ValueError):
        return {}
    python = {thread.native_id for thread in threading.enumerate()} | {os.getpid()}
    found: dict[str, int] = {}
    pending = []
    for tid in tids:
        if tid in python:
            continue
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text(encoding="utf-8").strip()
        except OSError:
            continue  # gone meanwhile
        if not name.startswith(FORK_SAFE_THREAD_NAMES):
            pending.append(tid)
    if not pending:
        return {}
    import time

    libraries = _executable_mappings()
    deadline = time.monotonic() + _RUNNING_WAIT
    for tid in pending:
        library = _thread_library(tid, libraries, deadline)
        if library is None or not any(safe in library.lower() for safe in FORK_SAFE_LIBRARIES):
            found[library or "unknown"] = found.get(library or "unknown", 0) + 1
    return found


def _executable_mappings() -> list[tuple[int, int, str]]:
    """``(start, end, file name)`` of the mapped executable code of shared libraries, and
    ``(start, end, "")`` of every other mapping, sorted."""
    mappings = []
    with contextlib.suppress(OSError, ValueError), Path("/proc/self/maps").open("rb") as maps:
        for line in maps:
            fields = line.split(None, 5)
            start, _, end = fields[0].partition(b"-")
            path = fields[5].strip().decode(errors="replace") if len(fields) > 5 else ""
            library = Path(path).name if b"x" in fields[1] and path.startswith("/") else ""
            mappings.append((int(start, 16), int(end, 16), library))
    mappings.sort()
    return mappings


def _thread_library(tid: int, mappings: list[tuple[int, int, str]], deadline: float) -> str | None:
    """The library thread ``tid`` runs in, from its stack; None if it cannot be told (the
    thread is still on a CPU at ``deadline``, or its stack is unreadable)."""
    import bisect
    import struct
    import time

    while True:
        try:
            fields = Path(f"/proc/self/task/{tid}/syscall").read_text(encoding="ascii").split()
        except OSError:
            return None
        if len(fields) >= 9 or time.monotonic() >= deadline:
            break
        time.sleep(0.01)  # on a CPU now ("running"): its stack moves
    if len(fields) < 9:
        return None
    stack = int(fields[-2], 16)
    starts = [start for start, _, _ in mappings]
    where = bisect.bisect_right(starts, stack) - 1
    if where < 0 or stack >= mappings[where][1]:
        return None
    try:
        fd = os.open("/proc/self/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.pread(fd, min(mappings[where][1] - stack, 256 * 1024), stack)
    except OSError:
        return None
    finally:
        os.close(fd)
    for (word,) in struct.iter_unpack("=Q", data[: len(data) // 8 * 8]):
        at = bisect.bisect_right(starts, word) - 1
        if at < 0 or word >= mappings[at][1]:
            continue
        library = mappings[at][2]
        if library and not library.startswith(_COMMON_LIBRARIES) and "python" not in library:
            return library
    return None


def unsupported(app: Any) -> str | None:
    """Why a copy of this kernel, now, could not be made into a kernel safely, or None."""
    threads = notebook_threads(app)
    if threads:
        names = ", ".join(sorted(t.name for t in threads)[:5])
        return f"the notebook has started threads of its own ({names})"
    native = foreign_threads()
    if native:
        pools = ", ".join(f"{name}: {count}" for name, count in sorted(native.items())[:5])
        return f"the notebook runs native threads that a copy would lack ({pools})"
    devices = gpu_devices()
    if devices or _cuda_initialised():
        what = ", ".join(devices[:3]) if devices else "torch.cuda is initialised"
        return f"the notebook holds a GPU context ({what})"
    children = child_processes()
    if children:
        return f"the notebook has started processes that still run (pids {children[:5]})"
    comms = open_comms()
    if comms:
        return f"the notebook has {comms} open comms (widgets): they belong to the kernel"
    return None


def checkpoint(address: str, key: int) -> None:
    """In the kernel, between two cells: fork a checkpoint that serves ``address``; return.

    Raises :class:`CheckpointRefused` when :func:`unsupported` says why not.
    """
    app = _app()
    why = unsupported(app)
    if why is not None:
        raise CheckpointRefused(why)
    # (The kernel flushed its output streams at the end of the last cell; the copy never
    # writes what they may hold.)
    _reap()
    # Python reseeds ``random`` in a forked child: the copy puts the state back.
    state = _random_state()
    pid = os.fork()
    if pid:
        _FORKED.add(pid)
        return
    _serve_checkpoint(app, address, key, state)


def _detach_streams() -> None:
    """Descriptors 0-2 and ``sys.std*`` away from the kernel's output pipes and sockets.

    ipykernel's output streams point descriptors 1 and 2 at pipes its threads read (gone
    here: writing would reach the kernel's output), and keep the originals' copies.
    """
    _OLD_STREAMS[:] = [sys.stdout, sys.stderr]
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        original = getattr(stream, "_original_stdstream_copy", None)
        if isinstance(original, int):
            with contextlib.suppress(OSError):
                os.dup2(original, fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115


def _random_state() -> Any:
    """The state of ``random``'s shared generator, if the notebook's modules loaded it."""
    module = sys.modules.get("random")
    return None if module is None else module.getstate()


def _set_random_state(state: Any) -> None:
    if state is not None:
        sys.modules["random"].setstate(state)


def _reap() -> None:
    """Reap the checkpoints this kernel forked that have exited (dropped by the host)."""
    for pid in list(_FORKED):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        _FORKED.discard(pid)


def _serve_checkpoint(app: Any, address: str, key: int, state: Any) -> NoReturn:
    """The checkpoint process: serve the host until it goes. Never returns."""
    code = 1
    try:
        # A signal here must not wake the kernel's event loop through the shared descriptor.
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _KEPT.append(app)
        enabled = gc.isenabled()
        # A collection would write to every object's header, copying the pages shared with
        # the kernel: the copy collects nothing while it waits.
        gc.disable()
        _set_random_state(state)
        _detach_streams()
        os.setsid()
        serving = _serving()
        serving.CHILDREN.clear()
        _FORKED.clear()
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.connect(address)
        hello = {"key": key, "pid": os.getpid()}
        control.sendall(json.dumps(hello).encode() + b"\n")

        def child(request: dict[str, Any], control: socket.socket, parent: int) -> NoReturn:
            _set_random_state(state)
            _restored_child(request, control, parent, gc_enabled=enabled)

        serving.serve(control, child)
        code = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    os._exit(code)


def _restored_child(
    request: dict[str, Any], control: socket.socket, parent: int, *, gc_enabled: bool
) -> NoReturn:
    """In a process forked from a checkpoint: become a kernel with the state. Never returns."""
    kernel = _kernel()
    serving = _serving()
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        argv = serving.become_kernel_child(request, control, parent)
        shell = _forget_old_kernel()
        # The new application hides every name the namespace holds when it initializes
        # (IPython's ``hide_initial_ns``): the user's variables would vanish from ``%who``.
        hidden = dict(getattr(shell, "user_ns_hidden", {}))
    except BaseException:
        import traceback

        traceback.print_exc()
        kernel.exit_now(1)

    def prepared(app: Any) -> None:
        # The shell still names the old kernel: the new one speaks for it from now on, and
        # counts executions from where the shell is. Its banner (the host asks for it) would
        # pick a tip with ``random``, moving the notebook's generator.
        shell.kernel = app.kernel
        shell.enable_tip = False
        shell.user_ns_hidden.clear()
        shell.user_ns_hidden.update(hidden)
        for old, new in zip(_OLD_STREAMS, (sys.stdout, sys.stderr), strict=False):
            for name in _STREAM_METHODS:
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(old, name, getattr(new, name))
        app.kernel.execution_count = max(0, shell.execution_count - 1)
        if gc_enabled:
            gc.enable()

    # In a new, empty context: the one this runs in is the old kernel's request handler's,
    # whose values (the parent message of the displays) would outlive it.
    contextvars.Context().run(kernel.run_kernel, argv, prepared=prepared)
    os._exit(1)  # (not reached: the kernel exits)


def _forget_old_kernel() -> Any:
    """Clear what a new kernel application would find of the old one; return the shell.

    The old application, kernel and zmq objects stay referenced (never finalized: their
    descriptors are shared with other processes). The shell singleton stays: the new kernel
    takes it, with the user's namespace, module, history and callbacks.
    """
    import asyncio
    import atexit

    app = _app()
    old_kernel = getattr(app, "kernel", None)
    shell = getattr(old_kernel, "shell", None)
    _KEPT.append((app, old_kernel))
    # Its exit handlers would close sockets of a context whose threads are not here.
    for handler in (app.close, app.cleanup_connection_file):
        atexit.unregister(handler)
    iopub = getattr(app, "iopub_thread", None)
    if iopub is not None:
        atexit.unregister(iopub.stop)
    if old_kernel is not None:
        type(old_kernel).clear_instance()
    type(app).clear_instance()
    zmq = sys.modules.get("zmq")
    if zmq is not None:
        _KEPT.append(zmq.Context._instance)
        zmq.Context._instance = None
    # This runs inside the old event loop's callback: the new application runs its own.
    _KEPT.append(asyncio.events._get_running_loop())
    asyncio.events._set_running_loop(None)
    asyncio.set_event_loop(asyncio.new_event_loop())
    debugger = sys.modules.get("ipykernel.debugger")
    if debugger is not None:
        vars(debugger)["_is_debugpy_available"] = False
        # Nor does it need the files of the loaded modules, which the kernel would read from
        # each of them (copying the pages they share with the checkpoint).
        kernel = _kernel()
        kernel.MODULE_FILES = {name: kernel.FileOnly(None) for name in list(sys.modules)}
    return shell
