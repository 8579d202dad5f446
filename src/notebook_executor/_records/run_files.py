"""What a run record holds: the record's key and shape, and the run rendered as markdown.

The executed notebook (``runs/YYYY-MM-DD/<run_id>.ipynb``, the truth) carries the run's record
in ``metadata["notebook_executor"]``: the result dict plus provenance (source path and sha256,
kernel, Python and package versions, the names of secrets and extra environment variables,
never their values). The markdown file beside it is the same run for people: a logbook-style
front matter, then each cell with its text results. The files themselves are named, written,
read and listed by :class:`.store.RunStore` alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._types import RunResult
from .scraps import find_scraps, summarize_scrap
from .text import strip_ansi

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["RECORD_KEY", "RESULT_KEYS", "render_markdown"]

RECORD_KEY = "notebook_executor"
#: Keys of the result dict, in order (SPEC section 4): those of :class:`RunResult`.
RESULT_KEYS = tuple(RunResult.__annotations__)


def render_markdown(nb: NotebookNode, record: Mapping[str, Any]) -> str:
    """The readable record of a run: front matter, then cells and their text results."""
    import yaml

    front = {
        "run_id": record.get("run_id"),
        "uuid": record.get("uuid"),
        "notebook": record.get("notebook"),
        "parameters": record.get("parameters") or {},
        "user_request": record.get("request"),
        "executed_at": record.get("started_at"),
        "finished_at": record.get("finished_at"),
        "duration_seconds": record.get("duration_seconds"),
        "status": record.get("status"),
        "error_kind": record.get("error_kind"),
        "output_path": record.get("output_path"),
    }
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
    title = Path(str(record.get("notebook") or "notebook")).name
    parts.append(f"# Run of `{title}`: {record.get('status')}")
    parts.append("")
    failed = record.get("failed_cell")
    if isinstance(failed, dict):
        parts.append(
            f"Failed in cell {failed.get('index')}: {failed.get('ename')}: {failed.get('evalue')}"
        )
        parts.append("")
    for cell in nb.cells:
        parts.extend(_render_cell(cell))
    scraps = {name: summarize_scrap(raw) for name, raw in find_scraps(nb.cells).items()}
    if scraps:
        parts += ["## Scraps", "", "```json"]
        parts.append(json.dumps(scraps, indent=2, ensure_ascii=False, default=str))
        parts += ["```", ""]
    return "\n".join(parts).rstrip() + "\n"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _fence(text: str, info: str = "") -> list[str]:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return [f"{ticks}{info}", text.rstrip("\n"), ticks, ""]


def _render_cell(cell: Mapping[str, Any]) -> list[str]:
    source = str(cell.get("source", ""))
    kind = cell.get("cell_type")
    if kind == "markdown":
        return [source.rstrip("\n"), ""]
    if kind == "raw":
        return _fence(source, "text")
    lines: list[str] = []
    tags = (cell.get("metadata") or {}).get("tags") or []
    status = ((cell.get("metadata") or {}).get(RECORD_KEY) or {}).get("status")
    label = "python"
    if "injected-parameters" in tags:
        lines.append("*Injected parameters:*")
        lines.append("")
    if status in ("not_run", "skipped"):
        lines.append("*Not run.*" if status == "not_run" else "*Skipped (`skip-execution`).*")
        lines.append("")
    lines += _fence(source, label)
    for output in cell.get("outputs", ()):
        lines += _render_output(output)
    return lines


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
