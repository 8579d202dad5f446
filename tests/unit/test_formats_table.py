"""The format table: one sniffer for every face, and a format added by one row."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor, NotebookSourceError, read_notebook, write_notebook
from notebook_executor._faces.mcp.paths import Root
from notebook_executor._review.check import find_notebooks
from notebook_executor._sources import formats
from notebook_executor._sources.source_format import SourceFormat
from notebook_executor._sources.spans import text_cell_spans
from notebook_executor._sources.text_formats import read_text, sniff_script, write_text

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"

#: Files a folder may hold, and whether each is a notebook source.
FOUND = {
    # Every .ipynb is one, whatever its case.
    "a.ipynb": True,
    "UPPER.IPYNB": True,
    # A percent script, with or without a space after the '#'.
    "percent.py": True,
    "tight.py": True,
    # A light script declares itself with a jupytext header.
    "light.py": True,
    "module.py": False,
    # Markdown: a jupytext header, MyST cells or a logbook front matter make a notebook...
    "jupytext.md": True,
    "myst.md": True,
    "logbook.md": True,
    # ... a page with a front matter or code blocks does not.
    "page.md": False,
    "readme.md": False,
    "notes.txt": False,
}

TEXTS = {
    "percent.py": "# %%\nx = 1\n",
    "tight.py": "#%%\nx = 1\n",
    "light.py": "# ---\n# jupyter:\n#   jupytext:\n#     formats: py:light\n# ---\n\nx = 1\n",
    "module.py": "print('a module')\n",
    "jupytext.md": "---\njupyter:\n  jupytext:\n    formats: md\n---\n\n```python\nx = 1\n```\n",
    "myst.md": "# Title\n\n```{code-cell} python\nx = 1\n```\n",
    "logbook.md": "---\nparameters:\n  x: 1\n---\n\n```python\nprint(x)\n```\n",
    "page.md": "---\ntitle: A page\nlayout: post\n---\n\nSome prose.\n",
    "readme.md": "# Readme\n\n```python\nx = 1\n```\n",
    "notes.txt": "# %%\nx = 1\n",
}


def _folder(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in FOUND:
        if name.lower().endswith(".ipynb"):
            shutil.copy(DATA / "unit_basic.ipynb", root / name)
        else:
            (root / name).write_text(TEXTS[name], encoding="utf-8")
    return root


def _names(paths: list[str] | list[Path], root: Path) -> list[str]:
    return sorted(Path(p).relative_to(root).as_posix() for p in paths)


def test_check_finds_exactly_the_notebooks(tmp_path: Path) -> None:
    root = _folder(tmp_path / "root")
    assert _names(find_notebooks([str(root)]), root) == sorted(n for n, ok in FOUND.items() if ok)


def test_mcp_listing_and_check_discovery_agree(tmp_path: Path) -> None:
    # Before, the MCP server had its own sniffer: it listed any .md opening with '---' or
    # holding a ```python block, missed '#%%' scripts, light scripts and upper-case suffixes.
    root = _folder(tmp_path / "root")
    listed = list(Root(root).notebooks(root, None))
    assert _names(listed, root) == _names(find_notebooks([str(root)]), root)


@pytest.mark.parametrize("skipped", [".hidden", "__pycache__", "venv", "runs"])
def test_mcp_listing_and_check_skip_the_same_folders(tmp_path: Path, skipped: str) -> None:
    root = tmp_path / "root"
    _folder(root / skipped)
    if skipped == "venv":
        (root / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    if skipped == "runs":
        (root / "runs" / "catalog.sqlite").write_bytes(b"")
    shutil.copy(DATA / "unit_basic.py", root / "top.py")
    assert _names(find_notebooks([str(root)]), root) == ["top.py"]
    assert _names(list(Root(root).notebooks(root, None)), root) == ["top.py"]


# -- a format is one row ------------------------------------------------------------------------


@pytest.fixture
def txt_format(monkeypatch: pytest.MonkeyPatch) -> SourceFormat:
    """A test-only row: percent scripts kept in ``.txt`` files, built from the text rows' parts."""
    row = SourceFormat(
        "percent text",
        (".txt",),
        "py:percent",
        sniff_script,
        read_text,
        write_text,
        text_cell_spans,
    )
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, row))
    return row


def test_a_new_row_reads_writes_is_found_listed_and_edited(
    tmp_path: Path, txt_format: SourceFormat
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    source = root / "basic.txt"
    shutil.copy(DATA / "unit_basic.py", source)
    (root / "notes.txt").write_text("Some notes, no cells.\n", encoding="utf-8")
    # Read: the same cells as the script it was copied from.
    expected = [(c.cell_type, c.source) for c in read_notebook(DATA / "unit_basic.py").cells]
    assert formats.format_for(source) is txt_format
    assert [(c.cell_type, c.source) for c in read_notebook(source).cells] == expected
    # Write: a percent script, which reads back to the same cells.
    written = write_notebook(read_notebook(DATA / "unit_basic.ipynb"), root / "out.txt")
    assert "\n# %% [markdown]\n# The end.\n" in written.read_text(encoding="utf-8")
    assert [(c.cell_type, c.source) for c in read_notebook(written).cells] == expected
    # Found by check and listed by the MCP server; a .txt without cells is neither.
    assert _names(find_notebooks([str(root)]), root) == ["basic.txt", "out.txt"]
    assert _names(list(Root(root).notebooks(root, None)), root) == ["basic.txt", "out.txt"]
    # Edited in place: the other cells' text is untouched.
    before = source.read_text(encoding="utf-8")
    nb = NotebookExecutor.edit_cell(source, 2, 'print("edited")')
    assert nb.cells[2].source == 'print("edited")'
    after = source.read_text(encoding="utf-8")
    assert after == before.replace(
        'for _ in range(count):\n    print(f"Hello, {name}!")', 'print("edited")'
    )
    NotebookExecutor.insert_cell(source, 5, "z = 3")
    assert read_notebook(source).cells[5].source == "z = 3"
    assert source.read_text(encoding="utf-8").endswith("# %%\nz = 3\n")


def test_without_the_row_a_txt_file_is_no_notebook(tmp_path: Path) -> None:
    (tmp_path / "basic.txt").write_text("# %%\nx = 1\n", encoding="utf-8")
    assert find_notebooks([str(tmp_path)]) == []
    with pytest.raises(NotebookSourceError, match=r"unsupported format '\.txt'"):
        read_notebook(tmp_path / "basic.txt")
