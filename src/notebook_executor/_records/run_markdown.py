"""The readable record of a run (``<run_id>.md``), laid out as the logbook pattern writes one.

Front matter first: the pattern's own keys (``parameters``, ``uuid``, ``user_request``,
``executed_at``, ``status``), then the rest of the run's account (``run_id``, ``notebook``, the
end time, the error kind, the output path; ``edited_cells`` for a modified run;
``resumed_from``, ``reused_cells`` and ``reused_from`` for a run that took cells from
another). Then the cells in order: narrative as written (after substitution), each code
cell's code, and its output under a ``Results:`` line. A cell a modified run replaced shows
the template's code, then the note of the edit (the run's request when it has none), then the
code as run, then its results: "Modified to be extra friendly and casual as requested:".

A logbook's parameters live in its front matter, so its run record shows neither the
parameters cell made from them nor the injected-parameters cell: the values are in the record's
front matter. A percent script or an ``.ipynb`` keeps both, as its author wrote the one and the
other says what was injected, with a title naming the notebook and the status.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._parameters.declared import INJECTED_TAG, PARAMETERS_TAG
from .scraps import find_scraps, summarize_scrap
from .text import strip_ansi

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["RECORD_KEY", "render_markdown"]

#: Where the run's record lives in the executed notebook's metadata (and its cells').
RECORD_KEY = "notebook_executor"


def render_markdown(nb: NotebookNode, record: Mapping[str, Any]) -> str:
    """The readable record of a run: front matter, then cells and their text results."""
    import yaml

    front: dict[str, Any] = {
        "parameters": record.get("parameters") or {},
        "uuid": record.get("uuid"),
        "user_request": record.get("request"),
        "executed_at": record.get("started_at"),
        "status": record.get("status"),
        "run_id": record.get("run_id"),
        "notebook": record.get("notebook"),
        "finished_at": record.get("finished_at"),
        "duration_seconds": record.get("duration_seconds"),
        "error_kind": record.get("error_kind"),
        "output_path": record.get("output_path"),
    }
    if record.get("edited_cells"):
        front["edited_cells"] = record["edited_cells"]
    # docs/how-to/incremental.md: cells whose state and outputs came from an earlier run.
    for key in ("resumed_from", "reused_cells", "reused_from"):
        if record.get(key):
            front[key] = record[key]
    if record.get("dask_attempts"):
        # A run on a Dask cluster: where each attempt began and how it ended.
        front["attempts"] = record["dask_attempts"]
    parts = [
        "---",
        yaml.dump(
            _plain(front),
            Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),  # libyaml when built with it
            sort_keys=False,
            allow_unicode=True,
        ).rstrip(),
    ]
    parts += ["---", ""]
    logbook = isinstance(nb.metadata.get("front_matter"), Mapping)
    if not logbook:
        title = Path(str(record.get("notebook") or "notebook")).name
        parts += [f"# Run of `{title}`: {record.get('status')}", ""]
    failed = record.get("failed_cell")
    if isinstance(failed, dict):
        # The notebook's text, as code: markdown syntax in it (emphasis inside a secret) shows
        # as written, never joined by a renderer.
        error = _code_span(f"{failed.get('ename')}: {failed.get('evalue')}")
        parts.append(f"Failed in cell {failed.get('index')}: {error}")
        parts.append("")
    request = record.get("request")
    for cell in nb.cells:
        if logbook and _tagged(cell, PARAMETERS_TAG, INJECTED_TAG):
            continue  # the values are in the front matter
        parts.extend(_render_cell(cell, request))
    scraps = {name: summarize_scrap(raw) for name, raw in find_scraps(nb.cells).items()}
    if scraps:
        parts += ["## Scraps", "", "```json"]
        parts.append(json.dumps(scraps, indent=2, ensure_ascii=False, default=str))
        parts += ["```", ""]
    if isinstance(record.get("session"), Mapping):
        from .session_log import render_session_log

        parts += render_session_log(record["session"])
    return "\n".join(parts).rstrip() + "\n"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _tagged(cell: Mapping[str, Any], *wanted: str) -> bool:
    tags = (cell.get("metadata") or {}).get("tags") or []
    return isinstance(tags, list) and any(tag in tags for tag in wanted)


def _code_span(text: str) -> str:
    """``text`` as an inline code span: delimited by more backticks than it holds in a row,
    on one line."""
    text = " ".join(text.split())
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * (longest + 1)
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{padding}{text}{padding}{ticks}"


def _fence(text: str, info: str = "") -> list[str]:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return [f"{ticks}{info}", text.rstrip("\n"), ticks, ""]


def _render_cell(cell: Mapping[str, Any], request: Any) -> list[str]:
    source = str(cell.get("source", ""))
    kind = cell.get("cell_type")
    info = (cell.get("metadata") or {}).get(RECORD_KEY) or {}
    edited = isinstance(info, Mapping) and isinstance(info.get("original_source"), str)
    if kind == "markdown":
        if edited:
            return [*_edit_head(info, request, None), source.rstrip("\n"), ""]
        return [source.rstrip("\n"), ""]
    if kind == "raw":
        return _fence(source, "text")
    lines: list[str] = []
    status = info.get("status") if isinstance(info, Mapping) else None
    if _tagged(cell, INJECTED_TAG):
        lines += ["*Injected parameters:*", ""]
    if status in ("not_run", "skipped"):
        lines.append("*Not run.*" if status == "not_run" else "*Skipped (`skip-execution`).*")
        lines.append("")
    if edited:
        lines += _edit_head(info, request, "python")
    lines += _fence(source, "python")
    results: list[str] = []
    for output in cell.get("outputs", ()):
        results += _render_output(output)
    if results:
        lines += ["Results:", "", *results]
    return lines


def _edit_head(info: Mapping[str, Any], request: Any, language: str | None) -> list[str]:
    """The template's text of an edited cell, then why it was changed (the note, else the
    run's request), ending with a colon: what follows is the text as run."""
    original = str(info["original_source"])
    head = _fence(original, language) if language else [original.rstrip("\n"), ""]
    note = info.get("edit_note")
    if isinstance(note, str) and note.strip():
        reason = " ".join(note.split()).rstrip(":.")
    elif isinstance(request, str) and request.strip():
        reason = f"Modified as requested ({' '.join(request.split())})"
    else:
        reason = "Modified for this run"
    return [*head, f"{reason}:", ""]


def _render_output(output: Mapping[str, Any]) -> list[str]:
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
        return _fence(strip_ansi("".join(text) if isinstance(text, list) else str(text)), "text")
    if kind == "error":
        body = "\n".join(strip_ansi(str(line)) for line in output.get("traceback", []))
        if not body:
            body = f"{output.get('ename')}: {output.get('evalue')}"
        return _fence(body, "text")
    if kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        if any(key.startswith("application/scrapbook.scrap.") for key in data):
            return []
        if "text/markdown" in data:
            text = data["text/markdown"]
            return ["".join(text) if isinstance(text, list) else str(text), ""]
        if "text/plain" in data:
            text = data["text/plain"]
            return _fence(
                strip_ansi("".join(text) if isinstance(text, list) else str(text)), "text"
            )
        if data:
            return [f"*[{', '.join(sorted(data))} output]*", ""]
    return []
