"""``run``, ``inspect`` and ``convert``: one notebook at a time."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..._errors import OutputWriteError, RecordWriteError
from . import common
from .common import EXIT_FAILED, EXIT_OK, UsageError, print_json, print_result
from .jobs import add_detach, detach_command

__all__ = ["cell_edits", "parameter_values", "register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    run = commands.add_parser("run", help="run a notebook and record the run")
    run.add_argument("notebook", metavar="NOTEBOOK", help="the source: a path or a URL")
    run.add_argument(
        "output_path",
        nargs="?",
        metavar="OUT",
        help="also write the executed notebook here (papermill's positional output; a path "
        "or a URL); the run record is kept under --runs-dir either way",
    )
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
        "--parameters_raw",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "RAW"),
        help="a parameter passed as the raw string",
    )
    run.add_argument(
        "-f",
        "--parameters-file",
        "--parameters_file",
        metavar="PARAMS.yaml",
        help="YAML parameters file",
    )
    run.add_argument(
        "-y",
        "--parameters-yaml",
        "--parameters_yaml",
        metavar="YAML",
        help="parameters as a YAML string",
    )
    run.add_argument(
        "-b",
        "--parameters-base64",
        "--parameters_base64",
        metavar="BASE64",
        help="parameters as a base64-encoded YAML string",
    )
    run.add_argument("--request", metavar="TEXT", help="why this run is made (kept in the record)")
    run.add_argument("--output", metavar="PATH", help="the same as OUT")
    run.add_argument("--timeout", type=common.seconds, metavar="S", help="limit for the whole run")
    run.add_argument(
        "--cell-timeout",
        "--execution-timeout",
        "--execution_timeout",
        type=common.seconds,
        metavar="S",
        help="limit for each cell",
    )
    run.add_argument(
        "-k", "--kernel", metavar="NAME", help="kernel to use instead of the notebook's"
    )
    run.add_argument("--cwd", metavar="DIR", help="kernel working directory (default: notebook's)")
    run.add_argument(
        "--prepare-only",
        "--prepare_only",
        action="store_true",
        help="write OUT with the parameters injected and run nothing (no kernel starts)",
    )
    run.add_argument(
        "--log-output",
        "--log_output",
        action="store_true",
        help="stream cell outputs to stderr as they arrive",
    )
    run.add_argument(
        "--progress-bar",
        "--progress_bar",
        dest="progress_bar",
        action="store_true",
        default=None,
        help="show a bar of cells on stderr (default: on a terminal)",
    )
    run.add_argument(
        "--no-progress-bar",
        "--no_progress_bar",
        dest="progress_bar",
        action="store_false",
        help="show no bar of cells",
    )
    run.add_argument(
        "--secret",
        action="append",
        default=[],
        metavar="NAME",
        help="pass environment variable NAME to the kernel as a secret: its value is written "
        "nowhere and masked in outputs (repeatable)",
    )
    run.add_argument(
        "--edit",
        nargs=2,
        action="append",
        default=[],
        metavar=("INDEX", "FILE"),
        help="a modified run: cell INDEX holds the text of FILE ('-': standard input) for this "
        "run only; the notebook file is not changed (repeatable)",
    )
    run.add_argument(
        "--edit-markdown",
        action="store_true",
        help="let --edit replace markdown cells (narrative) too; without it an --edit of a "
        "markdown cell is refused ('notebook-executor cells NOTEBOOK' lists the cells)",
    )
    run.add_argument(
        "--edit-note",
        action="append",
        default=[],
        metavar="TEXT",
        help="why the cell was edited, shown in the run's record (one for every --edit, or one "
        "for them all)",
    )
    common.add_checkpoint_options(run)
    common.add_env_option(run)
    common.add_runs_dir(run)
    run.add_argument("--json", action="store_true", help="print the result dict as JSON")
    add_detach(run)
    run.set_defaults(handler=_cmd_run)

    inspect = commands.add_parser("inspect", help="list a notebook's parameters")
    inspect.add_argument("notebook", metavar="NOTEBOOK")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(handler=_cmd_inspect)

    convert = commands.add_parser("convert", help="convert between .ipynb, .py and .md")
    convert.add_argument("src", metavar="SRC")
    convert.add_argument("dst", metavar="DST")
    convert.set_defaults(handler=_cmd_convert)


def _cmd_run(args: argparse.Namespace) -> int:
    if args.detach:
        return detach_command(args)
    if args.output is not None and args.output_path is not None:
        raise UsageError("give the output once: OUT or --output")
    output = args.output_path if args.output_path is not None else args.output
    if args.prepare_only and output is None:
        raise UsageError("--prepare-only needs OUT, where the prepared notebook is written")
    edits = cell_edits(args.notebook, args.edit, args.edit_note, args.edit_markdown)
    if edits and args.prepare_only:
        raise UsageError("--edit does not go with --prepare-only")
    values = parameter_values(args)
    with common.executor(
        args, kernel_name=args.kernel, log_output=args.log_output, progress=args.progress_bar
    ) as ex:
        if not args.prepare_only:
            # Once the planner has read the source, a template imports ipykernel while the
            # rest is checked, when the run is on this interpreter's kernel; the kernel is
            # forked from it once the run is known to be good (bad input: none starts). A
            # notebook with its own environment forks from that environment's template.
            ex.prepare_kernel(once_read=True)
        options = common.run_options(args).replace(
            output_path=output, parameters=values, edits=edits or None
        )
        if args.prepare_only:
            ex.prepare(args.notebook, **options.given())
            print(f"wrote {output} (parameters injected, not run)", file=sys.stderr)
            return EXIT_OK
        try:
            result = ex.execute(args.notebook, **options.given())
        except (KeyboardInterrupt, RecordWriteError, OutputWriteError) as exc:
            # The run is recorded (as cancelled, or as far as the disk allowed): --json still
            # prints its one document; the error's line goes to stderr.
            ended = getattr(exc, "result", None)
            if args.json and isinstance(ended, dict):
                print_json(ended)
            raise
    if args.json:
        print_json(result)
    else:
        print_result(result)
    return EXIT_OK if result["status"] == "success" else EXIT_FAILED


def parameter_values(args: argparse.Namespace) -> dict[str, Any]:
    """The parameter values given to a command: ``-f``, ``-y``, ``-b``, then ``-p`` (text,
    typed by the planner against the declared parameters, once it has read the source) and
    ``-r``, of those the command has."""
    from ..._parameters.values import TextValue

    values: dict[str, Any] = {}
    if getattr(args, "parameters_file", None):
        values.update(
            common.yaml_mapping(common.read_text(args.parameters_file), args.parameters_file)
        )
    if getattr(args, "parameters_yaml", None):
        values.update(common.yaml_mapping(args.parameters_yaml, "-y"))
    if getattr(args, "parameters_base64", None):
        values.update(common.yaml_mapping(_base64_text(args.parameters_base64), "-b"))
    for name, text in getattr(args, "parameters", None) or ():
        values[name] = TextValue(text)
    for name, text in getattr(args, "parameters_raw", None) or ():
        values[name] = text
    return values


def cell_edits(
    notebook: str, pairs: list[list[str]], notes: list[str], markdown: bool
) -> list[dict[str, Any]]:
    """The ``edits`` of ``--edit INDEX FILE`` pairs and their ``--edit-note`` texts; each of a
    code cell only, unless ``--edit-markdown`` says an edit of a markdown cell is meant (the
    planner checks them against the source)."""
    from ..._review.run_edits import CodeCellEdit

    if notes and not pairs:
        raise UsageError("--edit-note goes with --edit INDEX FILE")
    if notes and len(notes) not in (1, len(pairs)):
        raise UsageError(
            f"{len(notes)} --edit-note for {len(pairs)} --edit: give one note for each edit, "
            "or one for them all"
        )
    if sum(1 for _, path in pairs if path == "-") > 1:
        raise UsageError("--edit: standard input ('-') can be read for one edit only")
    edits = []
    for number, (index, path) in enumerate(pairs):
        try:
            position = int(index)
        except ValueError:
            raise UsageError(f"--edit {index} {path}: INDEX must be an integer") from None
        source = common.read_input(path, f"--edit {index}")
        note = notes[0] if len(notes) == 1 else notes[number] if notes else None
        edit: dict[str, Any] = {"index": position, "source": source, "note": note}
        if not markdown:
            edit = CodeCellEdit(edit)
            edit.hint = (
                "to replace its text give --edit-markdown too "
                f"('notebook-executor cells {notebook}' lists the cells and their indices)"
            )
        edits.append(edit)
    return edits


def _base64_text(text: str) -> str:
    import base64
    import binascii

    try:
        return base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise UsageError("-b: not base64-encoded UTF-8 text") from None


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ..._executor import NotebookExecutor

    declared = NotebookExecutor.inspect_parameters(args.notebook)
    environment = declared.environment
    if args.json:
        # The parameters mapping (``inspect_parameters``' shape); the declared dependencies
        # show in the text form, the MCP answer and ``inspect_environment``.
        print_json(declared)
        return EXIT_OK
    note = _reading_note(args.notebook)
    if note is not None:
        print(note)
    if not declared:
        print("no parameters (no cell tagged 'parameters')")
    for info in declared.values():
        default = "(required)" if info["required"] else f"= {info['default']!r}"
        help_text = f"  # {info['help']}" if info["help"] else ""
        print(f"{info['name']}: {info['type']} {default}{help_text}")
    if environment is not None:
        python = environment["requires-python"]
        print(
            f"dependencies ({environment['declared_in']}): "
            + (", ".join(environment["dependencies"]) or "none")
            + (f"; requires-python {python}" if python else "")
        )
    return EXIT_OK


def _reading_note(notebook: str) -> str | None:
    """How a script with no cell marker was read (a second read of a local file is a cache
    hit; a URL is not fetched again)."""
    from ..._sources.formats import load_source, reading_note
    from ..._sources.remote import is_url

    return None if is_url(notebook) else reading_note(load_source(notebook))


def _cmd_convert(args: argparse.Namespace) -> int:
    from ..._sources.formats import format_for, read_notebook, write_notebook

    format_for(args.dst)
    if Path(args.src).resolve() == Path(args.dst).resolve():
        raise UsageError("SRC and DST are the same file")
    written = write_notebook(read_notebook(args.src), args.dst)
    print(f"wrote {written}", file=sys.stderr)
    return EXIT_OK
