"""The MCP server: one warm executor behind the tools, on stdio or streamable HTTP.

Over HTTP the server binds to loopback unless told otherwise, keeps the SDK's DNS-rebinding
protection (Host and Origin checked), and answers only requests that carry its bearer token,
on loopback too (any local user can reach a loopback port): the token is read from
:data:`TOKEN_ENV`, or made at start and shown once on stderr beside the address.

Kernels started for clients do not inherit the server's environment: they start from
:func:`kernel_base_environment` (``PATH``, ``HOME``, locale, temporary folders, ``PYTHONPATH``,
``VIRTUAL_ENV``), plus the secrets a client names among those the operator allowed
(``--allow-secret NAME``); a client cannot read any other variable of the server, not even
through ``/proc``: the server is not dumpable (:func:`hide_environment`), and the template
kernels are forked from starts with no variable but harmless ones. A
notebook's declared ``env:`` variables are named as secrets, or found in ``.env`` files inside
the root (the notebook's folder, then the root folder), never outside it.

Runs are recorded where ``--runs-dir`` says, else in the project's runs folder found from the
root as every face finds it from its working folder (:func:`root_runs_dir`), kept inside the
root.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import sys
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._executor import NotebookExecutor
from ..._kernels.launch import KERNEL_ENV_NAMES, kernel_base_environment
from ..._records.project import find_runs_dir
from ..guide import guide_body
from .paths import Root
from .tools import add_resources, server_tools
from .workspace import Workspace

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "KERNEL_ENV_NAMES",
    "TOKEN_ENV",
    "build_server",
    "hide_environment",
    "is_loopback",
    "kernel_base_environment",
    "root_runs_dir",
    "serve",
]

logger = logging.getLogger(__name__)

#: Environment variable holding the bearer token HTTP clients must send (made at start when
#: unset). It is a variable of the server: never handed to a kernel.
TOKEN_ENV = "NOTEBOOK_EXECUTOR_MCP_TOKEN"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only reaches this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: ``prctl`` option: whether this process may be dumped, traced, or read through ``/proc``.
_PR_SET_DUMPABLE = 4


def hide_environment() -> bool:
    """Make this process's environment and memory unreadable to the kernels it starts.

    A notebook runs as the server's user: it could read ``/proc/<server pid>/environ`` (the
    bearer token, every variable not allowed to clients) or the server's memory. On Linux the
    server marks itself not dumpable (``PR_SET_DUMPABLE`` 0): its ``/proc/<pid>`` files then
    belong to root, and no process of the same user (a kernel included) can read its
    environment, memory or open files, or trace it. A program started by ``exec`` is dumpable
    again: kernels, which the server starts so, are debugged as usual. The server itself gets
    no core dump, and a debugger attaches to it only as root.

    Returns whether the process is now hidden (False elsewhere than Linux, or when refused).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        done = False
    if not done:
        logger.warning("cannot hide the server's environment from kernels (prctl failed)")
    return done


def build_server(
    root: str | os.PathLike[str],
    executor: NotebookExecutor,
    allowed_secrets: Collection[str] = (),
    checkpoint_memory: int | None = None,
) -> tuple[MCPServer[Any], Workspace]:
    """The server with every tool registered, confined to ``root``, running on ``executor``;
    clients may name the variables ``allowed_secrets`` of the server's environment as
    secrets, and no other; a session's checkpoints hold at most ``checkpoint_memory`` bytes
    (None: the session tools' default)."""
    from mcp.server.mcpserver import MCPServer

    from ... import __version__

    # The token is the server's own: never a secret a kernel could be handed.
    allowed = [name for name in allowed_secrets if name != TOKEN_ENV]
    workspace = Workspace(Root(root), executor, os.environ, allowed)
    workspace.checkpoint_memory = checkpoint_memory
    server: MCPServer[Any] = MCPServer(
        "notebook-executor",
        version=__version__,
        # The same guide `notebook-executor guide` prints, without its front matter.
        instructions=guide_body(),
        log_level="WARNING",
        tools=list(server_tools(workspace)),
    )
    add_resources(server, workspace)
    return server, workspace


