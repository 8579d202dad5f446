"""The ``notebook-executor`` command line; ``main(argv=None) -> int``.

Exit status: 0 success, 1 the notebook failed (the result is still printed), 2 bad input or
usage (one line on stderr naming the problem, no traceback). ``--json`` prints exactly one JSON
document on stdout and nothing else there. This is the only module that configures logging.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from ._errors import NotebookExecutorError

__all__ = ["main"]

PROG = "notebook-executor"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _UsageError(Exception):
    """Bad command-line usage, reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see '{self.prog} --help')")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Run Jupyter notebooks (.ipynb, percent .py, markdown .md) as "
        "reproducible, parameterized tasks.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    run = commands.add_parser("run", help="run a notebook and record the run")
    run.add_argument("notebook", metavar="NOTEBOOK")
    run.add_argument(
        "-p",
        "--parameters",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a parameter, converted like papermill's -p then to the declared type",
    )
    run.add_argument(
        "-r",
        "--parameters-raw",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "RAW"),
        help="a parameter passed as the raw string",
    )
    run.add_argument("-f", "--parameters-file", metavar="PARAMS.yaml", help="YAML parameters file")
    run.add_argument("-y", "--parameters-yaml", metavar="YAML", help="parameters as a YAML string")
    run.add_argument("--request", metavar="TEXT", help="why this run is made (kept in the record)")
    run.add_argument("--output", metavar="PATH", help="also write the executed notebook here")
    run.add_argument("--timeout", type=_seconds, metavar="S", help="limit for the whole run")
    run.add_argument("--cell-timeout", type=_seconds, metavar="S", help="limit for each cell")
    run.add_argument("--kernel", metavar="NAME", help="kernel to use instead of the notebook's")
    run.add_argument("--cwd", metavar="DIR", help="kernel working directory (default: notebook's)")
    run.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="pass environment variable NAME to the kernel as a secret: its value is written "
        "nowhere and masked in outputs (repeatable)",
    )
    _add_runs_dir(run)
    run.add_argument("--json", action="store_true", help="print the result dict as JSON")
    run.set_defaults(handler=_cmd_run)

    inspect = commands.add_parser("inspect", help="list a notebook's parameters")
    inspect.add_argument("notebook", metavar="NOTEBOOK")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(handler=_cmd_inspect)

    runs = commands.add_parser("runs", help="list past runs, newest first")
    runs.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    runs.add_argument("--status", choices=("success", "error", "running"), help="only this status")
    runs.add_argument("--since", metavar="WHEN", help="only runs started at or after (ISO date)")
    runs.add_argument("--limit", type=_positive_int, metavar="N", help="at most N runs")
    _add_runs_dir(runs)
    _add_table_format(runs)
    runs.set_defaults(handler=_cmd_runs)

    scraps = commands.add_parser("scraps", help="parameters and scraps of past runs, as a table")
    scraps.add_argument("--notebook", metavar="N", help="only runs of this notebook")
    scraps.add_argument(
        "--status", choices=("success", "error", "running"), help="only this status"
    )
    scraps.add_argument("--since", metavar="WHEN", help="only runs started at or after (ISO date)")
    _add_runs_dir(scraps)
    _add_table_format(scraps)
    scraps.set_defaults(handler=_cmd_scraps)

    show = commands.add_parser("show", help="show one past run")
    show.add_argument("run_id", metavar="RUN_ID")
    _add_runs_dir(show)
    show.add_argument("--json", action="store_true", help="print the result dict as JSON")
    show.set_defaults(handler=_cmd_show)

    convert = commands.add_parser("convert", help="convert between .ipynb, .py and .md")
    convert.add_argument("src", metavar="SRC")
    convert.add_argument("dst", metavar="DST")
    convert.set_defaults(handler=_cmd_convert)

    reindex = commands.add_parser("reindex", help="rebuild the run catalog from the run files")
    _add_runs_dir(reindex)
    reindex.set_defaults(handler=_cmd_reindex)
    return parser


def _add_runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs-dir", default="runs", metavar="DIR", help="where run records live (default: runs)"
    )


