"""Papermill's metadata written from an engine outcome (no kernel)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import nbformat
import pytest

from notebook_executor._notebook import NotebookNode, from_dict
from notebook_executor._records.papermill_meta import annotate_papermill
from notebook_executor._sources.remote import is_url
from notebook_executor.engine import CellFailure, EngineOutcome

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _nb() -> NotebookNode:
    v4 = nbformat.v4
    nb: nbformat.NotebookNode = v4.new_notebook(
        cells=[
            v4.new_markdown_cell("m"),
            v4.new_code_cell("a"),
            v4.new_raw_cell("r"),
            v4.new_code_cell("b"),
            v4.new_markdown_cell("m2"),
            v4.new_code_cell("c"),
        ]
    )
    node: NotebookNode = from_dict(nb)
    return node


def _annotate(nb: NotebookNode, outcome: EngineOutcome | None) -> None:
    annotate_papermill(
        nb,
        outcome,
        parameters={"x": 1},
        default_parameters={"x": 0, "y": "s"},
        input_path="in.py",
        output_path="out.ipynb",
        started=None if outcome is None else START,
        finished=None if outcome is None else START + timedelta(seconds=2.5),
    )


def test_failed_run() -> None:
    nb = _nb()
    outcome = EngineOutcome(
        completed=[1],
        failure=CellFailure(3, "cell_error", "E", "v", []),
        cell_seconds={1: 0.25, 3: 0.5},
        cell_started={1: "2026-01-02T03:04:05.100Z", 3: "2026-01-02T03:04:05.400Z"},
    )
    _annotate(nb, outcome)
    meta = nb.metadata["papermill"]
    assert meta["exception"] is True
    assert meta["start_time"] == "2026-01-02T03:04:05+00:00"
    assert meta["duration"] == 2.5
    assert (meta["parameters"], meta["default_parameters"]) == ({"x": 1}, {"x": 0, "y": "s"})
    statuses = [cell.metadata["papermill"]["status"] for cell in nb.cells]
    assert statuses == ["completed", "completed", "completed", "failed", "pending", "pending"]
    first = nb.cells[1].metadata["papermill"]
    assert first == {
        "exception": False,
        "start_time": "2026-01-02T03:04:05.100000+00:00",
        "end_time": "2026-01-02T03:04:05.350000+00:00",
        "duration": 0.25,
        "status": "completed",
    }
    assert nb.cells[3].metadata["papermill"]["exception"] is True
    assert nb.cells[0].metadata["papermill"]["start_time"] is None


def test_successful_run_and_prepared_notebook() -> None:
    nb = _nb()
    _annotate(nb, EngineOutcome(completed=[1, 3, 5]))
    assert nb.metadata["papermill"]["exception"] is None
    assert {cell.metadata["papermill"]["status"] for cell in nb.cells} == {"completed"}
    prepared = _nb()
    _annotate(prepared, None)
    assert prepared.metadata["papermill"]["start_time"] is None
    assert {cell.metadata["papermill"]["status"] for cell in prepared.cells} == {"pending"}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("s3://b/k.ipynb", True),
        ("https://h/x.ipynb", True),
        ("gs://b/x.py", True),
        ("notebooks/x.ipynb", False),
        ("C:/x.ipynb", False),
        ("./s3:/x.ipynb", False),
    ],
)
def test_is_url(path: str, expected: bool) -> None:
    assert is_url(path) is expected


def test_cells_after_a_clean_exit_stay_pending() -> None:
    # sys.exit() in cell 3: the markdown and code cells after it never ran.
    nb = _nb()
    outcome = EngineOutcome(
        completed=[1, 3],
        exited=3,
        cell_seconds={1: 0.25, 3: 0.5},
        cell_started={1: "2026-01-02T03:04:05.100Z", 3: "2026-01-02T03:04:05.400Z"},
    )
    _annotate(nb, outcome)
    statuses = [cell.metadata["papermill"]["status"] for cell in nb.cells]
    assert statuses == ["completed", "completed", "completed", "completed", "pending", "pending"]
