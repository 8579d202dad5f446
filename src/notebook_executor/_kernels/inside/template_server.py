"""The fork server's template: a process that has imported a kernel's modules, and forks kernels.

This file runs in its own interpreter (``python -c`` + ``runpy``, as ``__nbx_template__``),
never imported by the library, and imports nothing from ``notebook_executor``. It loads
ipykernel, IPython and the usual data modules (scrapbook, pandas, numpy) but creates no zmq
context and no thread, then answers the requests of ``fork_serving.serve`` on a Unix socket. A
kernel it forks (:func:`_child`) starts a new session (its own process group), asks the OS to
SIGKILL it when the template dies (``PR_SET_PDEATHSIG``), moves to ``cwd``, takes ``env`` as
its whole environment, sends its stderr to the file ``stderr``, reseeds random generators, and
runs the kernel app on ``connection_file``.

The template exits, killing its children's sessions (the kernels and whatever their notebooks
started: see ``sessions.py``), when the socket closes (the host closed or died), or when its
parent-death signal (SIGTERM, ``PR_SET_PDEATHSIG``) says the host was killed outright.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import io
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn


def _kernel_main() -> Any:
    """``kernel_main.py`` beside this file, loaded by path as its :data:`NAME`."""
    name = "_notebook_executor_kernel"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().with_name("kernel_main.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


kernel = _kernel_main()
serving = kernel.sibling("fork_serving")
_modules = kernel.sibling("preload")
#: What every template imports, and what the full one imports besides (``preload.py``).
PRELOAD, DATA_PRELOAD = _modules.PRELOAD, _modules.DATA_PRELOAD


def _on_host_death(signum: int, frame: Any) -> None:
    """The template's parent-death signal: the host is gone, and so go the kernels."""
    serving.end_children()
    os._exit(0)


def _preload(data: bool) -> list[str]:
    """Import the modules kernels will use; return the names imported.

    The template runs no other distribution's plugin: a preloaded module that loads one (an
    entry point: papermill loads every ``papermill.engine`` and ``papermill.io`` plugin as it
    is imported, and scrapbook imports papermill) gets a :class:`DeferredPlugin`, which loads
    it when first used, in the kernel that uses it. What a plugin does as it is imported may
    depend on where it runs: one that imports ``matplotlib.pyplot`` before any kernel exists
    fixes matplotlib's backend to ``agg``, and forked kernels would show no figure. A module
    whose import fails has the packages it left half imported forgotten (a kernel imports
    them whole, itself). Data modules are imported as in a kernel's cell: see :func:`_as_in_a_cell`.
    """
    loaded = []
    for name in PRELOAD + DATA_PRELOAD if data else PRELOAD:
        before = set(sys.modules)
        plugins: set[str] = set()
        try:
            with _plugins_deferred(plugins), _as_in_a_cell(name in DATA_PRELOAD):
                __import__(name)
        except Exception as exc:  # a missing optional module only makes kernels start slower
            _forget_half_imported(before, exc, plugins)
            continue
        loaded.append(name)
    return loaded


class _KernelShell:
    """What the template's modules see of IPython's shell while they are imported: one that
    runs in a kernel (``shell.kernel``), with a kernel application's configuration section.
    A module that asks more of it at import fails to import here, and each kernel imports it
    itself, as a fresh one would."""

    __slots__ = ()
    kernel = object()
    config: dict[str, Any] = {"IPKernelApp": {}}  # noqa: RUF012 (read only)


class _KernelOutput(io.TextIOBase):
    """What the template's modules see of ``sys.stdout`` and ``sys.stderr`` while they are
    imported: a kernel's output stream (ipykernel's ``OutStream``: UTF-8, not a terminal);
    what they write there is dropped, as the template's output is."""

    encoding = "UTF-8"
    errors = "strict"

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


