"""Modified runs: the cells a caller replaces for one run, the source file left untouched.

The logbook pattern's second example: a run of a template with some cells changed, and the
record showing, for each, the template's code (after substitution), why it was changed, and the
code as run. The planner checks that the edits are a list (:func:`check_edit_list`) before
it reads the source, then each edit against the source as read (``_review.run_edits``); here
they are applied to the plan's notebook, each edited cell keeping the template's
text in ``cell.metadata.notebook_executor.original_source`` (and its note in ``edit_note``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgumentError
from .._parameters.placeholders import substitute_source
from .._records.results import EDIT_KEYS
from .._records.run_markdown import RECORD_KEY
from .._sources.remote import is_url
from .._types import CellEdit

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["MAX_EDITS", "apply_edits", "check_edit_list", "edit_notes", "forget_edits"]

#: Most cells one run may replace.
MAX_EDITS = 1000


def check_edit_list(path: str | os.PathLike[str], edits: object) -> Sequence[object]:
    """``edits`` if it is a list of at most :data:`MAX_EDITS` edits for the source at
    ``path`` (a local one when there are any); the edits themselves are checked against the
    source, once it is read (:func:`notebook_executor._review.run_edits.check_edits`).

    Raises
    ------
    InvalidArgumentError
        ``edits`` is not a list, is too long, or edits a source given as a URL.
    """
    shown = os.fspath(path)
    if isinstance(edits, (str, bytes)) or not isinstance(edits, Sequence):
        raise InvalidArgumentError(
            f"edits must be a list of {{'index', 'source', 'note'}} mappings, got "
            f"{type(edits).__name__}"
        )
    if len(edits) > MAX_EDITS:
        raise InvalidArgumentError(f"edits: at most {MAX_EDITS} cells may be edited in a run")
    if edits and is_url(shown):
        raise InvalidArgumentError(f"edits apply to a local source, not to {shown!r}")
    return edits


def forget_edits(nb: NotebookNode) -> None:
    """Drop what an executed ``.ipynb`` source says of an earlier run's edits."""
    for cell in nb.cells:
        info = cell.get("metadata", {}).get(RECORD_KEY)
        if isinstance(info, dict):
            for key in EDIT_KEYS:
                info.pop(key, None)


def apply_edits(
    nb: NotebookNode,
    edits: Sequence[CellEdit],
    substitute: Mapping[str, Any] | None,
    declared: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Keep each edited cell's template text (with ``substitute``'s placeholders replaced, as
    the rest of the run shows them) in its metadata; then put the edit's source in its place.

    Call before the notebook's own substitution, so the edited text is substituted as well.
    """
    for edit in edits:
        index = edit["index"]
        cell = nb.cells[index]
        original = cell.source
        if substitute:
            original = substitute_source(cell.cell_type, original, index, substitute, declared)
        info = cell.metadata.get(RECORD_KEY)
        cell.metadata[RECORD_KEY] = {
            **(info if isinstance(info, dict) else {}),
            "original_source": original,
            "edit_note": edit.get("note"),
        }
        cell.source = edit["source"]


def edit_notes(edits: Sequence[CellEdit]) -> list[dict[str, Any]]:
    """What the run record says of the edits: ``[{"index", "note"}]`` (the text is in the
    cells)."""
    return [{"index": edit["index"], "note": edit.get("note")} for edit in edits]
