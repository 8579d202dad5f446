"""RunStore, the one owner of the run records: names, writes, reads (parsed once), lists."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from notebook_executor import NotebookSourceError, RunNotFoundError
from notebook_executor._notebook import NotebookNode, from_dict
from notebook_executor._records.store import RunStore, executed_cells

RUN_ID = "20240309T172645Z-hello-3f2a1b9c"


def _notebook(text: str = "hello\n") -> NotebookNode:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('hello')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    nb.cells = [cell]
    node: NotebookNode = from_dict(nb)
    return node


def test_names_only_run_ids(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    assert store.path(RUN_ID) == tmp_path / "2024-03-09" / f"{RUN_ID}.ipynb"
    for bad in ("../../etc/passwd", "hello", f"{RUN_ID}/../x", ""):
        assert not store.exists(bad)
        with pytest.raises(RunNotFoundError):
            store.path(bad)
    assert not store.exists(RUN_ID)


def test_a_read_is_one_parse_of_what_was_written(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    path = store.write(RUN_ID, _notebook(), {"run_id": RUN_ID, "status": "success"}, final=True)
    assert store.exists(RUN_ID)
    run_file = store.read(RUN_ID)
    assert run_file.run_id == RUN_ID
    assert run_file.record == {"run_id": RUN_ID, "status": "success"}
    # Cells as stored (text split into lines), and a notebook as nbformat reads the file.
    assert run_file.cells == json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert run_file.notebook() == nbformat.read(path, as_version=4)
    # Each notebook is a new one: changing it changes neither the file nor the next one.
    changed = run_file.notebook()
    changed.cells[0].source = "changed"
    assert run_file.notebook().cells[0].source == "print('hello')"


def test_the_cache_keeps_a_parse_until_the_file_changes(tmp_path: Path) -> None:
    store = RunStore(tmp_path, cache=1)
    store.write(RUN_ID, _notebook(), {"run_id": RUN_ID, "status": "running"}, final=False)
    first = store.read(RUN_ID)
    assert store.read(RUN_ID) is first
    store.write(RUN_ID, _notebook(), {"run_id": RUN_ID, "status": "success"}, final=True)
    again = store.read(RUN_ID)
    assert again is not first and again.record["status"] == "success"
    # Without a cache every read parses.
    assert RunStore(tmp_path).read(RUN_ID) is not RunStore(tmp_path).read(RUN_ID)


def test_lists_run_files_only(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.write(RUN_ID, _notebook(), {"run_id": RUN_ID}, final=True)
    later = "20240310T000000Z-hello-00000000"
    store.write(later, _notebook(), {"run_id": later}, final=False)
    (tmp_path / "2024-03-09" / "copy.ipynb").write_text("{}")
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / f"{RUN_ID}.ipynb").write_text("{}")
    assert list(store.paths()) == [store.path(RUN_ID), store.path(later)]
    assert list(RunStore(tmp_path / "nowhere").paths()) == []


def test_damaged_or_foreign_files_are_refused(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    with pytest.raises(RunNotFoundError):
        store.read(RUN_ID)
    path = store.path(RUN_ID)
    path.parent.mkdir(parents=True)
    for text, reason in (
        ("{not json", "unreadable run record"),
        ("[1, 2]", "unreadable run record"),
        (json.dumps(nbformat.v4.new_notebook()), "not a notebook-executor run record"),
    ):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(NotebookSourceError, match=reason):
            store.read(RUN_ID)


def test_executed_cells_of_any_executed_notebook(tmp_path: Path) -> None:
    # A caller's copy or papermill's output holds no record: its cells are still read.
    path = tmp_path / "out.ipynb"
    nbformat.write(nbformat.from_dict(_notebook()), os.fspath(path))
    assert executed_cells(path)[0]["outputs"][0]["text"] == ["hello\n"]
