"""The CI gate: find the notebooks under some paths, validate each, write a JUnit report.

A folder expands to the notebooks in it, recursively, as the format table's sniffers tell them
(:func:`~notebook_executor._sources.discover.walk_notebooks`: ``.ipynb`` files, ``.py`` files
with a ``# %%`` cell marker or a jupytext header, ``.md`` files with a jupytext header, MyST
cells or a logbook front matter). Hidden folders, caches, virtual environments and run-record
folders are skipped. A file named explicitly is always checked.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

from .._records.text import trim_traceback
from .._sources.discover import walk_notebooks
from .parameter_sets import DEFAULT_SET, ParameterSet, ParameterSets

if TYPE_CHECKING:
    from .validate import Checked

__all__ = [
    "CheckCase",
    "CheckResult",
    "check_cases",
    "failure_report",
    "find_notebooks",
    "junit_xml",
    "run_checks",
]


@dataclass(frozen=True)
class CheckCase:
    """One notebook with one of its parameter sets: a ``check`` line, a pytest item."""

    path: str
    parameter_set: ParameterSet = DEFAULT_SET

    @property
    def label(self) -> str:
        """The path, with ``[id]`` when the notebook has several parameter sets."""
        return self.parameter_set.label(self.path)


def check_cases(notebooks: Iterable[str], sets: ParameterSets | None) -> list[CheckCase]:
    """Each notebook once per parameter set ``sets`` gives it (once when ``sets`` is None)."""
    return [
        CheckCase(path, parameter_set)
        for path in notebooks
        for parameter_set in (sets.for_notebook(path) if sets is not None else (DEFAULT_SET,))
    ]


@dataclass
class CheckResult:
    """The verdict on one notebook (with one parameter set)."""

    path: str
    valid: bool
    problems: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    #: The parameter set's id, when the notebook has several.
    set_id: str | None = None
    #: Why the notebook was skipped (it then counts as passing).
    skipped: str | None = None
    #: The failed run's cell, code and traceback (see :func:`failure_report`).
    report: str = ""

    @property
    def label(self) -> str:
        """The path, with ``[id]`` when the notebook has several parameter sets."""
        return self.path if self.set_id is None else f"{self.path}[{self.set_id}]"

    def line(self) -> str:
        """One line for the terminal: ``ok``, ``skip`` or ``FAIL``, the path, the first error."""
        if self.skipped is not None:
            return f"skip  {self.label}: {self.skipped}"
        if self.valid:
            warnings = sum(1 for p in self.problems if p["severity"] == "warning")
            note = f" ({warnings} warning{'s' * (warnings != 1)})" if warnings else ""
            return f"ok    {self.label}{note}"
        first = next(p for p in self.problems if p["severity"] == "error")
        where = f"cell {first['cell']}: " if first["cell"] is not None else ""
        return f"FAIL  {self.label}: {where}{first['message']}"

    def as_json(self) -> dict[str, Any]:
        """The verdict as ``check --json`` prints it."""
        document: dict[str, Any] = {"path": self.path}
        if self.set_id is not None:
            document["parameter_set"] = self.set_id
        document.update(valid=self.valid, problems=self.problems)
        if self.skipped is not None:
            document["skipped"] = self.skipped
        return document


def failure_report(checked: Checked) -> str:
    """What a failure shows: each error with its cell, the failed cell's code and its
    traceback (library frames collapsed, as the MCP server shows them), output diffs."""
    parts: list[str] = []
    failed = checked.result.get("failed_cell") if checked.result is not None else None
    for problem in checked.answer["problems"]:
        if problem["severity"] != "error":
            continue
        where = f"cell {problem['cell']}" if problem["cell"] is not None else "notebook"
        parts.append(f"{where}: {problem['message']}")
        index = problem["cell"]
        if failed is not None and index == failed["index"]:
            parts.append(_indented("code", failed["source"]))
            traceback = trim_traceback([str(line) for line in failed["traceback"]])
            if traceback:
                parts.append(_indented("traceback", "\n".join(traceback)))
        if index is not None and index in checked.diffs:
            parts.append(_indented("outputs (- golden, + this run)", checked.diffs[index]))
    if checked.result is not None:
        parts.append(f"run {checked.result['run_id']}")
    return "\n".join(parts)


def _indented(title: str, text: str) -> str:
    return f"  {title}:\n" + "\n".join(f"    {line}" for line in text.rstrip("\n").split("\n"))


def find_notebooks(
    paths: Iterable[str], skipped: Callable[[Path, str], None] | None = None
) -> list[str]:
    """The notebooks ``paths`` name, folders expanded, in a stable order, without repeats;
    ``skipped`` is told of each file in the folders that looks like a notebook and is not
    one, and why (a ``# %%`` inside a string is no cell marker).

    Raises
    ------
    FileNotFoundError
        A path does not exist.
    """
    found: list[str] = []
    seen: set[str] = set()

    def add(path: Path) -> None:
        key = os.path.normpath(path)
        if key not in seen:
            seen.add(key)
            found.append(os.fspath(path))

    for given in paths:
        path = Path(given)
        if path.is_file():
            add(path)
        elif path.is_dir():
            for found_path in walk_notebooks(path, skipped=skipped):
                add(found_path)
        else:
            raise FileNotFoundError(given)
    return found


def run_checks(
    cases: Sequence[CheckCase],
    check: Callable[[CheckCase], Checked],
    *,
    workers: int = 1,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Check every case, ``workers`` at a time; results in the order of ``cases``.

    ``on_result`` is told of each result as it completes (from the calling thread, in order).
    """

    def one(case: CheckCase) -> CheckResult:
        began = time.perf_counter()
        set_id = case.parameter_set.id
        try:
            checked = check(case)
        except Exception as exc:  # a notebook that cannot be checked fails its check
            problem = {"cell": None, "severity": "error", "message": str(exc)}
            return CheckResult(
                case.path, False, [problem], time.perf_counter() - began, set_id=set_id
            )
        answer = checked.answer
        return CheckResult(
            case.path,
            bool(answer["valid"]),
            [dict(problem) for problem in answer["problems"]],
            time.perf_counter() - began,
            set_id=set_id,
            skipped=checked.skipped,
            report="" if answer["valid"] else failure_report(checked),
        )

    results: list[CheckResult] = []
    if workers <= 1 or len(cases) <= 1:
        for case in cases:
            results.append(one(case))
            if on_result is not None:
                on_result(results[-1])
        return results
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers, thread_name_prefix="notebook-executor-check") as pool:
        for result in pool.map(one, cases):
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def junit_xml(results: Sequence[CheckResult], *, name: str = "notebook-executor check") -> str:
    """A JUnit XML report: one ``testsuite``, one ``testcase`` per notebook, a ``failure``
    naming the failing cell and its error for each invalid notebook."""
    failures = sum(1 for r in results if not r.valid)
    skipped = sum(1 for r in results if r.skipped is not None)
    total_seconds = sum(r.seconds for r in results)
    suites = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{total_seconds:.3f}",
    )
    for result in results:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=_classname(result.path),
            name=result.label,
            file=result.path,
            time=f"{result.seconds:.3f}",
        )
        if result.skipped is not None:
            ElementTree.SubElement(case, "skipped", message=_xml_text(result.skipped))
        errors = [p for p in result.problems if p["severity"] == "error"]
        if errors:
            first = errors[0]
            where = f"cell {first['cell']}: " if first["cell"] is not None else ""
            failure = ElementTree.SubElement(
                case,
                "failure",
                message=_xml_text(f"{where}{first['message']}")[:1000],
                type="NotebookCheckFailure",
            )
            failure.text = _xml_text(
                "\n".join(_problem_line(p) for p in result.problems)
                + (f"\n\n{result.report}" if result.report else "")
            )
        warnings = [p for p in result.problems if p["severity"] == "warning"]
        if warnings and not errors:
            out = ElementTree.SubElement(case, "system-out")
            out.text = _xml_text("\n".join(_problem_line(p) for p in warnings))
    ElementTree.indent(suites)
    body = ElementTree.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _classname(path: str) -> str:
    parent = Path(path).parent.as_posix().strip("./")
    return parent.replace("/", ".") or "notebooks"


def _problem_line(problem: dict[str, Any]) -> str:
    where = f"cell {problem['cell']}" if problem["cell"] is not None else "notebook"
    return f"{problem['severity']}: {where}: {problem['message']}"


_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml_text(text: str) -> str:
    # XML 1.0 cannot hold most control characters, even escaped.
    return _XML_INVALID.sub("?", text)