def _add_table_format(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print JSON")
    group.add_argument("--csv", action="store_true", help="print CSV")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        _fail(str(exc))
        return EXIT_USAGE
    _configure_logging(args.verbose)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (NotebookExecutorError, _UsageError) as exc:
        _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`); nothing more to say.
        sys.stderr.close()
        return EXIT_OK


def _fail(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format=f"{PROG}: %(levelname)s: %(message)s")


def _executor(args: argparse.Namespace, **options: Any) -> Any:
    from ._executor import NotebookExecutor

    return NotebookExecutor(runs_dir=args.runs_dir, **options)


# -- run ------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from ._parameters import convert_text_value, declared_parameters
    from ._sources import load_source

    with _executor(args, kernel_name=args.kernel) as ex:
        if args.kernel in (None, "python3"):
            # A template imports ipykernel while the source is read and checked; the kernel
            # is forked from it once the run is known to be good (bad input: none starts).
            ex._prepare_first_kernel()
        declared = declared_parameters(load_source(args.notebook).notebook)
        values: dict[str, Any] = {}
        if args.parameters_file:
            values.update(_yaml_mapping(_read_text(args.parameters_file), args.parameters_file))
        if args.parameters_yaml:
            values.update(_yaml_mapping(args.parameters_yaml, "-y"))
        for name, text in args.parameters:
            values[name] = convert_text_value(declared.get(name), text)
        for name, text in args.parameters_raw:
            values[name] = text
        secrets: dict[str, str] = {}
        for name in args.secret:
            if name not in os.environ:
                raise _UsageError(f"--secret {name}: no environment variable {name!r} is set")
            secrets[name] = os.environ[name]
        result = ex.execute(
            args.notebook,
            output_path=args.output,
            parameters=values,
            timeout=args.timeout,
            cell_timeout=args.cell_timeout,
            request=args.request,
            cwd=args.cwd,
            secrets=secrets or None,
        )
    if args.json:
        _print_json(result)
    else:
        _print_result(result)
    return EXIT_OK if result["status"] == "success" else EXIT_FAILED


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _UsageError(f"cannot read parameters file {path!r}: {exc}") from None


def _yaml_mapping(text: str, origin: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        raise _UsageError(f"{origin}: not valid YAML ({first})") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise _UsageError(f"{origin}: parameters must be a YAML mapping of names to values")
    return data


def _print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, ensure_ascii=False, default=str) + "\n")


def _print_result(result: dict[str, Any]) -> None:
    out = sys.stdout
    status = result["status"]
    out.write(
        f"{status}: {result['notebook']} ({result['cells_executed']}/{result['cells_total']} "
        f"code cells, {result['duration_seconds']:.2f} s)\n"
    )
    out.write(f"run: {result['run_id']}\noutput: {result['output_path']}\n")
    failed = result.get("failed_cell")
    if failed:
        out.write(
            f"failed cell {failed['index']} ({result['error_kind']}): "
            f"{failed['ename']}: {failed['evalue']}\n"
        )
        for line in failed["traceback"][-15:]:
            out.write(f"  {line}\n")
    for name, value in result.get("scraps", {}).items():
        out.write(f"scrap {name} = {json.dumps(value, ensure_ascii=False, default=str)}\n")


# -- inspect, convert -------------------------------------------------------------------------


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ._parameters import declared_parameters
    from ._sources import load_source

    declared = {
        name: parameter.as_dict()
        for name, parameter in declared_parameters(load_source(args.notebook).notebook).items()
    }
    if args.json:
        _print_json(declared)
        return EXIT_OK
    if not declared:
        print("no parameters (no cell tagged 'parameters')")
        return EXIT_OK
    for info in declared.values():
        default = "(required)" if info["required"] else f"= {info['default']!r}"
        help_text = f"  # {info['help']}" if info["help"] else ""
        print(f"{info['name']}: {info['type']} {default}{help_text}")
    return EXIT_OK


def _cmd_convert(args: argparse.Namespace) -> int:
    from ._sources import format_for, read_notebook, write_notebook

    format_for(args.dst)
    if Path(args.src).resolve() == Path(args.dst).resolve():
        raise _UsageError("SRC and DST are the same file")
    written = write_notebook(read_notebook(args.src), args.dst)
    print(f"wrote {written}", file=sys.stderr)
    return EXIT_OK


# -- catalog commands -----------------------------------------------------------------------


def _cmd_runs(args: argparse.Namespace) -> int:
    with _executor(args) as ex:
        rows = ex.runs(
            notebook=args.notebook, status=args.status, since=args.since, limit=args.limit
        )
    if args.json:
        _print_json(rows)
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
    with _executor(args) as ex:
        frame = ex.scraps(notebook=args.notebook, status=args.status, since=args.since)
    if args.json:
        sys.stdout.write(frame.reset_index().to_json(orient="records", force_ascii=False) + "\n")
    elif args.csv:
        sys.stdout.write(frame.to_csv())
    else:
        sys.stdout.write(frame.to_string() + "\n")
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    with _executor(args) as ex:
        result = ex.get_run(args.run_id)
    if args.json:
        _print_json(result)
    else:
        _print_result(result)
    return EXIT_OK


def _cmd_reindex(args: argparse.Namespace) -> int:
    with _executor(args) as ex:
        count = ex.reindex()
    print(f"indexed {count} runs in {Path(args.runs_dir) / 'catalog.sqlite'}", file=sys.stderr)
    return EXIT_OK
