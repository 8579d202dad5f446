"""Editing cells in place: every format, every other cell's text byte-identical, refusals."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from notebook_executor import (
    NotebookExecutor,
    NotebookExecutorError,
    NotebookSourceError,
    read_notebook,
)
from notebook_executor._sources.formats import format_for

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"
FORMATS = ["unit_basic.ipynb", "unit_basic.py", "unit_basic.md", "unit_myst.md", "unit_logbook.md"]

edit_cell = NotebookExecutor.edit_cell
insert_cell = NotebookExecutor.insert_cell
delete_cell = NotebookExecutor.delete_cell


def _shape(nb: Any) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copy(DATA / name, target)
    return target


def _split(old: str, new: str) -> tuple[str, str]:
    """The longest common prefix and the longest common suffix of two texts."""
    return old[: _common(old, new)], old[len(old) - _common(old[::-1], new[::-1]) :]


def _common(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (character by character)."""
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return size


def _assert_untouched(path: Path, old: str, new: str, before: Any, kept: range, tail: int) -> None:
    """Cells ``kept`` (before the change) lie wholly in the unchanged prefix of the file, and
    the last ``tail`` cells wholly in its unchanged suffix: their text is byte-identical."""
    prefix, suffix = _split(old, new)
    fmt = format_for(path)
    if fmt.jupytext_format is None:
        cells_text = [
            json.dumps(cell, indent=1, sort_keys=True, ensure_ascii=False).replace("\n", "\n  ")
            for cell in json.loads(old)["cells"]
        ]
        for index in kept:
            assert cells_text[index] in prefix
        for index in range(len(cells_text) - tail, len(cells_text)):
            assert cells_text[index] in suffix
        return
    for index in kept:
        if index == 0 and "parameters:" in old.split("\n---", 1)[0]:
            # A logbook's parameters cell is its front matter.
            assert prefix.startswith(old[: old.index("\n---", 3) + 4])
            continue
        assert _in_file(before.cells[index], path) in prefix
    for index in range(len(before.cells) - tail, len(before.cells)):
        assert _in_file(before.cells[index], path) in suffix


def _in_file(cell: Any, path: Path) -> str:
    """How a cell's text appears in a text source (a markdown cell of a percent script is
    commented out)."""
    if path.suffix == ".py" and cell.cell_type == "markdown":
        return "\n".join(f"# {line}" if line else "#" for line in cell.source.splitlines())
    return str(cell.source)


@pytest.mark.parametrize("name", FORMATS)
def test_edit_changes_one_cell_and_leaves_the_others_byte_identical(
    tmp_path: Path, name: str
) -> None:
    path = _copy(tmp_path, name)
    old = path.read_text(encoding="utf-8")
    before = read_notebook(path)
    index = 2
    nb = edit_cell(path, index, "total = 40 + 2\nprint(total)", expect=before.cells[index].source)
    intended = _shape(before)
    intended[index] = (intended[index][0], "total = 40 + 2\nprint(total)")
    assert _shape(nb) == intended == _shape(read_notebook(path))
    new = path.read_text(encoding="utf-8")
    _assert_untouched(path, old, new, before, range(index), len(before.cells) - index - 1)
    # The tags of the edited cell are kept.
    assert nb.cells[index].metadata.get("tags") == before.cells[index].metadata.get("tags")


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("cell_type", ["code", "markdown"])
@pytest.mark.parametrize("where", ["middle", "end"])
def test_insert_cell_in_every_format(tmp_path: Path, name: str, cell_type: str, where: str) -> None:
    path = _copy(tmp_path, name)
    old = path.read_text(encoding="utf-8")
    before = read_notebook(path)
    index = 3 if where == "middle" else len(before.cells)
    source = "# Added\n\nSome text." if cell_type == "markdown" else "added = 1\nprint(added)"
    nb = insert_cell(path, index, source, cell_type=cell_type)
    intended = _shape(before)
    intended.insert(index, (cell_type, source))
    assert _shape(nb) == intended
    new = path.read_text(encoding="utf-8")
    _assert_untouched(path, old, new, before, range(index - 1), len(before.cells) - index)


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("index", [2, 4])
def test_delete_cell_in_every_format(tmp_path: Path, name: str, index: int) -> None:
    path = _copy(tmp_path, name)
    before = read_notebook(path)
    nb = delete_cell(path, index, expect=before.cells[index].source)
    intended = _shape(before)
    del intended[index]
    assert _shape(nb) == intended == _shape(read_notebook(path))


