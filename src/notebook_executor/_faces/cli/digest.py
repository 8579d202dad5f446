"""``digest``: what earlier runs found, in a page (markdown, or JSON with ``--json``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import common
from .common import EXIT_OK, print_json

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    digest = commands.add_parser(
        "digest",
        help="what earlier runs found: statuses, parameters tried, scraps, errors, notes",
        description="A page summarising past runs of a notebook (or of every notebook); "
        "each item names run ids that 'show' and 'search' take.",
    )
    digest.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    digest.add_argument("--since", metavar="WHEN", help="only runs started at or after (ISO date)")
    digest.add_argument(
        "--limit-chars",
        type=common.positive_int,
        default=4000,
        metavar="N",
        help="longest page, in characters (4000)",
    )
    common.add_runs_dir(digest)
    digest.add_argument("--json", action="store_true", help="print the digest as JSON")
    digest.set_defaults(handler=_cmd_digest)


def _cmd_digest(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        found = ex.digest(args.notebook, since=args.since, limit_chars=args.limit_chars)
    if args.json:
        print_json(found)
    else:
        sys.stdout.write(found["text"])
    return EXIT_OK
