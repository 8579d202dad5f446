"""Check a notebook without running it, and optionally by running it with nbval's markers.

Static checks: the file reads (for ``.ipynb``, each nbformat schema error with its cell), the
parameters cell parses and declares something, code cells compile, the notebook names one
language; then everything ``execute`` checks before a kernel starts, by the same code (the
executor's planning): the kernel, the given parameters, the declared environment variables
(with the executor's ``base_env`` and ``.env`` folders), front matter and placeholders, and
the options. So a notebook called valid is one ``execute`` starts with the same options; the
file's own checks (syntax of every cell, one language) are stricter than ``execute``.

With ``execute=True`` the notebook also runs (on the executor's engine, so on its warm kernels;
the run is not kept in the run records), honouring nbval's markers:

- ``# NBVAL_SKIP`` (a comment line in the cell), tags ``skip-execution`` / ``nbval-skip``: the
  cell does not run;
- tag ``raises-exception`` or ``# NBVAL_RAISES_EXCEPTION``: the cell must raise, and the run
  goes on past it; a cell so marked that raises nothing is a problem;
- ``# NBVAL_CHECK_OUTPUT`` or tag ``nbval-check-output``: the cell's new outputs must equal its
  golden ones for the parameter set (an ``.ipynb``'s stored outputs when it runs with its only
  set; else the ``.golden.json`` file beside the source, one entry per set).
  Compared as nbval's lax mode does, text only, after normalisation (ANSI colours, memory
  addresses, timestamps, uuids, trailing spaces, the user's rules): see :mod:`.golden`.

:func:`check_notebook` is the one verdict ``check`` and ``pytest --notebooks`` give: it can
also record the run, compare every cell, regenerate the golden outputs, and skip a notebook
whose required parameters or environment variables are not given.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._errors import (
    DependencyError,
    InvalidArgumentError,
    NotebookSourceError,
    ParameterError,
)
from .._notebook import notebook_language
from .._parameters.declared import (
    INJECTED_TAG,
    PARAMETERS_TAG,
    declared_parameters,
    parameters_cell_error,
    parameters_cell_index,
    parse_python,
)
from .._parameters.environment import declared_env_names
from .._run.plan import parses_parameters
from .._sources.bounded import MAX_SOURCE_BYTES
from .._sources.formats import NESTED_TOO_DEEP
from .._sources.regular import read_regular_text
from .._types import RunResult, ValidateAnswer, ValidateProblem
from .golden import (
    OutputRules,
    comparable,
    golden_path,
    readable_diff,
    store_outputs,
    stored_outputs,
)

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .._run.plan import Plan
    from ..engine import Engine

__all__ = ["Checked", "cell_syntax_problem", "check_notebook", "validate_notebook"]

Problem = ValidateProblem

SKIP_TAGS = frozenset({"skip-execution", "nbval-skip"})
RAISES_TAGS = frozenset({"raises-exception", "nbval-raises-exception"})
CHECK_TAGS = frozenset({"nbval-check-output"})


#: A value of each declared type, standing in for a required parameter without one.
_STAND_INS: dict[str, Any] = {
    "int": 0,
    "float": 0.0,
    "str": "",
    "bool": False,
    "list": [],
    "dict": {},
    "tuple": (),
}


def _problem(cell: int | None, severity: Literal["error", "warning"], message: str) -> Problem:
    return {"cell": cell, "severity": severity, "message": message}


def _marker(cell: NotebookNode, comment: str, tags: frozenset[str]) -> bool:
    if set(cell.get("metadata", {}).get("tags", [])) & tags:
        return True
    if cell.cell_type != "code":
        return False
    return any(line.strip().upper() == f"# {comment}" for line in cell.source.splitlines())


@dataclass
class Checked:
    """The verdict on one notebook, as ``check`` and ``pytest --notebooks`` both read it."""

    answer: ValidateAnswer
    #: Why the notebook was not checked (a required parameter or environment variable not
    #: given), when it was skipped.
    skipped: str | None = None
    #: The run's result, when it ran.
    result: RunResult | None = None
    #: ``{cell index: readable diff}`` of the cells whose outputs differ from the golden ones.
    diffs: dict[int, str] = field(default_factory=dict)
    #: Where regenerated golden outputs were written.
    golden_written: str | None = None


def validate_notebook(
    path: str | os.PathLike[str],
    *,
    plan: Callable[..., Plan],
    execute: bool = False,
    engine: Engine | None = None,
    options: Mapping[str, Any] | None = None,
) -> ValidateAnswer:
    """``{"valid", "problems"}`` for ``path`` (see ``NotebookExecutor.validate``).

    :func:`check_notebook`'s answer, without skipping and without recording the run.
    """
    return check_notebook(path, plan=plan, execute=execute, engine=engine, options=options).answer


def check_notebook(
    path: str | os.PathLike[str],
    *,
    plan: Callable[..., Plan],
    execute: bool = False,
    engine: Engine | None = None,
    options: Mapping[str, Any] | None = None,
    run: Callable[[Plan], RunResult] | None = None,
    outputs: OutputRules | None = None,
    skip_unset: bool = False,
) -> Checked:
    """The verdict on ``path``: ``validate``'s answer, and what ``check`` and the pytest
    plugin report besides (the run's result, output diffs, a reason to skip).

    ``run`` runs the planned notebook (the executor's own run, recorded under its runs
    folder); by default the run goes to a scratch folder and is not kept. ``outputs`` says
    which cells' outputs are compared with the golden ones (see :mod:`.golden`), and whether
    they are regenerated. With ``skip_unset``, a notebook whose required parameters or
    declared environment variables are not given is skipped, with the reason, instead of
    failing.

    ``plan`` is the executor's own planning (the function ``execute`` calls), so every check
    a run makes before its kernel starts (the given parameters, the kernel, the declared
    environment with the executor's ``base_env`` and ``.env`` folders, placeholders, front
    matter, the options) is made here by the same code: ``valid`` means ``execute`` starts.
    A problem with the notebook or its parameters is reported; an option that ``execute``
    refuses raises the same error here. ``engine`` runs the notebook with ``execute``;
    ``options`` are ``execute``'s (parameters, timeouts, env, secrets...).
    """
    from .._sources.formats import format_for, load_source

    options = dict(options or {})
    if "output_path" in options:
        raise InvalidArgumentError(
            "validate does not take output_path (its run is not kept)", argument="output_path"
        )
    options.setdefault("parameters", None)
    rules = outputs or OutputRules()
    problems: list[Problem] = []
    try:
        fmt = format_for(path)
    except NotebookSourceError as exc:
        return Checked(_verdict([_problem(None, "error", exc.reason)]))
    if fmt.jupytext_format is None:
        problems.extend(_schema_problems(Path(path)))
        if problems:
            return Checked(_verdict(problems))
    try:
        nb = load_source(path).nb
    except NotebookSourceError as exc:
        return Checked(_verdict([_problem(None, "error", exc.reason)]))
    planned, language = None, notebook_language(nb)
    stand_ins = {} if execute else _stand_ins(nb, options, language)
    if skip_unset and (execute or options["parameters"] is not None):
        unset = _unset_parameters(nb, options, language)
        if unset:
            return Checked(_verdict([]), skipped=_needs("parameter", unset))
    try:
        # A notebook's own environment is made only for a run (an unresolvable one is then
        # reported as a problem of the run's planning).
        planned = plan(path, output_path=None, make_environment=execute, **{**options, **stand_ins})
        language = planned.job.kernel.language
    except ParameterError as exc:
        env_names = _env_names(nb)
        if skip_unset and exc.parameter in env_names:
            unset = [name for name in env_names if f"{name!r}, which is not set" in str(exc)]
            return Checked(_verdict([]), skipped=_needs("environment variable", unset))
        if exc.parameter not in stand_ins.get("parameters", {}):
            cell = None if exc.parameter in env_names else parameters_cell_index(nb)
            problems.extend(_problem(cell, "error", problem) for problem in exc.problems)
    except NotebookSourceError as exc:
        if not (parses_parameters(language) and parameters_cell_error(nb)):
            problems.append(_problem(None, "error", exc.reason))
    except DependencyError as exc:
        problems.append(_problem(None, "error", str(exc)))
        # else: the parameters cell does not parse, reported below with its cell
    problems.extend(_language_problems(nb, language))
    if parses_parameters(language):
        # The notebook's own language: its parameters and cells are read as Python.
        problems.extend(_parameters_problems(nb))
        problems.extend(_syntax_problems(nb))
    if execute and planned is not None and not any(p["severity"] == "error" for p in problems):
        if engine is None:
            raise InvalidArgumentError("validate(execute=True) needs an engine", argument="engine")
        checked = _run_problems(path, nb, planned, engine, run, rules)
        checked.answer = _verdict([*problems, *checked.answer["problems"]])
        return checked
    return Checked(_verdict(problems))


def _unset_parameters(nb: NotebookNode, options: Mapping[str, Any], language: str) -> list[str]:
    """The required parameters of ``nb`` that ``options`` does not give."""
    if not parses_parameters(language):
        return []
    try:
        declared = declared_parameters(nb)
    except (NotebookSourceError, ParameterError):
        return []
    given = options.get("parameters") or {}
    return [name for name, p in declared.items() if p.required and name not in given]


def _needs(what: str, names: list[str]) -> str:
    plural = "s" * (len(names) != 1)
    return f"needs {what}{plural} {', '.join(names)}, not given"


def _stand_ins(nb: NotebookNode, options: Mapping[str, Any], language: str) -> dict[str, Any]:
    """Without ``parameters``, a stand-in value for each required parameter, so that the
    checks after the parameters' (environment, placeholders...) still run: a notebook that
    requires a parameter is valid, and ``execute`` needs its value."""
    if options.get("parameters") is not None or not parses_parameters(language):
        return {}
    try:
        declared = declared_parameters(nb)
    except (NotebookSourceError, ParameterError):
        return {}
    values = {
        name: _STAND_INS.get(parameter.type)
        for name, parameter in declared.items()
        if parameter.required
    }
    return {"parameters": values} if values else {}


def _env_names(nb: NotebookNode) -> list[str]:
    try:
        return declared_env_names("", nb)
    except NotebookSourceError:
        return []


def _verdict(problems: list[Problem]) -> ValidateAnswer:
    problems.sort(key=lambda p: -1 if p["cell"] is None else p["cell"])
    return {"valid": not any(p["severity"] == "error" for p in problems), "problems": problems}


def _schema_problems(path: Path) -> list[Problem]:
    """nbformat schema errors, each with the cell it is in."""
    import nbformat
    from nbformat.validator import iter_validate

    try:
        raw = json.loads(read_regular_text(path, MAX_SOURCE_BYTES, encoding="utf-8-sig"))
    except FileNotFoundError:
        return [_problem(None, "error", "no such file")]
    except RecursionError:
        return [_problem(None, "error", f"not a readable JSON notebook: {NESTED_TOO_DEEP}")]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [_problem(None, "error", f"not a readable JSON notebook: {exc}")]
    if not isinstance(raw, dict) or raw.get("nbformat") != 4:
        return [_problem(None, "error", "not an nbformat 4 notebook")]
    problems = []
    seen: set[tuple[int | None, str]] = set()
    with contextlib.suppress(Exception):
        from nbformat.v4.rwbase import rejoin_lines

        for error in iter_validate(rejoin_lines(nbformat.from_dict(raw))):
            where = list(getattr(error, "absolute_path", []) or [])
            cell = where[1] if len(where) > 1 and where[0] == "cells" else None
            message = f"schema: {str(error.message)[:300]}"
            if (cell, message) not in seen:
                seen.add((cell, message))
                problems.append(_problem(cell, "error", message))
    return problems


def _parameters_problems(nb: NotebookNode) -> list[Problem]:
    tagged = [
        i
        for i, cell in enumerate(nb.cells)
        if PARAMETERS_TAG in cell.get("metadata", {}).get("tags", [])
    ]
    problems = []
    code = [i for i in tagged if nb.cells[i].cell_type == "code"]
    for i in tagged:
        if nb.cells[i].cell_type != "code":
            problems.append(_problem(i, "warning", "a non-code cell is tagged 'parameters'"))
    for i in code[1:]:
        problems.append(
            _problem(i, "warning", f"another cell tagged 'parameters' (cell {code[0]} is used)")
        )
    if code:
        index = code[0]
        source = nb.cells[index].source
        broken = parameters_cell_error(nb)
        if broken is not None:
            return [*problems, _problem(index, "error", f"the parameters cell {broken[1]}")]
        if not declared_parameters(nb) and source.strip():
            problems.append(
                _problem(
                    index, "warning", "the parameters cell assigns no parameter (name = value)"
                )
            )
    return problems


def _syntax_problems(nb: NotebookNode) -> list[Problem]:
    problems = []
    for index, cell in enumerate(nb.cells):
        if PARAMETERS_TAG in cell.get("metadata", {}).get("tags", []):
            continue  # reported by the parameters check
        problem = cell_syntax_problem(cell)
        if problem is not None:
            problems.append(_problem(index, "error", problem))
    return problems


def cell_syntax_problem(cell: Any) -> str | None:
    """Why a Python code cell does not compile (``validate``'s check; ``edit`` warns with
    it), or None: a markdown cell, a cell magic, and a cell that parses have none."""
    if cell.get("cell_type") != "code" or cell.get("source", "").lstrip().startswith("%%"):
        return None
    try:
        parse_python(cell["source"])
    except SyntaxError as exc:
        return f"syntax error: {exc.msg} (line {exc.lineno})"
    except ValueError as exc:  # e.g. NUL bytes
        return f"cannot compile: {exc}"
    return None


def _language_problems(nb: NotebookNode, language: str) -> list[Problem]:
    metadata = nb.metadata
    names = {
        "kernelspec": metadata.get("kernelspec", {}).get("language"),
        "language_info": metadata.get("language_info", {}).get("name"),
        "jupytext": metadata.get("jupytext", {}).get("main_language"),
    }
    named = {key: str(value).lower() for key, value in names.items() if value}
    problems = []
    if len(set(named.values())) > 1:
        listed = ", ".join(f"{key} says {value}" for key, value in named.items())
        problems.append(_problem(None, "error", f"the notebook names two languages ({listed})"))
    for index, cell in enumerate(nb.cells):
        other = cell.get("metadata", {}).get("language")
        if cell.cell_type == "code" and other and str(other).lower() != language:
            problems.append(
                _problem(
                    index,
                    "error",
                    f"a {other} cell in a {language} notebook (one kernel runs every cell)",
                )
            )
    return problems


def _run_problems(
    path: str | os.PathLike[str],
    nb: NotebookNode,
    planned: Plan,
    engine: Engine,
    run: Callable[[Plan], RunResult] | None,
    rules: OutputRules,
) -> Checked:
    """Run the planned notebook with nbval's markers honoured; the problems its run shows."""
    import nbformat

    from .._records.scrub import Redactor, scrub_notebook
    from .._run.runner import run_plan

    job_cells = [
        i
        for i, cell in enumerate(planned.nb.cells)
        if INJECTED_TAG not in cell.get("metadata", {}).get("tags", [])
    ]
    skipped, raising, checked = set(), set(), set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        job_cell = planned.nb.cells[job_cells[index]]
        if _marker(cell, "NBVAL_SKIP", SKIP_TAGS):
            skipped.add(index)
            # A raw cell keeps its place (indices still match the source) and never runs.
            planned.nb.cells[job_cells[index]] = nbformat.v4.new_raw_cell(
                job_cell.source, metadata=job_cell.metadata
            )
        elif _marker(cell, "NBVAL_RAISES_EXCEPTION", RAISES_TAGS):
            raising.add(index)
            tags = job_cell.metadata.setdefault("tags", [])
            if "raises-exception" not in tags:
                tags.append("raises-exception")
        if rules.every_cell or _marker(cell, "NBVAL_CHECK_OUTPUT", CHECK_TAGS):
            checked.add(index)
    if run is not None:
        result = run(planned)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="notebook-executor-validate-"))
        try:
            result = run_plan(planned, engine, scratch, lambda *_: None)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    problems: list[Problem] = []
    failed = result.get("failed_cell")
    if result["status"] != "success":
        where = failed["index"] if failed else None
        what = f"{failed['ename']}: {failed['evalue']}" if failed else "the run failed"
        problems.append(_problem(where, "error", f"{result['error_kind']}: {what}"))
    # Compared as a run record stores them: a secret printed by a cell never reaches a problem.
    ran = scrub_notebook(planned.nb, planned.secrets).cells
    for index in sorted(raising):
        outputs = ran[job_cells[index]].get("outputs", [])
        reached = ran[job_cells[index]].get("execution_count") is not None
        if reached and not any(o.get("output_type") == "error" for o in outputs):
            problems.append(
                _problem(index, "error", "marked raises-exception but raised no exception")
            )
    compared = [
        index
        for index in sorted(checked - skipped)
        if ran[job_cells[index]].get("execution_count") is not None
    ]
    # Regenerated goldens replace the stored ones unread (a file that cannot be read too).
    regenerate = bool(rules.update and compared and result["status"] == "success")
    golden = stored_outputs(path, nb, rules.set_id) if compared and not regenerate else None
    verdict = Checked(_verdict([]), result=result)
    if regenerate:
        new = {index: list(ran[job_cells[index]].get("outputs", [])) for index in compared}
        counts = {index: ran[job_cells[index]].get("execution_count") for index in compared}
        verdict.golden_written = os.fspath(store_outputs(path, rules.set_id, new, counts))
        compared = []
    for index in compared:
        cell = ran[job_cells[index]]
        stored = None if golden is None else golden.get(index)
        if stored is None:
            golden_file = golden_path(path, rules.set_id)
            problems.append(
                _problem(
                    index,
                    "warning",
                    f"outputs not compared: no golden outputs stored in {golden_file} "
                    "(pytest --notebooks --notebook-update-golden stores them)",
                )
            )
            continue
        want = comparable(stored, rules)
        got = comparable(cell.get("outputs", []), rules)
        if want != got:
            problems.append(
                _problem(
                    index, "error", f"outputs differ from the stored ones: {_first_diff(want, got)}"
                )
            )
            verdict.diffs[index] = readable_diff(want, got)
    redactor = Redactor(planned.secrets)
    verdict.answer = _verdict(redactor.value(problems))
    verdict.diffs = redactor.value(verdict.diffs)
    return verdict


def _first_diff(want: list[Any], got: list[Any]) -> str:
    for position, (a, b) in enumerate(zip(want, got, strict=False)):
        if a != b:
            return f"output {position}: expected {_short(a)}, got {_short(b)}"
    return f"expected {len(want)} outputs, got {len(got)}"


def _short(value: Any) -> str:
    text = json.dumps(value[-1] if isinstance(value, list) else value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."
