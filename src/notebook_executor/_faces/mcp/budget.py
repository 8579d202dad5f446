"""The context budget: every response fits in :data:`MAX_RESPONSE_CHARS` characters.

An agent pays for each character a tool returns. Long text is cut with a marker that says how
much was cut and how to read the rest; tracebacks keep the frames of the notebook's own cells;
no image reaches a response as base64 text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..._records.text import trim_traceback

__all__ = [
    "MAX_PAYLOAD_CHARS",
    "MAX_RESPONSE_CHARS",
    "MIN_LIMIT",
    "clip",
    "fit",
    "serialized_size",
    "trim_traceback",
]

#: No response (the whole serialized tool result) is longer than this.
MAX_RESPONSE_CHARS = 20_000

#: A structured payload goes out twice (as structured content and as its JSON text), plus the
#: envelope: each copy gets a little less than half the budget.
MAX_PAYLOAD_CHARS = 9_500

#: The string limits :func:`fit` tries in turn, longest first.
_STEPS = (4_000, 2_000, 1_000, 400, 160)


def serialized_size(document: Any) -> int:
    """Length of ``document`` as compact JSON."""
    return len(json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str))


def clip(text: str, limit: int, how: str = "") -> str:
    """``text`` cut to ``limit`` characters with a marker naming what was cut and ``how`` to
    read on."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit:,} more characters cut"
    marker += f"; {how}]" if how else "]"
    return text[:limit] + marker


def fit(document: Any, limit: int = MAX_PAYLOAD_CHARS) -> Any:
    """``document`` cut until its compact JSON is at most ``limit`` characters.

    Three stages, each ending as soon as the document fits:

    1. its strings are clipped to each of :data:`_STEPS` in turn (strings already shorter are
       untouched; each cut leaves a marker);
    2. rounds of cutting containers: each round halves every list and mapping whose count of
       original items is at least half the largest such count (and at least 2), keeping the
       first half and a marker saying how many items were cut;
    3. if it still does not fit, its JSON text, clipped so that the answer fits.

    The rounds of stage 2 terminate: the number of original items left in reachable
    containers is a natural number, and each round lowers it by at least one (a container of
    ``n >= 2`` items keeps ``n // 2``; markers are not counted). Stage 3 always fits when
    ``limit`` is at least :data:`MIN_LIMIT`.

    Raises
    ------
    ValueError
        ``limit`` is below :data:`MIN_LIMIT`.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT}, got {limit}")
    if serialized_size(document) <= limit:
        return document
    for step in _STEPS:
        document = _clip_strings(document, step)
        if serialized_size(document) <= limit:
            return document
    tree = _Node.of(document)
    if not isinstance(tree, _Node):  # one string (or number) too long even when clipped
        return _as_text(document, limit)
    while True:
        shown = tree.render()
        if serialized_size(shown) <= limit:
            return shown
        if not tree.halve_largest():
            return _as_text(shown, limit)


#: The smallest limit :func:`fit` accepts: room for a clipped text and its marker.
MIN_LIMIT = 100


def _clip_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, list):
        return [_clip_strings(item, limit) for item in value]
    if isinstance(value, dict):
        return {key: _clip_strings(item, limit) for key, item in value.items()}
    return value


class _Node:
    """A list or mapping being cut: the items kept (other nodes or plain values) and the
    number of items cut so far."""

    __slots__ = ("cut", "items", "mapping")

    def __init__(self, items: list[tuple[Any, Any]], mapping: bool) -> None:
        self.items = items
        self.mapping = mapping
        self.cut = 0

    @classmethod
    def of(cls, value: Any) -> Any:
        if isinstance(value, list):
            return cls([(None, cls.of(item)) for item in value], mapping=False)
        if isinstance(value, dict):
            return cls([(key, cls.of(item)) for key, item in value.items()], mapping=True)
        return value

    def nodes(self) -> Iterator[_Node]:
        """This node and every node reachable from it."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(item for _, item in node.items if isinstance(item, _Node))

    def halve_largest(self) -> bool:
        """One round of stage 2 of :func:`fit`; False when no container has 2 items left."""
        nodes = [node for node in self.nodes() if len(node.items) >= 2]
        if not nodes:
            return False
        threshold = max(2, (max(len(node.items) for node in nodes) + 1) // 2)
        for node in nodes:
            if len(node.items) >= threshold:
                keep = len(node.items) // 2
                node.cut += len(node.items) - keep
                del node.items[keep:]
        return True

    def render(self) -> Any:
        """The JSON value this node stands for, with a marker for what was cut."""
        values = [
            (key, item.render() if isinstance(item, _Node) else item) for key, item in self.items
        ]
        if not self.mapping:
            shown = [value for _, value in values]
            if self.cut:
                shown.append(f"[... {self.cut:,} more items cut]")
            return shown
        mapping = dict(values)
        if self.cut:
            # The marker's key must not replace a key that was kept.
            key = "..."
            while key in mapping:
                key += "."
            mapping[key] = f"[... {self.cut:,} more keys cut]"
        return mapping


def _as_text(document: Any, limit: int) -> dict[str, str]:
    """``{"truncated": text}``: the JSON text of ``document``, clipped to fit ``limit``.

    Escaping makes the answer's length differ from the text's: the longest prefix that fits
    is found by bisection, keeping a prefix known to fit (the empty one does, as ``limit >=
    MIN_LIMIT``).
    """
    text = json.dumps(document, ensure_ascii=False, default=str)
    fits, too_long = 0, len(text) + 1
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if serialized_size({"truncated": clip(text, middle)}) <= limit:
            fits = middle
        else:
            too_long = middle
    return {"truncated": clip(text, fits)}
