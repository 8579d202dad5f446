"""Plain text out of terminal text."""

from __future__ import annotations

import re

__all__ = ["hide_paths", "strip_ansi", "trim_traceback"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (colours, cursor moves) from ``text``."""
    return _ANSI.sub("", text)


#: A traceback entry that shows a frame of a notebook cell (IPython 7 and 8 spellings).
_CELL_FRAME = re.compile(
    r"Cell In\s*\[|<ipython-input-|^\s*File \"/tmp/ipykernel_|^Input In \["
    r"|Traceback \(most recent call last\)"
)


def trim_traceback(lines: list[str]) -> list[str]:
    """A traceback without ANSI codes, keeping the frames of notebook cells.

    IPython gives one entry per frame between a header (a rule, the exception's name) and the
    exception line; frames in library code are replaced by one line that counts them. What
    the MCP server answers, what the report shows and what ``pytest --notebooks``' failures
    show.
    """
    plain = [strip_ansi(line) for line in lines]
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


#: An installed package's folder: ``.../lib/python3.11/site-packages/`` and the like.
_PACKAGES = re.compile(r"(?:/[^\s/:\"'()]+)+/(?:site|dist)-packages/")


def hide_paths(text: str, home: str | None = None) -> str:
    """``text`` with the folders of installed packages shown as ``<site-packages>/`` and the
    home folder ``home`` (when given) as ``~``: a page shows where code is, not whose disk."""
    text = _PACKAGES.sub("<site-packages>/", text)
    if home and len(home) > 1:
        text = re.sub(re.escape(home.rstrip("/")) + r"(?=/|\b)", "~", text)
    return text
