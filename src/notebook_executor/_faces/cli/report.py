"""``report`` and ``export``: the runs as a static HTML site, and one run through nbconvert."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from . import common
from .common import EXIT_OK, UsageError

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    report = commands.add_parser(
        "report", help="write a static HTML report of the runs (opens with no server)"
    )
    report.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    report.add_argument(
        "--out", metavar="DIR", help="the report's folder (default: RUNS_DIR/report)"
    )
    report.add_argument("--title", default="Notebook runs", help="the index page's title")
    common.add_runs_dir(report)
    report.set_defaults(handler=_cmd_report)

    export = commands.add_parser("export", help="export one run with nbconvert")
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument(
        "--to", choices=("html", "markdown", "script"), default="html", help="the format"
    )
    export.add_argument(
        "--out",
        metavar="PATH",
        help="the file to write (default: RUN_ID with the format's "
        "extension, in the working directory); - writes to stdout",
    )
    export.add_argument(
        "--force", action="store_true", help="replace PATH (and its images) if they exist"
    )
    common.add_runs_dir(export)
    export.set_defaults(handler=_cmd_export)


def _cmd_report(args: argparse.Namespace) -> int:
    from ..._dispatch.progress import run_progress
    from ..report import build_report, default_out

    runs_dir = Path(args.runs_dir)
    if not runs_dir.is_dir():
        raise UsageError(f"no runs folder at {args.runs_dir!r} (see --runs-dir)")
    out = Path(args.out) if args.out else default_out(runs_dir)
    with common.executor(args) as ex:
        runs = ex.runs(notebook=args.notebook)
    progress = run_progress(len(runs), None)
    try:
        summary = build_report(runs, runs_dir, out, title=args.title, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    print(
        f"wrote {summary.index} ({summary.runs} runs, {summary.charts} charts; "
        f"{summary.pages_written} pages written, {summary.pages_kept} up to date)",
        file=sys.stderr,
    )
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    from ..._sources.files import missing_folder
    from ..report import export_run

    body, extension, extras = export_run(args.run_id, Path(args.runs_dir), args.to)
    if args.out == "-":
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
        return EXIT_OK
    target = Path(args.out) if args.out else Path(f"{args.run_id}{extension}")
    files = {target: body, **{target.parent / name: data for name, data in extras.items()}}
    existing = [path for path in files if path.exists()]
    if existing and not args.force:
        raise UsageError(f"{existing[0]} exists (use --force to replace it)")
    problem = missing_folder(target)
    if problem:
        raise UsageError(f"--out {os.fspath(target)!r}: {problem}")
    for path, data in files.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # the extras' own folder, beside it
            path.write_bytes(data)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc}") from None
    print(f"wrote {target}", file=sys.stderr)
    return EXIT_OK
