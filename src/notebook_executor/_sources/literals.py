"""Render plain values as Python source literals that evaluate back to the same value.

This is what makes parameter injection safe: a value is written as a literal, so a string can
never run as code, whatever quotes, newlines or backslashes it holds.

Kept in place of papermill's ``PythonTranslator`` for what it refuses, not for speed (five
parameters: 16 µs here, 22-26 µs there; ``benchmarks/bench_library_pieces.py``): papermill
writes a tuple as the string ``"(1,)"`` and any other object as its ``str()`` in quotes, where
this raises TypeError before anything runs.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["is_literal_value", "to_literal"]


#: Deepest nesting of lists, tuples and dicts a literal may have (Python's parser stops at 200).
MAX_DEPTH = 100


def to_literal(value: Any, _depth: int = 0) -> str:
    """Return Python source that evaluates to ``value``.

    Supports None, bool, int, float (including nan and infinities), str, and lists, tuples and
    dicts of those, nested up to :data:`MAX_DEPTH` deep. Raises TypeError for anything else
    (ints too long for Python to print included).
    """
    if _depth > MAX_DEPTH:
        raise TypeError(f"values nested more than {MAX_DEPTH} deep cannot be written as a literal")
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return repr(value)
        except ValueError:  # longer than sys.get_int_max_str_digits()
            raise TypeError("int too long to be written as a literal") from None
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "float('-inf')"
        return repr(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(to_literal(item, _depth + 1) for item in value)
        if isinstance(value, tuple):
            return f"({items},)" if len(value) == 1 else f"({items})"
        return f"[{items}]"
    if isinstance(value, dict):
        pairs = ", ".join(
            f"{to_literal(k, _depth + 1)}: {to_literal(v, _depth + 1)}" for k, v in value.items()
        )
        return "{" + pairs + "}"
    raise TypeError(f"{type(value).__name__} values cannot be written as a Python literal")


def is_literal_value(value: Any) -> bool:
    """Tell whether :func:`to_literal` accepts ``value``."""
    try:
        to_literal(value)
    except (TypeError, RecursionError):
        return False
    return True
