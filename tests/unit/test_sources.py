"""Sources: reading every format, logbook front matter, conversions, and every kind of bad file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from notebook_executor import NotebookSourceError, read_notebook, write_notebook
from notebook_executor._notebook import from_dict
from notebook_executor._parameters.declared import declared_parameters
from notebook_executor._sources import formats as _sources
from notebook_executor._sources.formats import FORMATS, format_for, load_source

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"
BASIC = ["unit_basic.ipynb", "unit_basic.py", "unit_basic.md", "unit_myst.md"]


def _shape(nb: Any) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


@pytest.mark.parametrize("name", BASIC)
def test_every_format_reads_to_the_same_cells(name: str) -> None:
    nb = read_notebook(DATA / name)
    assert nb.nbformat == 4
    assert [cell.cell_type for cell in nb.cells] == [
        "markdown",
        "code",
        "code",
        "markdown",
        "code",
    ]
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    assert code == [
        'name: str = "world"  # who to greet\ncount: int = 2  # how many times',
        'for _ in range(count):\n    print(f"Hello, {name}!")',
        'import scrapbook as sb\n\nsb.glue("greeting", f"Hello, {name}!")',
    ]
    assert nb.cells[1].metadata["tags"] == ["parameters"]
    assert all(cell.get("id") for cell in nb.cells)
    nbformat.validate(nb)
    declared = declared_parameters(from_dict(nb))
    assert {n: (p.type, p.default, p.help) for n, p in declared.items()} == {
        "name": ("str", "world", "who to greet"),
        "count": ("int", 2, "how many times"),
    }


@pytest.mark.parametrize("name", BASIC)
def test_load_source_hashes_the_bytes(name: str) -> None:
    import hashlib

    loaded = load_source(DATA / name)
    assert loaded.sha256 == hashlib.sha256((DATA / name).read_bytes()).hexdigest()
    assert loaded.format is format_for(name)


def test_logbook_front_matter_becomes_a_parameters_cell() -> None:
    nb = read_notebook(DATA / "unit_logbook.md")
    first = nb.cells[0]
    assert first.cell_type == "code"
    assert first.metadata["tags"] == ["parameters"]
    declared = declared_parameters(from_dict(nb))
    assert {n: p.as_dict() for n, p in declared.items()} == {
        "station": {
            "name": "station",
            "type": "any",
            "default": None,
            "help": "station id to summarise (required)",
            "required": True,
        },
        "readings": {
            "name": "readings",
            "type": "list",
            "default": [3.1, 4.7, 5.2],
            "help": "raw readings for the day",
            "required": False,
        },
        "unit": {
            "name": "unit",
            "type": "str",
            "default": "mm",
            "help": "unit of the readings",
            "required": False,
        },
        "verbose": {
            "name": "verbose",
            "type": "bool",
            "default": False,
            "help": "",
            "required": False,
        },
        "note": {"name": "note", "type": "any", "default": None, "help": "", "required": False},
    }
    assert nb.metadata["front_matter"] == {
        "title": "Daily measurement log",
        "author": "Ada",
        "date": "2024-01-02",
    }
    kinds = [cell.cell_type for cell in nb.cells]
    assert kinds == ["code", "markdown", "code", "markdown", "code"]
    assert nb.cells[2].source.startswith("import scrapbook as sb")


def _md(tmp_path: Path, text: str, name: str = "log.md") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_front_matter_without_parameters_is_left_alone(tmp_path: Path) -> None:
    nb = read_notebook(_md(tmp_path, "---\ntitle: x\n---\n\ntext\n"))
    assert declared_parameters(from_dict(nb)) == {}
    assert "parameters" not in nb.cells[0].metadata.get("tags", [])


def test_front_matter_with_empty_parameters(tmp_path: Path) -> None:
    nb = read_notebook(_md(tmp_path, "---\nparameters:\n---\n\ntext\n"))
    assert nb.cells[0].metadata["tags"] == ["parameters"]
    assert declared_parameters(from_dict(nb)) == {}


def test_front_matter_string_values_are_literals(tmp_path: Path) -> None:
    text = '---\nparameters:\n  q: "it\'s \\"quoted\\"\\n__import__(\'os\')"\n---\n\nx\n'
    nb = read_notebook(_md(tmp_path, text))
    assert declared_parameters(from_dict(nb))["q"].default == "it's \"quoted\"\n__import__('os')"


def test_front_matter_keys_that_are_not_strings_do_not_crash(tmp_path: Path) -> None:
    # YAML reads an unquoted date as a date: a front matter key may be one.
    text = "---\n2024-01-01: holiday\nparameters:\n  a: 1\n---\n\n```python\nprint(a)\n```\n"
    nb = read_notebook(_md(tmp_path, text))
    assert declared_parameters(from_dict(nb))["a"].default == 1
    assert nb.metadata["front_matter"] == {"2024-01-01": "holiday"}


@pytest.mark.parametrize(
    ("front", "fragment"),
    [
        ("parameters:\n  a: [1, 2\n", "parse"),
        ("parameters: [a, b]\n", "must be a mapping"),
        ("parameters:\n  2: x\n", "not a valid Python name"),
        ("parameters:\n  not-a-name: 1\n", "not a valid Python name"),
        ("parameters:\n  start: 2024-01-01\n", "quote it as a string"),
        ("parameters:\n  a: !!python/object:os.system x\n", "parse"),
    ],
)
def test_malformed_logbook_front_matter(tmp_path: Path, front: str, fragment: str) -> None:
    path = _md(tmp_path, f"---\n{front}---\n\ntext\n")
    with pytest.raises(NotebookSourceError) as info:
        read_notebook(path)
    assert fragment in info.value.reason
    assert info.value.path == str(path)
    assert "\n" not in str(info.value)


MYST_CELLS = "---\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n\n{cells}"


def _myst_cell(language: str, source: str) -> str:
    return f"```{{code-cell}} {language}\n{source}\n```\n\n"


def test_a_myst_notebook_in_two_languages_is_refused_naming_the_line(tmp_path: Path) -> None:
    cells = _myst_cell("ipython3", "x = 1") + "Some text.\n\n" + _myst_cell("bash", "echo hi")
    path = _md(tmp_path, MYST_CELLS.format(cells=cells), "mixed.md")
    with pytest.raises(NotebookSourceError) as info:
        read_notebook(path)
    assert info.value.reason.startswith("line 13: a bash code cell after ipython3 ones")
    assert "\n" not in str(info.value)


def test_python_lexer_names_count_as_one_language(tmp_path: Path) -> None:
    cells = "".join(
        _myst_cell(lexer, f"x{i} = {i}")
        for i, lexer in enumerate(["ipython3", "python", "python3", "ipython"])
    )
    notebook = read_notebook(_md(tmp_path, MYST_CELLS.format(cells=cells), "pythons.md"))
    assert [cell.source for cell in notebook.cells] == ["x0 = 0", "x1 = 1", "x2 = 2", "x3 = 3"]


# -- round trips ---------------------------------------------------------------------------------

EXTENSIONS = [fmt.extension for fmt in FORMATS]


@pytest.mark.parametrize("source", BASIC)
@pytest.mark.parametrize("target", EXTENSIONS)
def test_conversions_keep_cell_types_sources_and_tags(
    tmp_path: Path, source: str, target: str
) -> None:
    original = read_notebook(DATA / source)
    written = write_notebook(original, tmp_path / f"out{target}")
    assert written == tmp_path / f"out{target}"
    back = read_notebook(written)
    assert _shape(back) == _shape(original)
    assert declared_parameters(from_dict(back)) == declared_parameters(from_dict(original))
    # and once more, through another format
    again = read_notebook(write_notebook(back, tmp_path / "again.py"))
    assert _shape(again) == _shape(original)


def test_logbook_converts_with_its_parameters(tmp_path: Path) -> None:
    original = read_notebook(DATA / "unit_logbook.md")
    for target in EXTENSIONS:
        back = read_notebook(write_notebook(original, tmp_path / f"log{target}"))
        assert _shape(back) == _shape(original)
        assert declared_parameters(from_dict(back)) == declared_parameters(from_dict(original))


def test_raw_cells_survive_conversion(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_raw_cell("raw text"),
        nbformat.v4.new_markdown_cell("# md"),
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
    ]
    for target in EXTENSIONS:
        back = read_notebook(write_notebook(nb, tmp_path / f"raw{target}"))
        assert _shape(back) == _shape(nb), target


def test_ipynb_export_names_a_python_kernel(tmp_path: Path) -> None:
    nb = read_notebook(DATA / "unit_basic.py")
    data = json.loads(write_notebook(nb, tmp_path / "x.ipynb").read_text())
    assert data["metadata"]["kernelspec"]["name"] == "python3"
    assert "kernelspec" not in nb.metadata  # the caller's notebook is not changed


def test_write_is_atomic_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    nb = read_notebook(DATA / "unit_basic.py")
    (tmp_path / "sub").mkdir()  # not created by write_notebook
    write_notebook(nb, tmp_path / "sub" / "x.py")
    write_notebook(nb, tmp_path / "sub" / "x.py")
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["x.py"]


def test_write_to_an_unsupported_extension(tmp_path: Path) -> None:
    with pytest.raises(NotebookSourceError):
        write_notebook(nbformat.v4.new_notebook(), tmp_path / "x.txt")
    assert list(tmp_path.iterdir()) == []


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + (DATA / "unit_basic.py").read_bytes())
    assert _shape(read_notebook(path)) == _shape(read_notebook(DATA / "unit_basic.py"))


def test_extension_is_case_insensitive(tmp_path: Path) -> None:
    path = tmp_path / "UPPER.PY"
    path.write_bytes((DATA / "unit_basic.py").read_bytes())
    assert len(read_notebook(path).cells) == 5


# -- bad sources ---------------------------------------------------------------------------------


def _bad(tmp_path: Path, name: str, content: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


V4_CELL = {
    "id": "a",
    "cell_type": "code",
    "metadata": {},
    "source": 5,
    "outputs": [],
    "execution_count": None,
}


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("x.ipynb", b"\xff\xfe\x00garbage", "not UTF-8"),
        ("x.py", b"# %%\nprint('\xe9')\n", "not UTF-8"),
        ("x.md", "text\x00more", "NUL"),
        ("x.ipynb", "{not json", "not valid JSON"),
        ("x.ipynb", "", "not valid JSON"),
        ("x.ipynb", "[1, 2]", "not a notebook"),
        ("x.ipynb", '{"a": 1}', "not a notebook"),
        ("x.ipynb", '"cells"', "not a notebook"),
        ("x.ipynb", json.dumps({"nbformat": 3, "worksheets": []}), "nbformat 3"),
        ("x.ipynb", json.dumps({"nbformat": "4", "cells": []}), "nbformat '4'"),
        ("x.ipynb", json.dumps({"cells": []}), "nbformat None"),
        (
            "x.ipynb",
            json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [V4_CELL]}),
            "invalid notebook",
        ),
        (
            "x.ipynb",
            json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": "nope"}),
            "invalid notebook",
        ),
        (
            "x.ipynb",
            json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": [], "cells": []}),
            "invalid notebook",
        ),
        (
            "x.ipynb",
            json.dumps(
                {
                    "nbformat": 4,
                    "nbformat_minor": 5,
                    "metadata": {},
                    "cells": [{"id": "a", "cell_type": 1}],
                }
            ),
            "invalid notebook",
        ),
        ("x.ipynb", "[" * 100_000, "not valid JSON"),
    ],
)
def test_malformed_sources(tmp_path: Path, name: str, content: bytes | str, fragment: str) -> None:
    path = _bad(tmp_path, name, content)
    with pytest.raises(NotebookSourceError) as info:
        read_notebook(path)
    assert fragment in str(info.value)
    assert info.value.path == str(path)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(NotebookSourceError, match="no such file"):
        read_notebook(tmp_path / "missing.ipynb")


def test_a_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.ipynb").mkdir()
    with pytest.raises(NotebookSourceError, match="is a folder, not a notebook"):
        read_notebook(tmp_path / "dir.ipynb")


@pytest.mark.parametrize("name", ["x.txt", "x.json", "x", "x.ipynb.bak", "x.R"])
def test_unsupported_extension(tmp_path: Path, name: str) -> None:
    path = _bad(tmp_path, name, "{}")
    with pytest.raises(NotebookSourceError, match="unsupported format") as info:
        read_notebook(path)
    assert ".ipynb, .py, .md" in str(info.value)


def test_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sources, "MAX_SOURCE_BYTES", 10)
    path = _bad(tmp_path, "big.py", "# %%\nx = 1\n")
    with pytest.raises(NotebookSourceError, match="too large"):
        read_notebook(path)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    path = _bad(tmp_path, "locked.py", "# %%\nx = 1\n")
    path.chmod(0)
    if os.geteuid() == 0:
        # Root reads any file: its read of this one fails as anyone else's does.
        from notebook_executor._sources import formats, regular

        real_read = regular.read_regular

        def read_regular(where: Path, limit: int | None = None) -> bytes:
            if where == path:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(where))
            return real_read(where, limit)

        monkeypatch.setattr(formats, "read_regular", read_regular)
    try:
        with pytest.raises(NotebookSourceError, match="cannot read: Permission denied"):
            read_notebook(path)
    finally:
        path.chmod(0o644)


def test_source_errors_pickle() -> None:
    import pickle

    error = NotebookSourceError("a.py", "no such file")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.reason, str(copy)) == ("a.py", "no such file", "a.py: no such file")
