"""A child of the run server: its client's stand-in for one command, then maybe a session's
host.

Forked by :mod:`.daemon` for each command. The child takes its client's working directory,
environment, umask, resource limits and standard streams, runs the command line's ``main`` on
the client's ``argv``, and sends back the exit status: the command behaves as it would in the
client's own process (the same code, the same files, the same output), without the start-up.
Moving to the client's folder is safe here: this process serves that one client, as a forked
kernel serves one run (``os.chdir`` is what the kernel template does too). The request is
checked as a stranger's (:func:`read_request`); a limit the child cannot take (a hard limit
above the server's, which only privileged processes may raise) gets the answer
``in_process``: the client then runs the command itself, as with ``--no-server``. The child,
as the server, is not dumpable: no other process of the user (a later client's notebook)
reads its environment or memory through ``/proc``; kernels, new programs, are.

A ``session open`` leaves a session to hold: the child then closes the client's streams and
serves the session's socket until the session is closed, idle past its ``idle_timeout``, or the
server stops (SIGTERM, also sent when the server dies): the session's record is then finished
as :meth:`Session.close <notebook_executor.Session.close>` finishes it.

A job (``run --detach``, see :mod:`.jobs`) is answered as soon as it has its id: the child
lets go of its client and runs the command on its own.

Ctrl-C in the client arrives as an ``interrupt`` message (or the connection closing) and is
raised here as SIGINT: the command's own Ctrl-C handling applies. SIGPIPE is ignored, as in
the command run in-process: a client gone (its output a pipe no one reads) never kills the
child before it has stopped its kernels with their sessions.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import logging
import os
import resource
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from . import client, served, wire
from .paths import ServerFiles

__all__ = ["Command", "read_request", "serve_command", "serve_next"]

_PR_SET_PDEATHSIG = 1
#: The digits of the request's strings (bytes in hexadecimal).
_HEX = frozenset("0123456789abcdef")
#: The resources with limits (``RLIMIT_NOFILE``, ...).
_LIMIT_NAMES = tuple(name for name in dir(resource) if name.startswith("RLIMIT_"))
#: Largest limit a request may name (``rlim_t`` is 64 bits; unlimited is sent as None).
_MAX_LIMIT = (1 << 63) - 1


class Command(NamedTuple):
    """A client's command, as :func:`read_request` reads it."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int
    #: ``resource.RLIMIT_*`` -> (soft, hard), ``RLIM_INFINITY`` for unlimited.
    rlimits: dict[int, tuple[int, int]]


def read_request(request: dict[str, Any]) -> Command:
    """The command a client's request asks for (see :func:`.client.command_request`), read
    as a stranger's.

    Raises
    ------
    ValueError
        A field is missing or malformed (one line): not hexadecimal, a NUL byte, a
        variable's name with ``=``, a relative folder, a umask beyond 0o777, a limit
        unknown, negative, too large, or its soft above its hard.
    """
    argv, cwd, env = request.get("argv"), request.get("cwd"), request.get("env")
    umask, rlimits = request.get("umask"), request.get("rlimits")
    if not (isinstance(argv, list) and isinstance(env, dict) and isinstance(rlimits, dict)):
        raise ValueError("malformed command: needs argv, cwd, env, umask and rlimits")
    if type(umask) is not int or not 0 <= umask <= 0o777:
        raise ValueError("malformed command: umask is not a number from 0 to 0o777")
    environ = {}
    for name, value in env.items():
        key = _text(name, "a variable's name")
        if not key or "=" in key:
            raise ValueError("malformed command: a variable's name is empty or holds '='")
        environ[key] = _text(value, f"variable {key[:40]!r}")
    folder = _text(cwd, "the folder")
    if not folder.startswith("/"):
        raise ValueError("malformed command: the folder is not an absolute path")
    return Command(
        [_text(word, "an argument") for word in argv],
        folder,
        environ,
        umask,
        {_resource(name): _limits(name, pair) for name, pair in rlimits.items()},
    )


def _text(field: object, what: str) -> str:
    """A string of the request: the bytes it spells in hexadecimal (any bytes but NUL)."""
    if not isinstance(field, str) or len(field) % 2 or not _HEX.issuperset(field):
        raise ValueError(f"malformed command: {what} is not bytes in hexadecimal")
    data = bytes.fromhex(field)
    if b"\0" in data:
        raise ValueError(f"malformed command: {what} holds a NUL byte")
    return os.fsdecode(data)


