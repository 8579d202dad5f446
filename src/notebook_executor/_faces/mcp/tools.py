"""The server's tools and resources, each a thin call into one warm NotebookExecutor.

Every tool answers through :meth:`Workspace.answer <.workspace.Workspace.answer>` (small JSON,
redacted, cut to the budget); bad input of any kind (a path outside the root, an unknown run,
a parameter that does not fit) is a tool error, never a crash.
Blocking work runs on worker threads, so a long run does not hold up other requests.

Each tool is a module-level function, listed in :data:`TOOLS` (with the job tools of
:mod:`.job_tools` and the session tools of :mod:`.session_tools`); :func:`server_tools` gives
them what one server's tools share (see :mod:`.arguments`).
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time to
# build each tool's input schema.

import logging
import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult
from pydantic import Field

from ..._errors import NotebookExecutorError, ParameterError
from ..._run.options import option_help
from ..._sources.bounded import unencodable
from ..._types import USE_DEFAULT, RunResult
from ...engine import RunCancelled
from .arguments import (
    EDITS,
    READ_ONLY,
    RUNS,
    StrictTool,
    Table,
    client_values,
    progress_requested,
    strict_tool,
    within,
)
from .budget import fit_lists
from .job_tools import JOB_TOOLS, ServerJobs
from .session_tools import SESSION_TOOLS, ClientSessions
from .views import IMAGE_MIMES, output_image, page_cells, scrap_view
from .workspace import Workspace

__all__ = ["EXECUTE_OPTIONS", "TOOLS", "add_resources", "server_tools"]

logger = logging.getLogger(__name__)

#: Most notebooks ``list_notebooks`` names in one answer.
_MAX_LISTED = 200
#: At most this many files said to be skipped (see list_notebooks).
_MAX_SKIPPED = 50

#: The run options (:data:`~notebook_executor._run.options.RUN_OPTIONS`) the ``execute`` tool
#: offers, described by their help there. The others are the operator's, not a client's: an
#: ``output_path`` or a ``cwd`` would reach outside the root, ``env`` into the kernel's
#: environment. ``secrets`` are names of the server's variables the operator allows.
EXECUTE_OPTIONS = (
    "parameters",
    "timeout",
    "request",
    "secrets",
    "edits",
    "environment",
    "reuse",
)

#: The filters the run-listing tools share.
NotebookFilter = Annotated[
    str | None, Field(description="Only runs of this notebook (relative to the root).")
]
StatusFilter = Annotated[
    str | None,
    Field(pattern="^(success|error|running)$", description="Only runs with this status."),
]


def server_tools(ws: Workspace) -> list[StrictTool]:
    """Every tool, working in ``ws``; each refuses arguments it does not take."""
    shared = {"ws": ws, "jobs": ServerJobs(), "sessions": ClientSessions()}
    return [strict_tool(fn, how, ws.shown, shared) for fn, how in TOOLS]


async def list_notebooks(
    ws: Workspace,
    folder: Annotated[str, Field(description="Folder to list, relative to the root.")] = ".",
) -> CallToolResult:
    """List the notebook sources under a folder of the root: .ipynb files, scripts with
    '# %%' cells or a jupytext header, and markdown notebooks (a jupytext header, MyST
    cells or a logbook front matter). `skipped` names files that look like notebooks and
    are not, and why (a '# %%' inside a string is no cell marker)."""
    base = Path(within(ws.root, folder))
    if not base.is_dir():
        raise ToolError(f"{folder!r} is not a folder")

    def scan() -> dict[str, Any]:
        found: list[str] = []
        more = False
        unnamed = 0
        runs = ws.executor.runs_dir.resolve()
        skipped: list[dict[str, str]] = []

        def skip(path: Path, why: str) -> None:
            shown = ws.root.relative(path)
            if len(skipped) < _MAX_SKIPPED and unencodable(shown) is None:
                skipped.append({"path": shown, "why": why})

        for path in ws.root.notebooks(base, runs, skipped=skip):
            shown = ws.root.relative(path)
            if unencodable(shown) is not None:
                # A name that is not UTF-8 text cannot be sent, nor run (the record names
                # its source as text): counted, not listed.
                unnamed += 1
                continue
            if len(found) == _MAX_LISTED:
                more = True
                break
            found.append(shown)
        answer: dict[str, Any] = {"folder": ws.root.relative(base), "notebooks": found}
        if skipped:
            # Files that look like notebooks and are not (a test module holding a
            # notebook's text in a string): said, so that their absence is no mystery.
            answer["skipped"] = skipped
        notes = []
        if more:
            notes.append(f"only the first {_MAX_LISTED} are listed; list a subfolder")
        if unnamed:
            notes.append(
                f"{unnamed} notebook(s) whose file names are not UTF-8 text are not listed: "
                "rename them to use them"
            )
        if notes:
            answer["note"] = "; ".join(notes)
        return answer

    return ws.answer(await ws.call(scan))


async def inspect_parameters(
    ws: Workspace,
    path: Annotated[str, Field(description="Notebook source, relative to the root.")],
) -> CallToolResult:
    """The parameters a notebook declares: name, type, default, help text, required; and
    the dependencies it declares (its environment: dependencies, requires-python), or
    null."""
    target = within(ws.root, path)
    declared = await ws.call(lambda: ws.executor.inspect_parameters(target))
    environment = await ws.call(lambda: ws.executor.inspect_environment(target))
    return ws.answer({"path": path, "parameters": declared, "environment": environment})


async def read_notebook(
    ws: Workspace,
    path: Annotated[str | None, Field(description="Notebook source, relative to the root.")] = None,
    run_id: Annotated[
        str | None, Field(description="Read a past run's executed notebook instead.")
    ] = None,
    start: Annotated[int, Field(ge=0, description="Index of the first cell to show.")] = 0,
    limit: Annotated[int, Field(ge=1, le=200, description="Most cells to show.")] = 20,
    output_start: Annotated[
        int, Field(ge=0, description="Character offset into each text output (to page).")
    ] = 0,
    output_chars: Annotated[
        int, Field(ge=100, le=8000, description="Most characters of each output shown.")
    ] = 2000,
) -> CallToolResult:
    """Read cells of a notebook source or of a run, with their outputs.

    Cell indices are those of failed_cell.index and edit_cell. Long outputs are cut with a
    marker giving the output_start to read on; images are given as run:// resource URIs,
    never inline. The answer says next_start when more cells follow."""
    if (path is None) == (run_id is None):
        raise ToolError("give exactly one of path or run_id")
    if run_id is not None:
        target = ws.run_path(run_id)
        reread = f"read_notebook(run_id={run_id!r}"
    else:
        target = Path(within(ws.root, path or ""))
        reread = f"read_notebook(path={path!r}"
    nb = await ws.call(lambda: ws.executor.read_notebook(target))
    page = page_cells(
        nb,
        start=start,
        limit=limit,
        output_start=output_start,
        output_chars=output_chars,
        run_id=run_id,
        reread=reread,
    )
    head: dict[str, Any] = {"run_id": run_id} if run_id is not None else {"path": path}
    return ws.answer({**head, **page})


async def edit_cell(
    ws: Workspace,
    path: Annotated[str, Field(description="Notebook source, relative to the root.")],
    index: Annotated[int, Field(ge=0, description="Cell index (as in failed_cell.index).")],
    source: Annotated[str, Field(description="The cell's new source text.")],
    expect: Annotated[
        str | None,
        Field(description="The source you read; the edit is refused if the cell changed."),
    ] = None,
) -> CallToolResult:
    """Replace one cell's source in the file, in the file's own format; every other cell
    stays byte-identical."""
    target = within(ws.root, path)
    nb = await ws.call(lambda: ws.executor.edit_cell(target, index, source, expect=expect))
    return ws.answer({"path": path, "edited": index, "cells_total": len(nb.cells)})


async def insert_cell(
    ws: Workspace,
    path: Annotated[str, Field(description="Notebook source, relative to the root.")],
    index: Annotated[int, Field(ge=0, description="Position of the new cell.")],
    source: Annotated[str, Field(description="The new cell's source text.")],
    cell_type: Annotated[
        str, Field(pattern="^(code|markdown|raw)$", description="code, markdown or raw.")
    ] = "code",
) -> CallToolResult:
    """Insert a cell at a position in the file, in the file's own format."""
    target = within(ws.root, path)
    nb = await ws.call(lambda: ws.executor.insert_cell(target, index, source, cell_type=cell_type))
    return ws.answer(
        {"path": path, "inserted": index, "cell_type": cell_type, "cells_total": len(nb.cells)}
    )


