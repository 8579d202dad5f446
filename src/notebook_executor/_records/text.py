"""Plain text out of terminal text."""

from __future__ import annotations

import re

__all__ = ["strip_ansi", "trim_traceback"]

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
    exception line; frames in library code are replaced by one line that counts them. (The MCP
    server's answers and ``pytest --notebooks``' failures show tracebacks so.)
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
