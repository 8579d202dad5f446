"""The context budget: every response fits in :data:`MAX_RESPONSE_CHARS` characters.

An agent pays for each character a tool returns. Long text is cut with a marker that says how
much was cut and how to read the rest; tracebacks keep the frames of the notebook's own cells;
no image reaches a response as base64 text.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "MAX_PAYLOAD_CHARS",
    "MAX_RESPONSE_CHARS",
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

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: A traceback entry that shows a frame of a notebook cell (IPython 7 and 8 spellings).
_CELL_FRAME = re.compile(
    r"Cell In\s*\[|<ipython-input-|^\s*File \"/tmp/ipykernel_|^Input In \["
    r"|Traceback \(most recent call last\)"
)


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
    """``document`` with its longest strings (then its longest lists) cut until it fits.

    Strings already within the budget are untouched; each cut leaves a marker.
    """
    if serialized_size(document) <= limit:
        return document
    for step in _STEPS:
        document = _clip_strings(document, step)
        if serialized_size(document) <= limit:
            return document
    while serialized_size(document) > limit:
        shorter = _halve_longest_list(document)
        if shorter is None:
            # A mapping with too many keys: keep it readable as text.
            return {"truncated": clip(json.dumps(document, default=str), limit // 2)}
        document = shorter
    return document


def _clip_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, list):
        return [_clip_strings(item, limit) for item in value]
    if isinstance(value, dict):
        return {key: _clip_strings(item, limit) for key, item in value.items()}
    return value


def _halve_longest_list(value: Any) -> Any:
    """``value`` with its longest list (of more than one item) halved, or None if none."""
    longest: list[Any] | None = None

    def find(node: Any) -> None:
        nonlocal longest
        if isinstance(node, list):
            if len(node) > 1 and (longest is None or len(node) > len(longest)):
                longest = node
            for item in node:
                find(item)
        elif isinstance(node, dict):
            for item in node.values():
                find(item)

    find(value)
    if longest is None:
        return None
    target = longest

    def rebuild(node: Any) -> Any:
        if node is target:
            keep = len(node) // 2
            return [*node[:keep], f"[... {len(node) - keep} more items cut]"]
        if isinstance(node, list):
            return [rebuild(item) for item in node]
        if isinstance(node, dict):
            return {key: rebuild(item) for key, item in node.items()}
        return node

    return rebuild(value)


def trim_traceback(lines: list[str]) -> list[str]:
    """A traceback without ANSI codes, keeping the frames of notebook cells.

    IPython gives one entry per frame between a header (a rule, the exception's name) and the
    exception line; frames in library code are replaced by one line that counts them.
    """
    plain = [_ANSI.sub("", line) for line in lines]
    if len(plain) <= 2:
        return plain
    kept: list[str] = [plain[0]]
    skipped = 0
    for entry in plain[1:-1]:
        if _CELL_FRAME.search(entry):
            if skipped:
                kept.append(f"[... {skipped} frame(s) in library code omitted]")
                skipped = 0
            kept.append(entry)
        else:
            skipped += 1
    if skipped:
        kept.append(f"[... {skipped} frame(s) in library code omitted]")
    kept.append(plain[-1])
    return kept