@contextlib.contextmanager
def _as_in_a_cell(cell: bool = True) -> Any:
    """While it lasts (if ``cell``), a module being imported sees its host as one imported by
    a cell of a fresh kernel, where a library decides a setting from it at import: the
    builtin ``get_ipython`` and IPython's give a kernel's shell (:class:`_KernelShell`), and
    the standard streams are a kernel's (:class:`_KernelOutput`). Pandas, for one, makes
    ``display.max_columns`` 0 (fit the terminal's width) outside a kernel, 20 in one.
    Afterwards IPython's ``get_ipython``, wherever a module took it, is IPython's again.
    """
    import builtins

    if not cell:
        yield
        return
    getipython = sys.modules.get("IPython.core.getipython")
    ipython = sys.modules.get("IPython")
    real = getattr(getipython, "get_ipython", None)
    inside = True

    def get_ipython() -> Any:
        return _KernelShell() if inside or real is None else real()

    saved = sys.stdout, sys.stderr
    had = builtins.__dict__.get("get_ipython")
    builtins.get_ipython = get_ipython  # type: ignore[attr-defined]
    for module in (getipython, ipython):
        if module is not None:
            module.get_ipython = get_ipython  # type: ignore[attr-defined]
    sys.stdout = sys.stderr = _KernelOutput()
    try:
        yield
    finally:
        inside = False
        sys.stdout, sys.stderr = saved
        if had is None:
            del builtins.get_ipython  # type: ignore[attr-defined]
        else:
            builtins.get_ipython = had  # type: ignore[attr-defined]
        for module in (getipython, ipython):
            if module is not None:
                module.get_ipython = real  # type: ignore[attr-defined]


#: The distributions whose plugins the template loads while preloading: this project's own
#: (its papermill engine), which does nothing as it is imported.
OWN_DISTRIBUTIONS = frozenset({"notebook-executor"})


class DeferredPlugin:
    """Another distribution's plugin, as the template gives it to the module that loads it:
    loaded (its entry point's object imported) when first used, in the kernel that uses it,
    where its import runs as in a fresh kernel; then every attribute and call is its own.
    """

    __slots__ = ("_entry_point", "_load", "_object")

    def __init__(self, entry_point: Any, load: Any) -> None:
        self._entry_point = entry_point
        self._load = load
        self._object: Any = None

    def _loaded(self) -> Any:
        if self._object is None:
            self._object = self._load(self._entry_point)
        return self._object

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loaded(), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._loaded()(*args, **kwargs)

    def __repr__(self) -> str:
        if self._object is not None:
            return repr(self._object)
        return f"<plugin {self._entry_point!r}, loaded when first used>"


def _distribution_name(entry_point: Any) -> str | None:
    """The normalized name of the distribution an entry point comes from, if known."""
    import re

    dist = getattr(entry_point, "dist", None) or getattr(entry_point, "distro", None)
    name = getattr(getattr(dist, "metadata", None), "get", lambda key: None)("Name")
    name = name or getattr(dist, "name", None)
    return re.sub(r"[-_.]+", "-", name).lower() if isinstance(name, str) else None


