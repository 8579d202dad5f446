"""Connect the MCP SDK's own client to a ``notebook-executor mcp`` server process.

Over stdio the client starts the server as its subprocess (and stops it on exit); over HTTP
the server is started on a free loopback port and terminated after.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

__all__ = [
    "MAX_RESPONSE_CHARS",
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
    root: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A client session with a stdio server confined to ``root`` (the server's cwd)."""
    params = StdioServerParameters(
        command=SERVER[0], args=[*SERVER[1:], "--root", str(root)], cwd=str(root), env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def http_server(
    root: Path, host: str = "127.0.0.1", env: dict[str, str] | None = None
) -> Iterator[str]:
    """Start ``notebook-executor mcp --http`` and yield its URL; terminate it after."""
    port = free_port()
    process = subprocess.Popen(
        [*SERVER, "--root", str(root), "--http", f"{host}:{port}"],
        cwd=root,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the server exited: {process.stderr.read()}")  # type: ignore[union-attr]
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("the server did not start listening")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


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
