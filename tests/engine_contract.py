"""The engine contract as a table: what any engine makes of a notebook, run against the real
kernel engine (tests/integration/test_engine_contract.py) and the scripted one
(tests/unit/test_engine_contract.py).

Each case is a notebook whose code cells are real Python (what the kernel runs) and, per code
cell, the reply a :class:`~notebook_executor.engine.ScriptedEngine` handler gives for it (what
that cell outputs on a kernel). The expectations are checked on the outcome and the notebook
either engine leaves, so the scripted engine that unit tests rely on keeps the kernel engine's
rules: which cells run, their execution counts and outputs, where and how a run stops, and the
progress calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from notebook_executor._notebook import (
    NotebookNode,
    new_code_cell,
    new_markdown_cell,
    new_notebook,
)
from notebook_executor._run.cell_loop import run_job
from notebook_executor.engine import (
    CellFailure,
    CellHooks,
    CellReply,
    EngineOutcome,
    KernelChoice,
    RunCancelled,
    RunJob,
)

__all__ = ["CASES", "Case", "Observed", "check", "run_case", "scripted_handler"]


def stream(text: str, name: str = "stdout") -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": text}


def result(text: str, count: int) -> dict[str, Any]:
    return {
        "output_type": "execute_result",
        "data": {"text/plain": text},
        "metadata": {},
        "execution_count": count,
    }


def error(ename: str, evalue: str) -> dict[str, Any]:
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}


@dataclass(frozen=True)
class Cell:
    """A cell of a case: its type, source, tags, and the scripted engine's reply to it."""

    source: str
    reply: CellReply = ()
    cell_type: str = "code"
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    cells: tuple[Cell, ...]
    completed: list[int]
    #: (index, kind, ename, evalue) of the failure, or None.
    failure: tuple[int, str, str, str] | None = None
    exited: int | None = None
    #: Per cell index: its execution count (None: never ran).
    counts: Mapping[int, int | None] = field(default_factory=dict)
    #: Per cell index: its outputs as (output type, text); cells left out are not compared.
    outputs: Mapping[int, list[tuple[str, str]]] = field(default_factory=dict)
    cell_timeout: float | None = None


CASES: dict[str, Case] = {
    "code cells run in order; markdown is passed over": Case(
        cells=(
            Cell("# Title", cell_type="markdown"),
            Cell('print("a")', [stream("a\n")]),
            Cell("1 + 1", [result("2", 2)]),
        ),
        completed=[1, 2],
        counts={1: 1, 2: 2},
        outputs={1: [("stream", "a\n")], 2: [("execute_result", "2")]},
    ),
    "an error stops the run at its cell; later cells never run": Case(
        cells=(
            Cell("x = 1"),
            Cell('raise ValueError("bad")', [error("ValueError", "bad")]),
            Cell('print("never")', [stream("never\n")]),
        ),
        completed=[0],
        failure=(1, "cell_error", "ValueError", "bad"),
        counts={0: 1, 1: 2, 2: None},
        outputs={0: [], 2: []},
    ),
    "output before an error is kept with it": Case(
        cells=(
            Cell(
                'print("partial")\n{}["k"]',
                [stream("partial\n"), error("KeyError", "'k'")],
            ),
        ),
        completed=[],
        failure=(0, "cell_error", "KeyError", "'k'"),
        outputs={0: [("stream", "partial\n"), ("error", "KeyError")]},
    ),
    "sys.exit() ends the run early and successfully": Case(
        cells=(
            Cell('print("a")', [stream("a\n")]),
            Cell("import sys\nsys.exit()", [error("SystemExit", "")]),
            Cell('print("never")', [stream("never\n")]),
        ),
        completed=[0, 1],
        exited=1,
        counts={0: 1, 1: 2, 2: None},
        outputs={2: []},
    ),
    "skip-execution cells are passed over; blank cells complete without a count": Case(
        cells=(
            Cell('print("skipped")', [stream("skipped\n")], tags=("skip-execution",)),
            Cell("   \n"),
            Cell('print("b")', [stream("b\n")]),
        ),
        completed=[1, 2],
        counts={0: None, 1: None, 2: 1},
        outputs={0: [], 2: [("stream", "b\n")]},
    ),
    "a cell over its cell_timeout is a timeout at that cell": Case(
        cells=(
            Cell("x = 1"),
            Cell(
                "import time\ntime.sleep(60)",
                CellFailure(1, "timeout", "TimeoutError", "over", []),
            ),
            Cell('print("never")'),
        ),
        completed=[0],
        failure=(1, "timeout", "TimeoutError", ""),
        counts={2: None},
        cell_timeout=2.0,
    ),
}


def notebook(case: Case) -> NotebookNode:
    cells = []
    for cell in case.cells:
        if cell.cell_type == "markdown":
            cells.append(new_markdown_cell(cell.source))
        else:
            metadata = {"tags": list(cell.tags)} if cell.tags else {}
            cells.append(new_code_cell(cell.source, metadata=metadata))
    return new_notebook(cells)