@contextlib.contextmanager
def _plugins_deferred(loaded: set[str]) -> Any:
    """While it lasts, loading an entry point of any distribution but
    :data:`OWN_DISTRIBUTIONS` gives a :class:`DeferredPlugin`; the top-level packages of the
    plugins loaded are added to ``loaded``.

    Covers ``importlib.metadata`` and the ``entrypoints`` package (papermill's loader).
    """
    import importlib.metadata

    classes: list[Any] = [importlib.metadata.EntryPoint]
    if importlib.util.find_spec("entrypoints") is not None:
        classes.append(importlib.import_module("entrypoints").EntryPoint)
    originals = [cls.__dict__["load"] for cls in classes]

    def guarded(original: Any) -> Any:
        def load(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _distribution_name(self) not in OWN_DISTRIBUTIONS:
                return DeferredPlugin(self, original)
            module = getattr(self, "module", None) or getattr(self, "module_name", "")
            loaded.add(str(module).partition(".")[0])
            return original(self, *args, **kwargs)

        return load

    for cls, original in zip(classes, originals, strict=True):
        setattr(cls, "load", guarded(original))  # noqa: B010
    try:
        yield
    finally:
        for cls, original in zip(classes, originals, strict=True):
            setattr(cls, "load", original)  # noqa: B010


def _forget_half_imported(before: set[str], error: BaseException, plugins: set[str]) -> None:
    """After a failed import: forget the modules imported since ``before`` of the packages
    whose import it interrupted, and of the plugins loaded meanwhile (they may hold what those
    packages defined), so that a kernel imports them anew, whole."""
    packages = set(plugins)
    traceback = error.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if frame.f_code.co_name == "<module>":
            packages.add(str(frame.f_globals.get("__name__", "")).partition(".")[0])
        traceback = traceback.tb_next
    packages.discard("")
    packages.discard("__main__")
    for name in set(sys.modules) - before:
        if name.partition(".")[0] in packages:
            del sys.modules[name]


def _prepare_kernels(options: list[str]) -> None:
    """Do once, here, the start-up work every forked kernel would repeat identically.

    Makes the kernel application class, and parses a kernel's command line once with a
    throwaway application (not the singleton): each kernel then takes the configuration
    parsed, its own connection file put in (``kernel_main._parsed_command_line``), and what the
    parser keeps (compiled regular expressions, the logging set-up's imports) is shared.
    Builds the IPython shell kernels take (``ready_shell.py``): it reads IPython's profile
    folder (creating it where none exists yet, as any kernel's start does). It opens no
    socket and starts no thread.
    """
    argv = ["-f", kernel.ANY_FILE, f"--IPKernelApp.parent_handle={os.getpid()}", *options]
    app = kernel.kernel_app_class()()
    app.parse_command_line(argv)
    kernel.PARSED = (argv, app.cli_config, list(app.extra_args))
    # The shell every kernel builds, built here once (each kernel checks it is the one it
    # would build: see ready_shell.py).
    with contextlib.suppress(Exception):
        kernel.sibling("ready_shell").build(kernel.kernel_app_class(), argv)
    # IPython tokenizes every cell: the tokenizer's regular expressions, compiled at its first
    # use, cost each kernel about 2 ms of CPU (Python 3.11; later versions tokenize in C).
    import io
    import tokenize

    for _ in tokenize.generate_tokens(io.StringIO("x = 1\n").readline):
        pass


def _prepare_data_modules() -> None:
    """Do once, here, what the first ``scrapbook.glue`` in every kernel would: check a scrap
    against scrapbook's schema, filling the validators' caches (a pure function: no output)."""
    scraps = sys.modules.get("scrapbook.scraps")
    if scraps is not None:
        scraps.scrap_to_payload(scraps.Scrap("scrap", 1, "json"))


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
        argv = serving.become_kernel_child(request, control, template_pid)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        # A fresh ``python -m ipykernel_launcher`` has no cwd entry here; IPython adds "" back.
        while sys.path and sys.path[0] in ("", request["cwd"]):
            del sys.path[0]
    except BaseException:
        import traceback

        traceback.print_exc()
        kernel.exit_now(1)
    kernel.run_kernel(argv)
    os._exit(1)  # (not reached: the kernel exits)


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
    kernel.sibling("sessions")
    serving.die_with_parent(host_pid, signal.SIGTERM)
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
        # What every kernel loads as it starts (its file audit and state requests): loaded
        # once here, each kernel compiled them (4 ms of CPU where no bytecode is written).
        for name in ("file_audit", "state_files"):
            with contextlib.suppress(Exception):
                kernel.sibling(name)
        if data:
            with contextlib.suppress(Exception):
                _prepare_data_modules()
    finally:
        gc.enable()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(Exception):  # without it, kernels read each module themselves
        kernel.MODULE_FILES = kernel.module_files()
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
    serving.serve(control, _child, _fork_unsafe_state)
    # Every child is gone and nothing is left to flush: skip the interpreter's teardown of the
    # thousand-odd modules loaded, which would keep the host's close() waiting.
    os._exit(0)


if __name__ == "__nbx_template__":
    main(sys.argv[2:])
