"""Session tools of the MCP server, driven by the SDK's real client: open, run, fail, edit,
rerun_from, evaluate, close; sessions belong to their client and close when it disconnects."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.mcp_client import (
    MAX_RESPONSE_CHARS,
    http_server,
    http_session,
    response_size,
    stdio_session,
    structured,
)

pytestmark = pytest.mark.kernel

NOTEBOOK = """\
# %% tags=["parameters"]
n = 2

# %%
data = list(range(n))
print("loaded", len(data))

# %%
total = sum(data) / missing

# %%
print("total", total)
"""


def session_record(root: Path, run_id: str) -> dict[str, Any]:
    path = next((root / "runs").rglob(f"{run_id}.ipynb"))
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["metadata"][
        "notebook_executor"
    ]
    return record


def wait_closed(root: Path, run_id: str, seconds: float = 30) -> dict[str, Any]:
    ends = time.monotonic() + seconds
    while True:
        record = session_record(root, run_id)
        if not record["session"]["open"] or time.monotonic() > ends:
            return record
        time.sleep(0.1)


def test_open_run_fail_edit_rerun_evaluate_close_over_stdio(tmp_path: Path) -> None:
    (tmp_path / "analysis.py").write_text(NOTEBOOK, encoding="utf-8")

    async def scenario() -> None:
        async with stdio_session(tmp_path) as client:
            opened = structured(
                await client.call_tool(
                    "open_session",
                    {"path": "analysis.py", "parameters": {"n": "5"}, "request": "explore"},
                )
            )
            sid = opened["session_id"]
            result = await client.call_tool("session_run", {"session_id": sid})
            assert response_size(result) <= MAX_RESPONSE_CHARS
            step = structured(result)
            assert step["status"] == "error" and step["failed_cell"]["index"] == 2
            assert step["failed_cell"]["ename"] == "NameError"
            assert step["cells_run"] == [0, 1, 2]
            assert step["outputs"][1] == {"index": 1, "text": "loaded 5\n"}
            assert step["notebook"] == "analysis.py" and step["parameters"] == {"n": 5}
            evaluated = structured(
                await client.call_tool("session_evaluate", {"session_id": sid, "code": "data"})
            )
            assert evaluated["status"] == "success" and evaluated["output"] == "[0, 1, 2, 3, 4]\n"
            structured(
                await client.call_tool(
                    "edit_cell",
                    {"path": "analysis.py", "index": 2, "source": "total = sum(data) / 2"},
                )
            )
            step = structured(
                await client.call_tool("session_rerun_from", {"session_id": sid, "index": 2})
            )
            assert step["status"] == "success" and step["cells_run"][-2:] == [2, 3]
            assert step["outputs"][-1] == {"index": 3, "text": "total 5.0\n"}
            assert step["restored"] in ("checkpoint", "replay")
            assert step["restored"] == "checkpoint" or step["restore_reason"]
            listed = structured(await client.call_tool("list_sessions", {}))
            assert [s["session_id"] for s in listed["sessions"]] == [sid]
            bad = await client.call_tool("session_run", {"session_id": sid, "until": 99})
            assert bad.is_error
            unknown = await client.call_tool("session_run", {"session_id": sid, "nope": 1})
            assert unknown.is_error
            closed = structured(await client.call_tool("close_session", {"session_id": sid}))
            assert closed == {"session_id": sid, "run_id": opened["run_id"], "closed": True}
            gone = await client.call_tool("session_run", {"session_id": sid})
            assert gone.is_error
            record = session_record(tmp_path, opened["run_id"])
            kinds = [entry["kind"] for entry in record["session"]["log"]]
            assert kinds[:3] == ["step", "evaluate", "edit"] and kinds[-1] == "close"
            assert record["status"] == "success" and record["request"] == "explore"
            run = structured(await client.call_tool("get_run", {"run_id": opened["run_id"]}))
            assert run["status"] == "success"

    anyio.run(scenario)


def test_sessions_belong_to_their_client_and_close_when_it_disconnects(tmp_path: Path) -> None:
    (tmp_path / "analysis.py").write_text(NOTEBOOK, encoding="utf-8")

    async def scenario(url: str, token: str | None) -> str:
        async with http_session(url, token=token) as first:
            opened = structured(await first.call_tool("open_session", {"path": "analysis.py"}))
            sid = opened["session_id"]
            structured(await first.call_tool("session_run", {"session_id": sid, "until": 1}))
            async with http_session(url, token=token) as second:
                theirs = await second.call_tool("session_run", {"session_id": sid})
                assert theirs.is_error and "no open session" in str(theirs.content)
                assert structured(await second.call_tool("list_sessions", {})) == {"sessions": []}
            # The second client's disconnect left the first one's session open.
            step = structured(
                await first.call_tool("session_evaluate", {"session_id": sid, "code": "n"})
            )
            assert step["output"] == "2\n"
            return str(opened["run_id"])

    with http_server(tmp_path) as served:
        run_id = anyio.run(scenario, served.url, served.token)
        record = wait_closed(tmp_path, run_id)
        assert record["session"]["open"] is False
        assert record["session"]["log"][-1]["kind"] == "close"


def test_a_stdio_client_that_leaves_closes_its_sessions(tmp_path: Path) -> None:
    (tmp_path / "analysis.py").write_text(NOTEBOOK, encoding="utf-8")

    async def scenario() -> str:
        async with stdio_session(tmp_path) as client:
            opened = structured(await client.call_tool("open_session", {"path": "analysis.py"}))
            structured(await client.call_tool("session_run", {"session_id": opened["session_id"]}))
            return str(opened["run_id"])

    run_id = anyio.run(scenario)
    record = wait_closed(tmp_path, run_id)
    assert record["session"]["open"] is False


MEMORY_NOTEBOOK = """\
# %%
import time
import numpy as np
a = np.ones(40 * 2**20 // 8)
time.sleep(3)

# %%
a[:] = 2
time.sleep(3)

# %%
a[:] = 3
time.sleep(3)

# %%
a[:] = 4
time.sleep(3)
"""


def test_a_session_over_mcp_keeps_its_checkpoints_under_a_memory_limit(tmp_path: Path) -> None:
    # Each cell changes the whole 40 MB array: each checkpoint holds a version once the next
    # cell runs. Under a 60 MB limit the oldest are evicted; a restore of one says so.
    (tmp_path / "memory.py").write_text(MEMORY_NOTEBOOK, encoding="utf-8")

    async def scenario() -> None:
        args = ("--checkpoint-memory", str(60 * 2**20))
        async with stdio_session(tmp_path, args=args) as client:
            opened = structured(await client.call_tool("open_session", {"path": "memory.py"}))
            sid = opened["session_id"]
            for until in range(4):
                step = structured(
                    await client.call_tool("session_run", {"session_id": sid, "until": until})
                )
                assert step["status"] == "success", step
            [listed] = structured(await client.call_tool("list_sessions", {}))["sessions"]
            assert len(listed["checkpoints"]) <= 2, listed
            again = structured(
                await client.call_tool("session_rerun_from", {"session_id": sid, "index": 1})
            )
            assert again["restored"] == "replay"
            assert "evicted" in (again["restore_reason"] or "")
            await client.call_tool("close_session", {"session_id": sid})

    anyio.run(scenario)
