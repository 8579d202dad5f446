"""``sweep``: one notebook over many parameter sets, here or on a Dask cluster."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from . import common
from .common import EXIT_FAILED, EXIT_OK, UsageError, print_json
from .jobs import add_detach, detach_command

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add the ``sweep`` command to the ``commands`` subparsers."""
    sweep = commands.add_parser(
        "sweep",
        help="run a notebook once per parameter set (a file of sets, a grid, or both)",
        description="Run NOTEBOOK once per parameter set. -f gives a YAML list of sets; each -g "
        "NAME=V1,V2,... adds a grid dimension (every combination runs). Given both, every set "
        "of the file runs with every point of the grid. Runs go in parallel on this machine "
        "(--workers) or on a Dask cluster (--scheduler).",
    )
    sweep.add_argument("notebook", metavar="NOTEBOOK")
    sweep.add_argument("-f", "--sets-file", metavar="SETS.yaml", help="YAML list of parameter sets")
    sweep.add_argument(
        "-g",
        "--grid",
        action="append",
        default=[],
        metavar="NAME=V1,V2,...",
        help="values of one parameter, converted like run's -p (repeatable: the product)",
    )
    where = sweep.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=common.positive_int, metavar="N", help="runs at a time on this machine"
    )
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run on the Dask cluster of this scheduler (tcp://host:8786); needs the [dask] extra",
    )
    sweep.add_argument(
        "--retries",
        type=common.non_negative_int,
        default=0,
        metavar="N",
        help="with --scheduler: times a run whose worker is lost begins again (default 0: it "
        "ends as interrupted, never run twice)",
    )
    sweep.add_argument("--request", metavar="TEXT", help="why these runs are made (kept in each)")
    sweep.add_argument("--timeout", type=common.seconds, metavar="S", help="limit for each run")
    sweep.add_argument("--cell-timeout", type=common.seconds, metavar="S", help="limit per cell")
    sweep.add_argument(
        "-k", "--kernel", metavar="NAME", help="kernel to use instead of the notebook's"
    )
    sweep.add_argument(
        "--cwd",
        metavar="DIR",
        help="kernel working directory (default: the notebook's folder; on a cluster, a copy "
        "of it; with --scheduler DIR must exist on every worker)",
    )
    sweep.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="pass environment variable NAME to the kernels as a secret (repeatable)",
    )
    common.add_env_option(sweep)
    common.add_checkpoint_options(sweep)
    common.add_runs_dir(sweep)
    sweep.add_argument("--json", action="store_true", help="print the list of result dicts")
    add_detach(sweep)
    sweep.set_defaults(handler=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    if args.detach:
        if args.scheduler is not None:
            raise UsageError("--detach does not go with --scheduler")
        return detach_command(args)
    from ..._cluster.grid import combine, parse_grid_option
    from ..._parameters.values import TextValue

    if args.retries and args.scheduler is None:
        raise UsageError("--retries applies to runs on a Dask cluster (--scheduler)")
    grid: list[tuple[str, list[Any]]] = []
    for option in args.grid:
        name, texts = parse_grid_option(option)
        # Typed like run's -p by the planner, against the parameters the notebook declares
        # (a name it does not declare is refused there).
        grid.append((name, [TextValue(text) for text in texts]))
    sets = _read_sets(args.sets_file) if args.sets_file else None
    if sets is None and not grid:
        raise UsageError("give the parameter sets: -f SETS.yaml and/or -g NAME=V1,V2,...")
    parameter_sets = combine(sets, grid)
    if not parameter_sets:
        raise UsageError(f"{args.sets_file}: no parameter sets")
    options = common.run_options(args).given()
    with common.executor(args, kernel_name=args.kernel) as ex:
        if args.scheduler is not None:
            results = ex.execute_many(
                args.notebook,
                parameter_sets,
                client=args.scheduler,
                retries=args.retries,
                **options,
            )
        else:
            results = ex.execute_many(
                args.notebook, parameter_sets, max_workers=args.workers, **options
            )
    if args.json:
        print_json(results)
    else:
        _print_summary(results)
    return EXIT_OK if all(r["status"] == "success" for r in results) else EXIT_FAILED


def _read_sets(path: str) -> list[dict[str, Any]]:
    data = common.yaml_document(common.read_text(path), path)
    if not isinstance(data, list) or not all(
        isinstance(item, dict) and all(isinstance(key, str) for key in item) for item in data
    ):
        raise UsageError(f"{path}: parameter sets must be a YAML list of mappings")
    return data


def _print_summary(results: list[dict[str, Any]]) -> None:
    out = sys.stdout
    for result in results:
        parameters = json.dumps(result["parameters"], ensure_ascii=False, default=str)
        line = f"{result['status']:7} {result['run_id']}  {parameters}"
        failed = result.get("failed_cell")
        if failed:
            line += f"  cell {failed['index']} ({result['error_kind']}): {failed['ename']}"
        out.write(line + "\n")
    ok = sum(1 for r in results if r["status"] == "success")
    out.write(f"{ok}/{len(results)} runs succeeded\n")
