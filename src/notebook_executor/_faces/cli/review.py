"""``diff`` and ``check``: review notebooks and gate them in CI."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import common
from .common import EXIT_FAILED, EXIT_OK, UsageError, print_json

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    diff = commands.add_parser(
        "diff",
        help="compare two notebooks (paths in any format, or run ids)",
        description="Compare two notebooks. Two run ids compare the runs as diff_runs does: "
        "status, parameters, scraps, cells (outputs included) and the recorded inputs that "
        "changed (files by path, packages, git commit, machine). Exit status 0 when nothing "
        "differs, 1 otherwise.",
    )
    diff.add_argument("a", metavar="A", help="a notebook source or a run id")
    diff.add_argument("b", metavar="B", help="a notebook source or a run id")
    diff.add_argument("--outputs", action="store_true", help="compare cell outputs too")
    common.add_runs_dir(diff)
    diff.add_argument("--json", action="store_true", help="print the difference as JSON")
    diff.set_defaults(handler=_cmd_diff)

    reproduce = commands.add_parser(
        "reproduce",
        help="run a past run's source again with its parameters; are the outputs the same?",
        description="Run RUN's recorded source with its parameters and compare every cell's "
        "outputs with the record's (normalised as the output checks do); name the first cell "
        "that differs and the recorded inputs that changed. Exit status 0 reproduced, 1 not, "
        "2 refused.",
    )
    reproduce.add_argument("run_id", metavar="RUN", help="the run id")
    common.add_runs_dir(reproduce)
    reproduce.add_argument("--json", action="store_true", help="print the answer as JSON")
    reproduce.set_defaults(handler=_cmd_reproduce)

    validate = commands.add_parser(
        "validate",
        help="check one notebook: schema, parameters cell, language, kernel, declared env",
        description="Validate NOTEBOOK as NotebookExecutor.validate does (and the MCP tool "
        "validate): each problem with its cell and severity. With --execute it is also run "
        "(not recorded), nbval's markers honoured. Exit status 0 when valid, 1 otherwise.",
    )
    validate.add_argument("path", metavar="NOTEBOOK", help="the notebook source")
    validate.add_argument(
        "--execute", action="store_true", help="also run it (nbval markers honoured)"
    )
    validate.add_argument("--timeout", type=common.seconds, metavar="S", help="limit for the run")
    validate.add_argument("--cell-timeout", type=common.seconds, metavar="S", help="per cell")
    common.add_runs_dir(validate)
    validate.add_argument("--json", action="store_true", help="print the verdict as JSON")
    validate.set_defaults(handler=_cmd_validate)

    check = commands.add_parser(
        "check", help="validate notebooks (and run them with --execute); the CI gate"
    )
    check.add_argument("paths", nargs="*", metavar="PATH", help="notebooks or folders (default: .)")
    check.add_argument(
        "--execute", action="store_true", help="also run each notebook (nbval markers honoured)"
    )
    check.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report here")
    check.add_argument(
        "--notebooks-only",
        action="store_true",
        help="skip named files that are not notebook sources, and pass when none is left "
        "(for pre-commit, which names every changed .py and .md file)",
    )
    check.add_argument(
        "-j",
        "--jobs",
        type=common.positive_int,
        default=None,
        metavar="N",
        help="notebooks checked at once (default: the number of CPUs)",
    )
    check.add_argument(
        "--parameter-sets",
        metavar="FILE",
        help="YAML file of parameter sets per notebook (one check per set); a notebook whose "
        "required parameters or declared environment variables are not given is skipped",
    )
    check.add_argument(
        "--sanitize-with",
        metavar="FILE",
        help="regexes applied to outputs before NBVAL_CHECK_OUTPUT compares them "
        "(nbval's sanitize file format)",
    )
    check.add_argument("--timeout", type=common.seconds, metavar="S", help="limit for each run")
    check.add_argument("--cell-timeout", type=common.seconds, metavar="S", help="limit per cell")
    common.add_env_option(check)
    common.add_runs_dir(check)
    check.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    check.set_defaults(handler=_cmd_check)


def _colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


def _paint(text: str, code: str, on: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if on else text


def _cmd_diff(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        if _both_runs(ex, args.a, args.b):
            runs = ex.diff_runs(args.a, args.b)
            if args.json:
                print_json(runs)
            else:
                # A list, not a mapping: a run may be compared with itself.
                failures = [(run_id, ex.get_run(run_id)) for run_id in (args.a, args.b)]
                write_run_diff(runs, failures, sys.stdout, _colour(sys.stdout))
            return EXIT_OK if _runs_alike(runs) else EXIT_FAILED
        difference = ex.diff_notebooks(args.a, args.b, outputs=args.outputs)
    if args.json:
        print_json(difference)
    else:
        write_diff(difference, args.a, args.b, sys.stdout, _colour(sys.stdout))
    return EXIT_OK if difference["identical"] else EXIT_FAILED


def _cmd_reproduce(args: argparse.Namespace) -> int:
    with common.executor(args) as ex:
        answer = ex.reproduce(args.run_id)
    if args.json:
        print_json(answer)
    else:
        write_reproduction(answer, sys.stdout)
    return EXIT_OK if answer["reproduced"] else EXIT_FAILED


def write_reproduction(answer: Mapping[str, Any], out: TextIO) -> None:
    """The readable form of a ``reproduce`` answer."""
    original, new = answer["original_run_id"], answer["run_id"]
    verdict = "reproduced" if answer["reproduced"] else "not reproduced"
    out.write(f"{verdict}: run {original}, run again as {new}\n")
    status_a, status_b = answer["status"]
    if status_a != status_b:
        out.write(f"status: {status_a} -> {status_b}\n")
    difference = answer.get("first_difference")
    if difference:
        out.write(f"first difference: cell {difference['cell']}\n")
        out.writelines(f"  {line}\n" for line in str(difference.get("diff", "")).splitlines())
    if answer.get("inputs_changed"):
        out.write("inputs changed: " + ", ".join(answer["inputs_changed"]) + "\n")


def _both_runs(ex: Any, a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` both name past runs (and neither is a file)."""
    from ..._errors import NotebookExecutorError

    for reference in (a, b):
        if Path(reference).is_file():
            return False
        try:
            ex.get_run(reference)
        except NotebookExecutorError:
            return False
    return True