def _resource(name: object) -> int:
    number = getattr(resource, f"RLIMIT_{name}", None) if isinstance(name, str) else None
    if not (isinstance(name, str) and name.isalpha() and name.isupper()) or type(number) is not int:
        raise ValueError(f"malformed command: no resource limit {str(name)[:40]!r}")
    return number


def _limits(name: str, pair: object) -> tuple[int, int]:
    if not isinstance(pair, list) or len(pair) != 2:
        raise ValueError(f"malformed command: limit {name} is not [soft, hard]")
    soft, hard = (_MAX_LIMIT + 1 if value is None else value for value in pair)
    if not all(type(v) is int and 0 <= v <= _MAX_LIMIT + 1 for v in (soft, hard)) or soft > hard:
        raise ValueError(f"malformed command: limit {name} is not [soft, hard], soft <= hard")
    soft, hard = (resource.RLIM_INFINITY if v > _MAX_LIMIT else v for v in (soft, hard))
    return soft, hard


def _own_limits() -> tuple[int, dict[int, tuple[int, int]]]:
    """This process's umask and limits (no other thread may create a file meanwhile)."""
    mask = os.umask(0o077)
    os.umask(mask)
    numbers = [getattr(resource, name) for name in _LIMIT_NAMES]
    return mask, {number: resource.getrlimit(number) for number in numbers}


#: The namespaces a client must share with the server to be served (``/proc/<pid>/ns``).
_NAMESPACES = ("mnt", "net", "user", "pid", "ipc", "uts", "cgroup", "time")


def _foreign_namespaces(conn: socket.socket) -> str | None:
    """Why the client at the other end of ``conn`` cannot be served, when it sees another
    system than the server does: another mount, network, user, pid... namespace (a sandbox, a
    container, ``unshare``). Its command would run here, outside the client's view of files,
    network and processes: the client runs it itself. None when it shares them all."""
    try:
        pid = wire.check_peer(conn)
    except OSError:
        return "the run server cannot tell which process this shell is"
    others = []
    for kind in _NAMESPACES:
        try:
            own = Path(f"/proc/self/ns/{kind}").readlink()
        except OSError:
            continue  # a kind this system does not have
        try:
            same = pid > 0 and Path(f"/proc/{pid}/ns/{kind}").readlink() == own
        except OSError:
            same = False
        if not same:
            others.append(kind)
    if not others:
        return None
    shown = ", ".join({"mnt": "mount", "net": "network"}.get(kind, kind) for kind in others)
    return f"this shell is in another {shown} namespace than the run server"


def _take_limits(command: Command) -> str | None:
    """Take the client's umask and limits; why not, if a limit cannot be taken."""
    os.umask(command.umask)
    for number, (soft, hard) in command.rlimits.items():
        try:
            resource.setrlimit(number, (soft, hard))
        except (OSError, ValueError):
            name = next(n for n in _LIMIT_NAMES if getattr(resource, n) == number)
            own = resource.getrlimit(number)[1]
            shown = ["unlimited" if v == resource.RLIM_INFINITY else str(v) for v in (own, hard)]
            return (
                f"the run server cannot take this shell's limit {name[7:]}: its hard limit is "
                f"{shown[0]}, this shell's {shown[1]}"
            )
    return None


def serve_next(
    channel: socket.socket,
    files: ServerFiles,
    server_pid: int,
    command: Callable[[list[str]], int],
    last_kernel: dict[str, Any] | None,
) -> NoReturn:
    """A spare child: wait for the server's next command on ``channel``, then serve it.

    Meanwhile a kernel like the last run's (``last_kernel``) is started (see
    :meth:`.served.Serving.speculate`). The server sends the command's request with the client's
    connection and standard streams (four descriptors); it closes ``channel`` to end a spare
    it no longer needs. Never returns.
    """
    here = _serve(files, server_pid)
    own = _own_limits()  # those of the kernel started ahead
    if last_kernel is not None:
        with contextlib.suppress(Exception):  # a guess: never a reason not to serve
            here.speculate(last_kernel)
    try:
        request, fds = wire.receive_with_fds(channel, max_fds=4)
        conn = socket.socket(fileno=fds[0])
        asked = read_request(request)
    except (OSError, KeyError, IndexError, ValueError, KeyboardInterrupt):
        here.drop_speculation()
        here.after_answer()
        os._exit(0)
    if (asked.umask, asked.rlimits) != (own[0], {n: own[1][n] for n in asked.rlimits}):
        here.drop_speculation()  # started with other limits than its client's
    serve_command(conn, asked, fds[1:], files, server_pid, command, channel)


