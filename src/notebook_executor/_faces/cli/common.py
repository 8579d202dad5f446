"""What every command shares: the parser type, usage errors, argument types and printers."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..._run.options import RunOptions
    from ..._types import UseDefault

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "Parser",
    "UsageError",
    "add_env_option",
    "add_runs_dir",
    "add_table_format",
    "executor",
    "fail",
    "non_negative_int",
    "output_cut_line",
    "positive_int",
    "print_json",
    "print_result",
    "print_step",
    "read_input",
    "read_text",
    "run_options",
    "runs_dir_arg",
    "runs_header",
    "seconds",
    "settle_runs_dir",
    "yaml_document",
    "yaml_mapping",
]

PROG = "notebook-executor"
logger = logging.getLogger(__name__)
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage, reported as one line with exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def add_env_option(parser: argparse.ArgumentParser) -> None:
    """``--env current``: run a notebook that declares dependencies on this interpreter."""
    parser.add_argument(
        "--env",
        dest="environment",
        choices=("declared", "current"),
        default=None,
        help="where a notebook that declares dependencies runs: 'declared' (default), in an "
        "environment made by uv for them; 'current', on this interpreter",
    )


def add_checkpoint_options(parser: argparse.ArgumentParser) -> None:
    """``--reuse``, ``--no-reuse`` and ``--no-checkpoints`` (docs/how-to/incremental.md)."""
    parser.add_argument(
        "--reuse",
        action="store_true",
        default=None,
        help="start from the longest prefix of cells whose stored checkpoint still holds; "
        "default: reuse in [tool.notebook-executor] of the project's pyproject.toml",
    )
    parser.add_argument(
        "--no-reuse", dest="reuse", action="store_false", help="run every cell (the default)"
    )
    parser.add_argument(
        "--no-checkpoints",
        dest="checkpoints",
        action="store_false",
        default=None,
        help="write no durable checkpoint (then neither resume nor reuse can start from it)",
    )


def add_runs_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs-dir",
        default=None,
        type=runs_dir_arg,
        metavar="DIR",
        help="where run records live (default: the project's: the nearest runs/ holding a "
        "catalog up to the folder holding .git or pyproject.toml, else the runs-dir of its "
        "[tool.notebook-executor], else ./runs)",
    )


def settle_runs_dir(args: argparse.Namespace) -> None:
    """Give a command that takes ``--runs-dir`` and was given none the project's runs folder
    (:func:`~..._records.project.find_runs_dir`, from the working folder), and say which
    with ``-v``; ``args.runs_found`` keeps it (None when ``--runs-dir`` was given).

    Raises
    ------
    InvalidArgumentError
        The project's ``pyproject.toml`` cannot be read, or sets a bad ``runs-dir``.
    """
    if not hasattr(args, "runs_dir") or args.command == "mcp":
        return  # the MCP server finds its own, from its root (see ..mcp.server)
    from ..._records.project import find_runs_dir

    args.runs_found = None
    if args.runs_dir is None:
        args.runs_found = find_runs_dir()
        args.runs_dir = str(args.runs_found.path)
        logger.info("runs folder: %s", args.runs_found)
    else:
        logger.info("runs folder: %s (--runs-dir)", args.runs_dir)


def runs_header(args: argparse.Namespace) -> None:
    """The first line of a listing's human output: the runs folder, when it was found rather
    than given (``--runs-dir``)."""
    found = getattr(args, "runs_found", None)
    if found is not None:
        print(f"runs folder: {found}")


def runs_dir_arg(text: str) -> str:
    """A ``--runs-dir`` value: a folder, or a path where one will be made; never a file."""
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} cannot hold run records: not a folder")
    return text


def add_table_format(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print JSON")
    group.add_argument("--csv", action="store_true", help="print CSV")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}: {text!r}")
    return value


def fail(message: str) -> None:
    print(f"{PROG}: error: {message}", file=sys.stderr)


def configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format=f"{PROG}: %(levelname)s: %(message)s")


def executor(args: argparse.Namespace, **options: Any) -> Any:
    """The executor of a command: in the run server's child, on the server's kernels."""
    from ..._executor import NotebookExecutor
    from ..server.served import executor_class, executor_engine

    engine = executor_engine(options)
    if engine is None:
        return NotebookExecutor(runs_dir=args.runs_dir, **options)
    return executor_class()(runs_dir=args.runs_dir, engine=engine, **options)


def run_options(args: argparse.Namespace) -> RunOptions:
    """The options of a run that a command's flags give (of ``--timeout``, ``--cell-timeout``,
    ``--request``, ``--cwd``, ``--secret NAME`` and ``--env``, those the command has).

    A secret's value is read from this process's environment; a name that is not set there
    is a :class:`UsageError`.
    """
    from ..._run.options import RunOptions

    secrets: dict[str, str] = {}
    for name in getattr(args, "secret", None) or ():
        if name not in os.environ:
            raise UsageError(f"--secret {name}: no environment variable {name!r} is set")
        secrets[name] = os.environ[name]
    return RunOptions(
        # A flag not given leaves the executor's limit (the command's executor has none).
        timeout=_or_default(getattr(args, "timeout", None)),
        cell_timeout=_or_default(getattr(args, "cell_timeout", None)),
        request=getattr(args, "request", None),
        cwd=getattr(args, "cwd", None),
        secrets=secrets or None,
        environment=getattr(args, "environment", None),
        reuse=getattr(args, "reuse", None),
        checkpoints=getattr(args, "checkpoints", None),
    )


def _or_default(seconds: float | None) -> float | UseDefault:
    from ..._types import USE_DEFAULT

    return USE_DEFAULT if seconds is None else seconds


def read_text(path: str) -> str:
    """The text of a parameters file, read no further than the parameters limit allows."""
    from ..._sources.bounded import MAX_PARAMETERS_CHARS
    from ..._sources.regular import read_regular_text

    try:
        # One character more than allowed is enough for load_yaml to refuse it.
        return read_regular_text(path, chars=MAX_PARAMETERS_CHARS + 1)
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"cannot read parameters file {path!r}: {reason}") from None


def read_input(path: str, what: str, limit: int | None = None) -> str:
    """The text of file ``path`` (``-``: standard input), at most ``limit`` characters (by
    default :data:`~notebook_executor._sources.bounded.MAX_TEXT_SOURCE_BYTES`), or a
    :class:`UsageError` naming ``what`` it was for."""
    from ..._sources.bounded import MAX_TEXT_SOURCE_BYTES

    limit = MAX_TEXT_SOURCE_BYTES if limit is None else limit
    where = "standard input" if path == "-" else repr(path)
    try:
        if path == "-":
            text = sys.stdin.read(limit + 1)
        else:
            from ..._sources.regular import read_regular_text

            # One character past the limit is enough to refuse it below.
            text = read_regular_text(path, chars=limit + 1)
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"cannot read {what} from {where}: {reason}") from None
    if len(text) > limit:
        raise UsageError(f"{what} from {where} is over {limit:,} characters")
    return text


def yaml_document(text: str, origin: str) -> Any:
    """``text`` parsed as YAML within the bounds of :func:`load_yaml`; a usage error if not."""
    import yaml

    from ..._sources.bounded import YamlRefused, load_yaml

    try:
        return load_yaml(text)
    except YamlRefused as exc:
        raise UsageError(f"{origin}: {exc}") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        raise UsageError(f"{origin}: not valid YAML ({first})") from None


def yaml_mapping(text: str, origin: str) -> dict[str, Any]:
    data = yaml_document(text, origin)
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise UsageError(f"{origin}: parameters must be a YAML mapping of names to values")
    return data


def print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, ensure_ascii=False, default=str) + "\n")


#: Longest scrap value the human summary prints (as JSON); ``show RUN --json`` has it whole.
SCRAP_CHARS = 200


def print_result(result: dict[str, Any]) -> None:
    out = sys.stdout
    status = result["status"]
    # A run whose process was killed never wrote its counts or its duration.
    executed, total = result.get("cells_executed"), result.get("cells_total")
    cells = f"{_or_unknown(executed)}/{_or_unknown(total)} code cells"
    duration = result.get("duration_seconds")
    took = "unfinished" if duration is None else f"{duration:.2f} s"
    kind = f", {result['error_kind']}" if result.get("error_kind") == "interrupted" else ""
    from ..._records.results import modified_mark

    modified = modified_mark(result)
    out.write(f"{status}: {result['notebook']}{modified} ({cells}, {took}{kind})\n")
    out.write(f"run: {result['run_id']}\noutput: {result['output_path']}\n")
    cut = output_cut_line(result.get("output_cut") or [])
    if cut:
        out.write(cut + "\n")
    for note in result.get("state_notes") or []:
        out.write(f"checkpoints: {note}\n")
    failed = result.get("failed_cell")
    if failed:
        out.write(
            f"failed cell {failed['index']} ({result['error_kind']}): "
            f"{failed['ename']}: {failed['evalue']}\n"
        )
        for line in failed["traceback"][-15:]:
            out.write(f"  {line}\n")
    for name, value in (result.get("scraps") or {}).items():
        text = json.dumps(value, ensure_ascii=False, default=str)
        if len(text) > SCRAP_CHARS:
            text = (
                f"{text[:SCRAP_CHARS]} [... {len(text) - SCRAP_CHARS:,} more characters; "
                f"notebook-executor show {result['run_id']} --json]"
            )
        out.write(f"scrap {name} = {text}\n")


def output_cut_line(cut: list[Mapping[str, Any]]) -> str:
    """One line naming the cells whose outputs the run record does not hold whole (the
    result's ``output_cut``), or nothing."""
    if not cut:
        return ""
    from ..._records.streams import MAX_STREAM_CHARS

    why = {
        "stream_cap": f"streams over {MAX_STREAM_CHARS:,} characters, the rest cut from the "
        "run record",
        "lost": "output still arriving when the wait for it ended, the rest not kept",
    }
    return "output cut: " + "; ".join(
        f"cell {item['index']} ({why.get(str(item['reason']), str(item['reason']))})"
        for item in cut
    )


def _or_unknown(value: Any) -> str:
    return "?" if value is None else str(value)


def print_step(step: dict[str, Any]) -> None:
    """A session step's result as ``session run`` prints it (and ``job wait`` of a step)."""
    out = sys.stdout
    restored = f", restored by {step['restored']}" if step.get("restored") else ""
    out.write(
        f"{step['status']}: cells {step['cells_run']} ran{restored} "
        f"({step['cells_executed']}/{step['cells_total']} code cells so far)\n"
    )
    if step.get("restore_reason"):
        out.write(f"restore: {step['restore_reason']}\n")
    for output in step.get("outputs", []):
        text = output["text"].rstrip("\n")
        if text:
            out.write(f"[{output['index']}] " + text.replace("\n", "\n    ") + "\n")
    failed = step.get("failed_cell")
    if failed:
        out.write(
            f"failed cell {failed['index']} ({step['error_kind']}): "
            f"{failed['ename']}: {failed['evalue']}\n"
        )
    if step.get("stale_cells"):
        out.write(f"stale cells (edited since they ran): {step['stale_cells']}\n")
