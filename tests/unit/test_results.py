"""The result dict: ANSI stripping, index translation, keys and types, redaction."""

from __future__ import annotations

import json
from typing import Any

import nbformat
import pytest

from notebook_executor import EngineOutcome
from notebook_executor._records.results import (
    MAX_ERROR_CHARS,
    CellMap,
    annotate_cells,
    build_result,
    redact,
)
from notebook_executor._records.text import strip_ansi
from notebook_executor._types import RunResult
from notebook_executor.engine import CellFailure
from support import failed_cell
from unit.fake_engine import scrap_output


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("\x1b[0;31mValueError\x1b[0m: bad", "ValueError: bad"),
        ("\x1b[1;32mok\x1b[39;49m", "ok"),
        ("\x1b[38;5;196mred\x1b[0m", "red"),
        ("\x1b[38;2;1;2;3mrgb\x1b[m", "rgb"),
        ("up\x1b[2Aclear\x1b[K\x1b[?25l", "upclear"),
        ("\x1b]8;;http://x\x07link\x1b]8;;\x07", "link"),
        ("\x1b]0;title\x1b\\rest", "rest"),
        ("plain [0;31m text", "plain [0;31m text"),
        ("", ""),
    ],
)
def test_strip_ansi(text: str, plain: str) -> None:
    assert strip_ansi(text) == plain


def test_cell_map_without_injection_is_the_identity() -> None:
    cells = CellMap(None)
    assert [cells.to_source(i) for i in range(4)] == [0, 1, 2, 3]
    assert not any(cells.is_injected(i) for i in range(4))


def test_cell_map_shifts_cells_after_the_injected_one() -> None:
    cells = CellMap(2)
    assert [cells.to_source(i) for i in range(5)] == [0, 1, 1, 2, 3]
    assert [cells.is_injected(i) for i in range(4)] == [False, False, True, False]
    assert CellMap(0).to_source(0) == 0
    assert CellMap(0).to_source(1) == 0


