"""``mcp``: serve the notebooks of a folder to agents over the Model Context Protocol."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ..._errors import install_hint
from .common import EXIT_OK, UsageError

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    mcp = commands.add_parser(
        "mcp",
        help="serve notebooks to agents (Model Context Protocol; needs the [mcp] extra)",
        description="A Model Context Protocol server on stdio, or on streamable HTTP with --http. "
        "Tools see only the files under --root. Kernels get none of the server's environment "
        "variables but PATH, HOME, locale and temporary folders, plus those a client names "
        "in execute's secrets among the ones --allow-secret allows. Over HTTP (loopback too) "
        "clients must send 'Authorization: Bearer TOKEN': TOKEN is "
        "$NOTEBOOK_EXECUTOR_MCP_TOKEN, or made at start and printed once on stderr with the "
        "address listened on.",
    )
    mcp.add_argument(
        "--root", default=".", metavar="DIR", help="folder tools may read and write (default: .)"
    )
    mcp.add_argument(
        "--runs-dir",
        metavar="DIR",
        help="where run records live (default: the project's runs folder, found from ROOT as "
        "the other commands find it from the working folder, if inside ROOT; else ROOT/runs)",
    )
    mcp.add_argument(
        "--http",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (PORT 0: a free "
        "port; the address is printed on stderr)",
    )
    mcp.add_argument(
        "--allow-secret",
        action="append",
        default=[],
        metavar="NAME",
        help="let clients hand the server's environment variable NAME to a kernel as a secret "
        "(repeatable); no other variable of the server reaches a kernel",
    )
    mcp.add_argument(
        "--no-token",
        action="store_true",
        help="over HTTP on loopback, answer requests without a bearer token: any local user "
        "can then run code as this user (a warning is printed)",
    )
    mcp.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host header the HTTP server answers to besides loopback and HOST (repeatable)",
    )
    mcp.add_argument(
        "--checkpoint-memory",
        type=_bytes,
        metavar="BYTES",
        help="most memory the checkpoints of one session may hold, the oldest evicted first "
        "(default: 1 GiB)",
    )
    mcp.set_defaults(handler=_cmd_mcp)


def _bytes(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of bytes, got {text!r}")
    return int(text)


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _cmd_mcp(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not root.is_dir():
        raise UsageError(f"--root {args.root!r} is not a folder")
    try:
        import mcp  # noqa: F401 - only to report a missing extra in one line
    except ImportError:
        raise UsageError(f"the mcp command needs the mcp extra: {install_hint('mcp')}") from None
    from ..mcp.server import TOKEN_ENV, ListenError, is_loopback, serve

    if TOKEN_ENV in args.allow_secret:
        raise UsageError(f"--allow-secret {TOKEN_ENV}: the server's token never reaches a kernel")
    token, show_token = None, False
    if args.http is not None:
        if args.no_token and not is_loopback(args.http[0]):
            raise UsageError(
                f"--no-token serves only on loopback, not on {args.http[0]}: clients beyond "
                "this machine must send the bearer token"
            )
        if not args.no_token:
            token = os.environ.get(TOKEN_ENV) or None
            if token is None:
                import secrets

                token, show_token = secrets.token_urlsafe(32), True
    elif args.no_token:
        raise UsageError("--no-token applies to --http only")
    try:
        serve(
            args.root,
            args.runs_dir,
            args.http,
            args.allow_host,
            allowed_secrets=args.allow_secret,
            token=token,
            show_token=show_token,
            checkpoint_memory=args.checkpoint_memory,
        )
    except ListenError as exc:
        raise UsageError(f"--http: {exc}") from None
    return EXIT_OK
