"""``guide``: print the guide to the agent loop, as a skill document."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..guide import guide_text
from .common import EXIT_OK

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    guide = commands.add_parser(
        "guide",
        help="print a short guide to the run, edit, diff and search loop (for agents)",
        description="Print the guide to the loop (run, read the failed cell, edit it, run "
        "again, diff, search, check, MCP) as a skill document: markdown with a YAML front "
        "matter (name, description). The MCP server sends the same text as its instructions.",
    )
    guide.set_defaults(handler=_guide)


def _guide(args: argparse.Namespace) -> int:
    sys.stdout.write(guide_text())
    return EXIT_OK
