"""The command line's side of the run server: hand a command to it, starting it when needed.

:func:`forward` is the first thing ``main`` does: for ``run``, ``sweep``, ``check --execute``,
``resume``, ``session`` and ``jobs``, it sends the command line, the working directory, the
environment and the standard streams to this user's server for this interpreter (see
:mod:`.paths`), starting it when none runs, and returns the exit status the server's child
answers with. The commands of :data:`SERVED_WHEN_RUNNING` (``runs``, ``show``, ``diff``,
``edit``...) go to a server that already runs, and never start one. It returns None (run
in-process) for ``mcp`` and ``server``, with ``--no-server`` or
``$NOTEBOOK_EXECUTOR_NO_SERVER=1``, when no server can be reached (or started), and when the
server cannot take this process's resource limits (a hard limit above its own: said once with
``-v``; a ``session`` command is then refused).

The request (:func:`command_request`) carries the command line, the working directory and
the environment as the operating system's bytes (in hexadecimal: any byte, UTF-8 or not,
arrives as it was), the umask, and the soft and hard limit of every resource ``ulimit`` sets
(:func:`process_limits`). The server is started with a minimal environment of its own
(:func:`server_environment`): none of the starting client's other variables (its secrets)
reach it, nor any later client's command.

This module is what a served command imports: the standard library's small modules only
(measured with ``python -X importtime``; see ``benchmarks/bench_server.py``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import stat
import sys
import time

from ..._kernels.host_env import HOST_NAMES, startup_environment
from . import wire
from .paths import NO_SERVER_ENV, RuntimeFolderError, ServerFiles, server_files

# No pathlib, contextlib or typing at run time (nor argparse, logging, socket: see .wire): this
# module is the whole of a served command's client, and every import is paid at every command.
# ruff: noqa: PTH108, PTH109, SIM105
TYPE_CHECKING = False

if TYPE_CHECKING:
    from _socket import socket
    from collections.abc import Collection, Mapping, Sequence
    from typing import Any

__all__ = [
    "command_request",
    "connect",
    "forward",
    "process_limits",
    "request",
    "served_command",
    "server_environment",
    "start_server",
]

PROG = "notebook-executor"
EXIT_USAGE = 2
#: Seconds a client waits for a server it started to listen.
START_SECONDS = 60.0
#: True in a child of the server, where commands run in-process (set by ``.child``).
IN_SERVER = False
#: The commands the server runs, started for them when none runs; ``check`` only with
#: ``--execute``. ``jobs`` and ``job`` only read the jobs' files: served, they answer without
#: this process's start-up.
SERVED = ("run", "sweep", "check", "resume", "session", "jobs", "job")

#: The commands a server runs when one runs already (none is started for them): they run no
#: kernel of the server's (``reproduce`` starts its own), and in-process each pays the
#: package's imports first: ``show`` took 0.24 s against 0.03 s served (2 CPUs, 2026-11-29).
SERVED_WHEN_RUNNING = (
    "runs",
    "scraps",
    "show",
    "search",
    "digest",
    "reindex",
    "diff",
    "reproduce",
    "validate",
    "check",
    "inspect",
    "convert",
    "edit",
    "insert",
    "cells",
    "delete",
    "gc",
    "report",
    "export",
)

#: The commands whose child takes the spare, with the kernel it started ahead for a run.
_KERNEL_COMMANDS = ("run", "sweep", "check", "resume", "session")

#: The commands that live in the server: never run in-process, they take no ``--no-server``.
NEED_SERVER = ("session", "jobs", "job")


def no_server_commands() -> tuple[str, ...]:
    """The commands that take ``--no-server``: every one the server may run, but those that
    need it (:data:`NEED_SERVER`)."""
    served = dict.fromkeys((*SERVED, *SERVED_WHEN_RUNNING))
    return tuple(name for name in served if name not in NEED_SERVER)


def _command_words(argv: Sequence[str]) -> list[str]:
    words = list(argv)
    while words and words[0] in ("-v", "-vv", "-vvv", "--verbose"):
        words.pop(0)
    return words


def served_command(argv: Sequence[str]) -> str | None:
    """The command of ``argv`` if the server should run it, else None."""
    words = _command_words(argv)
    if not words or words[0] not in (*SERVED, *SERVED_WHEN_RUNNING):
        return None
    command, rest = words[0], words[1:]
    if "--no-server" in rest or "-h" in rest or "--help" in rest:
        return None
    if command == "sweep" and any(w == "--scheduler" or w.startswith("--scheduler=") for w in rest):
        return None
    if command == "session" and os.environ.get(NO_SERVER_ENV, "") not in ("", "0"):
        return command  # refused below, with the reason
    if os.environ.get(NO_SERVER_ENV, "") not in ("", "0"):
        return None
    return command


def starts_server(argv: Sequence[str]) -> bool:
    """Whether ``argv``'s command starts the server when none runs (:data:`SERVED`; not those
    of :data:`SERVED_WHEN_RUNNING`, nor ``check`` without ``--execute``)."""
    words = _command_words(argv)
    if not words or words[0] not in SERVED:
        return False
    return words[0] != "check" or "--execute" in words[1:]


def takes_kernel(argv: Sequence[str]) -> bool:
    """Whether ``argv``'s command may run a kernel of the server's: its child takes the spare
    (and the kernel it started ahead); any other command's child is forked for it alone."""
    words = _command_words(argv)
    return starts_server(argv) and words[0] in _KERNEL_COMMANDS


