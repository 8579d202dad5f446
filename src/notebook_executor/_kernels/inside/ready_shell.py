"""A kernel's IPython shell, built once in the template before the first fork.

Loaded by path in the template and its kernels (``kernel_main.sibling("ready_shell")``);
imports nothing from ``notebook_executor``. Building ipykernel's shell (``ZMQInteractiveShell``:
its configuration, magics, prefilters, completer, display machinery) costs a forked kernel
10-14 ms of CPU, a sixth of its start; none of it depends on which kernel it is, once three
things are the same:

- the configuration: the template builds the shell only when no configuration file is in
  use (each kernel checks the same, as it loads its own: :func:`adopt`), and no section is
  set for a parent class (``c.IPythonKernel.ZMQInteractiveShell...``), nor the kernel's
  classes;
- the environment variables read while it was built (noted with their values, by a
  tracking ``os.environ``; all of them when the environment was listed), and the profile
  folder they lead to;
- what a shell takes from its process as it is built: the working folder (IPython's
  ``_dh`` and ``starting_dir``), the standard streams and exception hook (the kernel's,
  set just before the shell in a fresh kernel), and the variables ipykernel's shell writes
  to the environment (``TERM``, ``PAGER``...): each kernel sets these again (:func:`adopt`).

A kernel whose case differs in any of these builds its own shell, as a fresh kernel does:
:func:`discard` forgets the template's. ipykernel makes the shell a singleton, and the
kernel asks for it by ``instance()``: the template's is the one it gets, and the kernel
takes it as the kernel made from a checkpoint takes the old kernel's (``checkpoint_server``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: In the template and a kernel it forked: the shell built, or None.
SHELL: Any = None

#: The environment variables read while :data:`SHELL` was built, with their values (None:
#: unset); None when the environment was listed as a whole (see :data:`WHOLE_ENV`).
ENV_READ: dict[str, str | None] | None = None

#: The whole environment as the shell was built, when it was listed.
WHOLE_ENV: dict[str, str] | None = None

#: In a forked kernel: whether it took the template's shell (:func:`adopt`).
ADOPTED = False

#: The classes a kernel takes its shell and compiler from, as the template built them.
_KERNEL_CLASS_KEYS = frozenset({"shell_class", "compiler_class", "user_module", "user_ns"})


@contextlib.contextmanager
def _environment_reads() -> Iterator[tuple[dict[str, str | None], list[bool]]]:
    """While it lasts: the variables read from ``os.environ``, with their values, and
    whether it was listed."""
    read: dict[str, str | None] = {}
    written: set[str] = set()
    listed = [False]
    environ = os.environ
    base = type(environ)

    def note(key: Any, value: str | None) -> None:
        # A variable the build wrote before reading it is the build's own (ipykernel's shell
        # sets ``TERM``, and each kernel sets it again).
        if isinstance(key, str) and key not in written:
            read.setdefault(key, value)

    class Noted(base):  # type: ignore[misc, valid-type]
        def __getitem__(self, key: Any) -> Any:
            try:
                value = base.__getitem__(self, key)
            except KeyError:
                note(key, None)
                raise
            note(key, value)
            return value

        def __contains__(self, key: Any) -> bool:
            found = bool(base.__contains__(self, key))
            note(key, base.__getitem__(self, key) if found else None)
            return found

        def __setitem__(self, key: Any, value: Any) -> None:
            if isinstance(key, str):
                written.add(key)
            base.__setitem__(self, key, value)

        def __iter__(self) -> Iterator[Any]:
            listed[0] = True
            return base.__iter__(self)

        def copy(self) -> dict[str, str]:
            listed[0] = True
            return dict(base.copy(self))

    environ.__class__ = Noted
    try:
        yield read, listed
    finally:
        environ.__class__ = base


def _plain_config(config: Any) -> bool:
    """Whether ``config`` sets nothing a template-built shell could get wrong: no section
    for a class under a parent class, and none of the kernel's classes."""
    for name, section in config.items():
        if not isinstance(section, dict):
            continue
        if any(isinstance(value, dict) for value in section.values()):
            return False
        if name in ("IPythonKernel", "Kernel") and _KERNEL_CLASS_KEYS & set(section):
            return False
        if name == "IPKernelApp" and "kernel_class" in section:
            return False
    return True