def scripted_handler(case: Case) -> Callable[[RunJob, int], CellReply]:
    """The handler of a :class:`ScriptedEngine` that answers each cell with its reply."""

    def handler(job: RunJob, index: int) -> CellReply:
        return case.cells[index].reply

    return handler


@dataclass
class Observed:
    outcome: EngineOutcome
    nb: NotebookNode
    cancelled: bool
    starting: list[int]
    done: list[int]
    outputs: list[tuple[int, str]]


def run_case(engine: Any, case: Case, cwd: Path, env: Mapping[str, str]) -> Observed:
    """Run ``case`` on ``engine`` (a kernel engine or a scripted one) and gather what it did."""
    import sys

    starting: list[int] = []
    done: list[int] = []
    outputs: list[tuple[int, str]] = []
    job = RunJob(
        nb=notebook(case),
        kernel=KernelChoice("python3", "python", native=True, interpreter=sys.executable),
        cwd=cwd,
        env=dict(env),
        cell_timeout=case.cell_timeout,
        cancel=threading.Event(),
        hooks=CellHooks(
            on_cell_start=[lambda event: starting.append(event.index)],
            on_output=[
                lambda event: outputs.append((event.index, str(event.output["output_type"])))
            ],
            on_cell_executed=[lambda ran: done.append(ran.index) if ran.completed else None],
        ),
    )
    try:
        outcome = run_job(engine, job)
        cancelled = False
    except RunCancelled as stop:
        outcome, cancelled = stop.outcome, True
    return Observed(outcome, job.nb, cancelled, starting, done, outputs)


def _texts(cell: NotebookNode) -> list[tuple[str, str]]:
    found = []
    for output in cell.get("outputs", []):
        kind = output["output_type"]
        if kind == "stream":
            found.append((kind, output["text"]))
        elif kind == "error":
            found.append((kind, output["ename"]))
        else:
            found.append((kind, output["data"]["text/plain"]))
    return found


def check(case: Case, seen: Observed) -> None:
    """Assert what the contract says of ``case`` on what an engine did."""
    outcome = seen.outcome
    assert seen.cancelled is False
    assert outcome.completed == case.completed
    failure = outcome.failure
    if case.failure is None:
        assert failure is None, failure
    else:
        assert failure is not None
        index, kind, ename, evalue = case.failure
        assert (failure.index, failure.kind, failure.ename) == (index, kind, ename)
        if evalue:
            assert failure.evalue == evalue
    assert outcome.exited == case.exited
    cells: Sequence[NotebookNode] = seen.nb.cells
    for index, count in case.counts.items():
        assert cells[index].get("execution_count") == count, index
    for index, expected in case.outputs.items():
        assert _texts(cells[index]) == expected, index
    # Progress: each cell that completed was announced before it ran, then reported done.
    assert seen.done == case.completed
    reached = _last_reached(case)
    runnable = [i for i, c in enumerate(case.cells) if c.cell_type == "code" and not c.tags]
    assert seen.starting == [i for i in runnable if i <= reached]
    assert set(outcome.cell_started) == set(seen.starting)
    # The live output hook saw every output the notebook kept, in order.
    kept = [
        (i, str(o["output_type"])) for i, cell in enumerate(cells) for o in cell.get("outputs", [])
    ]
    assert seen.outputs == kept


def _last_reached(case: Case) -> int:
    """The index of the last cell a run reaches: the failing or exiting one, or the last."""
    if case.failure is not None:
        return case.failure[0]
    if case.exited is not None:
        return case.exited
    return len(case.cells) - 1


@dataclass
class SessionObserved:
    """What a session's first step did with a case's notebook, and its run record's cells."""

    step: Mapping[str, Any]
    cells: list[NotebookNode]


def run_session_case(engine: Any, case: Case, folder: Path) -> SessionObserved:
    """Open a session on ``case``'s notebook on ``engine`` (through the executor, which closes
    it), run one step over every cell, and read the session's run record."""
    import nbformat

    from notebook_executor import NotebookExecutor

    path = folder / "case.ipynb"
    nbformat.write(nbformat.from_dict(notebook(case)), str(path))
    with (
        NotebookExecutor(runs_dir=folder / "runs", engine=engine) as ex,
        ex.open_session(path, cwd=folder, cell_timeout=case.cell_timeout) as session,
    ):
        step = session.run()
        run_id = session.run_id
    [record] = (folder / "runs").rglob(f"{run_id}.ipynb")
    nb = nbformat.read(str(record), as_version=4)
    return SessionObserved(step, list(nb.cells))


def check_session(case: Case, seen: SessionObserved) -> None:
    """Assert what the contract says of ``case`` on what a session's step did."""
    step = seen.step
    ran = list(case.completed)
    if case.failure is None:
        assert step["status"] == "success", step
    else:
        index, kind, ename, _ = case.failure
        assert step["status"] == "error", step
        assert (step["error_kind"], step["failed_cell"]["index"]) == (kind, index)
        assert step["failed_cell"]["ename"] == ename
        ran.append(index)
    assert step["cells_run"] == ran
    for index, count in case.counts.items():
        assert seen.cells[index].get("execution_count") == count, index
    for index, expected in case.outputs.items():
        assert _texts(seen.cells[index]) == expected, index