def test_delete_between_two_markdown_cells_keeps_them_apart(tmp_path: Path) -> None:
    # In jupytext markdown, two markdown cells need two blank lines between them.
    path = _copy(tmp_path, "unit_logbook.md")
    before = read_notebook(path)
    assert [c.cell_type for c in before.cells[1:4]] == ["markdown", "code", "markdown"]
    nb = delete_cell(path, 2)
    assert [c.source for c in nb.cells[1:3]] == [before.cells[1].source, before.cells[3].source]


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("unit_basic.py", "a = 1\n# %%\nb = 2"),
        ("unit_basic.py", "a = 1\n# %% [markdown]\n# text"),
    ],
)
def test_a_source_that_would_split_the_cell_is_refused(
    tmp_path: Path, name: str, source: str
) -> None:
    path = _copy(tmp_path, name)
    old = path.read_bytes()
    with pytest.raises(NotebookSourceError, match="nothing was written"):
        edit_cell(path, 2, source)
    assert path.read_bytes() == old
    assert not [p for p in tmp_path.iterdir() if p.name != name]


@pytest.mark.parametrize("name", ["unit_basic.md", "unit_myst.md", "unit_logbook.md"])
def test_a_fence_in_markdown_is_escaped_or_refused_never_split(tmp_path: Path, name: str) -> None:
    path = _copy(tmp_path, name)
    before = read_notebook(path)
    fence = "```{code-cell} ipython3" if "myst" in name else "```python"
    source = f"a = 1\n```\n\n{fence}\nb = 2"
    try:
        nb = edit_cell(path, 2, source)
    except NotebookSourceError:
        assert _shape(read_notebook(path)) == _shape(before)
    else:
        intended = _shape(before)
        intended[2] = (intended[2][0], source)
        assert _shape(nb) == intended


@pytest.mark.parametrize("name", FORMATS)
def test_out_of_range_and_stale_edits_are_refused(tmp_path: Path, name: str) -> None:
    path = _copy(tmp_path, name)
    old = path.read_bytes()
    count = len(read_notebook(path).cells)
    with pytest.raises(NotebookExecutorError, match=rf"index {count} is out of range"):
        edit_cell(path, count, "x")
    with pytest.raises(NotebookExecutorError, match="out of range"):
        delete_cell(path, -1)
    with pytest.raises(NotebookExecutorError, match="out of range"):
        insert_cell(path, count + 1, "x")
    with pytest.raises(NotebookExecutorError, match="changed since it was read"):
        edit_cell(path, 2, "x", expect="not what the cell holds")
    with pytest.raises(NotebookExecutorError, match="cell_type"):
        insert_cell(path, 0, "x", cell_type="heading")
    assert path.read_bytes() == old


def test_logbook_front_matter_is_not_edited_through_cells(tmp_path: Path) -> None:
    path = _copy(tmp_path, "unit_logbook.md")
    with pytest.raises(NotebookExecutorError, match="front matter"):
        edit_cell(path, 0, "station = 'x'")
    with pytest.raises(NotebookExecutorError, match="front matter"):
        insert_cell(path, 0, "x = 1")


def test_missing_file_and_bad_format(tmp_path: Path) -> None:
    with pytest.raises(NotebookSourceError, match="no such file"):
        edit_cell(tmp_path / "missing.py", 0, "x")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NotebookSourceError, match="unsupported format"):
        edit_cell(tmp_path / "notes.txt", 0, "x")


@pytest.mark.parametrize("name", ["unit_basic.ipynb", "unit_basic.py"])
def test_file_mode_is_kept_and_no_temp_file_remains(tmp_path: Path, name: str) -> None:
    path = _copy(tmp_path, name)
    path.chmod(0o640)
    edit_cell(path, 2, "print('mode')")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_ipynb_keeps_its_layout_and_outputs(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("print('é')", outputs=[
                nbformat.v4.new_output("stream", name="stdout", text="é\n")
            ]),
            nbformat.v4.new_markdown_cell("note"),
        ]
    )  # fmt: skip
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb, indent=2, ensure_ascii=True) + "\n", encoding="utf-8")
    inserted = insert_cell(path, 1, "x = 'ü'")
    edited = edit_cell(path, 0, "print('è')")
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.isascii()  # escaping and the final newline kept
    assert '\n      "cell_type": "code"' in text  # the two-space indentation kept
    assert edited.cells[0].outputs[0].text == "é\n"
    assert [c.source for c in edited.cells] == ["print('è')", "x = 'ü'", "note"]
    assert len({c.id for c in inserted.cells}) == 3