def forward(argv: Sequence[str]) -> int | None:
    """Run ``argv`` in the server; its exit status, or None to run it in-process."""
    command = None if IN_SERVER else served_command(argv)
    if command is None:
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None  # the folder is gone: the command says so itself, in-process
    verbose = any(w in ("-v", "-vv", "-vvv", "--verbose") for w in argv[:3])
    if command == "session" and os.environ.get(NO_SERVER_ENV, "") not in ("", "0"):
        _fail(f"sessions live in the run server: unset {NO_SERVER_ENV} to use them")
        return EXIT_USAGE
    starts = starts_server(argv)
    try:
        files = server_files()
        sock = connect(files)
        if sock is None and starts:
            sock = start_server(files, _secret_names(argv))
    except (RuntimeFolderError, OSError) as exc:
        reason = str(exc)
        sock = None
    else:
        reason = "it could not be started" if starts else "none runs"
    if sock is None:
        return _unserved(command, verbose, reason, f"no run server ({reason})")
    try:
        status, reason = _command(sock, list(argv), cwd)
    finally:
        sock.close()
    if status is not None:
        return status
    return _unserved(command, verbose, f"{reason}: stop it (`{PROG} server stop`)", reason)


def _unserved(command: str, verbose: bool, why: str, note: str) -> int | None:
    """A command the server does not serve: a session is refused (``why``), anything else
    runs in-process (None), which ``-v`` notes."""
    if command == "session":
        _fail(f"sessions need the run server, and {why}")
        return EXIT_USAGE
    if verbose:
        print(f"{PROG}: INFO: {note}: running in-process", file=sys.stderr)
    return None


def command_request(argv: Sequence[str], cwd: str) -> dict[str, Any]:
    """The request to run ``argv`` in ``cwd`` with this process's environment, umask and
    resource limits (strings as the bytes the operating system has, in hexadecimal)."""
    return {
        "op": "command",
        "argv": [os.fsencode(word).hex() for word in argv],
        "cwd": os.fsencode(cwd).hex(),
        "env": {name.hex(): value.hex() for name, value in os.environb.items()},
        **process_limits(),
    }


def process_limits() -> dict[str, Any]:
    """This process's ``umask`` and ``rlimits``: the soft and hard limit of each resource
    (``NOFILE`` for ``RLIMIT_NOFILE``; None: unlimited)."""
    mask = os.umask(0o077)  # a client has no other thread that could create a file meanwhile
    os.umask(mask)
    limits = {}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            pair = resource.getrlimit(getattr(resource, name))
            limits[name[7:]] = [None if v == resource.RLIM_INFINITY else v for v in pair]
    return {"umask": mask, "rlimits": limits}


def _command(sock: socket, argv: list[str], cwd: str) -> tuple[int | None, str]:
    """The command's exit status; or None and why, when the server asks for it to be run
    in-process (it cannot take this process's limits)."""
    message = command_request(argv, cwd)
    try:
        wire.send_with_fds(sock, message, [0, 1, 2])
    except OSError as exc:
        _fail(f"the run server did not take the command: {exc}")
        return EXIT_USAGE, ""
    interrupted = 0
    while True:
        try:
            answer = wire.receive(sock, limit=1 << 16)
        except KeyboardInterrupt:
            interrupted += 1
            if interrupted > 1:
                return 130, ""
            try:
                wire.send(sock, {"op": "interrupt"})
            except OSError:
                pass
            continue
        except OSError:
            _fail("the run server stopped before the command finished")
            return EXIT_USAGE, ""
        if "exit" in answer and isinstance(answer["exit"], int):
            return int(answer["exit"]), ""
        if "in_process" in answer:
            return None, str(answer["in_process"]).splitlines()[0]
        if "error" in answer:
            _fail(f"the run server refused the command: {answer['error']}")
            return EXIT_USAGE, ""


