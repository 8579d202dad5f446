"""``runs``, ``scraps``, ``show`` and ``reindex``: the catalog of past runs."""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path
from typing import Any

from . import common
from .common import EXIT_OK, print_json, print_result

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    runs = commands.add_parser("runs", help="list past runs, newest first")
    runs.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    runs.add_argument("--status", choices=("success", "error", "running"), help="only this status")
    runs.add_argument("--since", metavar="WHEN", help="only runs started at or after (ISO date)")
    runs.add_argument("--limit", type=common.positive_int, metavar="N", help="at most N runs")
    common.add_runs_dir(runs)
    common.add_table_format(runs)
    runs.set_defaults(handler=_cmd_runs)

    scraps = commands.add_parser("scraps", help="parameters and scraps of past runs, as a table")
    scraps.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    scraps.add_argument(
        "--status", choices=("success", "error", "running"), help="only this status"
    )
    scraps.add_argument("--since", metavar="WHEN", help="only runs started at or after (ISO date)")
    common.add_runs_dir(scraps)
    common.add_table_format(scraps)
    scraps.set_defaults(handler=_cmd_scraps)

    show = commands.add_parser("show", help="show one past run")
    show.add_argument("run_id", metavar="RUN_ID")
    common.add_runs_dir(show)
    show.add_argument("--json", action="store_true", help="print the result dict as JSON")
    show.set_defaults(handler=_cmd_show)

    reindex = commands.add_parser("reindex", help="rebuild the run catalog from the run records")
    common.add_runs_dir(reindex)
    reindex.set_defaults(handler=_cmd_reindex)


def _cmd_runs(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        rows = ex.runs(
            notebook=args.notebook, status=args.status, since=args.since, limit=args.limit
        )
    if args.json:
        print_json(rows)
    elif args.csv:
        columns = [
            "run_id", "status", "error_kind", "notebook", "started_at", "duration_seconds",
            "request",
        ]  # fmt: skip
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        sys.stdout.write(buffer.getvalue())
    else:
        for row in rows:
            kind = f" ({row['error_kind']})" if row.get("error_kind") else ""
            print(
                f"{row['run_id']}  {row['status']}{kind}  {row['notebook']}  "
                f"{(row.get('duration_seconds') or 0):.2f} s"
            )
    return EXIT_OK


def _cmd_scraps(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        frame = ex.scraps(notebook=args.notebook, status=args.status, since=args.since)
    if args.json:
        sys.stdout.write(frame.reset_index().to_json(orient="records", force_ascii=False) + "\n")
    elif args.csv:
        sys.stdout.write(frame.to_csv())
    else:
        sys.stdout.write(frame.to_string() + "\n")
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        result = ex.get_run(args.run_id)
    if args.json:
        print_json(result)
    else:
        print_result(result)
    return EXIT_OK


def _cmd_reindex(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        count = ex.reindex()
    print(f"indexed {count} runs in {Path(args.runs_dir) / 'catalog.sqlite'}", file=sys.stderr)
    return EXIT_OK
