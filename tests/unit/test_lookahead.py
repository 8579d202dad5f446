"""The cell loop sends each next cell ahead to a kernel that can take it, and only where safe.

A kernel that follows :class:`~notebook_executor.engine.SupportsLookahead` is asked to send
the next code cell as one completes; the loop then asks for that cell next, or stops the
kernel (a cancel, the deadline). Observers learn that the next cell was sent
(``CellRan.next_sent``), and the durable checkpoints' keeper writes no state then (it would
hold part of the next cell) and says until when it writes none (``quiet_until``), which
bounds the lookahead. A session's loop sends nothing ahead. No kernel here: the real
kernel's side is ``tests/integration/test_lookahead_kernel.py``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from notebook_executor._checkpoints.keeper import Keeper, Policy
from notebook_executor._notebook import new_code_cell, new_markdown_cell, new_notebook
from notebook_executor._run.cell_loop import Limits, run_cells, run_job
from notebook_executor.engine import (
    CellEnd,
    CellHooks,
    CellRan,
    EngineKernel,
    EngineOutcome,
    KernelChoice,
    NotebookNode,
    RunCancelled,
    RunJob,
    SupportsLookahead,
)


class AheadKernel:
    """Completes every cell; says it sent the next one when asked to."""

    def __init__(self, calls: list[Any], *, seconds: float = 0.0, fails: int | None = None):
        self.calls = calls
        self.seconds = seconds
        self.fails = fails
        self.info: dict[str, Any] = {}
        self.sent: int | None = None

    def _end(self, index: int) -> CellEnd:
        time.sleep(self.seconds)
        if index == self.fails:
            return CellEnd("error", {"content": {"ename": "E", "evalue": "x"}}, idle=True)
        return CellEnd("ok", idle=True)

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        assert self.sent in (None, index), "a cell sent ahead was not asked for next"
        self.sent = None
        self.calls.append(("cell", index))
        return self._end(index)

    def run_cell_then(
        self,
        nb: NotebookNode,
        index: int,
        limit: float | None,
        then: int,
        *,
        before: float | None = None,
    ) -> CellEnd:
        assert self.sent in (None, index), "a cell sent ahead was not asked for next"
        self.sent = None
        self.calls.append(("cell", index, "then", then, before))
        end = self._end(index)
        if end.how == "ok":
            self.sent = then
            end.next_sent = True
        return end

    def save_widgets(self, nb: NotebookNode) -> None:
        pass

    def stop(self) -> None:
        self.calls.append("stop")

    def close(self, *, clean: bool) -> None:
        self.calls.append(("close", clean))


class AheadEngine:
    def __init__(self, **kernel: Any) -> None:
        self.calls: list[Any] = []
        self.kernel = kernel

    def open(self, job: RunJob) -> EngineKernel:
        return AheadKernel(self.calls, **self.kernel)

    def close(self) -> None:
        pass


def _nb(*sources: str) -> NotebookNode:
    cells = [new_markdown_cell(s[1:]) if s.startswith("#") else new_code_cell(s) for s in sources]
    return new_notebook(cells=cells)


def _job(nb: NotebookNode, tmp_path: Path, **options: Any) -> RunJob:
    choice = KernelChoice(name="python3", language="python", native=True)
    return RunJob(nb, choice, tmp_path, {}, **options)


def test_the_kernel_follows_the_protocol() -> None:
    assert isinstance(AheadKernel([]), SupportsLookahead)


def test_each_cell_sends_the_next_code_cell_but_not_a_blank_one(tmp_path: Path) -> None:
    engine = AheadEngine()
    told: list[tuple[int, bool]] = []
    nb = _nb("a = 1", "# note", "b = 2", "", "c = 3", "d = 4")
    hooks = CellHooks(on_cell_executed=[lambda ran: told.append((ran.index, ran.next_sent))])
    outcome = run_job(engine, _job(nb, tmp_path, hooks=hooks))
    assert outcome.failure is None
    assert engine.calls == [
        # The markdown cell is not a code cell: the next code cell is sent.
        ("cell", 0, "then", 2, None),
        # The next code cell is blank: it completes without being sent, so nothing is.
        ("cell", 2),
        ("cell", 4, "then", 5, None),
        # The last cell sends nothing.
        ("cell", 5),
        ("close", True),
    ]
    assert told == [(0, True), (2, False), (3, False), (4, True), (5, False)]


def test_a_failed_cell_sends_nothing_and_the_run_stops_there(tmp_path: Path) -> None:
    engine = AheadEngine(fails=1)
    outcome = run_job(engine, _job(_nb("a = 1", "1 / 0", "b = 2"), tmp_path))
    assert outcome.failure is not None and outcome.failure.index == 1
    # Nothing was sent after the failed cell: its kernel may close politely.
    assert engine.calls == [
        ("cell", 0, "then", 1, None),
        ("cell", 1, "then", 2, None),
        ("close", True),
    ]


def test_a_cancel_between_cells_stops_the_kernel_running_the_cell_sent(
    tmp_path: Path,
) -> None:
    engine = AheadEngine()
    cancel = threading.Event()
    hooks = CellHooks(on_cell_executed=[lambda ran: cancel.set()])
    job = _job(_nb("a = 1", "b = 2", "c = 3"), tmp_path, hooks=hooks, cancel=cancel)
    with pytest.raises(RunCancelled) as raised:
        run_job(engine, job)
    assert engine.calls == [("cell", 0, "then", 1, None), "stop", ("close", False)]
    assert raised.value.outcome is not None
    assert raised.value.outcome.failure is not None
    assert raised.value.outcome.failure.index == 1


def test_the_deadline_between_cells_stops_the_kernel_running_the_cell_sent(
    tmp_path: Path,
) -> None:
    engine = AheadEngine(seconds=0.2)
    outcome = run_job(engine, _job(_nb("a = 1", "b = 2"), tmp_path, timeout=0.1))
    assert outcome.failure is not None
    assert (outcome.failure.index, outcome.failure.kind) == (1, "timeout")
    assert engine.calls == [("cell", 0, "then", 1, None), "stop", ("close", False)]


class QuietKeeper:
    """A state keeper that writes nothing, and says when it would."""

    def __init__(self, until: float | None) -> None:
        self.until = until
        self.asked = 0

    def restore(
        self, kernel: EngineKernel, nb: NotebookNode, cells: list[int], outcome: EngineOutcome
    ) -> list[int]:
        return cells

    def cell_executed(self, event: CellRan) -> None:
        pass

    def quiet_until(self) -> float | None:
        self.asked += 1
        return self.until


@pytest.mark.parametrize("until", [None, 12345.5])
def test_the_keeper_bounds_what_is_sent(tmp_path: Path, until: float | None) -> None:
    engine = AheadEngine()
    keeper = QuietKeeper(until)
    run_job(engine, _job(_nb("a = 1", "b = 2", "c = 3"), tmp_path, state=keeper))
    assert engine.calls[:2] == [("cell", 0, "then", 1, until), ("cell", 1, "then", 2, until)]
    # Asked as each cell that may send starts, not for the last.
    assert keeper.asked == 2


def test_without_lookahead_the_loop_sends_nothing_ahead(tmp_path: Path) -> None:
    """As a session's steps run: something acts on the kernel between cells."""
    calls: list[Any] = []
    kernel = AheadKernel(calls)
    nb = _nb("a = 1", "b = 2")
    outcome = EngineOutcome()
    assert run_cells(kernel, _job(nb, tmp_path), nb, [0, 1], Limits(None, None, 0), outcome)
    assert calls == [("cell", 0), ("cell", 1)]


