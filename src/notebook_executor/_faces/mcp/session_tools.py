"""The session tools: a live kernel a client steps through (``open_session``, ``session_run``,
``session_evaluate``, ``session_rerun_from``, ``close_session``, ``list_sessions``).

A session belongs to the client connection that opened it: another client cannot see or use
it, and it is closed when its connection ends (the SDK unwinds the connection's exit stack, on
stdio and on streamable HTTP alike), as well as when the server stops.
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import threading
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from ..._dispatch.jobs import Job
from ..._session.session import Session
from ..._types import USE_DEFAULT
from .arguments import READ_ONLY, RUNS, Table, client_values, within
from .job_tools import ServerJobs
from .workspace import Workspace

__all__ = ["SESSION_TOOLS", "ClientSessions"]

#: Most sessions one client may hold open at once.
MAX_SESSIONS_PER_CLIENT = 8

#: Most bytes the checkpoints of one session may hold, unless the server is told otherwise
#: (``notebook-executor mcp --checkpoint-memory``): a client's sessions hold at most 8 GiB.
CHECKPOINT_MEMORY = 1 << 30

SessionId = Annotated[str, Field(description="The session_id open_session gave.")]


class ClientSessions:
    """The open sessions of a server, each with the connection that owns it."""

    def __init__(self) -> None:
        self._owned: dict[str, tuple[object, Session]] = {}
        self._lock = threading.Lock()

    def add(self, owner: object, session: Session) -> None:
        with self._lock:
            self._owned[session.id] = (owner, session)

    def count(self, owner: object) -> int:
        with self._lock:
            return sum(1 for who, s in self._owned.values() if who is owner and not s.closed)

    def get(self, owner: object, session_id: str) -> Session:
        """The open session ``session_id`` of ``owner``; another client's is not found."""
        with self._lock:
            found = self._owned.get(session_id)
        if found is None or found[0] is not owner or found[1].closed:
            raise ToolError(f"no open session {session_id!r} of this client")
        return found[1]

    def of(self, owner: object) -> list[Session]:
        with self._lock:
            return [s for who, s in self._owned.values() if who is owner and not s.closed]

    def forget(self, session: Session) -> None:
        with self._lock:
            self._owned.pop(session.id, None)

    def close_all(self, owner: object) -> None:
        """Close every session of ``owner`` (its connection ended)."""
        for session in self.of(owner):
            session.close()
            self.forget(session)


def _owner(sessions: ClientSessions, ctx: Context) -> object:
    """The client connection of a request; its sessions close when it ends."""
    # The SDK hands low-level handlers the client's Connection (its per-connection state
    # and exit stack); MCPServer's context reaches it through the request's session only.
    connection = getattr(ctx.request_context.session, "_connection", None)
    if connection is None:
        raise ToolError("sessions need a client connection (this transport has none)")
    if not connection.state.get("notebook_executor.sessions"):
        connection.state["notebook_executor.sessions"] = True

        async def close_sessions() -> None:
            import anyio.to_thread

            await anyio.to_thread.run_sync(sessions.close_all, connection)

        connection.exit_stack.push_async_callback(close_sessions)
    return connection


def _step_answer(ws: Workspace, step: Any) -> CallToolResult:
    return ws.answer(ws.present(dict(step)))


#: ``wait`` of the step tools: as ``execute``'s.
Wait = Annotated[
    bool,
    Field(
        description="false: start the step as a job and answer {job_id} at once; follow it "
        "with job_wait (its answer: the step result), job_status, job_cancel."
    ),
]


async def open_session(
    ws: Workspace,
    sessions: ClientSessions,
    path: Annotated[str, Field(description="Notebook source, relative to the root.")],
    ctx: Context,
    parameters: Annotated[
        dict[str, Any] | None,
        Field(description="Values for the notebook's declared parameters."),
    ] = None,
    timeout: Annotated[
        float | None, Field(gt=0, description="Limit in seconds for each step.")
    ] = None,
    cell_timeout: Annotated[
        float | None, Field(gt=0, description="Limit in seconds for each cell.")
    ] = None,
    request: Annotated[
        str | None, Field(description="Why the session is opened; kept in its run record.")
    ] = None,
    secrets: Annotated[
        list[str] | None,
        Field(
            description="Names of the server's environment variables handed to the kernel "
            "as secrets (only those the server's operator allows)."
        ),
    ] = None,
    idle_timeout: Annotated[
        float, Field(gt=0, le=86_400, description="Seconds idle before the session closes.")
    ] = 1800,
) -> CallToolResult:
    """Start a live kernel on a notebook, to step through it with session_run,
    session_evaluate and session_rerun_from (time travel after an edit). Nothing runs yet.
    The session is a run record (run_id); it closes with close_session, when idle, or
    when this client disconnects."""
    who = _owner(sessions, ctx)
    if sessions.count(who) >= MAX_SESSIONS_PER_CLIENT:
        raise ToolError(f"this client has {MAX_SESSIONS_PER_CLIENT} open sessions: close one first")
    within(ws.root, path)
    # Confined again at every read: a session reads its notebook again at each step.
    target = ws.root.confined(path)
    secret_values = ws.secrets(secrets)

    def start() -> Session:
        return ws.executor.open_session(
            target,
            parameters=client_values(parameters),
            timeout=USE_DEFAULT if timeout is None else timeout,
            cell_timeout=USE_DEFAULT if cell_timeout is None else cell_timeout,
            request=request,
            secrets=secret_values,
            idle_timeout=idle_timeout,
            checkpoint_memory=ws.checkpoint_memory or CHECKPOINT_MEMORY,
        )

    session = await ws.call(start)
    sessions.add(who, session)
    return ws.answer({"session_id": session.id, "run_id": session.run_id, "path": path})


