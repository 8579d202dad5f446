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
from typing import Any
from xml.etree import ElementTree

from .._sources.discover import walk_notebooks

__all__ = ["CheckResult", "find_notebooks", "junit_xml", "run_checks"]


@dataclass
class CheckResult:
    """The verdict on one notebook."""

    path: str
    valid: bool
    problems: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        """One line for the terminal: ``ok`` or ``FAIL``, the path, the first error."""
        if self.valid:
            warnings = sum(1 for p in self.problems if p["severity"] == "warning")
            note = f" ({warnings} warning{'s' * (warnings != 1)})" if warnings else ""
            return f"ok    {self.path}{note}"
        first = next(p for p in self.problems if p["severity"] == "error")
        where = f"cell {first['cell']}: " if first["cell"] is not None else ""
        return f"FAIL  {self.path}: {where}{first['message']}"


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
    notebooks: Sequence[str],
    validate: Callable[[str], dict[str, Any]],
    *,
    workers: int = 1,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Validate every notebook, ``workers`` at a time; results in the order of ``notebooks``.

    ``on_result`` is told of each result as it completes (from the calling thread, in order).
    """

    def one(path: str) -> CheckResult:
        began = time.perf_counter()
        try:
            verdict = validate(path)
        except Exception as exc:  # a notebook that cannot be checked fails its check
            verdict = {
                "valid": False,
                "problems": [{"cell": None, "severity": "error", "message": str(exc)}],
            }
        return CheckResult(
            path, bool(verdict["valid"]), list(verdict["problems"]), time.perf_counter() - began
        )

    results: list[CheckResult] = []
    if workers <= 1 or len(notebooks) <= 1:
        for path in notebooks:
            results.append(one(path))
            if on_result is not None:
                on_result(results[-1])
        return results
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers, thread_name_prefix="notebook-executor-check") as pool:
        for result in pool.map(one, notebooks):
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def junit_xml(results: Sequence[CheckResult], *, name: str = "notebook-executor check") -> str:
    """A JUnit XML report: one ``testsuite``, one ``testcase`` per notebook, a ``failure``
    naming the failing cell and its error for each invalid notebook."""
    failures = sum(1 for r in results if not r.valid)
    total_seconds = sum(r.seconds for r in results)
    suites = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(
        suites,
        "testsuite",
        name=name,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time=f"{total_seconds:.3f}",
    )
    for result in results:
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=_classname(result.path),
            name=result.path,
            file=result.path,
            time=f"{result.seconds:.3f}",
        )
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
            failure.text = _xml_text("\n".join(_problem_line(p) for p in result.problems))
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
