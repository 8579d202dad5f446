"""Diffing notebooks: every format, matching by id and by alignment, outputs without noise."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest

from notebook_executor import NotebookExecutor, NotebookSourceError, RunNotFoundError
from notebook_executor._faces.cli import main
from notebook_executor._review.diff import diff_cells, normalised_outputs

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"
BASIC = ["unit_basic.ipynb", "unit_basic.py", "unit_basic.md", "unit_myst.md"]


@pytest.mark.parametrize("name", [*BASIC, "unit_logbook.md"])
def test_a_notebook_is_identical_to_itself(ex: NotebookExecutor, name: str) -> None:
    assert ex.diff_notebooks(DATA / name, DATA / name, outputs=True) == {
        "identical": True,
        "cells": [],
        "metadata_changed": False,
    }


@pytest.mark.parametrize("a", BASIC)
@pytest.mark.parametrize("b", BASIC)
def test_formats_compare_by_content(ex: NotebookExecutor, a: str, b: str) -> None:
    difference = ex.diff_notebooks(DATA / a, DATA / b)
    # The same cells in every format; only the first markdown cell names the format.
    changed = [(c["op"], c["index_a"], c["index_b"]) for c in difference["cells"]]
    same_intro = (
        ex.read_notebook(DATA / a).cells[0].source == ex.read_notebook(DATA / b).cells[0].source
    )
    assert changed == ([] if same_intro else [("modified", 0, 0)])
    assert difference["metadata_changed"] is False


@pytest.mark.parametrize("name", [*BASIC, "unit_logbook.md"])
def test_edit_insert_delete_show_as_modified_added_removed(
    ex: NotebookExecutor, tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    shutil.copy(DATA / name, path)
    ex.edit_cell(path, 2, ex.read_notebook(path).cells[2].source + "\nextra = 1")
    count = len(ex.read_notebook(path).cells)
    ex.insert_cell(path, count, "appended = True")
    ex.delete_cell(path, 1 if name != "unit_logbook.md" else 3)
    difference = ex.diff_notebooks(DATA / name, path)
    ops = {c["op"]: c for c in difference["cells"]}
    assert set(ops) == {"modified", "added", "removed"}
    assert ops["modified"]["index_a"] == 2
    assert "+extra = 1" in ops["modified"]["source_diff"].splitlines()
    assert ops["added"]["index_a"] is None and ops["added"]["index_b"] == count - 1
    assert ops["added"]["source_diff"].splitlines()[-1] == "+appended = True"
    assert ops["removed"]["index_b"] is None
    assert difference["identical"] is False


def test_cells_match_by_id_when_both_have_ids() -> None:
    a = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"x{i} = {i}") for i in range(4)])
    b = copy.deepcopy(a)
    # Rewrite a cell completely: matched by id, it is one modified cell, not remove + add.
    b.cells[2].source = "completely different text"
    b.cells.insert(0, nbformat.v4.new_code_cell("first = 0"))
    difference = diff_cells(a, b)
    assert [(c["op"], c["index_a"], c["index_b"]) for c in difference["cells"]] == [
        ("added", None, 0),
        ("modified", 2, 3),
    ]


def test_without_shared_ids_similar_cells_pair_and_different_ones_do_not() -> None:
    a = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("import math\nvalue = math.sqrt(16)"),
            nbformat.v4.new_code_cell("print('unrelated cell here')"),
        ]
    )
    b = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("import math\nvalue = math.sqrt(25)"),
            nbformat.v4.new_code_cell("zzz"),
        ]
    )
    for cell in [*a.cells, *b.cells]:
        cell.pop("id")
    ops = [(c["op"], c["index_a"], c["index_b"]) for c in diff_cells(a, b)["cells"]]
    assert ops == [("modified", 0, 0), ("removed", 1, None), ("added", None, 1)]


def _with_output(source: str, *outputs: dict[str, object]) -> Any:
    cell = nbformat.v4.new_code_cell(source, execution_count=1)
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def test_outputs_compared_without_noise() -> None:
    a = nbformat.v4.new_notebook(
        cells=[
            _with_output(
                "obj",
                {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                 "data": {"text/plain": "<Thing at 0x7f3a2c1b9d90>"}},
                {"output_type": "stream", "name": "stdout", "text": "\x1b[31mred\x1b[0m\n"},
            ),
            _with_output("print(1)", {"output_type": "stream", "name": "stdout", "text": "1\n"}),
        ]
    )  # fmt: skip
    b = copy.deepcopy(a)
    b.cells[0].execution_count = 7
    b.cells[0].outputs[0]["execution_count"] = 7
    b.cells[0].outputs[0]["data"]["text/plain"] = "<Thing at 0x7f00deadbeef>"
    b.cells[0].outputs[1]["text"] = "red\n"
    b.cells[0].metadata["execution"] = {"iopub.status.busy": "2024-01-01T00:00:00Z"}
    b.cells[1].outputs[0]["text"] = "2\n"
    difference = diff_cells(a, b, outputs=True)
    assert [(c["op"], c["index_a"], c["outputs_changed"]) for c in difference["cells"]] == [
        ("modified", 1, True)
    ]
    assert difference["cells"][0]["source_diff"] == ""
    # Without outputs=True the outputs are not looked at.
    assert diff_cells(a, b)["identical"] is True


def test_stream_chunks_are_merged() -> None:
    one = [{"output_type": "stream", "name": "stdout", "text": "ab\n"}]
    two = [
        {"output_type": "stream", "name": "stdout", "text": "a"},
        {"output_type": "stream", "name": "stdout", "text": "b\n"},
    ]
    assert normalised_outputs(one) == normalised_outputs(two)


def test_metadata_change_is_reported(tmp_path: Path, ex: NotebookExecutor) -> None:
    nb = json.loads((DATA / "unit_basic.ipynb").read_text())
    nb["metadata"]["authors"] = [{"name": "Ada"}]
    path = tmp_path / "meta.ipynb"
    path.write_text(json.dumps(nb))
    difference = ex.diff_notebooks(DATA / "unit_basic.ipynb", path)
    assert difference == {"identical": False, "cells": [], "metadata_changed": True}


def test_five_hundred_cells(tmp_path: Path) -> None:
    a = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(f"value_{i} = {i} * 2\nprint(value_{i})") for i in range(500)
        ]
    )
    b = copy.deepcopy(a)
    for cell in [*a.cells, *b.cells]:
        cell.pop("id")
    b.cells[100].source += "\n# changed"
    del b.cells[300]
    b.cells.insert(400, nbformat.v4.new_markdown_cell("new"))
    ops = [(c["op"], c["index_a"], c["index_b"]) for c in diff_cells(a, b)["cells"]]
    assert ops == [("modified", 100, 100), ("removed", 300, None), ("added", None, 400)]


def test_unknown_references(ex: NotebookExecutor) -> None:
    with pytest.raises(RunNotFoundError):
        ex.diff_notebooks(DATA / "unit_basic.py", "20240101T000000Z-nothing-here")
    with pytest.raises(NotebookSourceError, match="no such file"):
        ex.diff_notebooks(DATA / "unit_basic.py", "missing.ipynb")


def test_cli_diff_json_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(DATA / "unit_basic.py"), str(DATA / "unit_basic.py"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["identical"] is True
    code = main(["diff", str(DATA / "unit_basic.py"), str(DATA / "unit_basic.md")])
    out = capsys.readouterr().out
    assert code == 1
    assert "\x1b[" not in out  # not a terminal: no colour
    assert "@@ cell 0 modified [markdown]" in out
    assert "-A small percent script." in out and "+A small markdown notebook." in out


def test_cli_diff_colours_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from notebook_executor._faces.cli.review import write_diff

    difference = diff_cells(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 1")]),
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 2")]),
    )
    coloured, plain = io.StringIO(), io.StringIO()
    write_diff(difference, "A", "B", coloured, True)
    write_diff(difference, "A", "B", plain, False)
    assert "\x1b[32m+a = 2\x1b[0m" in coloured.getvalue()
    assert "\x1b[" not in plain.getvalue() and "+a = 2" in plain.getvalue()
