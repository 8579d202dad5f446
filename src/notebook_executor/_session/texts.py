"""Cell outputs as an agent reads them in a step's answer: bounded ANSI-free text, images as
references, secrets redacted. The run files keep the outputs whole."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .._records.redaction import Redactor
from .._records.text import strip_ansi

__all__ = ["CELL_CHARS", "STEP_CHARS", "clip", "outputs_text"]

#: Most characters of one cell's outputs in a step's answer.
CELL_CHARS = 4_000

#: Most characters of all the outputs of one step's answer (the whole answer stays well under
#: 20,000 characters).
STEP_CHARS = 12_000

#: Image types given as references, and the file name in their URI.
_IMAGES = {
    "image/png": "image.png",
    "image/jpeg": "image.jpeg",
    "image/gif": "image.gif",
    "image/svg+xml": "image.svg",
}


def clip(text: str, limit: int, where: str | None) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying where the rest is (``None``:
    that it is not kept)."""
    if len(text) <= limit:
        return text
    rest = f"in {where}" if where is not None else "not kept"
    return text[:limit] + f"\n[... cut: {len(text) - limit:,} more characters {rest}]"


def outputs_text(
    outputs: Iterable[Mapping[str, Any]],
    redactor: Redactor,
    *,
    run_id: str,
    cell: int | None,
    limit: int = CELL_CHARS,
) -> str:
    """The text of one cell's outputs: streams, the plain text of results, errors, and
    ``run://`` references of images (``cell`` is the source index; ``None``: an evaluation's
    outputs, which the run's notebook does not hold, so the text says what is not kept)."""
    parts: list[str] = []
    for number, output in enumerate(outputs):
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(_joined(output.get("text", "")))
        elif kind == "error":
            lines = [str(line) for line in output.get("traceback", [])]
            text = "\n".join(lines) if lines else f"{output.get('ename')}: {output.get('evalue')}"
            parts.append(text + "\n")
        else:
            parts.append(_data_text(output.get("data", {}), run_id, cell, number))
    text = redactor.text(strip_ansi("".join(parts)))
    where = None if cell is None else f"the run's notebook (run {run_id}, cell {cell})"
    return clip(text, limit, where)


def _data_text(data: Mapping[str, Any], run_id: str, cell: int | None, number: int) -> str:
    for mime, name in _IMAGES.items():
        if mime in data:
            if cell is None:
                return f"[{mime}: not kept]\n"
            return f"[{mime}: run://{run_id}/cells/{cell}/outputs/{number}/{name}]\n"
    for mime in ("text/plain", "text/markdown", "application/json"):
        if mime in data:
            value = data[mime]
            text = _joined(value) if isinstance(value, str | list) else json.dumps(value)
            return text + ("" if text.endswith("\n") else "\n")
    return f"[{', '.join(sorted(data))}]\n"


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)
