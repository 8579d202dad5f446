"""``search``: full-text search across every run record."""

from __future__ import annotations

import argparse
from typing import Any

from . import common
from .common import EXIT_OK, print_json

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    search = commands.add_parser(
        "search",
        help="full-text search across past runs (request, parameters, code, outputs, errors...)",
        description='Query syntax: words (all must match), "exact phrase", prefix*, '
        "OR, NOT, AND, parentheses.",
    )
    search.add_argument("query", metavar="QUERY", help="what to look for")
    search.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    search.add_argument(
        "--status", choices=("success", "error", "running"), help="only this status"
    )
    search.add_argument("--since", metavar="WHEN", help="only runs started at or after (ISO date)")
    search.add_argument(
        "--limit", type=common.positive_int, default=20, metavar="N", help="at most N hits (20)"
    )
    common.add_runs_dir(search)
    search.add_argument("--json", action="store_true", help="print the hits as JSON")
    search.set_defaults(handler=_cmd_search)


def _cmd_search(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        hits = ex.search(
            args.query,
            notebook=args.notebook,
            status=args.status,
            since=args.since,
            limit=args.limit,
        )
    if args.json:
        print_json(hits)
        return EXIT_OK
    for hit in hits:
        print(f"{hit['run_id']}  {hit['status']}  {hit['notebook']}  [{hit['where']}]")
        print(f"    {hit['snippet']}")
    return EXIT_OK
