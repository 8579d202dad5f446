"""An edit of an ``.ipynb`` file as text: the JSON ``cells`` array located, one element
replaced, inserted or removed, every other byte kept (indent, key order, escapes)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._errors import NotebookSourceError

__all__ = ["EditRequest", "change_ipynb"]


@dataclass
class EditRequest:
    """One cell's change: ``op`` (edit, insert, delete) at ``index``."""

    op: str
    index: int
    source: str | None
    cell_type: str | None


@dataclass
class _JsonCells:
    """Where the cells array and its elements lie in a notebook's JSON text."""

    open_at: int  # index of "["
    close_at: int  # index of "]"
    elements: list[tuple[int, int]]  # [start, end) of each cell object


_WHITESPACE = " \t\n\r"


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def _locate_cells(shown: str, text: str) -> _JsonCells:
    decoder = json.JSONDecoder()
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        raise NotebookSourceError(shown, "not a JSON object")
    at = _skip(text, at + 1)
    while at < len(text) and text[at] != "}":
        key, at = decoder.raw_decode(text, at)
        at = _skip(text, at)
        at = _skip(text, at + 1)  # the colon
        if key == "cells" and text[at] == "[":
            open_at = at
            elements: list[tuple[int, int]] = []
            at = _skip(text, at + 1)
            while text[at] != "]":
                _, end = decoder.raw_decode(text, at)
                elements.append((at, end))
                at = _skip(text, end)
                if text[at] == ",":
                    at = _skip(text, at + 1)
            return _JsonCells(open_at, at, elements)
        _, at = decoder.raw_decode(text, at)
        at = _skip(text, at)
        if text[at : at + 1] == ",":
            at = _skip(text, at + 1)
    raise NotebookSourceError(shown, "no 'cells' array")


def _line_indent(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    return text[start:at] if text[start:at].strip() == "" else ""


def change_ipynb(shown: str, text: str, request: EditRequest) -> str:
    located = _locate_cells(shown, text)
    elements = located.elements
    compact = "\n" not in text[located.open_at : located.close_at + 1]
    array_indent = _line_indent(text, located.open_at) or _line_indent(
        text, text.rfind('"cells"', 0, located.open_at)
    )
    element_indent = _line_indent(text, elements[0][0]) if elements else (array_indent * 2 or "  ")
    unit = len(element_indent) // 2 if element_indent else 1
    ensure_ascii = _ascii_only(text)
    dump: Callable[[dict[str, Any], bool], str] = lambda cell, sort: _dump_cell(  # noqa: E731
        cell, element_indent, unit, ensure_ascii, sort, compact
    )
    index = request.index
    if request.op == "edit":
        start, end = elements[index]
        cell = json.loads(text[start:end])
        assert request.source is not None
        cell["source"] = (
            request.source if isinstance(cell.get("source"), str) else _lines(request.source)
        )
        return text[:start] + dump(cell, False) + text[end:]
    separator = "," if compact else ",\n" + element_indent
    if request.op == "insert":
        assert request.source is not None and request.cell_type is not None
        new = dump(_new_cell(text, request.cell_type, request.source), True)
        if index < len(elements):
            start = elements[index][0]
            return text[:start] + new + separator + text[start:]
        if elements:
            end = elements[-1][1]
            return text[:end] + separator + new + text[end:]
        inner = new if compact else "\n" + element_indent + new + "\n" + array_indent
        return text[: located.open_at + 1] + inner + text[located.close_at :]
    start, end = elements[index]
    if index + 1 < len(elements):
        return text[:start] + text[elements[index + 1][0] :]
    if index > 0:
        return text[: elements[index - 1][1]] + text[end:]
    return text[: located.open_at + 1] + text[located.close_at :]


def _ascii_only(text: str) -> bool:
    """True when the file escapes non-ASCII text (``\\u00e9``) rather than writing it."""
    return text.isascii() and "\\u" in text


def _lines(source: str) -> list[str]:
    return source.splitlines(keepends=True)


def _dump_cell(
    cell: dict[str, Any], indent: str, unit: int, ensure_ascii: bool, sort: bool, compact: bool
) -> str:
    if compact:
        return json.dumps(cell, ensure_ascii=ensure_ascii, sort_keys=sort)
    text = json.dumps(cell, indent=unit, ensure_ascii=ensure_ascii, sort_keys=sort)
    return text.replace("\n", "\n" + indent)


def _new_cell(text: str, cell_type: str, source: str) -> dict[str, Any]:
    from nbformat.corpus.words import generate_corpus_id

    head = json.loads(text)
    cell: dict[str, Any] = {"cell_type": cell_type, "metadata": {}, "source": _lines(source)}
    if (head.get("nbformat"), head.get("nbformat_minor", 0)) >= (4, 5):
        taken = {c.get("id") for c in head.get("cells", [])}
        new_id = generate_corpus_id()
        while new_id in taken:
            new_id = generate_corpus_id()
        cell["id"] = new_id
    if cell_type == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell
