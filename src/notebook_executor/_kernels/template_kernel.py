"""The kernel side: the native kernel's entry point, and the fork server's template process.

This file runs in its own interpreter (``python -c`` + ``runpy``), never imported by the
library, and imports nothing from ``notebook_executor``. Run as ``__nbx_kernel__`` it is a
native kernel: ipykernel's ``IPKernelApp`` (see :func:`kernel_app`). Run as
``__nbx_template__`` it is the template of the fork server: it loads ipykernel, IPython and the
usual data modules (scrapbook, pandas, numpy) but creates no zmq context and no thread, then
answers requests on a Unix socket, one JSON line per request and per reply:

``{"op": "fork", "connection_file": ..., "cwd": ..., "env": {...}, "stderr": ...}``
    fork a kernel; reply ``{"pid": N}``. The child starts a new session (its own process
    group), asks the OS to SIGKILL it when the template dies (``PR_SET_PDEATHSIG``), moves to
    ``cwd``, takes ``env`` as its whole environment, sends its stderr to the file ``stderr``,
    reseeds random generators, and runs the kernel app on ``connection_file``.
``{"op": "reap", "pid": N}``
    reply ``{"status": code}`` (``subprocess`` convention: negative for a signal) once the
    child has exited, ``{"status": null}`` while it runs. Children stay zombies until reaped,
    so a pid is never reused while the host may still signal it.

The template exits, killing its children's sessions (the kernels and whatever their notebooks
started: see ``sessions.py``), when the socket closes (the host closed or died), or when its
parent-death signal (SIGTERM, ``PR_SET_PDEATHSIG``) says the host was killed outright.

Every kernel, launched or forked, watches its parent (the host or the template) through a
pidfd; when the parent exits, the kernel kills every other process of its session and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

#: Modules every kernel imports: the template preloads them.
PRELOAD = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.comm",
    "ipykernel.debugger",
    "IPython.core.interactiveshell",
    "IPython.core.completer",
    "IPython.core.history",
    "IPython.core.debugger",
    "IPython.core.completerlib",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "IPython.utils.wildcard",
    "traitlets.config.argcomplete_config",
    "tornado.platform.asyncio",
    "tornado.queues",
    "tornado.locks",
    "sqlite3",
    "jupyter_client.session",
)

#: Modules the notebooks of this project often import, preloaded too unless ``kernel`` only.
DATA_PRELOAD = (
    "scrapbook",
    "pandas",
    "numpy",
    "pyarrow",
    "pyarrow.parquet",
)

_PR_SET_PDEATHSIG = 1

#: Stands for the connection file in the command line the template parses for its kernels.
_ANY_FILE = "\0connection-file\0"

#: In the template and its children: a kernel's command line, with :data:`_ANY_FILE` for its
#: connection file, the configuration parsed from it, and the arguments left over. See
#: :func:`_parsed_command_line`.
_PARSED: tuple[list[str], Any, list[str]] | None = None

#: In the template and its children: a stand-in for each module loaded before the first fork,
#: by name, holding its ``__file__``. See :func:`_known_module_files`.
_MODULE_FILES: dict[str, _FileOnly] | None = None

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

    return KernelApp


@functools.cache
def _sessions() -> Any:
    """``sessions.py`` beside this file, loaded by path (this script imports no package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().with_name("sessions.py")
    spec = importlib.util.spec_from_file_location("_notebook_executor_sessions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
        sessions = _sessions()
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
                sessions.kill_sessions([os.getpid()], own=True)
        os._exit(1)


class _FileOnly:
    """A stand-in for a module the template loaded: its ``__file__`` and nothing else."""

    __slots__ = ("__file__",)

    def __init__(self, path: str | None) -> None:
        if path:
            self.__file__ = path


def _module_files() -> dict[str, _FileOnly]:
    """A :class:`_FileOnly` for each loaded module, by name.

    Made in one go (with copies of the paths), they lie on a few memory pages of their own:
    the children that read them copy those pages only.
    """
    files: dict[str, _FileOnly] = {}
    for name, module in sys.modules.copy().items():
        path = getattr(module, "__file__", None)
        files[name] = _FileOnly(path.encode().decode() if isinstance(path, str) else path)
    return files


class _ModulesView(Mapping[str, Any]):
    """``sys.modules`` as ipykernel's kernel reads it at start-up, without touching modules.

    ``copy()`` gives, in ``sys.modules`` order, a stand-in holding the ``__file__`` recorded by
    the template for each module it had loaded, and the module itself for the others.
    """

    def __init__(self, known: dict[str, _FileOnly]) -> None:
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
def _known_module_files(known: dict[str, _FileOnly] | None) -> Iterator[None]:
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


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signum`` to this process when its parent exits; exit now if it
    already has."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent_pid:
        _end_children()
        os._exit(1)


#: In the template: the kernels it forked and has not reaped.
_CHILDREN: set[int] = set()


def _end_children() -> None:
    """SIGKILL every kernel of the template, and every process in their sessions."""
    children = list(_CHILDREN)
    if not children:
        return
    with contextlib.suppress(Exception):
        _sessions().kill_sessions(children)
    for pid in children:
        # A child that has not called setsid() yet is in no session of its own.
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _on_host_death(signum: int, frame: Any) -> None:
    """The template's parent-death signal: the host is gone, and so go the kernels."""
    _end_children()
    os._exit(0)


def _preload(data: bool) -> list[str]:
    loaded = []
    for name in PRELOAD + DATA_PRELOAD if data else PRELOAD:
        try:
            __import__(name)
        except Exception:  # a missing optional module only makes kernels start slower
            continue
        loaded.append(name)
    return loaded


def _prepare_kernels(options: list[str]) -> None:
    """Do once, here, the start-up work every forked kernel would repeat identically.

    Makes the kernel application class, and parses a kernel's command line once with a
    throwaway application (not the singleton): each kernel then takes the configuration
    parsed, its own connection file put in (:func:`_parsed_command_line`), and what the
    parser keeps (compiled regular expressions, the logging set-up's imports) is shared.
    It opens no file and no socket.
    """
    global _PARSED
    argv = ["-f", _ANY_FILE, f"--IPKernelApp.parent_handle={os.getpid()}", *options]
    app = kernel_app_class()()
    app.parse_command_line(argv)
    _PARSED = (argv, app.cli_config, list(app.extra_args))


def _prepare_data_modules() -> None:
    """Do once, here, what the first ``scrapbook.glue`` in every kernel would: check a scrap
    against scrapbook's schema, filling the validators' caches (a pure function: no output)."""
    scraps = sys.modules.get("scrapbook.scraps")
    if scraps is not None:
        scraps.scrap_to_payload(scraps.Scrap("scrap", 1, "json"))


def _parsed_command_line(argv: list[str] | None) -> tuple[Any, list[str]] | None:
    """The configuration and leftover arguments the command line parser would give for
    ``argv``, from what the template parsed: None unless ``argv`` is that command line with an
    absolute path for its connection file."""
    if _PARSED is None or argv is None:
        return None
    template_argv, config, extra_args = _PARSED
    if (
        len(argv) != len(template_argv)
        or argv[0] != "-f"
        or argv[2:] != template_argv[2:]
        or not argv[1].startswith("/")
    ):
        return None
    import copy

    config = copy.deepcopy(config)
    found = [
        (section, key)
        for section, values in config.items()
        if isinstance(values, dict)
        for key, value in values.items()
        if value == _ANY_FILE
    ]
    if len(found) != 1 or _ANY_FILE in extra_args:
        return None
    section, key = found[0]
    config[section][key] = argv[1]
    return config, list(extra_args)


def _fork_unsafe_state() -> str | None:
    """Why forking from this process would be unsafe now, or None."""
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads"
    zmq = sys.modules.get("zmq")
    if zmq is not None and getattr(zmq.Context, "_instance", None) is not None:
        return "a zmq context exists"
    return None


def _child(request: dict[str, Any], control: socket.socket, template_pid: int) -> NoReturn:
    """Become a kernel. Never returns."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _CHILDREN.clear()
        control.close()
        os.setsid()
        die_with_parent(template_pid)
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        os.close(null)
        os.close(err)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        # A fresh ``python -m ipykernel_launcher`` has no cwd entry here; IPython adds "" back.
        while sys.path and sys.path[0] in ("", request["cwd"]):
            del sys.path[0]
        argv = [
            "-f",
            request["connection_file"],
            f"--IPKernelApp.parent_handle={template_pid}",
            *request.get("options", ()),
        ]
    except BaseException:
        import traceback

        traceback.print_exc()
        _exit(1)
    run_kernel(argv)


def run_kernel(argv: list[str]) -> NoReturn:
    """Be a kernel on ``argv`` (``["-f", connection_file, *options]``) until shut down; exit."""
    code = 1
    try:
        sys.argv = ["ipykernel_launcher", *argv]
        app = kernel_app()
        with _known_module_files(_MODULE_FILES):
            app.initialize(argv)
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
    _exit(code)


def _exit(code: int) -> NoReturn:
    """End the kernel process: exit handlers, then garbage, then out, without the teardown.

    The exit handlers include IPython's, which clears the user namespace (closing, and so
    flushing, the files a notebook left open); a collection then reaches those held in
    reference cycles. What remains, the interpreter's module-by-module teardown, takes a
    fraction of a second with pandas loaded, and would only free memory.
    """
    with contextlib.suppress(BaseException):
        import atexit

        atexit._run_exitfuncs()
    with contextlib.suppress(BaseException):
        gc.collect()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _status(pid: int) -> int | None:
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return -signal.SIGKILL
    if done == 0:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def serve(control: socket.socket) -> None:
    """Answer requests until the host closes the socket; then kill every child."""
    children = _CHILDREN
    template_pid = os.getpid()
    reader = control.makefile("rb")
    try:
        for line in reader:
            request = json.loads(line)
            op = request.get("op")
            reply: dict[str, Any]
            if op == "fork":
                unsafe = _fork_unsafe_state()
                if unsafe is not None:
                    reply = {"error": f"cannot fork safely: {unsafe}"}
                else:
                    pid = os.fork()
                    if pid == 0:
                        _child(request, control, template_pid)
                    children.add(pid)
                    reply = {"pid": pid}
            elif op == "reap":
                pid = int(request["pid"])
                code = _status(pid)
                if code is not None:
                    children.discard(pid)
                reply = {"status": code}
            else:
                reply = {"error": f"unknown op {op!r}"}
            control.sendall(json.dumps(reply).encode() + b"\n")
    finally:
        _end_children()
        for pid in children:
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)


def main(argv: list[str]) -> None:
    """``main([control_fd, host_pid, preload, *options])``: preload, report readiness, serve.

    ``preload`` is ``all`` (:data:`PRELOAD` and :data:`DATA_PRELOAD`) or ``kernel``
    (:data:`PRELOAD` only: ready sooner); ``options`` are those the kernels will be given.
    """
    control_fd, host_pid = int(argv[0]), int(argv[1])
    data = (argv[2] if len(argv) > 2 else "all") != "kernel"
    # A catchable parent-death signal: the template kills its kernels' sessions on its way out
    # (a SIGKILL would leave what their notebooks started running).
    signal.signal(signal.SIGTERM, _on_host_death)
    _sessions()
    die_with_parent(host_pid, signal.SIGTERM)
    # Ctrl-C at a terminal is for the host; the template goes when the host closes the socket.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    control = socket.socket(fileno=control_fd)
    # ``python -c`` put the working directory first on sys.path: imports come from packages only.
    while sys.path and sys.path[0] == "":
        del sys.path[0]
    # Importing allocates many objects that all live on: collecting meanwhile finds next to
    # nothing and costs a sixth of the import time, and a full collection afterwards (75 ms)
    # would free a few thousand objects. The template collects nothing before it serves.
    gc.disable()
    try:
        loaded = _preload(data)
        with contextlib.suppress(Exception):  # kernels would only start a little slower
            _prepare_kernels(argv[3:])
        if data:
            with contextlib.suppress(Exception):
                _prepare_data_modules()
    finally:
        gc.enable()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    global _MODULE_FILES
    with contextlib.suppress(Exception):  # without it, kernels read each module themselves
        _MODULE_FILES = _module_files()
    # Objects that exist now are shared with every child; keep the collector off their pages.
    gc.freeze()
    hello = {
        "ready": True,
        "pid": os.getpid(),
        "preloaded": loaded,
        "modules": sorted({name.partition(".")[0] for name in sys.modules}),
        "unsafe": _fork_unsafe_state(),
    }
    control.sendall(json.dumps(hello).encode() + b"\n")
    serve(control)
    # Every child is gone and nothing is left to flush: skip the interpreter's teardown of the
    # thousand-odd modules loaded, which would keep the host's close() waiting.
    os._exit(0)


def launched(argv: list[str]) -> NoReturn:
    """The native kernel launched on its own (not forked): ``launched(["-f", file, ...])``."""
    # As ``python -m ipykernel_launcher``: no cwd entry while loading; IPython adds "" back.
    while sys.path and sys.path[0] == "":
        del sys.path[0]
    run_kernel(argv)


if __name__ == "__nbx_template__":
    main(sys.argv[2:])
elif __name__ == "__nbx_kernel__":
    launched(sys.argv[2:])
