"""A session's log as the readable record (``.md``) shows it: one line per entry, in order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["render_session_log"]


def render_session_log(session: Mapping[str, Any]) -> list[str]:
    """Markdown lines for ``metadata.notebook_executor.session``: each step, evaluation, edit
    seen, restore and close, with what it did."""
    state = "open" if session.get("open") else "closed"
    lines = ["## Session log", "", f"Session `{session.get('id')}` ({state}).", ""]
    if session.get("dropped"):
        lines += [f"({session['dropped']} older entries dropped.)", ""]
    for number, entry in enumerate(session.get("log") or [], 1):
        if isinstance(entry, Mapping):
            lines.extend(_entry(number, entry))
    return lines


def _entry(number: int, entry: Mapping[str, Any]) -> list[str]:
    kind = entry.get("kind")
    head = f"{number}. `{entry.get('at')}` **{kind}**"
    if kind == "step":
        call = entry.get("call")
        where = ", ".join(
            f"{name}={entry[name]}" for name in ("index", "until") if entry.get(name) is not None
        )
        text = (
            f"{head} `{call}({where})`: ran cells {entry.get('cells_run')}, {entry.get('status')}"
        )
        if entry.get("failed_cell") is not None:
            text += f" (failed in cell {entry['failed_cell']})"
        if entry.get("restored"):
            text += f"; restored by {entry['restored']}"
        return [text, ""]
    if kind == "restore":
        text = f"{head} by {entry.get('how')}"
        if entry.get("after") is not None:
            text += f" to the state after cell {entry['after']}"
        if entry.get("replay"):
            text += f", replaying cells {entry['replay']}"
        if entry.get("why"):
            text += f": {entry['why']}"
        return [text, ""]
    if kind == "edit":
        return [
            f"{head} of cell {entry.get('index')}",
            "",
            *_block("before", entry.get("before")),
            *_block("after", entry.get("after")),
        ]
    if kind == "evaluate":
        return [
            f"{head}: {entry.get('status')}",
            "",
            *_block("code", entry.get("code"), "python"),
            *_block("output", entry.get("output")),
        ]
    return [f"{head}: {entry.get('why', '')}", ""]


def _block(label: str, text: Any, info: str = "text") -> list[str]:
    if text is None:
        return [f"   {label}: (none)", ""]
    body = str(text)
    fence = "````" if "```" in body else "```"
    indented = ["   " + line for line in body.splitlines()] or ["   "]
    return [f"   {label}:", "", f"   {fence}{info}", *indented, f"   {fence}", ""]
