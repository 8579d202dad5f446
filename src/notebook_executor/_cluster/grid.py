"""Parameter sets for a sweep: a file of sets, a grid of values, or both.

``-g NAME=V1,V2`` options make a grid: every combination of their values (the first option
varies slowest). A YAML file of sets gives a list of mappings. Given both, every set of the
file is combined with every point of the grid; a name may not come from both.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import InvalidArgumentError

__all__ = ["combine", "parse_grid_option", "split_values"]


def parse_grid_option(text: str) -> tuple[str, list[str]]:
    """``"NAME=V1,V2"`` -> ``("NAME", ["V1", "V2"])``; values stay text (converted later)."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise InvalidArgumentError(f"-g {text!r}: expected NAME=V1,V2,...")
    items = split_values(values)
    if not items:
        raise InvalidArgumentError(f"-g {text!r}: no values for {name}")
    return name, items


def split_values(text: str) -> list[str]:
    """Split on the commas outside brackets and quotes: ``1,[2,3],'a,b'`` has three values.

    A value wholly in quotes loses them: ``'a,b'`` is the text ``a,b``.

    Raises
    ------
    NotebookExecutorError
        A bracket or quote is not closed, or a value is empty.
    """
    values: list[str] = []
    depth = 0
    quote: str | None = None
    current: list[str] = []
    for char in text:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
            if depth < 0:
                raise InvalidArgumentError(f"unbalanced {char!r} in {text!r}")
        elif char == "," and depth == 0:
            values.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if quote is not None or depth != 0:
        raise InvalidArgumentError(f"unclosed quote or bracket in {text!r}")
    values.append("".join(current).strip())
    if text.strip() == "":
        return []
    if any(value == "" for value in values):
        raise InvalidArgumentError(f"an empty value in {text!r}")
    return [_unquote(value) for value in values]


def _unquote(value: str) -> str:
    """A value wholly in matching quotes loses them (they only protected its commas)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def combine(
    sets: Sequence[Mapping[str, Any]] | None, grid: Sequence[tuple[str, Sequence[Any]]]
) -> list[dict[str, Any]]:
    """Every set of ``sets`` (default: one empty set) joined with every point of ``grid``.

    Raises
    ------
    NotebookExecutorError
        A grid name appears twice, or in a set of the file too.
    """
    names = [name for name, _ in grid]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidArgumentError(f"-g {repeated[0]} is given more than once")
    base = [dict(s) for s in sets] if sets is not None else [{}]
    for index, values in enumerate(base):
        both = sorted(set(values) & set(names))
        if both:
            raise InvalidArgumentError(
                f"{both[0]} is given both by set {index} of the file and by -g"
            )
    points = [
        dict(zip(names, combination, strict=True))
        for combination in itertools.product(*(values for _, values in grid))
    ]
    return [{**values, **point} for values in base for point in points]
