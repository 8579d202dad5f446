"""The kernel program: a native kernel, and the fork-serving loop its copies share.

This file runs in its own interpreter, never imported by the library, and imports nothing from
``notebook_executor``. Run by path as ``__nbx_kernel__`` (:func:`launched`) it is a native
kernel: ipykernel's ``IPKernelApp`` (see :func:`kernel_app`). The fork server's template
(``template_server.py``) and checkpoints (``checkpoint_server.py``) load it by path, as the
module :data:`NAME`, and make kernels with :func:`run_kernel` in the processes they fork
(``fork_serving.py``).

``fork_serving.serve`` is the protocol of both: one JSON line per request and per reply, on
a Unix socket held by the host:

``{"op": "fork", "connection_file": ..., "cwd": ..., "env": {...}, "stderr": ...}``
    fork a kernel; reply ``{"pid": N}`` (or ``{"error": why}``).
``{"op": "reap", "pid": N}``
    reply ``{"status": code}`` (``subprocess`` convention: negative for a signal) once the
    child has exited, ``{"status": null}`` while it runs. Children stay zombies until reaped,
    so a pid is never reused while the host may still signal it.

The server exits, killing its children's sessions (the kernels and whatever their notebooks
started: see ``sessions.py``), when the socket closes (the host closed or died).

Every kernel, launched or forked, watches its parent (the host, the template or a checkpoint)
through a pidfd; when the parent exits, the kernel exits, and a child it leaves behind kills
every other process of its session once the kernel (and its running cell) is gone.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

#: The name this file is known by in ``sys.modules``, however it was loaded; its siblings
#: are ``_notebook_executor_<name>`` (:func:`sibling`).
NAME = "_notebook_executor_kernel"

#: Stands for the connection file in the command line the template parses for its kernels.
ANY_FILE = "\0connection-file\0"

#: In the template and its children: a kernel's command line, with :data:`ANY_FILE` for its
#: connection file, the configuration parsed from it, and the arguments left over. See
#: :func:`_parsed_command_line`.
PARSED: tuple[list[str], Any, list[str]] | None = None

#: In the template and its children: a stand-in for each module loaded before the first fork,
#: by name, holding its ``__file__``. See :func:`_known_module_files`.
MODULE_FILES: dict[str, FileOnly] | None = None

#: The shell message that asks a kernel for a checkpoint, and its reply (see
#: ``checkpoint_server.py``): ``{"address": host socket, "key": int}`` ->
#: ``{"status": "ok"}``, or ``{"status": "error", "ename": ..., "evalue": why}``, with
#: ``"seconds"``, the time the kernel spent on it.
CHECKPOINT_REQUEST = "nbx_checkpoint_request"

#: The shell message that asks a kernel to write its state to files or read it back, and its
#: reply (see ``state_files.py``).
STATE_REQUEST = "nbx_state_request"
STATE_REPLY = "nbx_state_reply"
CHECKPOINT_REPLY = "nbx_checkpoint_reply"

#: Longest a closing kernel waits for its control thread to finish its last message.
_CONTROL_JOIN_TIMEOUT = 5.0


def kernel_app() -> Any:
    """The kernel application (a new singleton of :func:`kernel_app_class`)."""
    return kernel_app_class().instance()


@functools.cache
def kernel_app_class() -> Any:
    """ipykernel's ``IPKernelApp``, losing no output, with a shutdown that cannot stall.

    Its IOPub sockets have no high-water mark (:meth:`init_iopub`), so no output message is
    dropped however fast a cell writes. It has no subshells (:meth:`init_control`): each shell
    message is handled on the main thread, without a hop between threads.

    After a shutdown request, ipykernel 7 returns from ``start()`` while its control thread may
    still be flushing to the IOPub thread, which the interpreter's exit handlers then stop:
    the flush waits out its 10 s timeout, so a kernel asked to shut down often looks hung and
    gets killed, losing the interpreter's own exit. Waiting for the control thread as soon as
    ``start()`` returns, while IOPub still runs, keeps the order safe and changes nothing else.
    """
    from ipykernel.kernelapp import IPKernelApp

    class KernelApp(IPKernelApp):  # type: ignore[misc]
        def init_control(self, context: Any) -> None:
            super().init_control(context)  # type: ignore[no-untyped-call]
            # No kernel subshells (a notebook run never asks for one): without their channel
            # thread, ipykernel handles each shell message on its main thread, as before
            # subshells existed, instead of passing it between threads (a millisecond or two
            # per cell). Subshell requests are then answered as unsupported.
            self.shell_channel_thread = None

        def init_kernel(self) -> None:
            # A forked kernel takes the shell its template built, when it is the one it
            # would build itself (``ready_shell.py``); else that one is forgotten first.
            ready = sys.modules.get("_notebook_executor_ready_shell")
            adopted = ready is not None and ready.usable_for(self)
            super().init_kernel()  # type: ignore[no-untyped-call]
            if adopted:
                ready.adopt(self)  # type: ignore[union-attr]
            # Checkpoints are asked for with a message of their own, handled between two
            # messages like any other: no cell runs (no execution count, no events).
            kernel = self.kernel
            kernel.shell_handlers[CHECKPOINT_REQUEST] = functools.partial(
                _checkpoint_request, kernel
            )
            kernel.shell_handlers[STATE_REQUEST] = functools.partial(_state_request, kernel)
            if hasattr(kernel, "_process_children"):
                kernel._process_children = functools.partial(
                    _process_children, kernel._process_children
                )

        def init_io(self) -> None:
            super().init_io()  # type: ignore[no-untyped-call]
            for stream in (sys.stdout, sys.stderr):
                _flush_only_what_was_written(stream)

        def init_iopub(self, context: Any) -> None:
            # A PUB socket drops messages once its queue holds its high-water mark (1000 by
            # default): a cell printing fast lost output silently. No limit: nothing is dropped.
            import zmq

            context.setsockopt(zmq.SNDHWM, 0)
            context.setsockopt(zmq.RCVHWM, 0)
            super().init_iopub(context)  # type: ignore[no-untyped-call]

        def init_poller(self) -> None:
            # ipykernel's poller exits the kernel within a second of its parent's death,
            # leaving what the notebook started running: this one kills that too, at once.
            parent = int(self.parent_handle or 0)
            if os.name != "posix" or parent <= 1 or os.getppid() != parent:
                super().init_poller()  # type: ignore[no-untyped-call]
                return
            self.poller = _ParentWatch(parent)

        def parse_command_line(self, argv: list[str] | None = None) -> None:
            parsed = _parsed_command_line(argv)
            if parsed is None:
                super().parse_command_line(argv)
                return
            config, extra_args = parsed
            # What the parser does, in its order, with what the template parsed already.
            self.argv = list(argv or ())
            self.log  # noqa: B018 (the parser sets up logging as it starts)
            self.cli_config = config
            self.update_config(config)
            self.extra_args = extra_args

        def start(self) -> None:
            try:
                super().start()  # type: ignore[no-untyped-call]
            finally:
                control = getattr(self, "control_thread", None)
                if control is not None and control.is_alive():
                    with contextlib.suppress(Exception):
                        control.stop()
                    control.join(_CONTROL_JOIN_TIMEOUT)

        def close(self) -> None:
            # ipykernel's, an exit handler, but for its last step: terminating the zmq
            # context waits until every message its sockets still hold is sent, or for their
            # linger (1 s). What is left then is for a host that asked for the shutdown and no
            # longer reads (the shutdown's own reply); the process ends at once after the
            # exit handlers (:func:`exit_now`), and the sockets with it. In one ``pytest
            # --notebooks`` session in two, a kernel asked to shut down took 1.0 s to exit
            # (its file flushes, IPython's exit handler, come after this one), and the
            # session's end waited for it.
            context, self.context = self.context, None
            try:
                super().close()  # type: ignore[no-untyped-call]
            finally:
                self.context = context

    return KernelApp


@functools.cache
def sibling(name: str) -> Any:
    """The file ``<name>.py`` beside this one, loaded by path once (this script imports no
    package), as ``_notebook_executor_<name>`` in ``sys.modules``."""
    import importlib.util
    from pathlib import Path

    module_name = f"_notebook_executor_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = Path(__file__).resolve().with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


#: What :func:`_flush_only_what_was_written` reads of ipykernel's ``OutStream``; a stream
#: without all of them (another ipykernel) keeps its own ``flush``.
_STREAM_STATE = ("_flush_pending", "_subprocess_flush_pending", "_buffers", "_buffer_lock", "echo")


def _flush_only_what_was_written(stream: Any) -> None:
    """Make ``stream.flush()`` return at once when nothing was written since the last flush.

    ipykernel flushes ``sys.stdout`` and ``sys.stderr`` twice per execute request (before the
    reply and before the idle status), and each flush hands two callbacks to the IOPub thread
    and waits for the second, written or not: four hops between threads per cell, 2.0 ms of a
    trivial cell's 6.5 ms in the kernel's main thread (cProfile inside a forked kernel, 300
    cells of ``y = x + i``, 2026-11-29). A stream with nothing buffered, no flush pending and
    no echo has nothing to send, and the IOPub messages sent before it (displays) go out in
    their order anyway, ahead of the idle status, on the same thread; so it now skips the
    hops. Anything written (by the cell, a thread, or the captured file descriptor's reader)
    still flushes as before. Set on the instance: ``type(sys.stdout)`` stays ipykernel's.
    """
    if not all(hasattr(stream, name) for name in _STREAM_STATE):
        return
    flush = stream.flush

    def flush_what_was_written() -> None:
        if (
            stream.echo is None
            and not stream._flush_pending
            and not stream._subprocess_flush_pending
        ):
            with stream._buffer_lock:
                written = any(buffer.tell() for buffer in stream._buffers.values())
            if not written:
                return
        flush()

    stream.flush = flush_what_was_written


class _ParentWatch(threading.Thread):
    """Ends the kernel, and every other process of its session, once its parent exits.

    Waits on a pidfd of the parent (woken at once, no polling); where there is none, checks
    the parent once a second. The parent is checked to be this process's parent after the
    pidfd is opened, so the pidfd is that process's, not a later one's holding its pid. The
    kill needs the interpreter lock: a cell holding it in C code delays it (the next
    executor's start sweeps what it could not kill).
    """

    def __init__(self, parent: int) -> None:
        super().__init__(name="parent-watch", daemon=True)
        self.parent = parent

    def run(self) -> None:
        sessions = sibling("sessions")
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(self.parent)
        if os.getppid() == self.parent:
            if pidfd is not None:
                poller = select.poll()
                poller.register(pidfd, select.POLLIN)
                while not poller.poll():
                    pass
            else:
                while os.getppid() == self.parent:
                    time.sleep(1.0)
        with contextlib.suppress(BaseException):
            if os.getsid(0) == os.getpid():
                _kill_session_after_exit(sessions)
        os._exit(1)


def _kill_session_after_exit(sessions: Any) -> None:
    """Have what this kernel's session started killed once this process is gone.

    The cell runs on beside this thread and may start a process after any pass over /proc,
    until this process exits: so a child of this thread waits for that exit (a pidfd of this
    process), then kills the session's other processes, pass after pass, and exits. Where there
    is no pidfd, the passes run here, before the exit.
    """
    try:
        exited = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        sessions.kill_sessions([os.getpid()], own=True)
        return
    if os.fork() != 0:
        return
    try:
        poller = select.poll()
        poller.register(exited, select.POLLIN)
        while not poller.poll():
            pass
        sessions.kill_sessions([os.getsid(0)], own=True)
    finally:
        os._exit(0)


class FileOnly:
    """A stand-in for a module the template loaded: its ``__file__`` and nothing else."""

    __slots__ = ("__file__",)

    def __init__(self, path: str | None) -> None:
        if path:
            self.__file__ = path


def module_files() -> dict[str, FileOnly]:
    """A :class:`FileOnly` for each loaded module, by name.

    Made in one go (with copies of the paths), they lie on a few memory pages of their own:
    the children that read them copy those pages only.
    """
    files: dict[str, FileOnly] = {}
    for name, module in sys.modules.copy().items():
        path = getattr(module, "__file__", None)
        files[name] = FileOnly(path.encode().decode() if isinstance(path, str) else path)
    return files


class _ModulesView(Mapping[str, Any]):
    """``sys.modules`` as ipykernel's kernel reads it at start-up, without touching modules.

    ``copy()`` gives, in ``sys.modules`` order, a stand-in holding the ``__file__`` recorded by
    the template for each module it had loaded, and the module itself for the others.
    """

    def __init__(self, known: dict[str, FileOnly]) -> None:
        self._known = known

    def __getitem__(self, name: str) -> Any:
        return sys.modules[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sys.modules)

    def __len__(self) -> int:
        return len(sys.modules)

    def copy(self) -> dict[str, Any]:
        known = self._known
        return {
            name: known[name] if name in known else sys.modules[name] for name in list(sys.modules)
        }


class _SysView:
    """The ``sys`` module, but for ``modules``: a :class:`_ModulesView`."""

    def __init__(self, modules: _ModulesView) -> None:
        self.modules = modules

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)


@contextlib.contextmanager
def _known_module_files(known: dict[str, FileOnly] | None) -> Iterator[None]:
    """While a forked kernel initializes: ipykernel lists the files of the loaded modules
    (for its debugger) from what the template recorded, not by reading every module.

    Reading ``__file__`` from each of the fifteen hundred modules writes to their reference
    counts, which copies about two thousand memory pages shared with the template: a tenth of
    a forked kernel's start-up. The list is the same: the modules' names come from
    ``sys.modules`` as it is then, and those loaded since the fork are read as usual.
    """
    ipkernel = sys.modules.get("ipykernel.ipkernel")
    if known is None or getattr(ipkernel, "sys", None) is not sys:
        yield
        return
    ipkernel.sys = _SysView(_ModulesView(known))  # type: ignore[union-attr]
    try:
        yield
    finally:
        ipkernel.sys = sys  # type: ignore[union-attr]


def _parsed_command_line(argv: list[str] | None) -> tuple[Any, list[str]] | None:
    """The configuration and leftover arguments the command line parser would give for
    ``argv``, from what the template parsed: None unless ``argv`` is that command line with an
    absolute path for its connection file, and any parent (a checkpoint's kernels have theirs).
    """
    if PARSED is None or argv is None:
        return None
    template_argv, config, extra_args = PARSED
    handle = "--IPKernelApp.parent_handle="
    if (
        len(argv) != len(template_argv)
        or argv[0] != "-f"
        or not argv[1].startswith("/")
        or not argv[2].startswith(handle)
        or not template_argv[2].startswith(handle)
        or argv[3:] != template_argv[3:]
    ):
        return None
    import copy

    config = copy.deepcopy(config)
    found = [
        (section, key)
        for section, values in config.items()
        if isinstance(values, dict)
        for key, value in values.items()
        if value == ANY_FILE
    ]
    parent = config.get("IPKernelApp", {}).get("parent_handle")
    if len(found) != 1 or ANY_FILE in extra_args or not isinstance(parent, (int, str)):
        return None
    section, key = found[0]
    config[section][key] = argv[1]
    # The value as the parser keeps it, for this kernel's parent.
    config["IPKernelApp"]["parent_handle"] = type(parent)(argv[2][len(handle) :])
    return config, list(extra_args)


#: How deep in the stack the kernel application runs (see :func:`_keep_headroom`).
_DEPTH: int | None = None


def _keep_headroom() -> None:
    """Keep the recursion a notebook may use: a kernel made from a checkpoint runs inside the
    old kernel's stack (about twenty frames deeper at each generation), so the limit rises by
    as much."""
    global _DEPTH
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    if _DEPTH is not None and depth > _DEPTH:
        sys.setrecursionlimit(sys.getrecursionlimit() + depth - _DEPTH)
    _DEPTH = depth


def run_kernel(argv: list[str], *, prepared: Callable[[Any], None] | None = None) -> NoReturn:
    """Be a kernel on ``argv`` (``["-f", connection_file, *options]``) until shut down; exit.

    ``prepared`` is called with the application once it is initialized, before it starts.
    """
    code = 1
    try:
        _keep_headroom()
        sys.argv = ["ipykernel_launcher", *argv]
        app = kernel_app()
        with _known_module_files(MODULE_FILES):
            app.initialize(argv)
        if prepared is not None:
            prepared(app)
        with contextlib.suppress(Exception):  # provenance only: the kernel runs without it
            sibling("file_audit").install(app.kernel, app.connection_file)
        with contextlib.suppress(Exception):  # without it, no durable checkpoint is used
            sibling("state_files").install()
        # The kernel's own objects live as long as it does: keep the collector to the user's
        # (the last collection, at exit, then has little to look through).
        gc.freeze()
        app.start()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    exit_now(code)


def exit_now(code: int) -> NoReturn:
    """End the kernel process: exit handlers, then garbage, then out, without the teardown.

    The exit handlers include IPython's, which clears the user namespace (closing, and so
    flushing, the files a notebook left open); a collection then reaches those held in
    reference cycles. What remains, the interpreter's module-by-module teardown, takes a
    fraction of a second with pandas loaded, and would only free memory.

    Last, a kernel leading its session kills what is left in it (what the notebook started),
    as its host would once it sees the kernel gone: a host killed in between would leave
    it running (the exit handlers have run: they still had their processes).
    """
    with contextlib.suppress(BaseException):
        import atexit

        atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        gc.collect()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(BaseException):
        if os.getsid(0) == os.getpid():
            sibling("sessions").kill_sessions([os.getpid()], own=True)
    os._exit(code)


def launched(argv: list[str]) -> NoReturn:
    """The native kernel launched on its own (not forked): ``launched(["-f", file, ...])``."""
    # As ``python -m ipykernel_launcher``: no cwd entry while loading; IPython adds "" back.
    while sys.path and sys.path[0] == "":
        del sys.path[0]
    run_kernel(argv)


def _has_no_child() -> bool:
    """Whether this process surely has no child process: every thread's ``children`` list in
    /proc is empty (False when it cannot be read)."""
    try:
        tasks = os.listdir("/proc/self/task")  # noqa: PTH208
        for task in tasks:
            with open(f"/proc/self/task/{task}/children", "rb") as listed:  # noqa: PTH123
                if listed.read().strip():
                    return False
    except OSError:
        return False
    return True


def _process_children(listed: Callable[[], list[Any]]) -> list[Any]:
    """ipykernel's list of the kernel's child processes (``listed``), which it asks for as
    it shuts down, to stop them: none, without asking, when the kernel has no child.

    ``listed`` imports psutil and walks every process of the machine: 14-22 ms of CPU in
    each kernel's shutdown (2 CPUs, 120 processes, 2026-11-28), about a fifth of a forked
    kernel's whole life. With no child there is no descendant either, so the answer is the
    same.
    """
    return [] if _has_no_child() else listed()


def _checkpoint_request(kernel: Any, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
    """Take a checkpoint of this kernel (``checkpoint_server.py``, loaded when first asked),
    and reply."""
    began = time.perf_counter()
    reply: dict[str, Any] = {"status": "ok"}
    try:
        content = parent.get("content", {})
        sibling("checkpoint_server").checkpoint(str(content["address"]), int(content["key"]))
    except Exception as exc:
        reply = {"status": "error", "ename": type(exc).__name__, "evalue": str(exc)}
    # What the checkpoint cost the kernel (its checks, and the fork: most of it).
    reply["seconds"] = time.perf_counter() - began
    kernel.session.send(stream, CHECKPOINT_REPLY, reply, parent, ident)


def _state_request(kernel: Any, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
    """Write or read the notebook's state (``state_files.py``), and reply."""
    began = time.perf_counter()
    try:
        reply = sibling("state_files").handle(dict(parent.get("content", {})))
    except Exception as exc:
        reply = {"status": "error", "ename": type(exc).__name__, "evalue": str(exc)[:2000]}
    reply["seconds"] = time.perf_counter() - began
    kernel.session.send(stream, STATE_REPLY, reply, parent, ident)


if __name__ == "__nbx_kernel__":
    sys.modules.setdefault(NAME, sys.modules[__name__])
    launched(sys.argv[2:])
