"""What every reader of a source shares: errors in the user's terms, and one shape of notebook."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "CELL_IDS_MINOR",
    "NESTED_TOO_DEEP",
    "first_line",
    "normalised",
    "parse_failure",
    "with_cell_ids_version",
]

#: What a source nested deeper than the parsers go is told.
NESTED_TOO_DEEP = "it is nested too deep"

#: The nbformat minor version that introduced cell ids.
CELL_IDS_MINOR = 5


def first_line(exc: BaseException) -> str:
    """The first line of an error's text, at most 300 characters."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def parse_failure(exc: BaseException) -> str:
    """A parser's failure in the user's terms: no names of Python internals."""
    import yaml

    if isinstance(exc, RecursionError):
        return NESTED_TOO_DEEP
    if isinstance(exc, yaml.YAMLError):
        return f"its YAML header is not valid YAML ({first_line(exc)})"
    if isinstance(exc, (AttributeError, TypeError, KeyError, IndexError)):
        return "its header or a cell's metadata holds a value of the wrong type"
    return first_line(exc)


def normalised(nb: NotebookNode) -> NotebookNode:
    """``nb`` with an id on every cell, so later stages need no special cases; ids exist from
    nbformat 4.5 on, so an older nb becomes a 4.5 one (or it would no longer validate)."""
    from .._notebook import random_cell_id

    for cell in nb.cells:
        if "id" not in cell:
            cell["id"] = random_cell_id()
    return with_cell_ids_version(nb)


def with_cell_ids_version(nb: NotebookNode) -> NotebookNode:
    """``nb`` marked nbformat 4.5 when its cells have ids and it says an older 4.x."""
    old = nb.get("nbformat") == 4 and nb.get("nbformat_minor", 0) < CELL_IDS_MINOR
    if old and any("id" in cell for cell in nb.get("cells", ())):
        nb["nbformat_minor"] = CELL_IDS_MINOR
    return nb
