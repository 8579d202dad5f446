"""Connect the MCP SDK's own client to a ``notebook-executor mcp`` server process.

Over stdio the client starts the server as its subprocess (and stops it on exit); over HTTP
the server is started on a free port it picks and prints, and terminated after.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

__all__ = [
    "MAX_RESPONSE_CHARS",
    "Served",
    "http_server",
    "http_session",
    "response_size",
    "stdio_session",
    "structured",
]

MAX_RESPONSE_CHARS = 20_000
SERVER = [sys.executable, "-m", "notebook_executor", "mcp"]


@contextlib.asynccontextmanager
async def stdio_session(
    root: Path,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> AsyncIterator[ClientSession]:
    """A client session with a stdio server confined to ``root``, started in ``cwd`` (default:
    the root) with ``env`` and the command-line options ``args``."""
    params = StdioServerParameters(
        command=SERVER[0],
        args=[*SERVER[1:], "--root", str(root), *args],
        cwd=str(cwd or root),
        # The SDK passes only a few variables on: PYTHONPATH too, so that the server runs the
        # code under test.
        env={**_pythonpath(), **(env or {})},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _pythonpath() -> dict[str, str]:
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}


@dataclass
class Served:
    """A running HTTP server: its URL, its bearer token (None with ``--no-token``), and what
    it wrote on stderr at start."""

    url: str
    token: str | None
    startup: str


_LISTENING = re.compile(r"listening on (http://\S+)")
_TOKEN = re.compile(r"bearer token \(shown once\): (\S+)")


@contextlib.contextmanager
def http_server(
    root: Path,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    wrapper: tuple[str, ...] = (),
) -> Iterator[Served]:
    """Start ``notebook-executor mcp --http HOST:0`` (a free port) and yield where it
    listens, read from its stderr; terminate it after. The token is the one it made, or
    ``env``'s ``NOTEBOOK_EXECUTOR_MCP_TOKEN``. ``wrapper`` is a command the server is started
    through (``setpriv ...``)."""
    environ = {k: v for k, v in os.environ.items() if k != "NOTEBOOK_EXECUTOR_MCP_TOKEN"}
    environ.update(env or {})
    with tempfile.TemporaryDirectory() as logs:
        log = Path(logs) / "stderr.txt"
        with log.open("w", encoding="utf-8") as stderr:
            process = subprocess.Popen(
                [*wrapper, *SERVER, "--root", str(root), "--http", f"{host}:0", *args],
                cwd=root,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        try:
            deadline = time.monotonic() + 60
            while True:
                startup = log.read_text(encoding="utf-8")
                listening = _LISTENING.search(startup)
                if listening and "bearer token" in startup:
                    break
                if process.poll() is not None:
                    raise AssertionError(f"the server exited: {startup}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"the server did not start listening: {startup}")
                time.sleep(0.1)
            shown = _TOKEN.search(startup)
            token = shown.group(1) if shown else environ.get("NOTEBOOK_EXECUTOR_MCP_TOKEN")
            yield Served(listening.group(1), token, startup)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    """A client session with the HTTP server at ``url``."""
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def response_size(result: CallToolResult) -> int:
    """Characters of the whole tool result as it goes over the wire (JSON)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


def structured(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful tool result (and its text says the same)."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    text = result.content[0]
    assert json.loads(text.text) == result.structured_content  # type: ignore[union-attr]
    return dict(result.structured_content)