async def session_run(
    ws: Workspace,
    sessions: ClientSessions,
    jobs: ServerJobs,
    session_id: SessionId,
    ctx: Context,
    until: Annotated[
        int | None,
        Field(ge=0, description="Last cell index to run (inclusive); all by default."),
    ] = None,
    wait: Wait = True,
) -> CallToolResult:
    """Run the next code cells of the session's notebook, as the file is now, up to
    until. A failing cell ends the step (status error, failed_cell); the session stays
    usable. Answers with the outputs of the cells run and stale_cells (edited after they
    ran). A long step: wait false answers {job_id} at once (then job_wait)."""
    session = sessions.get(_owner(sessions, ctx), session_id)
    if not wait:
        return ws.answer(jobs.add(Job(lambda cancel: session.run(until=until, cancel=cancel))))
    step = await ws.call(lambda: session.run(until=until))
    return _step_answer(ws, step)


async def session_rerun_from(
    ws: Workspace,
    sessions: ClientSessions,
    jobs: ServerJobs,
    session_id: SessionId,
    index: Annotated[int, Field(ge=0, description="Cell index to run from.")],
    ctx: Context,
    until: Annotated[
        int | None, Field(ge=0, description="Last cell index to run; all by default.")
    ] = None,
    wait: Wait = True,
) -> CallToolResult:
    """Put the kernel back as it was right after the last code cell before index ran
    (from a checkpoint when it can; earlier cells edited since are run again), then run
    from index. restored says how: checkpoint or replay (with restore_reason). wait
    false: a job, as session_run's."""
    session = sessions.get(_owner(sessions, ctx), session_id)
    if not wait:
        return ws.answer(
            jobs.add(Job(lambda cancel: session.rerun_from(index, until=until, cancel=cancel)))
        )
    step = await ws.call(lambda: session.rerun_from(index, until=until))
    return _step_answer(ws, step)


async def session_evaluate(
    ws: Workspace,
    sessions: ClientSessions,
    session_id: SessionId,
    code: Annotated[str, Field(description="Python code to run in the session's state.")],
    ctx: Context,
) -> CallToolResult:
    """Run code in the session's current state, outside the notebook (to inspect a
    variable, say): status, output (bounded text) and error."""
    session = sessions.get(_owner(sessions, ctx), session_id)
    answer = await ws.call(lambda: session.evaluate(code))
    return ws.answer({"session_id": session_id, **answer})


async def close_session(
    ws: Workspace, sessions: ClientSessions, session_id: SessionId, ctx: Context
) -> CallToolResult:
    """End a session's kernel and checkpoints, and finish its run record."""
    session = sessions.get(_owner(sessions, ctx), session_id)
    await ws.call(session.close)
    sessions.forget(session)
    return ws.answer({"session_id": session_id, "run_id": session.run_id, "closed": True})


async def list_sessions(ws: Workspace, sessions: ClientSessions, ctx: Context) -> CallToolResult:
    """This client's open sessions: session_id, run_id, and the cells whose state can be
    restored at once (checkpoints)."""
    found = [
        {"session_id": s.id, "run_id": s.run_id, "checkpoints": s.checkpoints}
        for s in sessions.of(_owner(sessions, ctx))
    ]
    return ws.answer({"sessions": found})


#: The session tools, in the order they are listed.
SESSION_TOOLS: Table = [
    (open_session, RUNS),
    (session_run, RUNS),
    (session_rerun_from, RUNS),
    (session_evaluate, RUNS),
    (close_session, RUNS),
    (list_sessions, READ_ONLY),
]
