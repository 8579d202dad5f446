"""The engine contract (tests/engine_contract.py) kept by the public scripted engine; the
kernel engine keeps the same table in tests/integration/test_engine_contract.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import notebook_executor.engine
from engine_contract import (
    CASES,
    check,
    check_session,
    run_case,
    run_session_case,
    scripted_handler,
)
from notebook_executor.engine import CellFailure, RunJob, ScriptedEngine


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_scripted_engine_keeps_the_contract(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    engine = ScriptedEngine(scripted_handler(case))
    check(case, run_case(engine, case, tmp_path, {}))
    assert len(engine.jobs) == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_session_step_on_the_scripted_engine_keeps_the_contract(
    name: str, tmp_path: Path
) -> None:
    case = CASES[name]
    engine = ScriptedEngine(scripted_handler(case))
    check_session(case, run_session_case(engine, case, tmp_path))
    assert [job.checkpoints for job in engine.jobs] == [True]


def test_it_is_public_and_runs_every_cell_silently_by_default(tmp_path: Path) -> None:
    assert "ScriptedEngine" in notebook_executor.engine.__all__
    case = CASES["code cells run in order; markdown is passed over"]
    seen = run_case(ScriptedEngine(), case, tmp_path, {})
    assert seen.outcome.completed == [1, 2]
    assert [cell.get("outputs") for cell in seen.nb.cells[1:]] == [[], []]


def test_a_set_cancel_event_or_a_cancelled_reply_raises_run_cancelled(tmp_path: Path) -> None:
    case = CASES["code cells run in order; markdown is passed over"]

    def cancel_at_2(job: RunJob, index: int) -> list[dict[str, str]] | CellFailure:
        if index == 2:
            return CellFailure(index, "cancelled", "KeyboardInterrupt", "stop", [])
        return []

    seen = run_case(ScriptedEngine(cancel_at_2), case, tmp_path, {})
    assert seen.cancelled is True
    assert seen.outcome.completed == [1]
    assert seen.outcome.failure is not None and seen.outcome.failure.index == 2

    def set_cancel(job: RunJob, index: int) -> list[dict[str, str]]:
        assert job.cancel is not None
        job.cancel.set()
        return []

    seen = run_case(ScriptedEngine(set_cancel), case, tmp_path, {})
    assert seen.cancelled is True
    assert seen.outcome.completed == [1]
    assert seen.outcome.failure is not None
    assert (seen.outcome.failure.index, seen.outcome.failure.kind) == (2, "cancelled")
