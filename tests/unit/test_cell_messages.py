"""How one cell's IOPub messages become its outputs (the kernel side is proven against nbclient
on a real kernel in tests/integration/test_cell_protocol.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from notebook_executor._kernels.cells import Displays, _CellOutput, timestamp
from notebook_executor._notebook import NotebookNode, new_code_cell, new_notebook


def _msg(kind: str, **content: Any) -> dict[str, Any]:
    return {"header": {"msg_type": kind}, "parent_header": {"msg_id": "m"}, "content": content}


def _stream(text: str) -> dict[str, Any]:
    return _msg("stream", name="stdout", text=text)


def _display(text: str, display_id: str | None = None, kind: str = "display_data") -> Any:
    transient = {"display_id": display_id} if display_id else {}
    return _msg(kind, data={"text/plain": text}, metadata={}, transient=transient)


def _nb(cells: int) -> NotebookNode:
    nb = new_notebook([new_code_cell(f"c{i}") for i in range(cells)])
    for cell in nb.cells:
        cell.metadata.execution = {}
    return nb


def _texts(cell: Any) -> list[str]:
    return [o.get("text") or o["data"]["text/plain"] for o in cell.outputs]


def test_outputs_are_kept_in_order_and_idle_ends_the_cell() -> None:
    nb, seen = _nb(1), []
    cell = _CellOutput(nb, 0, Displays(), lambda index, out: seen.append((index, out)))
    for msg in (
        _msg("status", execution_state="busy"),
        _msg("execute_input", code="c0", execution_count=4),
        _stream("a"),
        _display("b"),
        _msg("comm_open", comm_id="w", target_name="t", data={}),
        _msg("execute_result", data={"text/plain": "2"}, metadata={}, execution_count=4),
    ):
        assert cell.handle(msg) is False
    assert cell.handle(_msg("status", execution_state="idle")) is True
    assert _texts(nb.cells[0]) == ["a", "b", "2"]
    assert nb.cells[0].execution_count == 4
    assert [index for index, _ in seen] == [0, 0, 0]
    assert set(nb.cells[0].metadata.execution) == {
        "iopub.status.busy",
        "iopub.execute_input",
        "iopub.status.idle",
    }


def test_clear_output_clears_now_or_before_the_next_output() -> None:
    nb = _nb(1)
    cell = _CellOutput(nb, 0, Displays(), None)
    cell.handle(_stream("gone"))
    cell.handle(_msg("clear_output", wait=False))
    assert nb.cells[0].outputs == []
    cell.handle(_stream("old"))
    cell.handle(_msg("clear_output", wait=True))
    assert _texts(nb.cells[0]) == ["old"]
    cell.handle(_stream("new"))
    assert _texts(nb.cells[0]) == ["new"]


def test_a_display_update_reaches_back_to_an_earlier_cell_and_adds_nothing() -> None:
    nb, displays = _nb(2), Displays()
    _CellOutput(nb, 0, displays, None).handle(_display("one", "d1"))
    later = _CellOutput(nb, 1, displays, None)
    later.handle(_display("two", "d1", kind="update_display_data"))
    later.handle(_display("unknown", "d2", kind="update_display_data"))
    assert _texts(nb.cells[0]) == ["two"]
    assert nb.cells[1].outputs == []


def test_a_cleared_display_is_no_longer_updated() -> None:
    nb, displays = _nb(1), Displays()
    cell = _CellOutput(nb, 0, displays, None)
    cell.handle(_display("one", "d1"))
    cell.handle(_msg("clear_output", wait=False))
    cell.handle(_stream("after"))
    cell.handle(_display("two", "d1", kind="update_display_data"))
    assert _texts(nb.cells[0]) == ["after"]


def test_timestamps_are_utc_whatever_zone_the_kernel_stamps() -> None:
    local = datetime(2026, 1, 2, 4, 5, 6, 7000, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp({"header": {"date": local}}) == "2026-01-02T02:05:06.007000Z"
    assert timestamp({"header": {"date": "2026-01-02T02:05:06Z"}}) == "2026-01-02T02:05:06Z"
    assert timestamp({"header": {}}).endswith("Z")