def _executed() -> Any:
    """A job notebook: markdown, parameters, injected, code, markdown, code."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# t"),
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("x = 2", metadata={"tags": ["injected-parameters"]}),
        nbformat.v4.new_code_cell("glue()"),
        nbformat.v4.new_markdown_cell("text"),
        nbformat.v4.new_code_cell("raise ValueError('bad')"),
    ]
    nb.cells[3].outputs = scrap_output("n", 1) + scrap_output("t", "s")
    return nb


def _result(outcome: EngineOutcome, **overrides: Any) -> RunResult:
    arguments: dict[str, Any] = {
        "run_id": "20240101T000000Z-x-0000",
        "notebook_path": "nb.py",
        "output_path": "runs/2024-01-01/20240101T000000Z-x-0000.ipynb",
        "parameters": {"x": 2},
        "request": "why",
        "started_at": "2024-01-01T00:00:00.000Z",
        "finished_at": "2024-01-01T00:00:01.000Z",
        "duration_seconds": 1.23456789,
        "executed": _executed(),
        "outcome": outcome,
        "cell_map": CellMap(2),
    }
    arguments.update(overrides)
    return build_result(**arguments)


RESULT_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "status": (str,),
    "error_kind": (str, type(None)),
    "notebook": (str,),
    "output_path": (str,),
    "parameters": (dict,),
    "request": (str, type(None)),
    "started_at": (str,),
    "finished_at": (str,),
    "duration_seconds": (float,),
    "cells_total": (int,),
    "cells_executed": (int,),
    "failed_cell": (dict, type(None)),
    "scraps": (dict,),
    "output_cut": (list,),
    "edited_cells": (list,),
    "reused_cells": (list,),
    "reused_from": (str, type(None)),
    "resumed_from": (str, type(None)),
    "state_notes": (list,),
}


def test_a_successful_result() -> None:
    result = _result(EngineOutcome(completed=[1, 2, 3, 5]))
    assert list(result) == list(RESULT_TYPES)
    for key, value in result.items():
        assert isinstance(value, RESULT_TYPES[key]), key
    assert result["status"] == "success"
    assert result["error_kind"] is None
    assert result["failed_cell"] is None
    assert result["cells_total"] == 3  # the injected cell is not a source cell
    assert result["cells_executed"] == 3
    assert result["scraps"] == {"n": 1, "t": "s"}
    assert result["duration_seconds"] == 1.234568
    json.dumps(result)


def test_a_failed_result_names_the_source_cell() -> None:
    traceback = ["\x1b[0;31m---\x1b[0m", "\x1b[0;31mValueError\x1b[0m: \x1b[1mbad\x1b[0m"]
    failure = CellFailure(5, "cell_error", "ValueError", "\x1b[1mbad\x1b[0m", traceback)
    result = _result(EngineOutcome(completed=[1, 2, 3], failure=failure))
    assert result["status"] == "error"
    assert result["error_kind"] == "cell_error"
    assert result["cells_executed"] == 2
    assert result["failed_cell"] == {
        "index": 4,
        "source": "raise ValueError('bad')",
        "ename": "ValueError",
        "evalue": "bad",
        "traceback": ["---", "ValueError: bad"],
    }
    json.dumps(result)


@pytest.mark.parametrize("kind", ["timeout", "kernel_died", "cancelled", "interrupted"])
def test_other_error_kinds(kind: Any) -> None:
    failure = CellFailure(3, kind, "E", "v", [])
    result = _result(EngineOutcome(completed=[1, 2], failure=failure))
    assert result["error_kind"] == kind
    assert failed_cell(result)["index"] == 2
    assert failed_cell(result)["source"] == "glue()"


def test_long_error_texts_are_clipped() -> None:
    failure = CellFailure(5, "cell_error", "E", "v" * (MAX_ERROR_CHARS * 2), ["t" * 50_000] * 10)
    result = _result(EngineOutcome(failure=failure))
    failed = failed_cell(result)
    assert len(failed["evalue"]) < MAX_ERROR_CHARS + 100
    assert len(json.dumps(failed["traceback"])) < MAX_ERROR_CHARS * 4
    assert failed["traceback"][0] == "[earlier traceback lines are in the run records]"


def test_annotate_cells_records_what_ran() -> None:
    nb = _executed()
    outcome = EngineOutcome(
        completed=[1, 2],
        failure=CellFailure(3, "cell_error", "E", "v", []),
        cell_seconds={1: 0.1, 2: 0.2, 3: 0.3},
        cell_started={1: "a", 2: "b", 3: "c"},
    )
    annotate_cells(nb, outcome)
    status = {i: c.metadata.get("notebook_executor") for i, c in enumerate(nb.cells)}
    assert status[0] is None and status[4] is None
    assert status[1] == {"status": "completed", "started_at": "a", "duration_seconds": 0.1}
    assert status[3] == {"status": "failed", "started_at": "c", "duration_seconds": 0.3}
    assert status[5] == {"status": "not_run"}


def test_redact_nested_values() -> None:
    secrets = {"TOKEN": "hunter2", "EMPTY": ""}
    value = {
        "a": "x hunter2 y",
        "hunter2": ["hunter2", {"deep": ("keep", 1)}, 3, None],
        "n": 1.5,
    }
    assert redact(value, secrets) == {
        "a": "x [secret TOKEN] y",
        "[secret TOKEN]": ["[secret TOKEN]", {"deep": ("keep", 1)}, 3, None],
        "n": 1.5,
    }
    assert value["a"] == "x hunter2 y"  # the input is not changed


def test_redact_replaces_the_longest_secret_first() -> None:
    secrets = {"SHORT": "abcdef", "LONG": "abcdefghi"}
    assert redact("abcdefghi abcdef", secrets) == "[secret LONG] [secret SHORT]"
    assert (
        redact("abcdefghi abcdef", dict(reversed(secrets.items())))
        == "[secret LONG] [secret SHORT]"
    )


def test_redact_reaches_into_tuples() -> None:
    assert redact(("hunter2",), {"T": "hunter2"}) == ("[secret T]",)


def test_redact_keeps_notebook_nodes() -> None:
    nb = _executed()
    nb.cells[3].outputs.append(nbformat.v4.new_output("stream", name="stdout", text="hunter2\n"))
    clean = redact(nb, {"T": "hunter2"})
    assert isinstance(clean, nbformat.NotebookNode)
    assert clean.cells[3].outputs[-1].text == "[secret T]\n"
    assert "hunter2" not in nbformat.writes(clean)
    assert redact(nb, {}) is nb