def serve_command(
    conn: socket.socket,
    asked: Command,
    fds: list[int],
    files: ServerFiles,
    server_pid: int,
    command: Callable[[list[str]], int],
    report: socket.socket | None = None,
) -> NoReturn:
    """Run one command for the client at the other end of ``conn``; never returns. The kernel
    its run took is told on ``report`` (a spare's channel to the server) as soon as the run
    chose it, else once it answered (:meth:`.served.Serving.report_kernel`)."""
    here = _serve(files, server_pid)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # A write to a client gone (its pipe closed) raises BrokenPipeError, as in the command run
    # in-process: a SIGPIPE that killed this process would leave the run's kernel stopped
    # halfway (killed, its session not), or running.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    conn.settimeout(None)
    argv, cwd = asked.argv, asked.cwd
    refused = _foreign_namespaces(conn) or _take_limits(asked)
    if refused is not None:
        here.drop_speculation()
        _answer(conn, {"in_process": refused})
        os._exit(0)
    try:
        os.chdir(cwd)
    except OSError as exc:
        _answer(conn, {"error": f"cannot work in {cwd!r}: {exc.strerror}"})
        os._exit(0)
    os.environ.clear()
    os.environ.update(asked.env)
    tempfile.tempdir = None  # TMPDIR is the client's now
    _take_streams(fds)
    logging.root.handlers.clear()  # the command configures logging to the client's stderr
    finished = threading.Event()
    threading.Thread(target=_watch, args=(conn, finished), daemon=True).start()
    if client.served_command(argv) not in ("run", "resume"):
        here.drop_speculation()  # the kernel started ahead is a run's (a resume's too)

    here.report_channel = report
    here.given_secrets = any(word.startswith("--sec") for word in argv)

    def let_go() -> None:  # a job (``--detach``): answered now, the command goes on
        finished.set()
        _answer_now(here, conn, 0)
        here.report_kernel()

    here.detach = (argv, let_go)
    code = _run_main(command, argv)
    finished.set()
    if here.detached.is_set():
        here.drop_speculation()
        here.after_answer()
        os._exit(0)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    session = here.session
    listening = None
    if session is not None:
        from .session_host import listen

        listening = listen(here.files, session[1])  # before the answer: the next command finds it
    _release_streams()  # a reader of the client's output sees its end with the client's
    _answer(conn, {"exit": code})
    conn.close()
    here.report_kernel()  # (told already by a run, as soon as it chose its kernel)
    here.drop_speculation()  # a command that took no engine: its kernel stops
    here.after_answer()
    if session is not None and listening is not None:
        from .session_host import hold

        ex, held = session
        hold(here, ex, held, listening)
    os._exit(0)


def _serve(files: ServerFiles, server_pid: int) -> served.Serving:
    """This process serves the server of ``files``: dies with it, and knows it."""
    _die_with(server_pid)
    here = served.begin(files, server_pid)
    signal.signal(signal.SIGTERM, here.on_server_gone)
    client.IN_SERVER = True
    return here


def _answer_now(here: served.Serving, conn: socket.socket, code: int) -> None:
    """Answer the client with ``code`` now, letting go of its streams and connection."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    _release_streams()
    _answer(conn, {"exit": code})
    conn.close()
    here.detached.set()


def _run_main(command: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return command(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        with contextlib.suppress(Exception):  # the client's stderr may be gone too
            traceback.print_exc()
        return 70


def _die_with(server_pid: int) -> None:
    """SIGTERM when the server dies; exit now if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != server_pid:
        os._exit(1)


def _take_streams(fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(
        io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace"
    )
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=os.isatty(1)
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )


def _release_streams() -> None:
    """Let go of the client's streams (the child outlives its answer: kernels stop, a session
    is held)."""
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.close(null)


def _watch(conn: socket.socket, finished: threading.Event) -> None:
    """Raise SIGINT here when the client says ``interrupt`` or goes away, during the command."""
    while not finished.is_set():
        try:
            message = wire.receive(conn, limit=4096)
        except OSError:
            message = {"op": "gone"}
        if finished.is_set():
            return
        if message.get("op") in ("interrupt", "gone"):
            os.kill(os.getpid(), signal.SIGINT)
            if message.get("op") == "gone":
                return


def _answer(conn: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        wire.send(conn, message)
