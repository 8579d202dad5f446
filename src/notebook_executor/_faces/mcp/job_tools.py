"""The job tools: ``execute`` (and the session step tools) with ``wait: false`` start a job
and answer ``{"job_id"}`` at once; ``job_status``, ``job_wait`` and ``job_cancel`` follow it
(docs/how-to/jobs.md).

A job of the MCP server is a :class:`~notebook_executor.Job` of its own warm executor: its run
goes on a thread of this process (at most one job per core runs at once, the others are
queued), and its record is an ordinary run record. Jobs are the server's, not one
connection's: a client that reconnects (to a server over HTTP) finds its job again by its id;
an ended job is forgotten after :data:`KEEP_SECONDS` (its record stays). The server is the
user's own process, on stdio or on a local port: no other user reaches its jobs. When the
server stops, its jobs are cancelled (recorded as cancelled).

``job_status`` answers within :data:`STATUS_BYTES`; ``job_wait`` waits at most
:data:`MAX_WAIT_SECONDS` (less than a client's usual request timeout), with progress
notifications while it waits, and answers the result dict once the job ended, else the status.
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import json
import threading
import time
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from ..._dispatch.jobs import Job
from ..._errors import NotebookExecutorError
from ..._types import JobStatus
from .arguments import READ_ONLY, RUNS, Table, progress_requested
from .workspace import Workspace

__all__ = ["JOB_TOOLS", "MAX_WAIT_SECONDS", "STATUS_BYTES", "ServerJobs"]

#: Most bytes of a ``job_status`` answer (its JSON).
STATUS_BYTES = 2048
#: Longest ``job_wait`` (seconds), and its default.
MAX_WAIT_SECONDS = 50.0
DEFAULT_WAIT_SECONDS = 20.0
#: Seconds an ended job is remembered; and most jobs remembered.
KEEP_SECONDS = 3600.0
MAX_JOBS = 200

JobId = Annotated[
    str, Field(description="The job_id that execute (or a session step) with wait: false gave.")
]


class ServerJobs:
    """The jobs of an MCP server, by id."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def add(self, job: Job) -> dict[str, str]:
        with self._lock:
            now = time.monotonic()
            for job_id, old in list(self._jobs.items()):
                ended = old.finished_at
                if ended is not None and now - ended > KEEP_SECONDS:
                    del self._jobs[job_id]
            ended_jobs = [j for j in self._jobs if self._jobs[j].done()]
            for job_id in ended_jobs[: max(0, len(self._jobs) - MAX_JOBS + 1)]:
                del self._jobs[job_id]
            self._jobs[job.job_id] = job
        return {"job_id": job.job_id}

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise ToolError(f"no job {job_id!r} (an ended job is forgotten after an hour)")
        return job


def brief(ws: Workspace, status: JobStatus) -> dict[str, Any]:
    """A status object within :data:`STATUS_BYTES`: the result as its summary, the tail's
    oldest lines dropped as needed."""
    shown: dict[str, Any] = dict(status)
    result = shown["result"]
    if isinstance(result, dict):
        failed = result.get("failed_cell")
        shown["result"] = {
            "run_id": result.get("run_id"),
            "status": result.get("status"),
            "error_kind": result.get("error_kind"),
            "duration_seconds": result.get("duration_seconds"),
            "failed_cell": None
            if not isinstance(failed, dict)
            else {"index": failed.get("index"), "ename": failed.get("ename")},
        }
    tail = [line[:120] for line in shown["tail"]]
    while tail and len(json.dumps({**shown, "tail": tail})) > STATUS_BYTES - 64:
        tail.pop(0)
    shown["tail"] = tail
    return shown


async def job_status(ws: Workspace, jobs: ServerJobs, job_id: JobId) -> CallToolResult:
    """The status of a job that execute (or a session step) with wait: false started:
    status (queued, running, success, error, cancelled, interrupted), cell (the running
    cell's index), elapsed_seconds, tail (the last lines of output) and, once it ended, a
    summary of its result (get_run gives it whole). Answers at once, in under 2 KB."""
    return ws.answer(brief(ws, jobs.get(job_id).status()))


async def job_wait(
    ws: Workspace,
    jobs: ServerJobs,
    job_id: JobId,
    ctx: Context,
    timeout: Annotated[
        float,
        Field(
            gt=0,
            le=MAX_WAIT_SECONDS,
            description=f"Seconds to wait at most (up to {MAX_WAIT_SECONDS:g}).",
        ),
    ] = DEFAULT_WAIT_SECONDS,
) -> CallToolResult:
    """Wait for a job to end, at most timeout seconds: answers its result dict (as
    execute's) once it ended, else its status (call job_wait again). Progress is reported
    while it waits. The loop for a long notebook: execute(wait: false) -> job_id, then
    job_wait until the answer is a result (or job_status to look, job_cancel to stop)."""
    job = jobs.get(job_id)
    wants_progress = progress_requested(ctx)
    deadline = time.monotonic() + timeout
    told = 0.0
    while not job.done() and time.monotonic() < deadline:
        if wants_progress and time.monotonic() - told >= 1.0:
            told = time.monotonic()
            now = job.status()
            cell = "" if now["cell"] is None else f", cell {now['cell']}"
            await ctx.report_progress(now["elapsed_seconds"], None, f"{now['status']}{cell}")
        await anyio.sleep(0.05)
    if not job.done():
        return ws.answer(brief(ws, job.status()))
    try:
        result = job.wait(0)
    except NotebookExecutorError as exc:
        raise ws.refusal(str(exc)) from None
    except KeyboardInterrupt:
        # Cancelled before its run started, or a session's step cancelled (no step result).
        raise ToolError("the job was cancelled before it had a result") from None
    return ws.answer(ws.present(result))


async def job_cancel(ws: Workspace, jobs: ServerJobs, job_id: JobId) -> CallToolResult:
    """Cancel a job: its running cell stops (the kernel is stopped) and the run is recorded
    as cancelled; a queued job never starts. Answers its status."""
    job = jobs.get(job_id)
    job.cancel()
    deadline = time.monotonic() + 5
    while not job.done() and time.monotonic() < deadline:
        await anyio.sleep(0.02)
    return ws.answer(brief(ws, job.status()))


#: The job tools, in the order they are listed.
JOB_TOOLS: Table = [
    (job_status, READ_ONLY),
    (job_wait, READ_ONLY),
    (job_cancel, RUNS),
]
