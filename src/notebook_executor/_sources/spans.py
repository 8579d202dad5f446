"""Where each cell of a text notebook lies, by the rules jupytext reads it with.

jupytext reads a percent script or a markdown notebook with one cell reader per cell, each
consuming a number of lines; :func:`text_spans` runs that same loop and records the line range
each reader consumed, so the ranges follow jupytext's rules exactly (the caller verifies every
edit by reading the new text back). MyST is read by jupytext through markdown-it tokens, whose
line maps :func:`myst_spans` follows in the same way. :func:`text_cell_spans` is the span
finder of the text rows of the format table.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .source_format import Spans

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .source_format import SourceFormat

__all__ = ["Renderer", "Spans", "myst_spans", "text_cell_spans", "text_spans"]


def text_cell_spans(text: str, nb: NotebookNode, fmt: SourceFormat) -> tuple[int, Spans]:
    """``(header_end, spans)`` of ``text``, read as ``nb`` in format ``fmt`` (a script's
    PEP 723 block, no cell, is part of the header)."""
    from .dependencies import is_script_block
    from .text_formats import writing_format

    jupytext_format = writing_format(nb, fmt)
    if jupytext_format == "md:myst":
        return myst_spans(text)
    header_end, spans = text_spans(text, jupytext_format)
    if jupytext_format.startswith("py") and spans:
        # A script's PEP 723 block is no cell (read_script leaves it out): a header here.
        start, end = spans[0]
        if is_script_block("\n".join(text.splitlines()[start:end])):
            header_end = spans[1][0] if len(spans) > 1 else end
            spans = spans[1:]
    return header_end, spans


def text_spans(text: str, jupytext_format: str) -> tuple[int, Spans]:
    """``(header_end, spans)``: the line where cells start (after a YAML header) and the
    ``[start, end)`` line range of each cell jupytext reads from ``text``."""
    from jupytext.formats import guess_format, long_form_one_format, read_format_from_metadata
    from jupytext.jupytext import TextNotebookConverter

    fmt: dict[str, Any] = long_form_one_format(jupytext_format)
    extension = fmt["extension"]
    name = read_format_from_metadata(text, extension) or fmt.get("format_name")
    if name:
        fmt["format_name"] = name
    else:  # pragma: no cover - the formats used here always name themselves
        name, options = guess_format(text, extension)
        fmt["format_name"] = name
        fmt.update(options)
    converter = TextNotebookConverter(fmt, None)
    implementation = copy.copy(converter.implementation)
    total = len(text.splitlines())
    spans: Spans = []
    base = implementation.cell_reader_class

    class _Recording(base):  # type: ignore[misc, valid-type]
        def read(self, lines: list[str]) -> tuple[Any, int]:
            cell, consumed = super().read(lines)
            start = total - len(lines)
            spans.append((start, start + consumed))
            return cell, consumed

    implementation.cell_reader_class = _Recording
    converter.implementation = implementation
    converter.reads(text)
    header_end = spans[0][0] if spans else total
    return header_end, spans


def myst_spans(text: str) -> tuple[int, Spans]:
    """As :func:`text_spans`, for a MyST notebook (cells as jupytext's MyST reader finds them)."""
    from jupytext.myst import CODE_DIRECTIVE, RAW_DIRECTIVE, get_parser

    lines = text.splitlines()
    tokens = get_parser().parse(text + "\n")
    header_end = 0
    if tokens and tokens[0].type == "front_matter":
        header_end = tokens.pop(0).map[1]
    starts: list[int] = []
    markdown_from = header_end
    markdown_start = header_end

    def flush(until: int) -> None:
        if "\n".join(lines[markdown_from:until]).strip():
            starts.append(markdown_start)

    depth = 0
    for token in tokens:
        depth += token.nesting
        if depth != 0:
            continue
        is_cell = token.type == "fence" and token.info.startswith((CODE_DIRECTIVE, RAW_DIRECTIVE))
        if is_cell or token.type == "myst_block_break":
            flush(token.map[0])
            if is_cell:
                starts.append(token.map[0])
            markdown_start = token.map[0] if not is_cell else token.map[1]
            markdown_from = token.map[1]
    flush(len(lines))
    ends = [*starts[1:], len(lines)]
    spans = list(zip(starts, ends, strict=True))
    return header_end, spans


class UnwritableText(ValueError):
    """jupytext cannot write a cell's text in the file's format (the caller names the file)."""


class Renderer:
    """Cell texts as jupytext writes them in the format of ``nb``.

    A cell is written after its predecessor, which decides the separators between them (two
    blank lines between markdown cells of a jupytext markdown file, ``+++`` in MyST).
    """

    def __init__(self, nb: NotebookNode, fmt: SourceFormat) -> None:
        from .text_formats import writing_format

        self._format = writing_format(nb, fmt)
        metadata = copy.deepcopy(dict(nb.metadata))
        metadata.get("jupytext", {}).pop("cell_metadata_filter", None)
        metadata.pop("front_matter", None)
        self._metadata = metadata

    def _write(self, cells: list[NotebookNode | None]) -> str:
        import jupytext
        import nbformat

        clean = []
        for cell in cells:
            if cell is None:
                continue
            cell = copy.deepcopy(cell)
            cell.metadata.pop("lines_to_next_cell", None)
            clean.append(cell)
        document = nbformat.v4.new_notebook(cells=clean, metadata=copy.deepcopy(self._metadata))
        try:
            return str(jupytext.writes(document, fmt=self._format))
        except (IndexError, ValueError, KeyError) as exc:
            # jupytext cannot write some texts in some formats (a markdown cell of just "%%"
            # in a jupytext markdown file breaks its cell reader): refused, nothing written.
            raise UnwritableText(f"{type(exc).__name__} in jupytext's writer") from None

    def _after(self, previous: NotebookNode | None, cell: NotebookNode) -> str:
        head = self._write([previous])
        full = self._write([previous, cell])
        if not full.startswith(head):  # pragma: no cover - jupytext writes cells in order
            head, full = self._write([]), self._write([cell])
        return full[len(head) :]

    def cell_text(self, previous: NotebookNode | None, cell: NotebookNode) -> str:
        """``cell`` as written after ``previous``: any marker it needs first, no blank line
        before it, a line end after it."""
        return self._after(previous, cell).lstrip("\n")

    def joint(self, previous: NotebookNode | None, cell: NotebookNode) -> tuple[int, str]:
        """``(blank_lines, marker)`` written between ``previous`` and ``cell``: the marker is
        what precedes the cell's own text (``"+++\n\n"`` in MyST), or ``""``."""
        part = self._after(previous, cell)
        rest = part.lstrip("\n")
        blanks = len(part) - len(rest)
        alone = self._after(None, cell).lstrip("\n")
        marker = rest[: len(rest) - len(alone)] if rest.endswith(alone) else ""
        return blanks, marker
