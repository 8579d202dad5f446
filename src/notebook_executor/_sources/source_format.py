"""A row of the format table: what the package knows of one source format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["SNIFF_CHARS", "SourceFormat", "Spans"]

#: ``[start, end)`` line ranges, one per cell.
Spans = list[tuple[int, int]]

#: How much of a file the sniffers see: a header or a first cell marker comes early.
SNIFF_CHARS = 64 * 1024


@dataclass(frozen=True)
class SourceFormat:
    """One supported source format: a row of :data:`.formats.FORMATS`."""

    #: What errors and messages call it ("percent script").
    name: str
    #: File suffixes, lower case; the first is the one the format is known by.
    suffixes: tuple[str, ...]
    #: jupytext format for text formats; None means nbformat JSON.
    jupytext_format: str | None
    #: Whether a file with one of the suffixes, found in a folder, is a notebook, from the
    #: first :data:`SNIFF_CHARS` characters of its text; None: every such file is one.
    sniff: Callable[[str], bool] | None
    #: ``read(notebook, text, fmt)``: the notebook ``text`` holds (``notebook`` names the
    #: source in errors, which are :class:`NotebookSourceError`).
    read: Callable[[str, str, SourceFormat], NotebookNode]
    #: ``write(nb, fmt)``: the text of ``nb`` in this format.
    write: Callable[[NotebookNode, SourceFormat], str]
    #: ``spans(text, nb, fmt)``: ``(header_end, spans)``, the line where cells start and the
    #: ``[start, end)`` line range of each cell of ``nb`` (read from ``text``); None for
    #: JSON, whose cells the editor finds as the elements of the ``cells`` array.
    spans: Callable[[str, NotebookNode, SourceFormat], tuple[int, Spans]] | None
    #: Why a file the sniffer refuses still looks like a notebook (and is not one), from the
    #: same head; None when it does not look like one (or the format has no sniffer).
    near_miss: Callable[[str], str | None] | None = None

    @property
    def extension(self) -> str:
        """The suffix the format is known by (``.py``)."""
        return self.suffixes[0]

    @property
    def is_text(self) -> bool:
        """Whether jupytext reads it (a text format stores no outputs)."""
        return self.jupytext_format is not None