def test_a_file_changed_during_the_edit_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_executor._review import edit as edit_module

    path = _copy(tmp_path, "unit_basic.py")
    real = edit_module._verify

    def meanwhile(*args: Any) -> None:
        real(*args)
        path.write_text(path.read_text() + "\n# %%\nother = 1\n")

    monkeypatch.setattr(edit_module, "_verify", meanwhile)
    with pytest.raises(NotebookExecutorError, match="changed while it was being edited"):
        edit_cell(path, 2, "x = 1")
    assert path.read_text().endswith("other = 1\n")


# -- property: whatever the text, an edit is exact or refused ---------------------------------

_TEXT = st.text(
    alphabet=st.sampled_from(list("ab x=1#%`-+:{}[]\n")),
    min_size=0,
    max_size=40,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(FORMATS),
    op=st.sampled_from(["edit", "insert", "delete"]),
    index=st.integers(min_value=1, max_value=5),
    source=_TEXT,
    cell_type=st.sampled_from(["code", "markdown"]),
)
# jupytext's writer raised IndexError on this text: now refused like any unwritable edit.
@example(name="unit_logbook.md", op="edit", index=1, source="%%", cell_type="code")
@example(name="unit_logbook.md", op="insert", index=1, source="%%", cell_type="markdown")
def test_every_edit_is_exact_or_refused(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    op: str,
    index: int,
    source: str,
    cell_type: str,
) -> None:
    path = _copy(tmp_path_factory.mktemp("prop"), name)
    old = path.read_text(encoding="utf-8")
    before = read_notebook(path)
    count = len(before.cells)
    index = min(index, count if op == "insert" else count - 1)
    intended = _shape(before)
    try:
        if op == "edit":
            nb = edit_cell(path, index, source)
            intended[index] = (intended[index][0], _as_stored(name, source))
            kept, tail = range(index), count - index - 1
        elif op == "insert":
            nb = insert_cell(path, index, source, cell_type)
            intended.insert(index, (cell_type, _as_stored(name, source)))
            kept, tail = range(max(index - 1, 0)), count - index
        else:
            nb = delete_cell(path, index)
            del intended[index]
            kept, tail = range(max(index - 1, 0)), max(count - index - 2, 0)
    except NotebookSourceError:
        assert path.read_text(encoding="utf-8") == old
        return
    assert _shape(nb) == intended
    _assert_untouched(path, old, path.read_text(encoding="utf-8"), before, kept, tail)


def _as_stored(name: str, source: str) -> str:
    """A text format holds a cell's source up to its last line: trailing line breaks go."""
    return source if name.endswith(".ipynb") else source.rstrip("\r\n")


def test_an_edit_ending_in_a_line_break_is_written_as_the_format_holds_it(
    tmp_path: Path,
) -> None:
    """On a percent script, "z = 1\n" replaces the first cell (it was refused as changing the
    notebook's other cells, naming a cell boundary that was not there)."""
    path = tmp_path / "nb.py"
    path.write_text('# %% tags=["parameters"]\nx = None\n\n# %%\nprint(x)\n', encoding="utf-8")
    nb = edit_cell(path, 0, "z = 1\n")
    assert [cell.source for cell in nb.cells] == ["z = 1", "print(x)"]
    assert path.read_text(encoding="utf-8") == '# %% tags=["parameters"]\nz = 1\n\n# %%\nprint(x)\n'


def test_jupytext_reads_edited_files_as_our_reader_does(tmp_path: Path) -> None:
    path = _copy(tmp_path, "unit_basic.py")
    nb = edit_cell(path, 2, "y = 3")
    theirs = jupytext.read(path, fmt="py:percent")
    assert _shape(theirs) == _shape(nb)


@pytest.mark.parametrize("name", FORMATS)
def test_an_edit_undone_gives_back_the_same_bytes(tmp_path: Path, name: str) -> None:
    path = _copy(tmp_path, name)
    original = path.read_bytes()
    cells = read_notebook(path).cells
    for index in range(1 if "logbook" in name else 0, len(cells)):
        edit_cell(path, index, "changed = True", expect=cells[index].source)
        edit_cell(path, index, cells[index].source, expect="changed = True")
        assert path.read_bytes() == original


@pytest.mark.parametrize("name", ["unit_basic.py", "unit_basic.md", "unit_myst.md"])
def test_windows_line_ends_are_kept(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes((DATA / name).read_bytes().replace(b"\n", b"\r\n"))
    nb = insert_cell(path, 2, "a = 1\nb = 2")
    nb = edit_cell(path, 3, "c = 3\nd = 4")
    assert [c.source for c in nb.cells[2:4]] == ["a = 1\nb = 2", "c = 3\nd = 4"]
    data = path.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")