async def delete_cell(
    ws: Workspace,
    path: Annotated[str, Field(description="Notebook source, relative to the root.")],
    index: Annotated[int, Field(ge=0, description="Index of the cell to delete.")],
    expect: Annotated[
        str | None,
        Field(description="The source you read; refused if the cell changed since."),
    ] = None,
) -> CallToolResult:
    """Delete one cell from the file, in the file's own format."""
    target = within(ws.root, path)
    nb = await ws.call(lambda: ws.executor.delete_cell(target, index, expect=expect))
    return ws.answer({"path": path, "deleted": index, "cells_total": len(nb.cells)})


async def execute(
    ws: Workspace,
    jobs: ServerJobs,
    path: Annotated[str, Field(description="Notebook source, relative to the root.")],
    ctx: Context,
    parameters: Annotated[
        dict[str, Any] | None, Field(description=option_help("parameters"))
    ] = None,
    timeout: Annotated[float | None, Field(gt=0, description=option_help("timeout"))] = None,
    request: Annotated[str | None, Field(description=option_help("request"))] = None,
    secrets: Annotated[
        list[str] | None,
        Field(
            description="Names of the server's environment variables handed to the kernel "
            "as secrets (only those the server's operator allows); their values never "
            "appear in a record or an answer."
        ),
    ] = None,
    edits: Annotated[
        list[dict[str, Any]] | None,
        Field(
            max_length=100,
            description=option_help("edits"),
        ),
    ] = None,
    environment: Annotated[
        Literal["declared", "current"] | None,
        Field(description=option_help("environment")),
    ] = None,
    reuse: Annotated[bool | None, Field(description=option_help("reuse"))] = None,
    wait: Annotated[
        bool,
        Field(
            description="false: start a job and answer {job_id} at once (for a run longer "
            "than a request may last); follow it with job_wait, job_status, job_cancel."
        ),
    ] = True,
) -> CallToolResult:
    """Run a notebook on a fresh kernel and return its result dict: status, error_kind,
    failed_cell (index, source, ename, evalue, traceback), scraps, run_id, edited_cells.
    A failure inside the notebook is a result, not an error. Progress is reported per
    cell; cancelling the request stops the kernel and records the run as cancelled. With
    edits, some cells are replaced for this run only (the notebook file stays as it is).
    A long run: wait false answers {job_id} at once; then job_wait (again while it
    answers a status) gives the result."""
    within(ws.root, path)
    # Confined again where the executor reads it.
    target = ws.root.confined(path)
    secret_values = ws.secrets(secrets)
    if not wait:
        job = ws.executor.submit(
            target,
            parameters=client_values(parameters),
            timeout=USE_DEFAULT if timeout is None else timeout,
            request=request,
            secrets=secret_values,
            edits=edits,
            environment=environment,
            reuse=reuse,
        )
        return ws.answer(jobs.add(job))
    # Progress costs a hop to the event loop per cell: only when the client asked for it.
    wants_progress = progress_requested(ctx)
    token = anyio.lowlevel.current_token()
    send, receive = anyio.create_memory_object_stream[tuple[int, int]](math.inf)
    cancel, done = threading.Event(), threading.Event()

    def on_cell(cells_done: int, total: int) -> None:
        anyio.from_thread.run_sync(send.send_nowait, (cells_done, total), token=token)

    def run() -> RunResult | None:
        try:
            return ws.executor.execute(
                target,
                parameters=client_values(parameters),
                timeout=USE_DEFAULT if timeout is None else timeout,
                request=request,
                secrets=secret_values,
                edits=edits,  # type: ignore[arg-type]  # checked by the executor
                environment=environment,
                reuse=reuse,
                on_cell=on_cell if wants_progress else None,
                cancel=cancel,
            )
        except RunCancelled:
            return None
        finally:
            done.set()

    async def report() -> None:
        async with receive:
            async for cells_done, total in receive:
                await ctx.report_progress(
                    cells_done, total, f"{cells_done}/{total} code cells done"
                )

    failure: NotebookExecutorError | None = None
    result: RunResult | None = None
    async with anyio.create_task_group() as group:
        if wants_progress:
            group.start_soon(report)
        try:
            result = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            # The client cancelled: stop the kernel, and let the run record say so
            # before the request ends.
            cancel.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(done.wait)
            raise
        except NotebookExecutorError as exc:
            failure = exc
        finally:
            send.close()
    if isinstance(failure, ParameterError):
        failure = ws.explain_env(target, failure)
    if failure is not None:
        raise ws.refusal(str(failure))
    if result is None:
        raise ToolError("the run was cancelled")
    return ws.answer(ws.present(result))