def _runs_alike(runs: dict[str, Any]) -> bool:
    status_a, status_b = runs["status"]
    return status_a == status_b and not (
        runs["parameters"]
        or runs["scraps"]
        or runs.get("packages")
        or runs.get("inputs")
        or runs["cells"]
    )


def write_run_diff(
    runs: dict[str, Any],
    results: Sequence[tuple[str, dict[str, Any]]],
    out: TextIO,
    colour: bool,
) -> None:
    """The readable form of a ``diff_runs`` result; ``results`` pairs both run ids with their
    result dicts (to name the failed cell of a run that failed); the two may be one run."""
    (id_a, result_a), (id_b, result_b) = results
    if _runs_alike(runs):
        out.write(f"identical: runs {id_a} and {id_b}\n")
        return
    status_a, status_b = runs["status"]
    out.write(_paint(f"--- {id_a} ({status_a})\n+++ {id_b} ({status_b})\n", "1", colour))
    if status_a != status_b:
        out.write(_paint(f"status: {status_a} -> {status_b}", "33", colour) + "\n")
        for run_id, result in ((id_a, result_a), (id_b, result_b)):
            failed = result.get("failed_cell")
            if failed:
                kind = result.get("error_kind") or "error"
                out.write(
                    f"  {run_id} failed in cell {failed.get('index')} ({kind}): "
                    f"{failed.get('ename')}: {failed.get('evalue')}\n"
                )
    for group in ("parameters", "scraps", "packages"):
        if runs.get(group):
            out.write(_paint(f"{group}:", "33", colour) + "\n")
            for name, (value_a, value_b) in runs[group].items():
                out.write(f"  {name}: {_short(value_a)} -> {_short(value_b)}\n")
    _write_inputs(runs.get("inputs") or {}, out, colour)
    _write_cells(runs["cells"], out, colour)


def _write_inputs(inputs: Mapping[str, Any], out: TextIO, colour: bool) -> None:
    """The recorded inputs that changed (docs/how-to/reproduce.md), one line each, named."""
    if not inputs:
        return
    out.write(_paint("inputs:", "33", colour) + "\n")
    for group in ("files", "git", "machine"):
        for name, (value_a, value_b) in (inputs.get(group) or {}).items():
            label = "file" if group == "files" else group
            out.write(f"  {label} {name}: {_short(value_a)} -> {_short(value_b)}\n")
    if "environment" in inputs:
        lock_a, lock_b = inputs["environment"]
        out.write(f"  environment lock: {_short(lock_a)} -> {_short(lock_b)}\n")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_diff(difference: Mapping[str, Any], a: str, b: str, out: TextIO, colour: bool) -> None:
    """The readable form of a ``diff_notebooks`` result."""
    if difference["identical"]:
        out.write(f"identical: {a} and {b}\n")
        return
    out.write(_paint(f"--- {a}\n+++ {b}\n", "1", colour))
    _write_cells(difference["cells"], out, colour)
    if difference["metadata_changed"]:
        out.write(_paint("notebook metadata changed\n", "35", colour))


