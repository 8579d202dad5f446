"""Plain text out of terminal text."""

from __future__ import annotations

import re

__all__ = ["strip_ansi"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """Remove ANSI escape sequences (colours, cursor moves) from ``text``."""
    return _ANSI.sub("", text)
