"""``resume`` and ``gc``: durable checkpoints from the shell (docs/how-to/resume.md,
docs/how-to/incremental.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import common
from .common import EXIT_FAILED, EXIT_OK, print_json, print_result

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    resume = commands.add_parser(
        "resume",
        help="go on with a failed, timed-out, cancelled or interrupted run from its failed cell",
        description="Runs the notebook's file as it is now, with the earlier run's parameters, "
        "from its failed cell: the state before it is read back from the run's checkpoints "
        "(an edit before the failed cell goes back to the last checkpoint before the edited "
        "cell). A new run, whose resumed_from names the earlier one. Exit status as run's; "
        "2 for a run that succeeded or is unknown.",
    )
    resume.add_argument("run_id", metavar="RUN", help="the run to resume")
    resume.add_argument(
        "--edit",
        nargs=2,
        action="append",
        default=[],
        metavar=("INDEX", "FILE"),
        help="cell INDEX holds the text of FILE ('-': standard input) for this run only "
        "(repeatable), as run --edit",
    )
    resume.add_argument("--timeout", type=common.seconds, metavar="S", help="limit for the run")
    resume.add_argument(
        "--cell-timeout", type=common.seconds, metavar="S", help="limit for each cell"
    )
    resume.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="pass environment variable NAME to the kernel as a secret (repeatable)",
    )
    common.add_runs_dir(resume)
    resume.add_argument("--json", action="store_true", help="print the result dict as JSON")
    resume.set_defaults(handler=_cmd_resume)

    gc = commands.add_parser(
        "gc",
        help="show and free the disk the durable checkpoints take",
        description="Evicts the oldest checkpoints beyond the limits (512 MiB per notebook, "
        "2 GiB in all; --max-bytes: fewer), then removes what no checkpoint names.",
    )
    gc.add_argument(
        "--max-bytes",
        type=common.non_negative_int,
        metavar="N",
        help="keep at most N bytes of checkpoints (0: remove them all)",
    )
    common.add_runs_dir(gc)
    gc.add_argument("--json", action="store_true", help="print the answer as JSON")
    gc.set_defaults(handler=_cmd_gc)


def _cmd_resume(args: argparse.Namespace) -> int:
    from .run import cell_edits

    edits = cell_edits(f"the notebook of run {args.run_id}", args.edit, [], markdown=False)
    options = common.run_options(args)
    with common.executor(args) as ex:
        # A kernel starts while the earlier run is read and the notebook planned, as run's.
        ex.prepare_kernel(once_read=True)
        result = ex.resume(args.run_id, edits=edits or None, **options.given())
    if args.json:
        print_json(result)
    else:
        print_result(result)
    return EXIT_OK if result["status"] == "success" else EXIT_FAILED


def _cmd_gc(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        answer = ex.collect_checkpoints(max_bytes=args.max_bytes)
    if args.json:
        print_json(answer)
    else:
        print(
            f"freed {size_text(answer['freed_bytes'])}; kept {answer['checkpoints']} "
            f"checkpoints of {answer['notebooks']} notebooks, "
            f"{size_text(answer['bytes'])}",
            file=sys.stdout,
        )
    return EXIT_OK


def size_text(count: int) -> str:
    """``count`` bytes, readably (``12.3 MiB``)."""
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