def _write_cells(cells: list[dict[str, Any]], out: TextIO, colour: bool) -> None:
    for change in cells:
        op = change["op"]
        where = {
            "added": f"cell {change['index_b']} added",
            "removed": f"cell {change['index_a']} removed",
            "modified": f"cell {change['index_a']} modified"
            + (
                f" (cell {change['index_b']} in B)"
                if change["index_a"] != change["index_b"]
                else ""
            ),
        }[op]
        code = {"added": "32", "removed": "31", "modified": "33"}[op]
        out.write(_paint(f"@@ {where} [{change.get('cell_type', 'code')}]", code, colour) + "\n")
        for line in change["source_diff"].splitlines()[2:]:
            if line.startswith("+"):
                out.write(_paint(line, "32", colour) + "\n")
            elif line.startswith("-"):
                out.write(_paint(line, "31", colour) + "\n")
            elif line.startswith("@@"):
                out.write(_paint(line, "36", colour) + "\n")
            else:
                out.write(line + "\n")
        if change["outputs_changed"]:
            out.write(_paint("  outputs changed", "35", colour) + "\n")


def _cmd_validate(args: argparse.Namespace) -> int:
    options = common.run_options(args).given()
    with common.executor(args) as ex:
        verdict = ex.validate(args.path, execute=args.execute, **options)
    if args.json:
        print_json(verdict)
    else:
        print(f"{'valid' if verdict['valid'] else 'invalid'}: {args.path}")
        for problem in verdict["problems"]:
            where = f"cell {problem['cell']}: " if problem["cell"] is not None else ""
            print(f"  {where}{problem['severity']}: {problem['message']}")
    return EXIT_OK if verdict["valid"] else EXIT_FAILED


def _cmd_check(args: argparse.Namespace) -> int:
    from ..._errors import InvalidArgumentError
    from ..._executor import check_notebook
    from ..._review.check import check_cases, find_notebooks, junit_xml, run_checks
    from ..._review.golden import OutputRules, load_rules
    from ..._review.parameter_sets import load_parameter_sets
    from ..._sources.formats import is_notebook

    paths = args.paths or ["."]
    try:
        notebooks = find_notebooks(
            paths,
            # Files that look like notebooks and are not: said, on stderr (stdout is the
            # verdicts' and --json's).
            lambda path, why: print(f"skipped {path}: {why}", file=sys.stderr),
        )
    except FileNotFoundError as exc:
        raise UsageError(f"no such file or folder: {exc.args[0]!r}") from None
    if args.notebooks_only:
        notebooks = [path for path in notebooks if is_notebook(Path(path))]
        if not notebooks:
            print("no notebooks to check")
            return EXIT_OK
    if args.junit_xml is not None and Path(args.junit_xml).is_dir():
        raise UsageError(f"--junit-xml {args.junit_xml!r} is a folder")
    if not notebooks:
        raise UsageError(f"no notebooks found in {', '.join(map(repr, paths))}")
    try:
        sets = load_parameter_sets(args.parameter_sets)
        rules = load_rules(args.sanitize_with)
    except InvalidArgumentError as exc:
        raise UsageError(str(exc)) from None
    cases = check_cases(notebooks, sets)
    workers = args.jobs or os.cpu_count() or 1
    options = common.run_options(args).given()
    colour = _colour(sys.stdout) and not args.json

    def show(result: Any) -> None:
        if not args.json:
            line = result.line()
            code = "33" if result.skipped else "32" if result.valid else "31"
            head, _, rest = line.partition(" ")
            sys.stdout.write(_paint(head, code, colour) + " " + rest + "\n")
            sys.stdout.flush()

    with common.executor(args, warm_kernels=min(workers, 4) if args.execute else None) as ex:
        results = run_checks(
            cases,
            lambda case: check_notebook(
                ex,
                case.path,
                execute=args.execute,
                outputs=OutputRules(rules=rules, set_id=case.parameter_set.id),
                parameters=case.parameter_set.parameters,
                **options,
            ),
            workers=workers if args.execute else 1,
            on_result=show,
        )
    failed = sum(1 for r in results if not r.valid)
    skipped = sum(1 for r in results if r.skipped is not None)
    if args.junit_xml is not None:
        from ..._sources.files import atomic_write_text

        atomic_write_text(Path(args.junit_xml), junit_xml(results))
    if args.json:
        print_json([r.as_json() for r in results])
    else:
        summary = f"{len(results) - failed - skipped} passed, {failed} failed"
        if skipped:
            summary += f", {skipped} skipped"
        sys.stdout.write(_paint(summary, "31" if failed else "32", colour) + "\n")
    return EXIT_FAILED if failed else EXIT_OK
