"""What a notebook, its outputs and its scraps look like to an agent: small JSON, no base64.

Cells keep the indices of the source (the ones ``failed_cell.index`` and ``edit_cell`` use): in
an executed run the injected parameters cell is left out of the numbering. Text outputs are
paged (``output_start``); images become ``run://`` resource URIs, or a note when the notebook
is not a run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .budget import clip, trim_traceback

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = [
    "IMAGE_MIMES",
    "image_uri",
    "numbered_cells",
    "output_image",
    "page_cells",
    "scrap_view",
]

#: Image types a run's outputs are served as resources for: mime type -> file name in the URI.
IMAGE_MIMES = {
    "image/png": "image.png",
    "image/jpeg": "image.jpeg",
    "image/gif": "image.gif",
    "image/svg+xml": "image.svg",
}

_INJECTED_TAG = "injected-parameters"

#: Longest cell source shown in a page of cells.
_SOURCE_CHARS = 6_000


def image_uri(run_id: str, cell: int, output: int, mime: str) -> str:
    """The resource URI of one image output of a run."""
    return f"run://{run_id}/cells/{cell}/outputs/{output}/{IMAGE_MIMES[mime]}"


def numbered_cells(nb: NotebookNode) -> Iterator[tuple[int, Any]]:
    """``(index, cell)`` in source numbering: an injected parameters cell is not counted."""
    index = 0
    for cell in nb.cells:
        if _INJECTED_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        yield index, cell
        index += 1


def page_cells(
    nb: NotebookNode,
    *,
    start: int,
    limit: int,
    output_start: int,
    output_chars: int,
    run_id: str | None,
    reread: str,
) -> dict[str, Any]:
    """One page of cells with their outputs; ``reread`` is the call that reads a page again
    (``read_notebook(path='...'`` or ``read_notebook(run_id='...'``), for the markers."""
    cells = list(numbered_cells(nb))
    page = cells[start : start + limit]
    shown = []
    for index, cell in page:
        source = "".join(cell.source) if isinstance(cell.source, list) else str(cell.source)
        view: dict[str, Any] = {
            "index": index,
            "cell_type": cell.cell_type,
            "source": clip(source, _SOURCE_CHARS, "the file holds the full source"),
        }
        tags = cell.get("metadata", {}).get("tags", [])
        if tags:
            view["tags"] = list(tags)
        if cell.cell_type == "code":
            view["execution_count"] = cell.get("execution_count")
            how = f"{reread}, start={index}, limit=1, output_start=N)"
            view["outputs"] = [
                _output_view(output, run_id, index, n, output_start, output_chars, how)
                for n, output in enumerate(cell.get("outputs", []))
            ]
        shown.append(view)
    following = start + len(page)
    return {
        "cells_total": len(cells),
        "start": start,
        "cells": shown,
        "next_start": following if following < len(cells) else None,
    }


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _paged(text: str, start: int, chars: int, how: str) -> dict[str, Any]:
    """A window of ``text``: characters ``start`` to ``start + chars`` and how to read on."""
    window = text[start : start + chars]
    view: dict[str, Any] = {"text": window}
    if start > 0 or start + chars < len(text):
        view["chars_total"] = len(text)
        end = start + len(window)
        if end < len(text):
            view["text"] += (
                f"\n[... output cut: characters {start:,}-{end:,} of {len(text):,} shown; "
                f"read on with {how.replace('output_start=N', f'output_start={end}')}]"
            )
    return view


def _output_view(
    output: Mapping[str, Any],
    run_id: str | None,
    cell: int,
    number: int,
    start: int,
    chars: int,
    how: str,
) -> dict[str, Any]:
    kind = str(output.get("output_type", ""))
    if kind == "stream":
        return {
            "output_type": kind,
            "name": output.get("name"),
            **_paged(_text(output.get("text", "")), start, chars, how),
        }
    if kind == "error":
        return {
            "output_type": kind,
            "ename": output.get("ename"),
            "evalue": clip(str(output.get("evalue", "")), 2_000),
            "traceback": trim_traceback([str(line) for line in output.get("traceback", [])]),
        }
    data: Mapping[str, Any] = output.get("data", {})
    view: dict[str, Any] = {"output_type": kind, "mime_types": sorted(data)}
    for mime in ("text/plain", "text/markdown", "application/json", "text/html"):
        if mime in data:
            value = data[mime]
            text = value if isinstance(value, str | list) else json.dumps(value)
            view.update(_paged(_text(text), start, chars, how))
            break
    images = []
    for mime in data:
        if not mime.startswith("image/"):
            continue
        if run_id is not None and mime in IMAGE_MIMES:
            images.append({"mime_type": mime, "uri": image_uri(run_id, cell, number, mime)})
        else:
            images.append(
                {
                    "mime_type": mime,
                    "note": "image not inlined; run the notebook and read the run's image resource",
                }
            )
    if images:
        view["images"] = images
    return view


def output_image(nb: NotebookNode, cell: int, output: int, mime: str) -> bytes | str | None:
    """The image ``mime`` of output ``output`` of cell ``cell`` (source numbering): bytes for
    a binary image, text for SVG; None when there is none."""
    import base64

    cells = dict(numbered_cells(nb))
    if cell not in cells:
        return None
    outputs = cells[cell].get("outputs", [])
    if not 0 <= output < len(outputs):
        return None
    value = outputs[output].get("data", {}).get(mime)
    if value is None:
        return None
    text = _text(value)
    if mime == "image/svg+xml":
        return text
    return base64.b64decode(text)


def scrap_view(value: Any) -> Any:
    """A scrap as JSON an agent can read: JSON values as they are, a DataFrame summarized."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    shape = getattr(value, "shape", None)
    head = getattr(value, "head", None)
    if shape is not None and head is not None and hasattr(value, "to_json"):
        return {
            "type": type(value).__name__,
            "shape": list(shape),
            "columns": [str(column) for column in getattr(value, "columns", [])],
            "head": json.loads(head(5).to_json(orient="records", date_format="iso")),
        }
    return {"type": type(value).__name__, "repr": clip(repr(value), 1_000)}
