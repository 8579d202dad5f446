"""The fork-serving loop of the processes that fork kernels: the template and checkpoints.

Runs in a kernel-side interpreter, loaded by path (``kernel_main.sibling``); imports nothing
from ``notebook_executor``. :func:`serve` speaks the protocol described in ``kernel_main.py``
on the host's Unix socket, and kills every kernel it forked, with their sessions, when the
socket closes.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any, NoReturn

_PR_SET_PDEATHSIG = 1


def _sessions() -> Any:
    return sys.modules["_notebook_executor_kernel"].sibling("sessions")


def die_with_parent(parent_pid: int, signum: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signum`` to this process when its parent exits; exit now if it
    already has."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent_pid:
        end_children()
        os._exit(1)


#: In a process that forks kernels (the template, a checkpoint): those it has not reaped.
CHILDREN: set[int] = set()


def end_children() -> None:
    """SIGKILL every kernel this process forked, and every process in their sessions."""
    children = list(CHILDREN)
    if not children:
        return
    with contextlib.suppress(Exception):
        _sessions().kill_sessions(children)
    for pid in children:
        # A child that has not called setsid() yet is in no session of its own.
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


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


#: A process that forks kernels calls this in each child, with the request, the control
#: socket (to close) and its own pid; it never returns.
ForkChild = Callable[[dict[str, Any], socket.socket, int], NoReturn]


def serve(
    control: socket.socket, child: ForkChild, unsafe: Callable[[], str | None] = lambda: None
) -> None:
    """Answer requests until the host closes the socket; then kill every child.

    ``unsafe`` says why forking now would be unsafe (the request is then refused), or None.
    """
    children = CHILDREN
    server_pid = os.getpid()
    reader = control.makefile("rb")
    try:
        for line in reader:
            request = json.loads(line)
            op = request.get("op")
            reply: dict[str, Any]
            if op == "fork":
                why = unsafe()
                if why is not None:
                    reply = {"error": f"cannot fork safely: {why}"}
                else:
                    pid = os.fork()
                    if pid == 0:
                        child(request, control, server_pid)
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
        end_children()
        for pid in children:
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)


def redirect_std(stderr_path: str | None) -> None:
    """Standard input and output to the null device, standard error to ``stderr_path``'s end
    (or the null device)."""
    null = os.open(os.devnull, os.O_RDWR)
    err = (
        os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if stderr_path
        else os.dup(null)
    )
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(err, 2)
    os.close(null)
    os.close(err)


def take_limits(request: dict[str, Any]) -> None:
    """Take the host's ``umask`` and resource limits (``rlimits``: ``NOFILE`` -> [soft,
    hard]) of ``request``, as a kernel the host launched would inherit them; a limit this
    process may not take (a hard one above its own) stays its own."""
    import resource

    if isinstance(request.get("umask"), int):
        os.umask(request["umask"])
    for name, pair in dict(request.get("rlimits") or {}).items():
        with contextlib.suppress(AttributeError, OSError, TypeError, ValueError):
            resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), tuple(pair))


def become_kernel_child(request: dict[str, Any], control: socket.socket, parent: int) -> list[str]:
    """In a process just forked to be a kernel: leave the server (its socket, its children,
    its session and its output), die with ``parent``, and return the kernel's command line
    from the host's ``request``."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    CHILDREN.clear()
    # Closed for real: ``close()`` leaves the descriptor open while ``serve``'s reader holds
    # it, and a kernel (then its checkpoints) kept the server's end of the host's channel, so
    # the host never saw the server die (no EOF while an orphaned checkpoint lived).
    os.close(control.detach())
    os.setsid()
    die_with_parent(parent)
    take_limits(request)
    redirect_std(request["stderr"])
    return [
        "-f",
        request["connection_file"],
        f"--IPKernelApp.parent_handle={parent}",
        *request.get("options", ()),
    ]