async def get_run(
    ws: Workspace,
    run_id: Annotated[str, Field(description="A run id, as execute or list_runs gave it.")],
) -> CallToolResult:
    """The result dict of a past run: status, error_kind, failed_cell, parameters, scraps,
    timing; a failed run that was resumed also names the runs that resumed it
    (resumed_by)."""

    def found() -> dict[str, Any]:
        result = dict(ws.present(ws.executor.get_run(run_id)))
        if result.get("status") != "success":
            resumed_by = ws.executor.resumed_by(run_id)
            if resumed_by:
                result["resumed_by"] = resumed_by[:20]
        return result

    return ws.answer(await ws.call(found))


async def list_runs(
    ws: Workspace,
    notebook: NotebookFilter = None,
    status: StatusFilter = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Most runs listed.")] = 20,
) -> CallToolResult:
    """Past runs, newest first, as short summaries (get_run gives one in full)."""
    wanted = within(ws.root, notebook) if notebook is not None else None
    found = await ws.call(lambda: ws.executor.runs(notebook=wanted, status=status, limit=limit))
    return ws.answer({"runs": [_summary(ws.present(result)) for result in found]})


async def search_runs(
    ws: Workspace,
    query: Annotated[str, Field(min_length=1, description="Words to find in the runs.")],
    notebook: NotebookFilter = None,
    status: StatusFilter = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Most hits.")] = 20,
) -> CallToolResult:
    """Full-text search over every run record (request, parameters, code, narrative,
    outputs, errors, scraps); hits best first with where they matched and a snippet."""
    wanted = within(ws.root, notebook) if notebook is not None else None
    hits = await ws.call(
        lambda: ws.executor.search(query, notebook=wanted, status=status, limit=limit)
    )
    return ws.answer({"hits": [ws.present(hit) for hit in hits]})