def serve(
    root: str | os.PathLike[str],
    runs_dir: str | os.PathLike[str] | None,
    http: tuple[str, int] | None,
    allowed_hosts: list[str],
    *,
    allowed_secrets: Collection[str] = (),
    token: str | None = None,
    show_token: bool = False,
    checkpoint_memory: int | None = None,
) -> None:
    """Serve until the client (stdio) or a signal (HTTP) ends it; kernels are stopped after.

    Over HTTP, requests must carry ``token`` (None: no check); the address, and the token
    when ``show_token``, are written to stderr once the port is bound.
    """
    import anyio

    hide_environment()
    folder = Path(root).resolve()
    runs = Path(runs_dir) if runs_dir is not None else root_runs_dir(folder)
    logger.info("runs folder: %s", runs)
    with NotebookExecutor(
        runs_dir=runs,
        progress=False,
        base_env=kernel_base_environment(os.environ),
        dotenv_root=folder,
    ) as executor:
        server, _ = build_server(folder, executor, allowed_secrets, checkpoint_memory)
        if http is None:
            from .stdio import run_stdio

            anyio.run(run_stdio, server)
        else:
            anyio.run(_serve_http, server, http, allowed_hosts, token, show_token)


def root_runs_dir(folder: Path) -> Path:
    """The runs folder of a server confined to ``folder`` (resolved) and not told one: the
    project's, found from the root as every face finds it
    (:func:`~..._records.project.find_runs_dir`), when it lies inside the root; else
    ``ROOT/runs`` (with a warning): unless its operator says otherwise (``--runs-dir``), the
    server writes nowhere but under its root.

    Raises
    ------
    InvalidArgumentError
        The project's ``pyproject.toml`` cannot be read, or sets a bad ``runs-dir``.
    """
    found = find_runs_dir(folder)
    try:
        inside = found.path.resolve().is_relative_to(folder)
    except (OSError, RuntimeError):
        inside = False
    if inside:
        return found.path
    logger.warning(
        "the project's runs folder %s is outside --root %s: runs go to %s instead "
        "(--runs-dir chooses)",
        found,
        folder,
        folder / "runs",
    )
    return folder / "runs"


async def _serve_http(
    server: MCPServer[Any],
    http: tuple[str, int],
    extra: list[str],
    token: str | None,
    show_token: bool,
) -> None:
    import socket

    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    host, port = http
    local = ["127.0.0.1", "localhost", "[::1]"]
    names = [*local, *([] if is_loopback(host) else [_host_header(host)]), *extra]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*names, *(f"{name}:*" for name in names)],
        allowed_origins=[f"http://{name}:*" for name in names],
    )
    app: Any = server.streamable_http_app(transport_security=security, host=host)
    if token is not None:
        app = BearerToken(app, token)
    # The socket is bound here, so that the address printed is the one listened on (port 0
    # picks a free one).
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listener = socket.create_server((host, port), family=family)
    except OSError as exc:
        raise ListenError(
            f"cannot listen on {_host_header(host)}:{port}: {exc.strerror or exc}"
        ) from None
    url = f"http://{_host_header(host)}:{listener.getsockname()[1]}/mcp"
    print(f"notebook-executor mcp: listening on {url}", file=sys.stderr, flush=True)
    if token is None:
        print(
            "notebook-executor mcp: warning: no bearer token (--no-token): every local user "
            "can run code as this user through this server",
            file=sys.stderr,
            flush=True,
        )
    elif show_token:
        print(
            f"notebook-executor mcp: bearer token (shown once): {token}",
            file=sys.stderr,
            flush=True,
        )
    else:
        print(
            f"notebook-executor mcp: bearer token: the value of {TOKEN_ENV}",
            file=sys.stderr,
            flush=True,
        )
    from .http_limits import BoundedH11Protocol

    # Bounded: a request's headers and body must arrive in time, connections are counted.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", http=BoundedH11Protocol)
    with listener:
        await uvicorn.Server(config).serve(sockets=[listener])


def _host_header(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class ListenError(OSError):
    """The HTTP address cannot be listened on (taken, not this machine's, not allowed)."""


class BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers", [])).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain"),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b"bearer token required\n"})
                return
        await self.app(scope, receive, send)
