"""Jobs over MCP (docs/how-to/jobs.md): the official SDK's client, with a 10 s request timeout,
runs a 60 s notebook through execute(wait: false), job_status and job_wait, without one timeout."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.mcp_client import stdio_session, structured

pytestmark = [pytest.mark.kernel, pytest.mark.slow, pytest.mark.timeout(240)]

MINUTE = """\
# %% tags=["parameters"]
seconds = 60
# %%
import time
# %%
for i in range(seconds):
    print("second", i, flush=True)
    time.sleep(1)
# %%
print("done")
"""

#: The client's limit on every request, as an agent's MCP client sets one.
REQUEST_TIMEOUT = 10.0


def test_a_minute_long_notebook_through_start_status_and_wait(tmp_path: Path) -> None:
    (tmp_path / "minute.py").write_text(MINUTE)

    heard_progress: list[float] = []

    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]], int, float]:
        async def heard(progress: float, total: float | None, message: str | None) -> None:
            heard_progress.append(progress)

        async with stdio_session(tmp_path) as client:

            async def call(name: str, **arguments: Any) -> dict[str, Any]:
                answer = await client.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=REQUEST_TIMEOUT,
                    progress_callback=heard if name == "job_wait" else None,
                )
                return structured(answer)  # type: ignore[arg-type]

            started = time.monotonic()
            job = await call("execute", path="minute.py", wait=False)
            answered = time.monotonic() - started
            assert set(job) == {"job_id"}
            statuses = []
            while True:
                status = await call("job_status", job_id=job["job_id"])
                assert len(json.dumps(status)) <= 2048
                statuses.append(status)
                if status["cell"] == 2:
                    break
                await anyio.sleep(0.2)
            waits = 0
            while True:
                waits += 1
                answer = await call("job_wait", job_id=job["job_id"], timeout=8)
                if "run_id" in answer:
                    return answer, statuses, waits, answered
                assert answer["status"] == "running"
                assert answer["job_id"] == job["job_id"]
                assert len(json.dumps(answer)) <= 2048

    result, statuses, waits, answered = anyio.run(scenario)
    assert answered < 5
    assert result["status"] == "success"
    assert result["parameters"] == {"seconds": 60}
    assert result["duration_seconds"] >= 60
    assert statuses[-1]["status"] == "running"
    assert waits >= 5  # each wait within the client's 10 s
    assert len(heard_progress) >= 10  # notifications while job_wait waited


SESSION = """\
# %% tags=["parameters"]
n = 600
# %%
import time
# %%
for i in range(n):
    print("tick", i, flush=True)
    time.sleep(0.5)
"""


def test_a_session_step_is_a_job_too(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SESSION)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with stdio_session(tmp_path) as client:

            async def call(name: str, **arguments: Any) -> dict[str, Any]:
                answer = await client.call_tool(
                    name, arguments, read_timeout_seconds=REQUEST_TIMEOUT
                )
                return structured(answer)  # type: ignore[arg-type]

            session_id = (await call("open_session", path="slow.py"))["session_id"]
            job = await call("session_run", session_id=session_id, until=1, wait=False)
            assert set(job) == {"job_id"}
            first = await call("job_wait", job_id=job["job_id"], timeout=8)
            job = await call("session_run", session_id=session_id, wait=False)
            deadline = time.monotonic() + 60
            while (running := await call("job_status", job_id=job["job_id"]))["cell"] != 2:
                assert time.monotonic() < deadline
                await anyio.sleep(0.1)
            cancelled = await call("job_cancel", job_id=job["job_id"])
            await call("close_session", session_id=session_id)
            return first, running, cancelled

    first, running, cancelled = anyio.run(scenario)
    assert first["cells_run"] == [0, 1]
    assert first["status"] == "success"
    assert running["status"] == "running"
    assert cancelled["status"] == "cancelled"  # job_cancel waited for the step's end
