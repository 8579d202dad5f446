"""The run path's fast helpers give exactly what the slow standard ones give.

``copy_notebook`` against ``copy.deepcopy`` (values and node types), ``dumps_indented``
against ``json.dumps(..., indent=1, sort_keys=True, ensure_ascii=False)`` (the same text).
"""

from __future__ import annotations

import copy
import enum
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook_executor._notebook import (
    NotebookNode,
    new_code_cell,
    new_markdown_cell,
    new_notebook,
    new_output,
)
from notebook_executor._records.layout import bytes_as_base64, split_lines
from notebook_executor._sources.copying import copy_notebook
from notebook_executor._sources.formats import load_source
from notebook_executor._sources.nbjson import dumps_indented

DATA = Path(__file__).resolve().parents[1] / "data"
NOTEBOOKS = sorted(
    [*(DATA / "notebooks").iterdir(), *(DATA / "old_notebooks").glob("*.ipynb")],
    key=lambda path: path.name,
)


def _shape(value: Any) -> Any:
    """``value`` with the type of every container spelled out, to compare node types."""
    if isinstance(value, dict):
        return (type(value).__name__, {key: _shape(item) for key, item in value.items()})
    if isinstance(value, list):
        return ("list", [_shape(item) for item in value])
    return (type(value).__name__, value)


def _reference_json(document: Any) -> str:
    return json.dumps(
        document,
        indent=1,
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ": "),
        default=bytes_as_base64,
    )


def _executed() -> NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    cell = new_code_cell("print('é')\n1.5")
    cell.execution_count = 1
    cell.outputs = [
        new_output("stream", name="stdout", text="é\n\t\x1b[31mred\x1b[0m\n"),
        new_output(
            "execute_result",
            data={"text/plain": "1.5", "application/json": {"a": [1, 2.5, None, True]}},
            execution_count=1,
        ),
    ]
    nb.cells = [new_markdown_cell('# Title \u2028 "quoted"'), cell]
    # A plain dict inside a list (deepcopy keeps it plain) and one set past __setitem__.
    nb.metadata["plain"] = [{"k": {"inner": [1, {"deep": "x"}]}}]
    dict.__setitem__(nb.metadata, "unconverted", {"k": {"v": 1}})
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_copy_notebook_equals_deepcopy_on_every_test_notebook(path: Path) -> None:
    nb = load_source(path).nb
    assert nb.cells
    copied = copy_notebook(nb)
    assert _shape(copied) == _shape(copy.deepcopy(nb))
    assert copied.cells is not nb.cells


def test_copy_notebook_keeps_deepcopys_node_types_and_is_independent() -> None:
    nb = _executed()
    copied = copy_notebook(nb)
    assert _shape(copied) == _shape(copy.deepcopy(nb))
    # Containers keep their types, as deepcopy keeps them.
    assert type(copied.metadata["unconverted"]) is dict
    assert type(copied.cells[1].outputs[1].data) is NotebookNode
    assert type(copied.metadata["plain"][0]) is dict
    copied.cells[1].outputs[1].data["application/json"]["a"].append(9)
    copied.metadata.plain[0]["k"]["inner"][1]["deep"] = "changed"
    copied.cells[0].source = "changed"
    assert nb.cells[1].outputs[1].data["application/json"]["a"] == [1, 2.5, None, True]
    assert nb.metadata.plain[0]["k"]["inner"][1]["deep"] == "x"
    assert nb.cells[0].source.startswith("# Title")
    assert copied.cells[0].source == "changed"  # attribute access works on the copy


def test_copy_notebook_hands_other_types_to_deepcopy() -> None:
    nb = _executed()
    nb.metadata["when"] = (1, [2])
    copied = copy_notebook(nb)
    assert copied.metadata["when"] == (1, [2])
    assert copied.metadata["when"][1] is not nb.metadata["when"][1]
    plain = {"a": [1, {"b": 2}]}
    assert copy_notebook(plain) == plain  # type: ignore[arg-type]
    assert copy_notebook(plain) is not plain  # type: ignore[arg-type]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_dumps_indented_is_json_dumps_on_every_test_notebook(path: Path) -> None:
    document = split_lines(load_source(path).nb)
    text = dumps_indented(document, default=bytes_as_base64)
    assert text == _reference_json(document)
    assert '\n "cells": [\n' in text


def test_dumps_indented_is_json_dumps_on_an_executed_notebook() -> None:
    document = split_lines(_executed())
    assert dumps_indented(document, default=bytes_as_base64) == _reference_json(document)


class _Level(enum.IntEnum):
    HIGH = 3


class _Text(str):
    pass


@pytest.mark.parametrize(
    "document",
    [
        {},
        [],
        'top-level \u00e9 \x00 " \\ \n',
        None,
        [1.0, -0.0, 1e100, 1e-7, 0.1 + 0.2, math.nan, math.inf, -math.inf, 2**80, -(2**70)],
        {"b": True, "a": False, "c": None, "d": [[], {}, [[]], {"x": {}}]},
        {"t": (1, (2, "3"))},
        {"bytes": b"\x00\xff"},
        {"level": _Level.HIGH, "text": _Text("sub")},
        {1: "int key", 2: {2.5: "float key"}},
        {"\u2028": "line separator", "\ud800": "lone surrogate"},
    ],
    ids=[
        "empty-dict",
        "empty-list",
        "string",
        "none",
        "numbers",
        "constants",
        "tuples",
        "bytes",
        "subclasses",
        "int-key",
        "odd-characters",
    ],
)
def test_dumps_indented_is_json_dumps_on_odd_values(document: Any) -> None:
    assert dumps_indented(document, default=bytes_as_base64) == _reference_json(document)


def test_dumps_indented_raises_as_json_dumps_does() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = [cyclic]
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(cyclic)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"a": {1, 2}})
    with pytest.raises(TypeError):
        dumps_indented({1: "a", "b": 2})  # keys json.dumps cannot sort


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_dumps_indented_is_json_dumps_on_any_json_value(document: Any) -> None:
    assert dumps_indented(document, default=bytes_as_base64) == _reference_json(document)
