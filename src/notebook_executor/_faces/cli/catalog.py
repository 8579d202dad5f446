"""``runs``, ``scraps``, ``show``, ``reindex``, ``search`` and ``digest``: the catalog of past
runs, listed, searched and summed up (``digest``: a page, markdown or JSON with ``--json``).

Without ``--runs-dir``, the human output of ``runs`` and ``digest`` starts with the line
``runs folder: PATH (WHY)``: which history is shown, found from the working folder."""

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
    _add_filters(runs)
    runs.add_argument("--limit", type=common.positive_int, metavar="N", help="at most N runs")
    common.add_runs_dir(runs)
    common.add_table_format(runs)
    runs.set_defaults(handler=_cmd_runs)

    scraps = commands.add_parser("scraps", help="parameters and scraps of past runs, as a table")
    _add_filters(scraps)
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

    search = commands.add_parser(
        "search",
        help="full-text search across past runs (request, parameters, code, outputs, errors...)",
        description='Query syntax: words (all must match), "exact phrase", prefix*, '
        "OR, NOT, AND, parentheses.",
    )
    search.add_argument("query", metavar="QUERY", help="what to look for")
    _add_filters(search)
    search.add_argument(
        "--limit", type=common.positive_int, default=20, metavar="N", help="at most N hits (20)"
    )
    common.add_runs_dir(search)
    search.add_argument("--json", action="store_true", help="print the hits as JSON")
    search.set_defaults(handler=_cmd_search)

    digest = commands.add_parser(
        "digest",
        help="what earlier runs found: statuses, parameters tried, scraps, errors, notes",
        description="A page summarising past runs of a notebook (or of every notebook); "
        "each item names run ids that 'show' and 'search' take.",
    )
    _add_filters(digest, status=False)
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


def _add_filters(parser: argparse.ArgumentParser, *, status: bool = True) -> None:
    """The filters of every query over past runs: a notebook, a status, a first day."""
    parser.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    if status:
        parser.add_argument(
            "--status", choices=("success", "error", "running"), help="only this status"
        )
    parser.add_argument("--since", metavar="WHEN", help="only runs started at or after (ISO date)")


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
        from ..._records.results import modified_mark

        common.runs_header(args)
        for row in rows:
            kind = f" ({row['error_kind']})" if row.get("error_kind") else ""
            if row.get("cell") is not None:
                kind = f" (cell {row['cell']})"  # a run still going: the cell it is in
            print(
                f"{row['run_id']}  {row['status']}{kind}  {row['notebook']}"
                f"{modified_mark(row)}  "
                f"{(row.get('duration_seconds') or 0):.2f} s"
            )
        _checkpoints_line(args)
    return EXIT_OK


def _checkpoints_line(args: argparse.Namespace) -> None:
    """What the durable checkpoints of the runs folder take, when there are any."""
    from ..._checkpoints.store import CheckpointStore
    from .checkpoints import size_text

    store = CheckpointStore(Path(args.runs_dir))
    if not store.root.is_dir():
        return
    usage = store.usage()
    if usage.checkpoints:
        print(
            f"checkpoints: {usage.checkpoints} of {usage.notebooks} notebooks, "
            f"{size_text(usage.bytes)} (notebook-executor gc frees them)"
        )


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
        resumed_by = [] if result["status"] == "success" else ex.resumed_by(args.run_id)
    if args.json:
        print_json(result)
    else:
        print_result(result)
        if resumed_by:
            print(f"resumed by: {', '.join(resumed_by)}")
    return EXIT_OK


def _cmd_reindex(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        count = ex.reindex()
    print(f"indexed {count} runs in {Path(args.runs_dir) / 'catalog.sqlite'}", file=sys.stderr)
    return EXIT_OK


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


def _cmd_digest(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        found = ex.digest(args.notebook, since=args.since, limit_chars=args.limit_chars)
    if args.json:
        print_json(found)
    else:
        common.runs_header(args)
        sys.stdout.write(found["text"])
    return EXIT_OK
