"""The edits of a modified run, checked against the source before anything starts.

An edit is ``{"index", "source", "note"}``: a code or markdown cell's new text for one run.
Each is checked as :func:`~notebook_executor._review.edit.edit_cell` checks an edit of the file
(index in range, a text the source's format can hold as that one cell), without writing
anything; then the cell must be a code or markdown cell other than the parameters cell (whose
values come from the run's parameters).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .._errors import InvalidArgumentError
from .._parameters.declared import PARAMETERS_TAG
from .._run.edits import check_edit_list
from .._sources.bounded import unencodable
from .._sources.formats import LoadedSource
from .._types import CellEdit
from .edit import checked_edit

__all__ = ["CodeCellEdit", "check_edits"]

_KEYS = ("index", "source", "note")


class CodeCellEdit(dict[str, Any]):
    """An edit meant for a code cell only: one of another cell is refused, the message ending
    with :attr:`hint`. The command line's ``--edit`` without ``--edit-markdown`` gives these
    (a code file given for the wrong index would silently replace the narrative)."""

    #: What the caller can do about an edit of another kind of cell.
    hint: str = ""


def check_edits(
    path: str | os.PathLike[str], edits: object, loaded: LoadedSource
) -> list[CellEdit]:
    """``edits`` checked against the source at ``path`` as read (``loaded``: the file is not
    read again), each source as the file would hold it.

    Raises
    ------
    InvalidArgumentError
        ``edits`` is not a list of ``{"index", "source", "note"}`` mappings (a key unknown or
        missing, a value of the wrong type), an index is out of range or given twice, or the
        cell is not a code or markdown cell (not code, for a :class:`CodeCellEdit`), or is the
        parameters cell.
    NotebookSourceError
        A new text would split or merge cells in the source's format.
    """
    shown = os.fspath(path)
    checked: list[CellEdit] = []
    seen: set[int] = set()
    cells = loaded.nb.cells
    for number, edit in enumerate(check_edit_list(path, edits)):
        where = f"edits[{number}]"
        index, source, note = _fields(where, edit)
        if index in seen:
            raise InvalidArgumentError(f"{where}: cell {index} is edited twice")
        seen.add(index)
        text = checked_edit(path, index, source, loaded=loaded)
        cell = cells[index]
        if cell.cell_type not in ("code", "markdown"):
            raise InvalidArgumentError(
                f"{where}: cell {index} of {shown} is a {cell.cell_type} cell; only code and "
                "markdown cells are edited"
            )
        if isinstance(edit, CodeCellEdit) and cell.cell_type != "code":
            raise InvalidArgumentError(
                f"{where}: cell {index} of {shown} is a {cell.cell_type} cell, not code"
                + (f"; {edit.hint}" if edit.hint else "")
            )
        if PARAMETERS_TAG in (cell.get("metadata", {}).get("tags") or []):
            raise InvalidArgumentError(
                f"{where}: cell {index} of {shown} is the parameters cell; give the values as "
                "parameters instead"
            )
        checked.append({"index": index, "source": text, "note": note})
    return checked


def _fields(where: str, edit: object) -> tuple[int, str, str | None]:
    if not isinstance(edit, Mapping):
        raise InvalidArgumentError(
            f"{where} must be a mapping with 'index', 'source' and 'note', got "
            f"{type(edit).__name__}"
        )
    unknown = sorted(repr(key) for key in edit if key not in _KEYS)
    if unknown:
        raise InvalidArgumentError(
            f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; an "
            "edit takes 'index', 'source' and 'note'"
        )
    for key in ("index", "source"):
        if key not in edit:
            raise InvalidArgumentError(f"{where}: {key!r} is missing")
    index: Any = edit["index"]
    if isinstance(index, bool) or not isinstance(index, int):
        raise InvalidArgumentError(f"{where}: 'index' must be an int, got {index!r}")
    source: Any = edit["source"]
    if not isinstance(source, str):
        raise InvalidArgumentError(f"{where}: 'source' must be a str, got {type(source).__name__}")
    note: Any = edit.get("note")
    if note is not None:
        if not isinstance(note, str):
            raise InvalidArgumentError(
                f"{where}: 'note' must be a str or None, got {type(note).__name__}"
            )
        problem = unencodable(note)
        if problem:
            raise InvalidArgumentError(f"{where}: 'note': {problem}")
    return index, source, note
