"""``mcp``: serve the notebooks of a folder to agents over the Model Context Protocol."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .common import EXIT_OK, UsageError

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    mcp = commands.add_parser(
        "mcp",
        help="serve notebooks to agents (Model Context Protocol; needs the [mcp] extra)",
        description="A Model Context Protocol server on stdio, or on streamable HTTP with --http. "
        "Tools see only the files under --root. Over HTTP beyond loopback, clients must send "
        "'Authorization: Bearer $NOTEBOOK_EXECUTOR_MCP_TOKEN'.",
    )
    mcp.add_argument(
        "--root", default=".", metavar="DIR", help="folder tools may read and write (default: .)"
    )
    mcp.add_argument(
        "--runs-dir", metavar="DIR", help="where run records live (default: ROOT/runs)"
    )
    mcp.add_argument(
        "--http",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    mcp.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host header the HTTP server answers to besides loopback and HOST (repeatable)",
    )
    mcp.set_defaults(handler=_cmd_mcp)


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _cmd_mcp(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not root.is_dir():
        raise UsageError(f"--root {args.root!r} is not a folder")
    try:
        import mcp  # noqa: F401 - only to report a missing extra in one line
    except ImportError:
        raise UsageError(
            "the mcp command needs the mcp extra: pip install 'notebook-executor[mcp]'"
        ) from None
    from ..mcp.server import TOKEN_ENV, is_loopback, serve

    if args.http is not None and not is_loopback(args.http[0]) and not os.environ.get(TOKEN_ENV):
        raise UsageError(
            f"serving beyond loopback ({args.http[0]}) needs a bearer token: set {TOKEN_ENV}"
        )
    serve(args.root, args.runs_dir, args.http, args.allow_host)
    return EXIT_OK
