"""The MCP server, driven by the SDK's real client over stdio and streamable HTTP.

Every test starts its own server process confined to a temporary root and stops it after.
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import re
import socket
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.mcp_client import (
    MAX_RESPONSE_CHARS,
    Served,
    http_server,
    http_session,
    response_size,
    stdio_session,
    structured,
)

TOOLS = {
    "list_notebooks",
    "inspect_parameters",
    "read_notebook",
    "edit_cell",
    "insert_cell",
    "delete_cell",
    "execute",
    "get_run",
    "list_runs",
    "search_runs",
    "digest",
    "collect_outputs",
    "diff",
    "validate",
    "reproduce",
    "resume",
    "open_session",
    "session_run",
    "session_evaluate",
    "session_rerun_from",
    "close_session",
    "list_sessions",
    "job_status",
    "job_wait",
    "job_cancel",
}

HELLO = """\
# %% tags=["parameters"]
name = "world"  # who to greet

# %%
print(f"hello {name}")

# %%
import scrapbook as sb
sb.glue("greeting", f"hello {name}")
"""


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tiny_png() -> bytes:
    """A valid 2x2 red PNG, built by hand (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# -- without a kernel ---------------------------------------------------------------------


def test_stdio_lists_every_tool_with_a_description_and_a_typed_schema(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                assert tool.description and len(tool.description) > 30, tool.name
                assert tool.input_schema["type"] == "object"
            execute = tools["execute"].input_schema
            assert execute["required"] == ["path"]
            assert {"path", "parameters", "timeout", "request", "secrets"} <= set(
                execute["properties"]
            )
            assert "ctx" not in execute["properties"]
            paging = tools["read_notebook"].input_schema["properties"]
            assert {"start", "limit", "output_start"} <= set(paging)

    anyio.run(scenario)


def test_paths_outside_the_root_are_tool_errors(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = write(tmp_path, "outside.py", HELLO)
    write(root, "hello.py", HELLO)
    (root / "escape.py").symlink_to(outside)
    (root / "out").symlink_to(tmp_path)
    escapes = ["../outside.py", str(outside), "escape.py", "out/outside.py", "/etc/passwd"]

    async def scenario() -> None:
        async with stdio_session(root) as session:
            for path in escapes:
                for tool, extra in [
                    ("inspect_parameters", {}),
                    ("read_notebook", {}),
                    ("execute", {}),
                    ("edit_cell", {"index": 0, "source": "x = 1"}),
                    ("validate", {}),
                ]:
                    result = await session.call_tool(tool, {"path": path, **extra})
                    assert result.is_error, (tool, path)
                    assert "outside the server's root" in result.content[0].text  # type: ignore[union-attr]
            listed = structured(await session.call_tool("list_notebooks", {}))
            assert listed["notebooks"] == ["hello.py"]
            refused = await session.call_tool("list_notebooks", {"folder": ".."})
            assert refused.is_error
            refused = await session.call_tool("diff", {"a": "hello.py", "b": "../outside.py"})
            assert refused.is_error
            for run_id in ["../../etc/passwd", "20260101T000000Z-nothing-00000000"]:
                for tool in ("get_run", "collect_outputs"):
                    assert (await session.call_tool(tool, {"run_id": run_id})).is_error
                assert (await session.call_tool("read_notebook", {"run_id": run_id})).is_error
            # The server is still there after every refusal.
            inspected = structured(
                await session.call_tool("inspect_parameters", {"path": "hello.py"})
            )
            assert inspected["parameters"]["name"]["type"] == "str"
        assert outside.read_text(encoding="utf-8") == HELLO

    anyio.run(scenario)


def test_read_notebook_pages_cells(tmp_path: Path) -> None:
    cells = "".join(f"# %%\nx{i} = {i}\n\n" for i in range(30))
    write(tmp_path, "long.py", cells)

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            first = structured(
                await session.call_tool("read_notebook", {"path": "long.py", "limit": 10})
            )
            assert [cell["index"] for cell in first["cells"]] == list(range(10))
            assert first["cells_total"] == 30
            assert first["next_start"] == 10
            last = structured(
                await session.call_tool(
                    "read_notebook", {"path": "long.py", "start": 25, "limit": 10}
                )
            )
            assert [cell["source"] for cell in last["cells"]] == [
                f"x{i} = {i}" for i in range(25, 30)
            ]
            assert last["next_start"] is None

    anyio.run(scenario)


def test_authoring_tools_change_one_cell_and_review_tools_compare_and_check(
    tmp_path: Path,
) -> None:
    write(tmp_path, "a.py", HELLO)
    write(tmp_path, "b.py", HELLO)

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            inserted = structured(
                await session.call_tool(
                    "insert_cell",
                    {"path": "b.py", "index": 1, "source": "# Notes", "cell_type": "markdown"},
                )
            )
            assert inserted["cells_total"] == 4
            stale = await session.call_tool(
                "edit_cell", {"path": "b.py", "index": 2, "source": "pass", "expect": "nope"}
            )
            assert stale.is_error
            structured(await session.call_tool("delete_cell", {"path": "b.py", "index": 3}))
            changes = structured(await session.call_tool("diff", {"a": "a.py", "b": "b.py"}))
            assert changes["identical"] is False
            assert {cell["op"] for cell in changes["cells"]} == {"added", "removed"}
            checked = structured(await session.call_tool("validate", {"path": "b.py"}))
            assert checked["valid"] is True
            write(tmp_path, "broken.py", "# %%\ndef f(:\n")
            broken = structured(await session.call_tool("validate", {"path": "broken.py"}))
            assert broken["valid"] is False
            assert broken["problems"][0]["cell"] == 0
        text = (tmp_path / "b.py").read_text(encoding="utf-8")
        assert "# Notes" in text
        assert "sb.glue" not in text

    anyio.run(scenario)


def test_cli_refuses_no_token_beyond_loopback_and_the_token_as_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from notebook_executor._faces.cli import main

    monkeypatch.delenv("NOTEBOOK_EXECUTOR_MCP_TOKEN", raising=False)
    assert main(["mcp", "--root", str(tmp_path), "--http", "0.0.0.0:8765", "--no-token"]) == 2
    assert "--no-token serves only on loopback" in capsys.readouterr().err
    token = ["--allow-secret", "NOTEBOOK_EXECUTOR_MCP_TOKEN"]
    assert main(["mcp", "--root", str(tmp_path), *token]) == 2
    assert "never reaches a kernel" in capsys.readouterr().err
    assert main(["mcp", "--root", str(tmp_path / "missing")]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["mcp", "--http", "nohostport"]) == 2
    assert "HOST:PORT" in capsys.readouterr().err


def test_cli_reports_a_taken_port_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port another process listens on: one line and exit status 2, not a traceback."""
    from notebook_executor._faces.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        http = ["--http", f"127.0.0.1:{port}", "--no-token"]
        assert main(["mcp", "--root", str(tmp_path), *http]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_http_keeps_dns_rebinding_protection_and_asks_a_token_beyond_loopback(
    tmp_path: Path,
) -> None:
    import httpx2

    with http_server(tmp_path) as served:
        auth = {**ACCEPT, "Authorization": f"Bearer {served.token}"}
        rebound = httpx2.post(served.url, json=INITIALIZE, headers={**auth, "Host": "evil.example"})
        assert rebound.status_code in (403, 421)
        foreign = httpx2.post(
            served.url, json=INITIALIZE, headers={**auth, "Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
    token = "t0ken-" + os.urandom(8).hex()
    env = {"NOTEBOOK_EXECUTOR_MCP_TOKEN": token}
    with http_server(tmp_path, host="0.0.0.0", env=env) as served:
        # A token given in the environment is not shown.
        assert token not in served.startup
        assert served.token == token
        url = served.url.replace("0.0.0.0", "127.0.0.1")
        assert httpx2.post(url, json=INITIALIZE, headers=ACCEPT).status_code == 401
        wrong = {**ACCEPT, "Authorization": "Bearer nope"}
        assert httpx2.post(url, json=INITIALIZE, headers=wrong).status_code == 401

        async def scenario() -> None:
            async with http_session(url, token=token) as session:
                tools = (await session.list_tools()).tools
                assert {tool.name for tool in tools} == TOOLS

        anyio.run(scenario)


def test_http_on_loopback_asks_a_token_made_at_start_and_prints_where_it_listens(
    tmp_path: Path,
) -> None:
    import httpx2

    with http_server(tmp_path) as served:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", served.url)
        assert f"listening on {served.url}" in served.startup
        assert served.token and len(served.token) >= 32
        assert served.startup.count(served.token) == 1
        assert httpx2.post(served.url, json=INITIALIZE, headers=ACCEPT).status_code == 401
        wrong = {**ACCEPT, "Authorization": "Bearer " + served.token[:-1]}
        assert httpx2.post(served.url, json=INITIALIZE, headers=wrong).status_code == 401

        async def scenario() -> None:
            async with http_session(served.url, token=served.token) as session:
                tools = (await session.list_tools()).tools
                assert {tool.name for tool in tools} == TOOLS

        anyio.run(scenario)
    with http_server(tmp_path, args=("--no-token",)) as served:
        assert served.token is None
        assert "warning: no bearer token" in served.startup
        assert httpx2.post(served.url, json=INITIALIZE, headers=ACCEPT).status_code == 200


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="running a request as another user (nobody) needs root",
)
def test_another_local_user_cannot_use_the_loopback_server_without_the_token(
    tmp_path: Path,
) -> None:
    import pwd
    import shutil
    import subprocess

    nobody = pwd.getpwnam("nobody")
    # The interpreter under test may live in a folder nobody cannot enter: the system's
    # runs the request (it needs the standard library only).
    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for user nobody")
    request = (
        "import json, sys, urllib.error, urllib.request\n"
        "headers = {'Content-Type': 'application/json', **json.loads(sys.argv[2])}\n"
        "data = json.dumps(json.loads(sys.argv[3])).encode()\n"
        "try:\n"
        "    print(urllib.request.urlopen(urllib.request.Request(\n"
        "        sys.argv[1], data=data, headers=headers)).status)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print(exc.code)\n"
    )

    def as_nobody(headers: dict[str, str]) -> int:
        command = [python, "-I", "-c", request, served.url]
        done = subprocess.run(
            [*command, json.dumps(headers), json.dumps(INITIALIZE)],
            user=nobody.pw_uid,
            group=nobody.pw_gid,
            extra_groups=[],
            env={"PATH": os.environ.get("PATH", "")},
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return int(done.stdout)

    with http_server(tmp_path) as served:
        assert as_nobody(ACCEPT) == 401
        # The same request with the token is answered: the port was reachable as nobody.
        assert as_nobody({**ACCEPT, "Authorization": f"Bearer {served.token}"}) == 200


# -- on real kernels ------------------------------------------------------------------------


@pytest.mark.kernel
def test_execute_over_http_reports_progress_per_cell(tmp_path: Path) -> None:
    write(tmp_path, "notebooks/hello.py", HELLO)

    async def scenario(served: Served) -> None:
        reports: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append((progress, total))

        async with http_session(served.url, token=served.token) as session:
            result = structured(
                await session.call_tool(
                    "execute",
                    {"path": "notebooks/hello.py", "parameters": {"name": "Ada"}, "request": "hi"},
                    progress_callback=on_progress,
                )
            )
            assert result["status"] == "success"
            assert result["notebook"] == "notebooks/hello.py"
            assert result["scraps"] == {"greeting": "hello Ada"}
            assert result["parameters"] == {"name": "Ada"}
            # Four code cells ran: the parameters cell, the injected values, and two more.
            assert reports == [(1, 4), (2, 4), (3, 4), (4, 4)]
            again = structured(await session.call_tool("get_run", {"run_id": result["run_id"]}))
            assert again["run_id"] == result["run_id"]
            assert again["status"] == "success"
            listed = structured(await session.call_tool("list_runs", {}))
            assert [run["run_id"] for run in listed["runs"]] == [result["run_id"]]
            scraps = structured(
                await session.call_tool("collect_outputs", {"run_id": result["run_id"]})
            )
            assert scraps["scraps"] == {"greeting": "hello Ada"}

    with http_server(tmp_path) as served:
        anyio.run(scenario, served)


@pytest.mark.kernel
def test_a_kernel_writing_to_its_own_descriptors_leaves_the_stdio_stream_intact(
    tmp_path: Path,
) -> None:
    write(
        tmp_path,
        "fds.py",
        "# %%\nimport os\nos.write(1, b'raw stdout\\n')\nos.write(2, b'raw stderr\\n')\n"
        "os.system('echo from a child process')\n",
    )

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            for _ in range(2):
                result = structured(await session.call_tool("execute", {"path": "fds.py"}))
                assert result["status"] == "success"
            page = structured(
                await session.call_tool("read_notebook", {"run_id": result["run_id"]})
            )
            texts = "".join(output.get("text", "") for output in page["cells"][0]["outputs"])
            assert "raw stdout" in texts
            assert "from a child process" in texts

    anyio.run(scenario)


@pytest.mark.kernel
def test_output_flood_is_cut_to_the_budget_and_paged(tmp_path: Path) -> None:
    write(
        tmp_path,
        "flood.py",
        "# %%\nimport sys\nfor _ in range(20):\n    sys.stdout.write('x' * 1_000_000)\n"
        "# %%\nraise ValueError('y' * 1_000_000)\n",
    )

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            executed = await session.call_tool("execute", {"path": "flood.py"})
            assert response_size(executed) < MAX_RESPONSE_CHARS
            result = structured(executed)
            assert result["status"] == "error"
            assert result["failed_cell"]["index"] == 1
            assert result["failed_cell"]["ename"] == "ValueError"
            page = await session.call_tool(
                "read_notebook", {"run_id": result["run_id"], "start": 0, "limit": 5}
            )
            assert response_size(page) < MAX_RESPONSE_CHARS
            stream = structured(page)["cells"][0]["outputs"][0]
            assert stream["text"].startswith("x" * 2000)
            assert "output_start=2000" in stream["text"]
            assert stream["chars_total"] >= 1_000_000
            following = await session.call_tool(
                "read_notebook",
                {"run_id": result["run_id"], "start": 0, "limit": 1, "output_start": 2000},
            )
            assert response_size(following) < MAX_RESPONSE_CHARS
            assert "output_start=4000" in structured(following)["cells"][0]["outputs"][0]["text"]

    anyio.run(scenario)


@pytest.mark.kernel
def test_a_plot_is_a_resource_never_base64_in_an_answer(tmp_path: Path) -> None:
    png = tiny_png()
    # The kernel draws the image itself: its source holds no base64 text.
    write(
        tmp_path,
        "plot.py",
        "# %%\nimport struct, zlib\nfrom IPython.display import Image, display\n\n"
        + inspect.getsource(tiny_png)
        + "\n\ndisplay(Image(data=tiny_png()))\n",
    )

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            result = structured(await session.call_tool("execute", {"path": "plot.py"}))
            assert result["status"] == "success"
            page = await session.call_tool("read_notebook", {"run_id": result["run_id"]})
            text = page.model_dump_json()
            assert base64.b64encode(png).decode()[:16] not in text
            assert "iVBORw0KGgo" not in text  # any PNG's base64 starts so
            output = structured(page)["cells"][0]["outputs"][0]
            (image,) = output["images"]
            assert image["mime_type"] == "image/png"
            assert image["uri"] == f"run://{result['run_id']}/cells/0/outputs/0/image.png"
            resource = await session.read_resource(image["uri"])
            (content,) = resource.contents
            assert content.mime_type == "image/png"
            assert base64.b64decode(content.blob) == png  # type: ignore[union-attr]
            missing = f"run://{result['run_id']}/cells/0/outputs/7/image.png"
            with pytest.raises(Exception, match="no image/png"):
                await session.read_resource(missing)

    anyio.run(scenario)


@pytest.mark.kernel
def test_secrets_come_from_the_server_environment_and_never_come_back(tmp_path: Path) -> None:
    secret = "s3cr3t-" + os.urandom(6).hex()
    write(
        tmp_path,
        "leak.py",
        "# %%\nimport os\nprint(os.environ['API_KEY'])\n"
        "# %%\nraise KeyError(os.environ['API_KEY'])\n",
    )

    write(tmp_path, "typed.py", '# %% tags=["parameters"]\nn: int = 1\n')

    async def scenario() -> None:
        async with stdio_session(
            tmp_path, env={"API_KEY": secret}, args=("--allow-secret", "API_KEY")
        ) as session:
            executed = await session.call_tool(
                "execute", {"path": "leak.py", "secrets": ["API_KEY"]}
            )
            result = structured(executed)
            assert result["status"] == "error"
            assert secret not in executed.model_dump_json()
            page = await session.call_tool("read_notebook", {"run_id": result["run_id"]})
            assert secret not in page.model_dump_json()
            assert "[secret API_KEY]" in page.model_dump_json()
            unknown = await session.call_tool(
                "execute", {"path": "leak.py", "secrets": ["NOT_SET_ANYWHERE"]}
            )
            assert unknown.is_error
            # An error message that would quote the value shows its name instead.
            refused = await session.call_tool(
                "execute", {"path": "typed.py", "parameters": {"n": secret}}
            )
            assert refused.is_error
            assert "[secret API_KEY]" in refused.content[0].text  # type: ignore[union-attr]
            assert secret not in refused.model_dump_json()
        for path in (tmp_path / "runs").rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path

    anyio.run(scenario)


@pytest.mark.kernel
def test_cancelling_a_run_stops_its_kernel_and_records_it_cancelled(tmp_path: Path) -> None:
    pid_file = tmp_path / "kernel.pid"
    write(
        tmp_path,
        "slow.py",
        f"# %%\nimport os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "# %%\nimport time\ntime.sleep(600)\n",
    )

    async def scenario() -> dict[str, Any]:
        async with stdio_session(tmp_path) as session:
            started = anyio.Event()

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                started.set()

            async with anyio.create_task_group() as group:

                async def run() -> None:
                    await session.call_tool(
                        "execute", {"path": "slow.py"}, progress_callback=on_progress
                    )

                group.start_soon(run)
                with anyio.fail_after(120):
                    await started.wait()
                    while not pid_file.exists():
                        await anyio.sleep(0.05)
                group.cancel_scope.cancel()
            with anyio.fail_after(60):
                while True:
                    runs = structured(await session.call_tool("list_runs", {}))["runs"]
                    if runs and runs[0]["status"] != "running":
                        break
                    await anyio.sleep(0.1)
            return dict(runs[0])

    summary = anyio.run(scenario)
    assert summary["status"] == "error"
    assert summary["error_kind"] == "cancelled"
    assert summary["failed_cell"]["index"] == 1
    kernel = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while _alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(kernel)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.kernel
def test_agent_loop_fail_read_edit_rerun_diff_search(tmp_path: Path) -> None:
    write(
        tmp_path,
        "analysis.py",
        '# %% tags=["parameters"]\nn = 3\n\n# %%\ntotal = sum(range(n))\n\n'
        "# %%\nprint('mean', totl / n)\n\n# %%\nimport scrapbook as sb\nsb.glue('total', total)\n",
    )

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            first = structured(
                await session.call_tool(
                    "execute", {"path": "analysis.py", "request": "first attempt at the mean"}
                )
            )
            assert first["status"] == "error"
            failed = first["failed_cell"]
            assert failed["ename"] == "NameError"
            cell = structured(
                await session.call_tool(
                    "read_notebook", {"path": "analysis.py", "start": failed["index"], "limit": 1}
                )
            )["cells"][0]
            assert cell["index"] == failed["index"] == 2
            assert "totl" in cell["source"]
            structured(
                await session.call_tool(
                    "edit_cell",
                    {
                        "path": "analysis.py",
                        "index": cell["index"],
                        "source": cell["source"].replace("totl", "total"),
                    },
                )
            )
            second = structured(
                await session.call_tool(
                    "execute", {"path": "analysis.py", "request": "second attempt at the mean"}
                )
            )
            assert second["status"] == "success"
            assert second["scraps"] == {"total": 3}
            changes = structured(
                await session.call_tool("diff", {"a": first["run_id"], "b": second["run_id"]})
            )
            assert changes["status"] == ["error", "success"]
            hits = structured(await session.call_tool("search_runs", {"query": "attempt mean"}))[
                "hits"
            ]
            assert {hit["run_id"] for hit in hits} == {first["run_id"], second["run_id"]}

    anyio.run(scenario)
    assert "print('mean', total / n)" in (tmp_path / "analysis.py").read_text(encoding="utf-8")


@pytest.mark.kernel
def test_a_failed_cell_traceback_keeps_the_notebook_frames_only(tmp_path: Path) -> None:
    write(
        tmp_path,
        "parse.py",
        "# %%\nimport json\n\ndef parse(text):\n    return json.loads(text)\n\n# %%\nparse('{')\n",
    )

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            result = structured(await session.call_tool("execute", {"path": "parse.py"}))
            failed = result["failed_cell"]
            assert failed["index"] == 1
            assert failed["ename"] == "JSONDecodeError"
            traceback = failed["traceback"]
            assert not any("\x1b" in entry for entry in traceback)
            cells = [entry for entry in traceback if entry.startswith("Cell In")]
            assert len(cells) == 2
            assert "json.loads(text)" in cells[1]
            assert any("frame(s) in library code omitted" in entry for entry in traceback)
            assert not any("json/decoder.py" in entry for entry in traceback)
            assert traceback[-1].startswith("JSONDecodeError: Expecting property name")

    anyio.run(scenario)


@pytest.mark.kernel
def test_kernels_do_not_inherit_the_server_environment(tmp_path: Path) -> None:
    value = "server-only-" + os.urandom(6).hex()
    named = "named-secret-" + os.urandom(6).hex()
    write(
        tmp_path,
        "env.py",
        "# %%\nimport os\n"
        'print("server only:", os.environ.get("SERVER_ONLY_TOKEN"))\n'
        'print("named:", os.environ.get("API_KEY"))\n'
        'print("path set:", bool(os.environ.get("PATH")))\n'
        "import scrapbook as sb\n"
        'sb.glue("names", sorted(os.environ))\n',
    )

    async def scenario() -> None:
        env = {**os.environ, "SERVER_ONLY_TOKEN": value, "API_KEY": named}
        async with stdio_session(tmp_path, env=env, args=("--allow-secret", "API_KEY")) as session:
            executed = await session.call_tool(
                "execute", {"path": "env.py", "secrets": ["API_KEY"]}
            )
            result = structured(executed)
            assert result["status"] == "success", result
            assert "SERVER_ONLY_TOKEN" not in result["scraps"]["names"]
            assert "PATH" in result["scraps"]["names"]
            page = await session.call_tool("read_notebook", {"run_id": result["run_id"]})
            text = page.model_dump_json()
            assert "server only: None" in text
            assert "named: [secret API_KEY]" in text
            assert "path set: True" in text
            for answer in (executed, page):
                assert value not in answer.model_dump_json()
                assert named not in answer.model_dump_json()
        files = [path for path in (tmp_path / "runs").rglob("*") if path.is_file()]
        assert files
        for path in files:
            assert value.encode() not in path.read_bytes(), path

    anyio.run(scenario)


@pytest.mark.kernel
def test_a_client_can_name_only_the_secrets_the_operator_allows(tmp_path: Path) -> None:
    values = {
        "AWS_SECRET_ACCESS_KEY": "aws-" + os.urandom(8).hex(),
        "NOTEBOOK_EXECUTOR_MCP_TOKEN": "token-" + os.urandom(8).hex(),
        "API_KEY": "allowed-" + os.urandom(8).hex(),
    }
    # Reversed, a value slips past redaction: only keeping it from the kernel protects it.
    write(
        tmp_path,
        "reveal.py",
        "# %%\nimport os\n"
        f"for name in {sorted(values)!r}:\n"
        "    print(name, os.environ.get(name, '')[::-1])\n",
    )
    args = ("--allow-secret", "API_KEY", "--allow-secret", "UNSET_NAME")

    async def scenario() -> None:
        async with stdio_session(tmp_path, env=values, args=args) as session:
            for name in ("AWS_SECRET_ACCESS_KEY", "NOTEBOOK_EXECUTOR_MCP_TOKEN", "HOME"):
                refused = await session.call_tool(
                    "execute", {"path": "reveal.py", "secrets": [name]}
                )
                assert refused.is_error, name
                message = refused.content[0].text  # type: ignore[union-attr]
                assert f"secret {name!r} is not allowed" in message
                assert f"--allow-secret {name}" in message
            unset = await session.call_tool(
                "execute", {"path": "reveal.py", "secrets": ["UNSET_NAME"]}
            )
            assert "allowed but not set" in unset.content[0].text  # type: ignore[union-attr]
            result = structured(
                await session.call_tool("execute", {"path": "reveal.py", "secrets": ["API_KEY"]})
            )
            assert result["status"] == "success"
            page = (
                await session.call_tool("read_notebook", {"run_id": result["run_id"]})
            ).model_dump_json()
            assert values["API_KEY"][::-1] in page
            assert values["AWS_SECRET_ACCESS_KEY"][::-1] not in page
            assert values["NOTEBOOK_EXECUTOR_MCP_TOKEN"][::-1] not in page
        for path in (tmp_path / "runs").rglob("*"):
            if path.is_file():
                for name in ("AWS_SECRET_ACCESS_KEY", "NOTEBOOK_EXECUTOR_MCP_TOKEN"):
                    assert values[name][::-1].encode() not in path.read_bytes(), path

    anyio.run(scenario)


LOGBOOK = """---
parameters:
  who: "you"
env: [{name}]
---

```python
import os
print("reversed", os.environ[{name!r}][::-1])
```
"""


@pytest.mark.kernel
def test_declared_env_is_read_only_inside_the_root_or_from_allowed_secrets(
    tmp_path: Path,
) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "server-cwd"
    found = {name: f"{name.lower()}-" + os.urandom(8).hex() for name in ("ROOT", "FOLDER")}
    outside = "outside-" + os.urandom(8).hex()
    server = "server-" + os.urandom(8).hex()
    write(elsewhere, ".env", f"OUTSIDE_TOKEN={outside}\n")
    write(root, ".env", f"ROOT_TOKEN={found['ROOT']}\n")
    write(root, "logs/.env", f"FOLDER_TOKEN={found['FOLDER']}\n")
    for name in ("OUTSIDE_TOKEN", "SERVER_TOKEN", "ROOT_TOKEN", "FOLDER_TOKEN", "API_KEY"):
        write(root, f"logs/{name.lower()}.md", LOGBOOK.format(name=name))
    env = {"SERVER_TOKEN": server, "API_KEY": "key-" + os.urandom(8).hex()}

    async def scenario() -> None:
        async with stdio_session(
            root, env=env, args=("--allow-secret", "API_KEY"), cwd=elsewhere
        ) as session:
            # The server's working directory is outside the root: its .env feeds no kernel.
            refused = await session.call_tool("execute", {"path": "logs/outside_token.md"})
            assert refused.is_error
            text = refused.model_dump_json()
            assert "'OUTSIDE_TOKEN', which is not set" in text
            assert outside not in text and outside[::-1] not in text
            assert str(elsewhere) not in text
            assert "set it in the environment" not in text
            # Set in the server's environment, not allowed: the operator must allow it.
            refused = await session.call_tool("execute", {"path": "logs/server_token.md"})
            assert refused.is_error
            message = refused.content[0].text  # type: ignore[union-attr]
            assert "'SERVER_TOKEN': the server's environment has it, but it is not allowed" in (
                message
            )
            assert "--allow-secret SERVER_TOKEN" in message
            assert "the client names it in secrets" in message
            assert "set it in the environment" not in message
            assert server not in refused.model_dump_json()
            # Allowed: the client names it.
            refused = await session.call_tool("execute", {"path": "logs/api_key.md"})
            assert "the operator allows it; name it in secrets" in refused.content[0].text  # type: ignore[union-attr]
            named = structured(
                await session.call_tool(
                    "execute", {"path": "logs/api_key.md", "secrets": ["API_KEY"]}
                )
            )
            assert named["status"] == "success"
            # The notebook's folder and the root are inside the root.
            for name, value in found.items():
                result = structured(
                    await session.call_tool("execute", {"path": f"logs/{name.lower()}_token.md"})
                )
                assert result["status"] == "success", result
                page = await session.call_tool("read_notebook", {"run_id": result["run_id"]})
                assert f"reversed {value[::-1]}" in page.model_dump_json()

    anyio.run(scenario)


@pytest.mark.kernel
def test_an_answer_with_a_large_mapping_and_a_pair_fits_the_budget(tmp_path: Path) -> None:
    write(
        tmp_path,
        "big.py",
        "# %%\nimport scrapbook as sb\n"
        "sb.glue('big', {f'key{i}': i for i in range(20_000)})\nsb.glue('pair', [1, 2])\n",
    )

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            # Fitting such an answer used to loop forever: this bound only turns a hang into
            # a failure.
            with anyio.fail_after(600):
                executed = await session.call_tool("execute", {"path": "big.py"})
                assert response_size(executed) < MAX_RESPONSE_CHARS
                result = structured(executed)
                assert result["status"] == "success"
                assert result["scraps"]["pair"] == [1, 2]
                assert result["scraps"]["big"]["key0"] == 0
                collected = await session.call_tool("collect_outputs", {"run_id": result["run_id"]})
                assert response_size(collected) < MAX_RESPONSE_CHARS
                assert structured(collected)["scraps"]["pair"] == [1, 2]

    anyio.run(scenario)


@pytest.mark.kernel
def test_no_answer_shows_an_allowed_secret_printed_whole_or_in_pieces(tmp_path: Path) -> None:
    secret = os.urandom(12).hex()
    pieces = (secret[:10], secret[10:])
    write(
        tmp_path,
        "prints.py",
        "# %%\nimport os, sys, time\nimport scrapbook as sb\n"
        "value = os.environ['API_KEY']\n"
        "print('whole', value)\n"
        # Two writes, flushed apart: the kernel sends them as separate stream messages.
        "sys.stdout.write('pieces ' + value[:10]); sys.stdout.flush(); time.sleep(0.3)\n"
        "sys.stdout.write(value[10:] + '\\n'); sys.stdout.flush()\n"
        "sb.glue('leaked', value)\n"
        "sb.glue('nested', {'deep': ['x', value]})\n",
    )

    async def scenario() -> None:
        async with stdio_session(
            tmp_path, env={"API_KEY": secret}, args=("--allow-secret", "API_KEY")
        ) as session:
            executed = await session.call_tool(
                "execute",
                {"path": "prints.py", "secrets": ["API_KEY"], "request": "whole pieces"},
            )
            result = structured(executed)
            assert result["status"] == "success", result
            run_id = result["run_id"]
            answers = [
                executed,
                await session.call_tool("read_notebook", {"run_id": run_id}),
                await session.call_tool("get_run", {"run_id": run_id}),
                await session.call_tool("search_runs", {"query": "whole"}),
                await session.call_tool("search_runs", {"query": "pieces"}),
                await session.call_tool("collect_outputs", {"run_id": run_id}),
            ]
            page = answers[1].model_dump_json()
            assert "whole [secret API_KEY]" in page
            assert "pieces" in page
            for answer in answers:
                assert not answer.is_error
                shown = answer.model_dump_json()
                assert secret not in shown
                assert not any(piece in shown for piece in pieces), shown
            hits = structured(answers[3])["hits"]
            assert hits and all(secret not in json.dumps(hit) for hit in hits)

    anyio.run(scenario)


# -- strict arguments and plain messages --------------------------------------------------


def test_every_tool_refuses_an_argument_it_does_not_know_and_names_it(tmp_path: Path) -> None:
    write(tmp_path, "hello.py", HELLO)

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            for name, tool in tools.items():
                assert tool.input_schema.get("additionalProperties") is False, name
                known = list(tool.input_schema["properties"])
                refused = await session.call_tool(name, {"bogus_argument": 1})
                assert refused.is_error, name
                message = refused.content[0].text  # type: ignore[union-attr]
                assert "unknown argument 'bogus_argument'" in message, message
                assert f"{name} takes {', '.join(known)}" in message, message
            # The agent's slip: a notebook parameter given as an argument of execute.
            refused = await session.call_tool("execute", {"path": "hello.py", "name": "Bob"})
            assert refused.is_error
            message = refused.content[0].text  # type: ignore[union-attr]
            assert "unknown argument 'name'" in message
            assert "did you mean parameters={'name': ...}?" in message
            # A misspelt argument: the closest known one is suggested.
            refused = await session.call_tool(
                "execute", {"path": "hello.py", "paramters": {"name": "Bob"}, "timout": 5}
            )
            message = refused.content[0].text  # type: ignore[union-attr]
            assert "unknown arguments 'paramters', 'timout'" in message
            assert "did you mean 'parameters' (for 'paramters'), 'timeout' (for 'timout')?" in (
                message
            )
            # Known arguments still work.
            listed = structured(await session.call_tool("list_notebooks", {"folder": "."}))
            assert listed["notebooks"] == ["hello.py"]
        # Nothing ran: no run was recorded.
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.ipynb"))

    anyio.run(scenario)


def test_tool_descriptions_carry_no_docstring_indentation(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            for tool in (await session.list_tools()).tools:
                description = tool.description or ""
                assert description == inspect.cleandoc(description), tool.name
                assert not any(line.startswith(" ") for line in description.splitlines())

    anyio.run(scenario)


def test_no_tool_error_shows_the_absolute_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root, "hello.py", HELLO)
    write(root, "typed.py", TYPED)
    write(root, "logs/needs_env.md", LOGBOOK.format(name="NBX_NOWHERE_TOKEN"))
    bad_calls: list[tuple[str, dict[str, Any]]] = [
        ("inspect_parameters", {"path": "missing.py"}),
        ("inspect_parameters", {"path": str(root / "missing.py")}),
        ("read_notebook", {"path": "missing.py"}),
        ("edit_cell", {"path": "missing.py", "index": 0, "source": "x = 1"}),
        ("edit_cell", {"path": "hello.py", "index": 99, "source": "x = 1"}),
        ("edit_cell", {"path": "hello.py", "index": 0, "source": "x", "expect": "stale"}),
        ("insert_cell", {"path": "hello.py", "index": 99, "source": "x = 1"}),
        ("delete_cell", {"path": "hello.py", "index": 99}),
        ("execute", {"path": "missing.py"}),
        ("execute", {"path": "hello.py", "parameters": {"nobody": 1}}),
        ("execute", {"path": "typed.py", "parameters": {"times": "many"}}),
        ("execute", {"path": "logs/needs_env.md"}),
        ("validate", {"path": "missing.py"}),
        ("diff", {"a": "hello.py", "b": "missing.py"}),
        ("list_notebooks", {"folder": "hello.py"}),
        ("get_run", {"run_id": "20260101T000000Z-nothing-00000000"}),
        ("list_runs", {"notebook": "missing.py"}),
    ]

    async def scenario() -> None:
        async with stdio_session(root) as session:
            for tool, arguments in bad_calls:
                result = await session.call_tool(tool, arguments)
                text = result.model_dump_json()
                assert str(tmp_path) not in text, (tool, arguments, text)
                # Two answer rather than refuse: no runs, and a problem found.
                if tool not in ("list_runs", "validate"):
                    assert result.is_error, (tool, arguments, text)
            refused = await session.call_tool("execute", {"path": "logs/needs_env.md"})
            message = refused.content[0].text  # type: ignore[union-attr]
            assert "logs/.env or .env" in message

    anyio.run(scenario)


TYPED = """\
# %% tags=["parameters"]
times: int = 1
ratio: float = 0.5
loud: bool = False
words: list = []
label: str = "x"

# %%
import scrapbook as sb
sb.glue("seen", [type(v).__name__ for v in (times, ratio, loud, words, label)])
"""


@pytest.mark.kernel
def test_execute_converts_text_given_to_a_typed_parameter_as_the_cli_does(
    tmp_path: Path,
) -> None:
    write(tmp_path, "typed.py", TYPED)
    given = {"times": "3", "ratio": "2", "loud": "true", "words": "[1, 2]", "label": "7"}

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            result = structured(
                await session.call_tool("execute", {"path": "typed.py", "parameters": given})
            )
            assert result["status"] == "success", result
            assert result["parameters"] == {
                "times": 3,
                "ratio": 2.0,
                "loud": True,
                "words": [1, 2],
                "label": "7",
            }
            assert result["scraps"]["seen"] == ["int", "float", "bool", "list", "str"]
            # Text that does not fit is still refused, naming the parameter.
            refused = await session.call_tool(
                "execute", {"path": "typed.py", "parameters": {"times": "many"}}
            )
            assert refused.is_error
            assert "times" in refused.content[0].text  # type: ignore[union-attr]

    anyio.run(scenario)


def test_lone_surrogates_in_a_request_are_tool_errors_before_any_run(tmp_path: Path) -> None:
    """A hostile client writes JSON by hand: ``\\ud800`` escapes decode to lone surrogates,
    which no text file or record can hold. The SDK's transport refuses such a message before
    any tool sees it (on stdio it is logged and gets no answer); nothing runs, nothing is
    written, and the server goes on answering."""
    import subprocess

    from integration.mcp_client import SERVER

    write(tmp_path, "hello.py", HELLO)
    calls = [
        {"path": "hello.py", "parameters": {"name": "Bob\ud800"}},
        {"path": "hello.py", "request": "greet \udcff"},
        {"path": "hello\udc80.py"},
    ]
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {
                "jsonrpc": "2.0",
                "id": number,
                "method": "tools/call",
                "params": {"name": "execute", "arguments": arguments},
            }
            for number, arguments in enumerate(calls, start=1)
        ),
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "list_notebooks", "arguments": {}},
        },
    ]
    # ensure_ascii: the surrogates travel as escapes, as a hostile client would send them.
    lines = "".join(json.dumps(message) + "\n" for message in messages)
    with subprocess.Popen(
        [*SERVER, "--root", str(tmp_path)],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ},
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(lines.encode("ascii"))
        server.stdin.flush()
        answers: dict[int, Any] = {}
        deadline = time.monotonic() + 120
        while 9 not in answers and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            answer = json.loads(line)
            if "id" in answer:
                answers[answer["id"]] = answer
        server.stdin.close()
        server.wait(timeout=60)
    for number in range(1, len(calls) + 1):
        if number in answers:  # refused as a tool error if it got through the transport
            result = answers[number].get("result", {"isError": True, "content": [{"text": ""}]})
            assert result["isError"], answers[number]
            text = result["content"][0]["text"]
            assert "Traceback" not in text and "UnicodeEncodeError" not in text, text
    listed = answers[9]["result"]["structuredContent"]
    assert listed["notebooks"] == ["hello.py"]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.ipynb"))


def test_the_listing_finds_the_notebooks_check_finds(tmp_path: Path) -> None:
    # Before, the server sniffed files by its own rules: it listed a page whose front matter
    # opens with '---' and a README with a ```python block, and missed a '#%%' script, a light
    # script with a jupytext header and an upper-case .IPYNB, all of which check runs.
    from notebook_executor._review.check import find_notebooks

    write(tmp_path, "hello.py", HELLO)
    write(tmp_path, "tight.py", "#%%\nx = 1\n")
    write(
        tmp_path,
        "light.py",
        "# ---\n# jupyter:\n#   jupytext:\n#     formats: py:light\n# ---\n\nx = 1\n",
    )
    write(tmp_path, "module.py", "print('a module')\n")
    write(tmp_path, "page.md", "---\ntitle: A page\n---\n\nSome prose.\n")
    write(tmp_path, "readme.md", "# Readme\n\n```python\nx = 1\n```\n")
    write(tmp_path, "logbook.md", "---\nparameters:\n  x: 1\n---\n\n```python\nprint(x)\n```\n")
    upper = tmp_path / "UPPER.IPYNB"
    upper.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    found = [Path(p).relative_to(tmp_path).as_posix() for p in find_notebooks([str(tmp_path)])]
    assert sorted(found) == ["UPPER.IPYNB", "hello.py", "light.py", "logbook.md", "tight.py"]

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            listed = structured(await session.call_tool("list_notebooks", {"folder": "."}))
            assert listed["notebooks"] == found

    anyio.run(scenario)


def test_a_file_name_that_is_not_utf8_is_not_listed_and_breaks_nothing(tmp_path: Path) -> None:
    write(tmp_path, "hello.py", HELLO)
    (Path(os.fsdecode(bytes(tmp_path))) / os.fsdecode(b"caf\xe9.py")).write_text(HELLO)

    async def scenario() -> None:
        # Before, the server's writer died on the name and no answer ever came.
        with anyio.fail_after(120):
            await listing()

    async def listing() -> None:
        async with stdio_session(tmp_path) as session:
            listed = structured(await session.call_tool("list_notebooks", {"folder": "."}))
            assert listed["notebooks"] == ["hello.py"]
            assert "1 notebook(s) whose file names are not UTF-8 text" in listed["note"]
            ran = structured(await session.call_tool("execute", {"path": "hello.py"}))
            assert ran["status"] == "success"

    anyio.run(scenario)
