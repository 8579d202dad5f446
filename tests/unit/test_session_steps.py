"""Sessions' own logic on a fake kernel: steps, stale cells, which checkpoint a restore starts
from, replays and their reasons, eviction, the log of the run record, secrets, idleness."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import (
    InvalidArgumentError,
    NotebookExecutor,
    NotebookExecutorError,
    ParameterError,
)
from notebook_executor._run.options import RunOptions
from notebook_executor._run.plan import plan_run
from notebook_executor._session.ledger import FRESH, Ledger, Ran
from notebook_executor._session.opening import open_session
from notebook_executor._session.session import Session
from unit.fake_engine import FakeEngine, FakeKernel

CELLS = [
    "a = 1",
    "b = a + 1",
    "c = b + 1",
    "d = c + 1",
    'raise ValueError("cell 4")',
    "e = d + 1\nprint(e)",
]


def write(path: Path, cells: list[str], tagged: bool = False) -> None:
    heads = ['# %% tags=["parameters"]' if tagged and i == 0 else "# %%" for i in range(len(cells))]
    text = "".join(f"{head}\n{cell}\n\n" for head, cell in zip(heads, cells, strict=True))
    path.write_text(text, encoding="utf-8")


class Opened:
    def __init__(self, tmp_path: Path, cells: list[str] = CELLS, **options: Any) -> None:
        self.path = tmp_path / "nb.py"
        self.tagged = options.pop("tagged", False)
        write(self.path, cells, self.tagged)
        self.cells = list(cells)
        self.records: list[tuple[str, Any]] = []
        parameters = options.pop("parameters", None)
        secrets = options.pop("secrets", None)
        idle = options.pop("idle_timeout", None)
        self.engine = FakeEngine(**options)

        self.session: Session = open_session(
            lambda: plan_run(self.path, RunOptions(parameters=parameters, secrets=secrets)),
            self.engine,
            runs_dir=tmp_path / "runs",
            on_record=lambda method, record, *_: self.records.append((method, dict(record))),
            idle_timeout=idle,
            checkpoint_memory=None,
            on_close=lambda session: None,
        )

    @property
    def kernel(self) -> FakeKernel:
        """The session's kernel now (a fresh one replaces it after a timeout)."""
        assert self.engine.kernel is not None
        return self.engine.kernel

    def edit(self, index: int, source: str) -> None:
        self.cells[index] = source
        write(self.path, self.cells, self.tagged)

    def record(self) -> dict[str, Any]:
        files = list((self.path.parent / "runs").rglob("*.ipynb"))
        assert len(files) == 1
        nb = json.loads(files[0].read_text(encoding="utf-8"))
        return dict(nb["metadata"]["notebook_executor"], cells=nb["cells"])


@pytest.fixture(autouse=True)
def every_cell_checkpointed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's cells take no time: a checkpoint after each, unless a test says otherwise."""
    monkeypatch.setattr("notebook_executor._session.costs.WORTH_RATIO", 0.0)
    # Nor do its restores: a checkpoint is always quicker than a fresh kernel.
    monkeypatch.setattr("notebook_executor._session.costs.FIRST_RESTORE_COST", 0.0)


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[Callable[..., Opened]]:
    made: list[Opened] = []

    def make(cells: list[str] = CELLS, **options: Any) -> Opened:
        made.append(Opened(tmp_path, cells, **options))
        return made[-1]

    yield make
    for item in made:
        item.session.close()


def test_a_failing_cell_ends_the_step_and_the_session_stays_usable(opened: Any) -> None:
    o = opened()
    step = o.session.run()
    assert step["status"] == "error" and step["error_kind"] == "cell_error"
    assert step["cells_run"] == [0, 1, 2, 3, 4]
    assert step["failed_cell"]["index"] == 4 and step["failed_cell"]["evalue"] == "cell 4"
    assert step["restored"] is None and step["session_id"] == o.session.id
    o.edit(4, "f = 0")
    step = o.session.run()
    # run() goes on from the failed cell, in the current state.
    assert step["cells_run"] == [4, 5] and step["status"] == "success"
    assert step["outputs"][-1] == {"index": 5, "text": "5\n"}
    assert step["cells_executed"] == 6 and step["failed_cell"] is None


def test_run_until_stops_at_that_cell_and_goes_on_from_there(opened: Any) -> None:
    o = opened()
    assert o.session.run(until=1)["cells_run"] == [0, 1]
    assert o.session.run(until=3)["cells_run"] == [2, 3]
    assert o.session.run(until=3)["cells_run"] == []


