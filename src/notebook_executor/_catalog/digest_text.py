"""The digest as a markdown page, never longer than the characters asked for.

The page has a title, then one section per list of the digest (runs by status, parameters
tried, latest scraps, how numeric scraps moved, errors, requests and edit notes), one line per
item, each naming its run ids in backticks. When the page would run over the limit, whole items
are left out (a section's heading goes with its last item) and a closing line says how many,
and how to read them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MIN_LIMIT_CHARS", "render"]

#: The smallest page asked for that still holds the title and the closing line.
MIN_LIMIT_CHARS = 400
#: Longest value shown inline, and longest request or note.
_VALUE_CHARS = 80
_NOTE_CHARS = 300
_NOTEBOOK_CHARS = 160
#: Room kept for the closing line while items are added.
_FOOTER_ROOM = 160


def render(found: Mapping[str, Any], limit_chars: int) -> str:
    """The markdown page of a digest (its lists as :func:`..digest.gather` returns them)."""
    notebooks = {item["notebook"] for key in _NOTEBOOK_LISTS for item in found[key]}
    shown = _cut_path(found["notebook"]) if found["notebook"] else "every notebook"
    head = [f"# Digest of {shown}", ""]
    since = f" since {found['since']}" if found["since"] else ""
    folder, names = _short_names(notebooks) if len(notebooks) > 1 else ("", {})
    named = f" Notebooks are named from `{_cut_path(folder)}/`." if folder else ""
    head.append(f"{found['runs']} runs{since}. Run ids work with get_run and search.{named}")
    text = "\n".join(head) + "\n"
    left_out = sum(found["omitted"].values())
    for heading, key, line in _sections(names):
        items = found[key]
        started = False
        for item in items:
            addition = ("" if started else f"\n## {heading}\n\n") + line(item) + "\n"
            if len(text) + len(addition) + _FOOTER_ROOM > limit_chars:
                left_out += 1
                continue
            text += addition
            started = True
    if left_out:
        text += (
            f"\n*{left_out} more items not shown here (limit {limit_chars} characters): ask "
            "for a larger limit, or use search and get_run with the run ids above.*\n"
        )
    return text[:limit_chars]


_NOTEBOOK_LISTS = ("parameters", "scraps", "trends", "errors", "notes")


def _short_names(paths: set[str]) -> tuple[str, dict[str, str]]:
    """The folder that all ``paths`` are in ("" if none) and each path from there: a page of
    several notebooks in one deep folder names each by what tells them apart, once each."""
    split = [path.split("/") for path in paths]
    shared: list[str] = []
    for parts in zip(*(folders[:-1] for folders in split), strict=False):
        if len(set(parts)) > 1:
            break
        shared.append(parts[0])
    if not shared or shared == [""]:
        return "", {path: path for path in paths}
    return "/".join(shared), {path: "/".join(path.split("/")[len(shared) :]) for path in paths}


def _sections(names: Mapping[str, str]) -> list[tuple[str, str, Callable[[Any], str]]]:
    """One (heading, list, line) per section; ``names`` names the notebooks of a page of
    several (empty for one notebook's page: its items do not name it)."""

    def where(item: Mapping[str, Any]) -> str:
        notebook = item["notebook"]
        return f"{_cut_path(names.get(notebook, notebook))}: " if names else ""

    def status(item: Mapping[str, Any]) -> str:
        return (
            f"- {item['status']}: {item['count']} runs, first {item['first_at']} "
            f"(`{item['first_run_id']}`), last {item['last_at']} (`{item['last_run_id']}`)"
        )

    def parameter(item: Mapping[str, Any]) -> str:
        if item["kind"] == "range":
            return (
                f"- {where(item)}`{item['name']}`: {_value(item['min'])} .. "
                f"{_value(item['max'])} ({item['distinct']} values in {item['runs']} runs; min "
                f"`{item['min_run_id']}`, max `{item['max_run_id']}`)"
            )
        values = ", ".join(
            f"{_value(v['value'])} ({v['runs']}x, last `{v['last_run_id']}`)"
            for v in item["values"]
        )
        more = f", and {item['more_values']} more" if item["more_values"] else ""
        return f"- {where(item)}`{item['name']}`: {values}{more}"

    def scraps(item: Mapping[str, Any]) -> str:
        values = ", ".join(f"`{name}` = {_value(v)}" for name, v in item["scraps"].items())
        return (
            f"- {where(item)}`{item['run_id']}` ({item['started_at']}): "
            f"{values or 'no JSON scraps'}"
        )

    def trend(item: Mapping[str, Any]) -> str:
        return (
            f"- {where(item)}`{item['name']}`: {_number(item['first'])} -> "
            f"{_number(item['last'])} over {item['runs']} runs (first `{item['first_run_id']}`, "
            f"last `{item['last_run_id']}`; min {_number(item['min'])} `{item['min_run_id']}`, "
            f"max {_number(item['max'])} `{item['max_run_id']}`)"
        )

    def error(item: Mapping[str, Any]) -> str:
        name = item["ename"] or item["error_kind"] or "error"
        value = f": {_cut(item['evalue'], _VALUE_CHARS)}" if item["evalue"] else ""
        cell = f" in cell {item['cell']}" if item["cell"] is not None else ""
        kind = f" [{item['error_kind']}]" if item["error_kind"] else ""
        others = item["run_ids"][1:]
        also = f"; also {', '.join(f'`{r}`' for r in others)}" if others else ""
        return (
            f"- {where(item)}{name}{value}{cell}{kind}: {item['count']} runs, last "
            f"`{item['last_run_id']}` ({item['last_at']}){also}"
        )

    def note(item: Mapping[str, Any]) -> str:
        label = "request" if item["kind"] == "request" else f"edit of cell {item['cell']}"
        runs = f" ({item['runs']} runs)" if item["runs"] > 1 else ""
        return (
            f"- {where(item)}`{item['run_id']}` {item['status']}, {label}{runs}: "
            f"{json.dumps(_cut(item['text'], _NOTE_CHARS), ensure_ascii=False)}"
        )

    return [
        ("Runs by status", "statuses", status),
        ("Parameters tried", "parameters", parameter),
        ("Scraps of the latest successful run", "scraps", scraps),
        ("How numeric scraps moved", "trends", trend),
        ("Errors, most frequent first", "errors", error),
        ("Requests and edit notes, newest first", "notes", note),
    ]


def _value(value: Any) -> str:
    return _cut(json.dumps(value, ensure_ascii=False, default=str), _VALUE_CHARS)


def _number(value: float) -> str:
    return f"{value:.6g}"


def _cut_path(path: str) -> str:
    """A path's last :data:`_NOTEBOOK_CHARS` characters: its end names the notebook."""
    path = " ".join(str(path).split())
    return path if len(path) <= _NOTEBOOK_CHARS else "..." + path[3 - _NOTEBOOK_CHARS :]


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