def _keeper(tmp_path: Path, nb: NotebookNode) -> tuple[Keeper, list[int]]:
    keeper = Keeper(
        _job(nb, tmp_path), tmp_path / "runs", "run", "id", Policy(), [], shown=lambda i: i
    )
    saved: list[int] = []
    keeper._save = lambda kernel, nb, index: saved.append(index)  # type: ignore[method-assign]
    keeper._kernel = object()  # type: ignore[assignment]
    keeper._nb, keeper._cells, keeper._stateful = nb, [0, 1, 2], True
    keeper._holds_state = lambda kernel: True  # type: ignore[method-assign, assignment]
    return keeper, saved


def test_the_keeper_writes_no_state_while_the_next_cell_runs(tmp_path: Path) -> None:
    nb = _nb("a = 1", "b = 2", "c = 3")
    keeper, saved = _keeper(tmp_path, nb)
    keeper._mark = time.monotonic() - 10  # a state is due
    keeper.cell_executed(CellRan(0, "t", 10.0, None, False, next_sent=True))
    assert saved == []
    keeper.cell_executed(CellRan(1, "t", 10.0, None, False))
    assert saved == [1]


def test_the_keeper_says_until_when_it_writes_nothing(tmp_path: Path) -> None:
    nb = _nb("a = 1", "b = 2", "c = 3")
    keeper, _ = _keeper(tmp_path, nb)
    keeper._mark = 100.0
    assert keeper.quiet_until() == 100.0 + Policy().every_seconds
    keeper._last_cost = 1.0  # a state that cost 1 s: the next after twenty times that
    assert keeper.quiet_until() == 100.0 + 1.0 / Policy().cost_share
    keeper._stateful = False
    assert keeper.quiet_until() is None
