"""The command line's side of the run server: hand a command to it, starting it when needed.

:func:`forward` is the first thing ``main`` does: for ``run``, ``sweep``, ``check --execute``
and ``session``, it sends the command line, the working directory, the environment and the
standard streams to this user's server for this interpreter (see :mod:`.paths`), and returns
the exit status the server's child answers with. It returns None (run in-process) for every
other command, with ``--no-server`` or ``$NOTEBOOK_EXECUTOR_NO_SERVER=1``, and when no server
can be reached or started (said once with ``-v``).

This module is what a served command imports: the standard library's small modules only
(measured with ``python -X importtime``; see ``benchmarks/bench_server.py``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import time

from . import wire
from .paths import NO_SERVER_ENV, RuntimeFolderError, ServerFiles, server_files

# No pathlib, contextlib or typing at run time (nor argparse, logging, socket: see .wire): this
# module is the whole of a served command's client, and every import is paid at every command.
# ruff: noqa: PTH108, PTH109, SIM105
TYPE_CHECKING = False

if TYPE_CHECKING:
    from _socket import socket
    from collections.abc import Sequence
    from typing import Any

__all__ = ["connect", "forward", "request", "served_command", "start_server"]

PROG = "notebook-executor"
EXIT_USAGE = 2
#: Seconds a client waits for a server it started to listen.
START_SECONDS = 60.0
#: True in a child of the server, where commands run in-process (set by ``.child``).
IN_SERVER = False
#: The commands the server runs; ``check`` only with ``--execute``.
SERVED = ("run", "sweep", "check", "session")


def served_command(argv: Sequence[str]) -> str | None:
    """The command of ``argv`` if the server should run it, else None."""
    words = list(argv)
    while words and words[0] in ("-v", "-vv", "-vvv", "--verbose"):
        words.pop(0)
    if not words or words[0] not in SERVED:
        return None
    command, rest = words[0], words[1:]
    if "--no-server" in rest or "-h" in rest or "--help" in rest:
        return None
    if command == "check" and "--execute" not in rest:
        return None
    if command == "sweep" and any(w == "--scheduler" or w.startswith("--scheduler=") for w in rest):
        return None
    if command == "session" and os.environ.get(NO_SERVER_ENV, "") not in ("", "0"):
        return command  # refused below, with the reason
    if os.environ.get(NO_SERVER_ENV, "") not in ("", "0"):
        return None
    return command


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
    try:
        files = server_files()
        sock = connect(files) or start_server(files)
    except (RuntimeFolderError, OSError) as exc:
        reason = str(exc)
        sock = None
    else:
        reason = "it could not be started"
    if sock is None:
        if command == "session":
            _fail(f"sessions need the run server, and {reason}")
            return EXIT_USAGE
        if verbose:
            print(f"{PROG}: INFO: no run server ({reason}): running in-process", file=sys.stderr)
        return None
    try:
        return _command(sock, list(argv), cwd)
    finally:
        sock.close()


def _command(sock: socket, argv: list[str], cwd: str) -> int:
    message = {"op": "command", "argv": argv, "cwd": cwd, "env": dict(os.environ)}
    try:
        wire.send_with_fds(sock, message, [0, 1, 2])
    except OSError as exc:
        _fail(f"the run server did not take the command: {exc}")
        return EXIT_USAGE
    interrupted = 0
    while True:
        try:
            answer = wire.receive(sock, limit=1 << 16)
        except KeyboardInterrupt:
            interrupted += 1
            if interrupted > 1:
                return 130
            try:
                wire.send(sock, {"op": "interrupt"})
            except OSError:
                pass
            continue
        except OSError:
            _fail("the run server stopped before the command finished")
            return EXIT_USAGE
        if "exit" in answer and isinstance(answer["exit"], int):
            return int(answer["exit"])
        if "error" in answer:
            _fail(f"the run server refused the command: {answer['error']}")
            return EXIT_USAGE


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


def start_server(files: ServerFiles) -> socket | None:
    """Start this user's server (one client at a time starts it) and connect to it."""
    import subprocess

    lock = os.open(files.start_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = connect(files)
        if sock is not None:
            return sock
        log = os.open(files.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "notebook_executor._faces.cli.serve"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=files.folder,
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