def test_rerun_after_an_edit_restores_the_checkpoint_before_it(opened: Any) -> None:
    o = opened()
    o.session.run()
    assert o.session.checkpoints == [0, 1, 2, 3]
    o.edit(4, "f = d * 10")
    step = o.session.rerun_from(4)
    assert step["restored"] == "checkpoint" and step["restore_reason"] is None
    assert step["cells_run"] == [4, 5] and step["status"] == "success"
    assert ("restore", 3) in o.kernel.calls
    assert o.session.evaluate("f")["output"] == "40\n"


def test_an_earlier_edit_moves_the_restore_back_and_says_so(opened: Any) -> None:
    o = opened()
    o.session.run()
    o.edit(2, "c = b + 100")
    o.edit(4, "f = 0")
    step = o.session.rerun_from(4)
    assert step["cells_run"] == [2, 3, 4, 5]
    assert step["restored"] == "checkpoint"
    assert step["restore_reason"] == "cell 2 changed since it ran"
    assert step["outputs"][-1]["text"] == "104\n"
    assert step["stale_cells"] == []


def test_run_reports_cells_edited_after_they_ran(opened: Any) -> None:
    o = opened()
    o.session.run(until=3)
    o.edit(1, "b = 7")
    step = o.session.run(until=3)
    assert step["stale_cells"] == [1] and step["cells_run"] == []
    assert o.session.checkpoints == [0]


def test_without_checkpoints_a_fresh_kernel_replays_with_the_reason(opened: Any) -> None:
    o = opened(unsupported="checkpoints need Linux")
    o.session.run()
    o.edit(4, "f = 1")
    step = o.session.rerun_from(4)
    assert step["restored"] == "replay"
    assert step["restore_reason"] == "checkpoints need Linux"
    assert step["cells_run"] == [0, 1, 2, 3, 4, 5]
    assert len(o.engine.kernels) == 2


def test_an_evicted_checkpoint_restores_from_an_older_one(opened: Any) -> None:
    o = opened(keep=4)
    o.session.run()
    o.edit(4, "f = 1")
    assert o.session.rerun_from(4)["restored"] == "checkpoint"
    # Kept: the four newest, after cells 2 to 5.
    assert o.kernel.checkpoints() == [2, 3, 4, 5]
    o.kernel._saved.pop(3)
    o.kernel.dropped[3] = "evicted to stay within checkpoint_memory"
    step = o.session.rerun_from(4)
    assert step["restored"] == "checkpoint" and step["cells_run"] == [3, 4, 5]
    assert step["restore_reason"] == (
        "the checkpoint after cell 3 is gone: evicted to stay within checkpoint_memory"
    )