def build(app_class: Any, argv: list[str]) -> None:
    """In the template: build the shell a kernel on ``argv`` would (see the module doc).

    A throwaway application (not the singleton) parses ``argv`` and loads the configuration
    as a kernel's does; the shell is built with it. Nothing is built when a configuration
    file is in use, or the configuration sets what :func:`_plain_config` refuses.
    """
    global SHELL, ENV_READ, WHOLE_ENV
    with _environment_reads() as (read, listed):
        app = app_class()
        app.parse_command_line(argv)
        cli_config = app.config.copy()
        app.init_profile_dir()
        app.init_config_files()
        app.load_config_file()
        app.update_config(cli_config)
        if app.loaded_config_files or not _plain_config(app.config):
            return
        from ipykernel.ipkernel import IPythonKernel

        traits = IPythonKernel.class_traits()
        shell_class: Any = traits["shell_class"].default()
        compiler_class: Any = traits["compiler_class"].default()
        shell = shell_class.instance(
            parent=app,
            profile_dir=app.profile_dir,
            user_module=None,
            user_ns=None,
            kernel=None,
            compiler_class=compiler_class,
        )
        whole = dict(os.environ) if listed[0] else None
    if not _fits(shell):
        SHELL = shell
        discard()
        return
    SHELL = shell
    ENV_READ = None if whole is not None else dict(read)
    WHOLE_ENV = whole


def _fits(shell: Any) -> bool:
    """Whether ``shell`` has what :func:`adopt` sets (another IPython version may not)."""
    return (
        isinstance(getattr(shell, "_orig_sys_module_state", None), dict)
        and isinstance(getattr(getattr(shell, "history_manager", None), "dir_hist", None), list)
        and callable(getattr(shell, "init_environment", None))
        and hasattr(shell, "starting_dir")
        and hasattr(shell, "sys_excepthook")
        and callable(getattr(shell, "atexit_operations", None))
    )


def _same_environment() -> bool:
    if WHOLE_ENV is not None:
        return dict(os.environ) == WHOLE_ENV
    if ENV_READ is None:
        return False
    return all(os.environ.get(name) == value for name, value in ENV_READ.items())


def discard() -> None:
    """Forget the template's shell: this kernel builds its own (its exit handler unhooked)."""
    global SHELL
    shell, SHELL = SHELL, None
    if shell is None:
        return
    import atexit

    atexit.unregister(shell.atexit_operations)
    type(shell).clear_instance()


def usable_for(app: Any) -> bool:
    """In a forked kernel, its application's configuration loaded: whether the template's
    shell is the one it would build (else it is discarded)."""
    if SHELL is None:
        return False
    profile = getattr(app, "profile_dir", None)
    if (
        app.loaded_config_files
        or not _same_environment()
        or profile is None
        or SHELL.profile_dir.location != profile.location
        or not _plain_config(app.config)
    ):
        discard()
        return False
    return True


def adopt(app: Any) -> None:
    """In a forked kernel whose kernel object took the template's shell: give the shell what
    it takes from its kernel and its process as it is built (see the module doc)."""
    global SHELL, ADOPTED
    shell: Any = SHELL
    kernel = app.kernel
    if shell is None:
        return
    took = getattr(kernel, "shell", None) is shell
    if not took:
        # This ipykernel made a shell of its own: the template's must not stay the singleton.
        discard()
        return
    SHELL = None
    ADOPTED = True
    shell.parent = kernel
    shell.kernel = kernel
    shell.profile_dir = app.profile_dir
    state = shell._orig_sys_module_state
    state.update(stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr, excepthook=sys.excepthook)
    shell.sys_excepthook = sys.excepthook
    shell.starting_dir = str(Path.cwd())
    shell.history_manager.dir_hist[:] = [Path.cwd()]
    shell.init_environment()
