"""The MCP server never stalls on one bad file, one bad request or one idle client.

Each test starts its own server process (stdio or streamable HTTP, on loopback) confined to a
temporary root, and stops it after: named pipes in the root, requests the SDK cannot parse
(a lone surrogate escape), and HTTP clients that connect and send nothing, or too much at once.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from integration.mcp_client import http_server, http_session, stdio_session, structured

pytest.importorskip("mcp")

from notebook_executor._faces.mcp.http_limits import HEADER_SECONDS, MAX_CONNECTIONS

NOTEBOOK = '# %% tags=["parameters"]\nx = 1\n\n# %%\nprint(x)\n'


def test_fifos_named_like_notebooks_stall_no_tool(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "hello.py").write_text(NOTEBOOK, encoding="utf-8")
    for name in ("a.md", "b.py", "c.ipynb"):
        os.mkfifo(root / name)

    async def scenario() -> None:
        async with stdio_session(root) as session:
            with anyio.fail_after(120):
                # More calls than the server has threads: a blocked call would hold one each.
                for _ in range(50):
                    listed = structured(await session.call_tool("list_notebooks", {}))
                    assert listed["notebooks"] == ["hello.py"]
                read = await session.call_tool("read_notebook", {"path": "b.py"})
                assert read.is_error
                assert "regular file" in read.content[0].text  # type: ignore[union-attr]
                answer = structured(await session.call_tool("read_notebook", {"path": "hello.py"}))
                assert answer["cells_total"] == 2

    anyio.run(scenario)


def _line(process: subprocess.Popen[bytes], seconds: float) -> dict[str, object] | None:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    return json.loads(process.stdout.readline()) if ready else None


def test_a_request_holding_a_lone_surrogate_is_answered_over_stdio(tmp_path: Path) -> None:
    # Raw JSON-RPC lines: the SDK's client would not send such a request.
    (tmp_path / "hello.py").write_text(NOTEBOOK, encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, "-m", "notebook_executor", "mcp", "--root", str(tmp_path)],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None

    def send(text: str) -> None:
        assert server.stdin is not None
        server.stdin.write(text.encode() + b"\n")
        server.stdin.flush()

    try:
        send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"},
                    },
                }
            )
        )
        assert _line(server, 60) is not None
        send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        for number, (tool, arguments) in enumerate(
            [
                ("read_notebook", '{"path": "\\ud800.py"}'),
                ("search_runs", '{"query": "a\\udfff"}'),
                ("execute", '{"path": "hello.py", "request": "\\ud83d"}'),
            ],
            start=2,
        ):
            send(
                f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call", "params": '
                f'{{"name": "{tool}", "arguments": {arguments}}}}}'
            )
            answer = _line(server, 60)
            assert answer is not None, f"{tool}: no answer"
            assert answer["id"] == number
            error = answer["error"]
            assert isinstance(error, dict)
            assert "lone surrogate" in str(error["message"])
        # The server goes on answering.
        send(
            '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": '
            '{"name": "list_notebooks", "arguments": {}}}'
        )
        answer = _line(server, 60)
        assert answer is not None
        assert answer["id"] == 9
        assert "hello.py" in json.dumps(answer["result"])
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _closed_by_server(conn: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``conn`` within ``seconds``."""
    conn.settimeout(seconds)
    try:
        return conn.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_idle_and_slow_http_clients_are_cut_and_connections_are_bounded(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text(NOTEBOOK, encoding="utf-8")
    with http_server(tmp_path) as served:
        where = urlsplit(served.url)
        address = (where.hostname or "127.0.0.1", where.port or 80)
        began = time.monotonic()
        # Connections that send nothing, and one that sends its header a byte at a time.
        idle = [socket.create_connection(address) for _ in range(10)]
        slow = socket.create_connection(address)
        header = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for byte in header[:20]:
            slow.sendall(bytes([byte]))
            time.sleep(0.2)
        # More connections than the server keeps: the ones over are closed at once.
        crowd = [socket.create_connection(address) for _ in range(MAX_CONNECTIONS + 20)]
        over = sum(_closed_by_server(conn, 0.5) for conn in crowd)
        assert over >= 20
        try:
            for conn in [*idle, slow]:
                assert _closed_by_server(conn, HEADER_SECONDS + 30), "a connection was held"
            assert time.monotonic() - began < HEADER_SECONDS + 30
            for conn in crowd:
                assert _closed_by_server(conn, HEADER_SECONDS + 30), "a connection was held"
        finally:
            for conn in [*idle, slow, *crowd]:
                conn.close()

        # A client that speaks goes on being served.
        async def scenario() -> None:
            async with http_session(served.url, served.token) as session:
                listed = structured(await session.call_tool("list_notebooks", {}))
                assert listed["notebooks"] == ["hello.py"]

        anyio.run(scenario)