def test_quick_cells_are_run_again_rather_than_checkpointed(
    opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("notebook_executor._session.costs.WORTH_RATIO", 5.0)
    o = opened()
    o.session.run(until=3)
    # Only the fresh kernel was worth a checkpoint.
    assert o.kernel.checkpoints() == [FRESH]
    o.edit(3, "d = 0")
    step = o.session.rerun_from(4)
    assert step["restored"] == "replay" and step["cells_run"] == [0, 1, 2, 3, 4]
    assert step["restore_reason"] == "cell 3 changed since it ran"
    o.session.rerun_from(3, until=2)
    step = o.session.rerun_from(2)
    assert step["cells_run"][:2] == [0, 1]
    assert step["restore_reason"] == "cells up to 1 are quicker to run again than to checkpoint"


def test_a_restore_that_fails_falls_back_to_a_replay(opened: Any) -> None:
    o = opened(broken_restores=True)
    o.session.run()
    o.edit(4, "f = 1")
    step = o.session.rerun_from(4)
    assert step["restored"] == "replay"
    assert step["restore_reason"].startswith("the checkpoint could not be restored")
    assert step["cells_run"] == [0, 1, 2, 3, 4, 5] and step["status"] == "success"


def test_a_refused_checkpoint_is_the_reason_of_the_replay(opened: Any) -> None:
    o = opened()
    o.session.run(until=1)
    o.engine.unsupported = "the notebook started threads of its own"
    o.session.run()
    o.engine.unsupported = None
    o.edit(4, "f = 1")
    step = o.session.rerun_from(4)
    assert step["cells_run"] == [2, 3, 4, 5]
    assert step["restore_reason"] == (
        "no checkpoint after cell 3: the notebook started threads of its own"
    )


def test_an_evaluation_keeps_its_effects_and_a_rerun_drops_them(opened: Any) -> None:
    o = opened()
    o.session.run(until=3)
    answer = o.session.evaluate("d = 99\nd")
    assert answer == {"status": "success", "output": "99\n", "error": None}
    failed = o.session.evaluate("1/0")
    assert failed["status"] == "error" and failed["error"]["ename"] == "ZeroDivisionError"
    step = o.session.rerun_from(4)
    assert step["restored"] == "checkpoint"
    assert o.session.evaluate("d")["output"] == "4\n"


def test_the_record_logs_steps_evaluations_edits_and_restores_in_order(opened: Any) -> None:
    o = opened()
    o.session.run()
    o.session.evaluate("a")
    o.edit(4, "f = 2")
    o.session.rerun_from(4)
    record = o.record()
    log = record["session"]["log"]
    assert [entry["kind"] for entry in log] == [
        "step",
        "evaluate",
        "edit",
        "restore",
        "step",
    ]
    assert log[2]["before"] == 'raise ValueError("cell 4")' and log[2]["after"] == "f = 2"
    assert log[3]["how"] == "checkpoint" and log[3]["after"] == 3
    assert record["session"]["open"] is True and record["status"] == "success"
    # Each cell holds its latest execution.
    assert "".join(record["cells"][4]["source"]) == "f = 2" and record["cells"][4]["outputs"] == []
    o.session.close()
    record = o.record()
    assert record["session"]["open"] is False and record["session"]["log"][-1]["kind"] == "close"
    md = next((o.path.parent / "runs").rglob("*.md")).read_text(encoding="utf-8")
    assert "## Session log" in md and "**restore** by checkpoint" in md
    assert next(method for method, _ in o.records) == "begin"
    assert o.kernel.closed


def test_secrets_never_reach_a_step_an_evaluation_or_the_log(opened: Any) -> None:
    o = opened(
        ["import os\ntoken = os.environ['TOKEN']\nprint(token)"],
        secrets={"TOKEN": "s3cr3t-value-123"},
    )
    step = o.session.run()
    answer = o.session.evaluate("print(token)")
    o.session.close()
    text = json.dumps([step, answer]) + json.dumps(o.record())
    assert "s3cr3t-value-123" not in text
    # The secret reached the kernel (the cell read it and printed it), and was redacted there.
    assert step["status"] == "success", step["failed_cell"]
    assert step["outputs"][-1]["text"] == "[secret TOKEN]\n"
    assert answer == {"status": "success", "output": "[secret TOKEN]\n", "error": None}


def test_parameters_are_injected_after_the_parameters_cell(opened: Any) -> None:
    o = opened(["n = 1", "m = n * 2\nprint(m)"], parameters={"n": 5}, tagged=True)
    assert o.session.run(until=0)["cells_run"] == [0]
    assert o.session.evaluate("n")["output"] == "5\n"
    step = o.session.run()
    assert step["cells_run"] == [1] and step["outputs"][-1]["text"] == "10\n"
    assert step["parameters"] == {"n": 5}
    o.session.rerun_from(1)
    assert o.session.evaluate("m")["output"] == "10\n"


def test_bad_indices_are_refused(opened: Any) -> None:
    o = opened()
    for bad in (-1, 6, True, "2", 2.0):
        with pytest.raises(NotebookExecutorError):
            o.session.rerun_from(bad)
    with pytest.raises(NotebookExecutorError):
        o.session.rerun_from(3, until=-1)
    with pytest.raises(NotebookExecutorError):
        o.session.evaluate(b"1")  # type: ignore[arg-type]


def test_an_evaluation_of_text_no_kernel_can_be_sent_is_a_typed_error(opened: Any) -> None:
    # A JSON "\ud800" reaches Python as a lone surrogate: no UTF-8 message can carry it.
    o = opened()
    with pytest.raises(InvalidArgumentError, match="lone surrogate"):
        o.session.evaluate("x = '\ud800'")
    assert o.session.evaluate("1 + 1")["status"] == "success"


def test_until_before_index_restores_and_runs_nothing(opened: Any) -> None:
    o = opened()
    o.session.run(until=3)
    o.session.evaluate("d = 0")
    step = o.session.rerun_from(3, until=2)
    assert step["cells_run"] == [] and step["restored"] == "checkpoint"
    assert o.session.evaluate("c, 'd' in globals()")["output"] == "(3, False)\n"


def test_a_closed_session_refuses_steps(opened: Any) -> None:
    o = opened()
    o.session.close()
    o.session.close()
    for call in (o.session.run, lambda: o.session.rerun_from(0), lambda: o.session.evaluate("1")):
        with pytest.raises(NotebookExecutorError, match="closed"):
            call()
    assert o.session.checkpoints == []


def test_an_idle_session_closes_itself(opened: Any) -> None:
    o = opened(idle_timeout=0.2)
    o.session.run(until=0)
    ends = time.monotonic() + 5
    while not o.session.closed and time.monotonic() < ends:
        time.sleep(0.02)
    assert o.session.closed and o.kernel.closed
    assert o.record()["session"]["log"][-1]["why"] == "idle for 0.2 s"


def test_bad_input_is_refused_before_any_kernel_starts(tmp_path: Path) -> None:
    path = tmp_path / "nb.py"
    path.write_text('# %% tags=["parameters"]\nn: int = 1\n\n# %%\nprint(n)\n')
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        with pytest.raises(ParameterError):
            ex.open_session(path, parameters={"n": "x"})
        with pytest.raises(ParameterError):
            ex.open_session(path, parameters={"nope": 1})
        with pytest.raises(NotebookExecutorError):
            ex.open_session(tmp_path / "missing.py")
        with pytest.raises(NotebookExecutorError):
            ex.open_session(path, idle_timeout=-1)
        with pytest.raises(NotebookExecutorError):
            ex.open_session(path, checkpoint_memory="1G")  # type: ignore[arg-type]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.ipynb"))


# -- the ledger alone ---------------------------------------------------------------------------


def test_the_nearest_valid_checkpoint_wins() -> None:
    ledger = Ledger()
    ledger.saved_as(FRESH)
    for index in range(4):
        ledger.ran(Ran(index, f"s{index}"))
        ledger.saved_as(index)
    wanted = [Ran(0, "s0"), Ran(1, "s1"), Ran(2, "changed"), Ran(3, "s3")]
    plan = ledger.plan(wanted, [FRESH, 0, 1, 2, 3], None)
    assert plan.key == 1 and [cell.index for cell in plan.replay] == [2, 3]
    assert plan.reason == "cell 2 changed since it ran"
    plan = ledger.plan(wanted[:2], [FRESH, 0, 2, 3], None)
    assert plan.key == 0 and plan.reason == "no checkpoint holds the state after cell 1"
    plan = ledger.plan(wanted[:2], [], "checkpoints need Linux")
    assert plan.key is None and plan.reason == "checkpoints need Linux"
    assert ledger.plan([], [FRESH], None).key == FRESH


def test_a_failed_or_evaluated_state_is_never_checkpointed() -> None:
    ledger = Ledger()
    ledger.ran(Ran(0, "x"))
    assert ledger.may_checkpoint()
    ledger.ran(Ran(1, "y", completed=False))
    assert not ledger.may_checkpoint() and ledger.next_index() == 1
    ledger.rebuilt(None)
    ledger.evaluated = True
    assert not ledger.may_checkpoint()


# -- what a step shows --------------------------------------------------------------------------


def test_outputs_are_ansi_free_bounded_text_with_images_as_references() -> None:
    from notebook_executor._records.redaction import Redactor
    from notebook_executor._session.texts import outputs_text

    outputs: list[dict[str, Any]] = [
        {"output_type": "stream", "name": "stdout", "text": "\x1b[31mred\x1b[0m secret-value-9\n"},
        {"output_type": "display_data", "data": {"image/png": "iVBOR" * 1000, "text/plain": "<F>"}},
        {"output_type": "execute_result", "data": {"text/plain": "x" * 10_000}},
    ]
    text = outputs_text(outputs, Redactor({"S": "secret-value-9"}), run_id="r1", cell=3)
    assert text.startswith("red [")
    assert "secret-value-9" not in text and "\x1b" not in text
    assert "[image/png: run://r1/cells/3/outputs/1/image.png]" in text
    assert "iVBOR" not in text and len(text) < 4_200 and "more characters" in text


# -- what a restore costs (issue 33, item 6) ----------------------------------------------------


def test_a_state_that_is_the_start_of_the_one_wanted_runs_on_without_a_restore(
    opened: Any,
) -> None:
    o = opened()
    o.session.run(until=1)
    o.kernel.calls.clear()
    step = o.session.rerun_from(4, until=3)
    assert step["cells_run"] == [2, 3] and step["restored"] is None
    assert [call for call, _ in o.kernel.calls if call in ("restore", "start")] == []


def test_a_fresh_kernel_wins_over_a_restore_that_costs_more(
    opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("notebook_executor._session.costs.FIRST_RESTORE_COST", 10.0)
    o = opened()
    o.session.run(until=3)
    o.edit(3, "d = 0")
    step = o.session.rerun_from(4, until=3)
    assert step["restored"] == "replay" and step["cells_run"] == [0, 1, 2, 3]
    assert step["restore_reason"].startswith("a fresh kernel running the cells again is quicker")
    assert ("restore", 2) not in o.kernel.calls


def test_a_rerun_spends_on_checkpoints_no_more_than_it_saved(
    opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("notebook_executor._session.costs.FIRST_CHECKPOINT_COST", 1.0)
    o = opened()
    o.session.run(until=2)
    # A run step has no limit: every cell was worth a checkpoint (the fixture's ratio).
    assert o.session.checkpoints == [0, 1, 2]
    o.edit(1, "b = a + 2")
    step = o.session.rerun_from(1, until=3)
    assert step["restored"] == "checkpoint" and step["cells_run"] == [1, 2, 3]
    # Restoring saved less than a checkpoint is thought to cost: none was taken.
    assert o.session.checkpoints == [0]
