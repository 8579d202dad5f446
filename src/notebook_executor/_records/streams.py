"""The cap on what a cell's streams keep in the run records."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["MAX_STREAM_CHARS", "cap_streams", "drop_outputs"]

#: Longest text kept per stream of a cell in the run records; the rest is cut with a visible marker.
MAX_STREAM_CHARS = 1_000_000


def cap_streams(nb: NotebookNode) -> tuple[NotebookNode, list[int]]:
    """A copy of ``nb`` whose streams hold at most :data:`MAX_STREAM_CHARS` per cell.

    A kernel sends a long stream in many messages: the cap holds for each stream (stdout,
    stderr) of a cell as a whole; what follows the cut is dropped and counted in a marker at
    the place of the cut. Returns the copy and the indices of the cells that were cut.
    ``nb`` itself is not changed.
    """
    capped = copy.copy(nb)
    capped["cells"] = list(nb.cells)
    cut_cells: list[int] = []
    for index, cell in enumerate(nb.cells):
        kept: dict[str, int] = {}
        cut: dict[str, Any] = {}
        dropped: dict[str, int] = {}
        outputs = []
        for output in cell.get("outputs", ()):
            if output.get("output_type") != "stream":
                outputs.append(output)
                continue
            name = str(output.get("name", ""))
            text = output.get("text", "")
            if isinstance(text, list):
                text = "".join(text)
            if name in cut:
                dropped[name] += len(text)
                continue
            room = MAX_STREAM_CHARS - kept.get(name, 0)
            if len(text) > room:
                output = copy.copy(output)
                output["text"] = text[:room]
                cut[name], dropped[name] = output, len(text) - room
            kept[name] = kept.get(name, 0) + len(text)
            outputs.append(output)
        if not cut:
            continue
        for name, output in cut.items():
            output["text"] += (
                f"\n[notebook-executor: output truncated, {dropped[name]} more characters "
                "not kept]\n"
            )
        capped.cells[index] = copy.copy(cell)
        capped.cells[index]["outputs"] = outputs
        cut_cells.append(index)
    return capped, cut_cells


def drop_outputs(nb: NotebookNode, reason: str) -> tuple[NotebookNode, list[int]]:
    """A copy of ``nb`` whose cells hold no output, each that had some given a marker that
    says why (a run record that could not be written whole is written without them).
    Returns the copy and the indices of the cells whose outputs were dropped."""
    from .._notebook import from_dict

    bare = copy.copy(nb)
    bare["cells"] = list(nb.cells)
    dropped: list[int] = []
    for index, cell in enumerate(nb.cells):
        if not cell.get("outputs"):
            continue
        marker = from_dict(
            {
                "output_type": "stream",
                "name": "stderr",
                "text": f"[notebook-executor: output not stored: {reason}]\n",
            }
        )
        bare.cells[index] = copy.copy(cell)
        bare.cells[index]["outputs"] = [marker]
        dropped.append(index)
    return bare, dropped
