"""nbformat's file layout written fast: JSON with sorted keys and a one-space indent.

``json.dumps`` with an ``indent`` runs the standard library's pure-Python encoder, which yields
every token through a chain of generators; the run records are written once per run, so that
cost is paid by every run. :func:`dumps_indented` writes the same bytes by appending to one
list, and hands anything it does not know (keys that are not strings, unknown types, a
reference cycle) to ``json.dumps`` itself, so its output is always exactly ``json.dumps``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["dumps_indented"]

try:
    from _json import encode_basestring as _quote
except ImportError:  # pragma: no cover - CPython always has the accelerator
    from json.encoder import py_encode_basestring as _quote

_INFINITY = float("inf")


class _Unusual(Exception):
    """Met something only ``json.dumps`` knows how to write."""


def dumps_indented(document: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False, default=default)``,
    the same text, several times faster."""
    parts: list[str] = []
    try:
        _Writer(parts, default).value(document, "\n")
    except (_Unusual, RecursionError):
        return json.dumps(
            document,
            indent=1,
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ": "),
            default=default,
        )
    return "".join(parts)


class _Writer:
    def __init__(self, parts: list[str], default: Callable[[Any], Any] | None) -> None:
        self.append = parts.append
        self.default = default

    def value(self, value: Any, newline: str) -> None:
        """Append ``value``; ``newline`` is a line break and the indent of its own level."""
        kind = type(value)
        if kind is str:
            self.append(_quote(value))
        elif value is None:
            self.append("null")
        elif value is True:
            self.append("true")
        elif value is False:
            self.append("false")
        elif kind is int:
            self.append(int.__repr__(value))
        elif kind is float:
            self.append(_float(value))
        elif isinstance(value, dict):
            self.mapping(value, newline)
        elif isinstance(value, (list, tuple)):
            self.sequence(value, newline)
        else:
            # Subclasses of str, int or float, and anything ``default`` turns into JSON.
            raise _Unusual

    def mapping(self, mapping: dict[Any, Any], newline: str) -> None:
        if not mapping:
            self.append("{}")
            return
        inner = newline + " "
        separator = "," + inner
        append = self.append
        append("{" + inner)
        first = True
        try:
            keys = sorted(mapping)
        except TypeError:
            raise _Unusual from None
        for key in keys:
            if type(key) is not str:
                raise _Unusual
            if first:
                first = False
            else:
                append(separator)
            append(_quote(key))
            append(": ")
            item = mapping[key]
            if type(item) is str:
                append(_quote(item))
            else:
                self.value(item, inner)
        append(newline + "}")

    def sequence(self, items: list[Any] | tuple[Any, ...], newline: str) -> None:
        if not items:
            self.append("[]")
            return
        inner = newline + " "
        separator = "," + inner
        append = self.append
        append("[" + inner)
        first = True
        for item in items:
            if first:
                first = False
            else:
                append(separator)
            if type(item) is str:
                append(_quote(item))
            else:
                self.value(item, inner)
        append(newline + "]")


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)