async def digest(
    ws: Workspace,
    notebook: NotebookFilter = None,
    since: Annotated[
        str | None,
        Field(
            max_length=64,
            description="Only runs started at or after this ISO date or datetime.",
        ),
    ] = None,
    limit_chars: Annotated[
        int, Field(ge=400, le=16000, description="Longest markdown page, in characters.")
    ] = 4000,
) -> CallToolResult:
    """What earlier runs of a notebook (or of every notebook) found, in one page: runs by
    status, parameter values tried, the latest scraps and how numeric scraps moved,
    recurring errors with their cell and count, requests and edit notes. Read it before
    running a notebook again; every item names run ids for get_run and search_runs."""
    wanted = within(ws.root, notebook) if notebook is not None else None
    found: dict[str, Any] = dict(
        await ws.call(lambda: ws.executor.digest(wanted, since=since, limit_chars=limit_chars))
    )
    # Paths as the caller names them (the text is made relative the same way).
    for key in ("parameters", "scraps", "trends", "errors", "notes"):
        found[key] = [
            {**item, "notebook": ws.notebook_name(item["notebook"])} for item in found[key]
        ]
    # Over many notebooks the lists are long: they are cut (counted in "omitted"), the
    # page (text) is kept whole.
    return ws.answer(
        {**found, "notebook": notebook, "text": ws.shown(found["text"])}, prefit=fit_lists
    )


async def collect_outputs(
    ws: Workspace,
    run_id: Annotated[str, Field(description="A run id.")],
) -> CallToolResult:
    """The scraps a run recorded (scrapbook glue), decoded; a DataFrame is summarized as
    its shape, columns and first rows."""
    ws.run_path(run_id)
    scraps = await ws.call(lambda: ws.executor.collect_outputs(run_id))
    return ws.answer(
        {"run_id": run_id, "scraps": {name: scrap_view(v) for name, v in scraps.items()}}
    )


async def diff(
    ws: Workspace,
    a: Annotated[str, Field(description="A notebook (relative to the root) or a run id.")],
    b: Annotated[str, Field(description="A notebook (relative to the root) or a run id.")],
    outputs: Annotated[bool, Field(description="Compare outputs too (notebooks only).")] = False,
) -> CallToolResult:
    """What differs between two runs (status, parameters, scraps, cells) or two notebooks
    (cells added, removed, modified, with unified diffs of their sources)."""
    (first, first_run), (second, second_run) = ws.path_or_run(a), ws.path_or_run(b)
    if first_run and second_run and not outputs:
        found: Mapping[str, Any] = await ws.call(lambda: ws.executor.diff_runs(first, second))
    else:
        found = await ws.call(lambda: ws.executor.diff_notebooks(first, second, outputs=outputs))
    return ws.answer({"a": a, "b": b, **found})


async def validate(
    ws: Workspace,
    path: Annotated[str, Field(description="Notebook source, relative to the root.")],
    execute: Annotated[bool, Field(description="Also run it, honouring nbval markers.")] = False,
) -> CallToolResult:
    """Check a notebook: schema, parameters cell, one language, kernel, declared
    environment; with execute=true also run it and compare NBVAL_CHECK_OUTPUT cells."""
    target = within(ws.root, path)
    found = await ws.call(lambda: ws.executor.validate(target, execute=execute))
    return ws.answer({"path": path, **found})


async def reproduce(
    ws: Workspace,
    run_id: Annotated[str, Field(description="A run id, as execute or list_runs gave it.")],
) -> CallToolResult:
    """Run a past run's source again with its parameters and compare every cell's
    outputs with the record's: reproduced (bool), run_id (the new run),
    first_difference (null or {cell, diff}), inputs_changed (files, packages, commit)."""
    ws.run_path(run_id)
    found = await ws.call(lambda: ws.executor.reproduce(run_id))
    return ws.answer(found)


async def resume(
    ws: Workspace,
    run_id: Annotated[
        str, Field(description="A failed run's id, as execute or list_runs gave it.")
    ],
    edits: Annotated[
        list[dict[str, Any]] | None,
        Field(max_length=100, description=option_help("edits")),
    ] = None,
    timeout: Annotated[float | None, Field(gt=0, description=option_help("timeout"))] = None,
) -> CallToolResult:
    """Go on with a failed, timed-out, cancelled or interrupted run from its failed cell:
    the notebook's file as it is now, the earlier run's parameters, the state before the
    failed cell read back from its checkpoints (an edit before it goes back further). The
    result dict of a new run: resumed_from, reused_cells, state_notes (what was not undone,
    why a checkpoint was not used). A run that succeeded is refused."""
    ws.run_path(run_id)
    found = await ws.call(
        lambda: ws.executor.resume(
            run_id,
            edits=edits,  # type: ignore[arg-type]  # checked by the executor
            timeout=USE_DEFAULT if timeout is None else timeout,
        )
    )
    return ws.answer(dict(found))


#: Every tool, in the order they are listed.
TOOLS: Table = [
    (list_notebooks, READ_ONLY),
    (inspect_parameters, READ_ONLY),
    (read_notebook, READ_ONLY),
    (edit_cell, EDITS),
    (insert_cell, EDITS),
    (delete_cell, EDITS),
    *JOB_TOOLS,
    (execute, RUNS),
    (get_run, READ_ONLY),
    (list_runs, READ_ONLY),
    (search_runs, READ_ONLY),
    (digest, READ_ONLY),
    (collect_outputs, READ_ONLY),
    (diff, READ_ONLY),
    (validate, RUNS),
    (reproduce, RUNS),
    (resume, RUNS),
    *SESSION_TOOLS,
]


def add_resources(server: MCPServer[Any], ws: Workspace) -> None:
    """Register the run image resources on ``server``."""
    for mime, name in IMAGE_MIMES.items():
        _add_image_resource(server, ws, mime, name)


def _add_image_resource(server: MCPServer[Any], ws: Workspace, mime: str, name: str) -> None:
    def read(run_id: str, cell: str, output: str) -> bytes | str:
        try:
            path = ws.run_path(run_id)
            nb = ws.executor.read_notebook(path)
            image = output_image(nb, int(cell), int(output), mime)
        except (ToolError, NotebookExecutorError, ValueError) as exc:
            raise ResourceError(str(exc)) from None
        if image is None:
            raise ResourceError(f"run {run_id} has no {mime} at cell {cell}, output {output}")
        return image

    server.resource(
        f"run://{{run_id}}/cells/{{cell}}/outputs/{{output}}/{name}",
        name=f"run-{name.replace('.', '-')}",
        description=f"A {mime} image output of a run's cell (cells numbered as in the source).",
        mime_type=mime,
    )(read)


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    failed = result.get("failed_cell")
    return {
        "run_id": result.get("run_id"),
        "notebook": result.get("notebook"),
        "status": result.get("status"),
        "error_kind": result.get("error_kind"),
        "request": result.get("request"),
        "started_at": result.get("started_at"),
        "duration_seconds": result.get("duration_seconds"),
        "parameters": result.get("parameters"),
        "failed_cell": None
        if not isinstance(failed, dict)
        else {"index": failed.get("index"), "ename": failed.get("ename")},
    }