def connect(files: ServerFiles) -> socket | None:
    """A connection to the running server, or None when none listens (a stale socket file and
    pid file are then removed)."""
    try:
        sock = wire.connect(files.socket)
    except OSError as exc:
        if exc.errno == errno.ECONNREFUSED:
            _clean_stale(files)
        return None
    try:
        wire.check_peer(sock)
    except OSError:
        sock.close()
        return None
    return sock


def request(files: ServerFiles, message: dict[str, Any]) -> dict[str, Any] | None:
    """The server's answer to ``message``, or None when no server runs."""
    sock = connect(files)
    if sock is None:
        return None
    try:
        wire.send_with_fds(sock, message, [])
        return wire.receive(sock, limit=1 << 24)
    finally:
        sock.close()


def start_server(files: ServerFiles, secrets: Collection[str] = ()) -> socket | None:
    """Start this user's server (one client at a time starts it) and connect to it; its
    environment is :func:`server_environment`'s, without the variables named ``secrets``."""
    import subprocess

    lock = os.open(files.start_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = connect(files)
        if sock is not None:
            return sock
        log = _open_log(files.log)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "notebook_executor._faces.cli.serve"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=files.folder,
                env=server_environment(os.environ, secrets),
                start_new_session=True,
            )
        finally:
            os.close(log)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            sock = connect(files)
            if sock is not None:
                return sock
            if process.poll() is not None:
                return connect(files)
            time.sleep(0.02)
        return None
    finally:
        os.close(lock)


#: What the server keeps of the environment of the client that starts it, besides the
#: interpreter's start-up variables, ``LC_*`` and ``NOTEBOOK_EXECUTOR_*``: the host's harmless
#: ones (:data:`~..._kernels.host_env.HOST_NAMES`), its virtual environment and runtime folder,
#: nothing secret. Each command runs with its own client's whole environment.
SERVER_ENV_NAMES = HOST_NAMES | {"VIRTUAL_ENV", "XDG_RUNTIME_DIR"}


def server_environment(environ: Mapping[str, str], secrets: Collection[str] = ()) -> dict[str, str]:
    """The environment a server started from ``environ`` gets: :data:`SERVER_ENV_NAMES`, the
    interpreter's start-up variables, ``LC_*`` and ``NOTEBOOK_EXECUTOR_*``, never one named
    in ``secrets``. Its ``/proc/<pid>/environ``, which its children's show too, holds no
    client's secret."""
    kept = {
        **startup_environment(dict(environ)),
        **{
            name: value
            for name, value in environ.items()
            if name in SERVER_ENV_NAMES or name.startswith(("LC_", "NOTEBOOK_EXECUTOR_"))
        },
    }
    return {name: value for name, value in kept.items() if name not in secrets}


def _secret_names(argv: Sequence[str]) -> set[str]:
    """The variables ``argv`` names with ``--secret`` (or an abbreviation of it)."""
    names = set()
    for at, word in enumerate(argv):
        option, equals, value = word.partition("=")
        if len(option) >= 5 and "--secret".startswith(option):
            if equals:
                names.add(value)
            elif at + 1 < len(argv):
                names.add(argv[at + 1])
    return names


def _open_log(path: str) -> int:
    """The server's log, to append to: a regular file, never one that would block the client
    (a FIFO: opening it waits for a reader, writing for room) or lead elsewhere (a symlink).

    Raises
    ------
    RuntimeFolderError
        Something else than a regular file is there (it is left alone).
    """
    odd = RuntimeFolderError(f"the run server's log {path} is not a regular file")
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        log = os.open(path, flags | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ELOOP):  # a FIFO with no reader, a symlink
            raise odd from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(log).st_mode):
            raise odd
        os.fchmod(log, 0o600)
        fcntl.fcntl(log, fcntl.F_SETFL, fcntl.fcntl(log, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(log)
        raise
    return log


def _clean_stale(files: ServerFiles) -> None:
    """Remove the socket and pid file of a server that died, unless one runs (its lock held)."""
    try:
        fd = os.open(files.lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # a server runs (it is starting)
    else:
        for stale in (files.socket, files.pid_file):
            try:
                os.unlink(stale)
            except OSError:
                pass
    finally:
        os.close(fd)


def _fail(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)
