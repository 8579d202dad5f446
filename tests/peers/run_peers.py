"""Parity with nbclient, papermill and jupytext on their own test material (``nox -s peers``).

The sdists of the installed nbclient, papermill and jupytext (pinned by the nox session) are
downloaded from the package index (at once, and once: tests/sdists.py keeps the archives in
the checkout's ignored ``.nox/sdists``) and unpacked in a temporary folder; nothing of them is
kept in this repository. Three suites, each printing its counts:

- ``nbclient``: every notebook of nbclient's ``tests/files``, run by nbclient and by
  :meth:`NotebookExecutor.execute`, compared cell by cell (outputs after nbclient's own
  ``normalize_output``, execution counts, widget state). :data:`NBCLIENT_EXCEPTIONS` lists the
  notebooks that differ by design, each with its reason (docs/how-to/papermill.md gives them too).
- ``papermill``: papermill's ``test_execute.py``, ``test_autosave.py`` and
  ``test_engines.py``, with this package's engine registered as papermill's default engine
  (and standing in for ``NBClientEngine``) by the plugin ``papermill_default_engine.py``,
  whose ``EXCEPTIONS`` are the tests that mock papermill's own nbclient client class.
- ``jupytext``: every Python notebook of jupytext's ``tests/data/notebooks/inputs`` read by
  :func:`notebook_executor.read_notebook` and by ``jupytext.read``, compared cell by cell.

Usage: ``python tests/peers/run_peers.py [--suite nbclient|papermill|jupytext] [--keep DIR]``.
Exits 1 when any comparison differs outside the listed exceptions.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

# Run as a script: tests/ holds the shared download of pinned sdists.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sdists import prefetch, sdist

PEERS = ("nbclient", "papermill", "jupytext")

#: nbclient notebooks that differ by design, and why.
NBCLIENT_EXCEPTIONS: dict[str, str] = {
    "Interrupt.ipynb": (
        "no interrupt_on_timeout/allow_errors: a cell over its time limit stops the run "
        "(TimeoutError), the kernel is not interrupted to go on with the next cell"
    ),
    "Skip Exceptions.ipynb": (
        "no allow_errors: an error stops the run (only cells tagged raises-exception may fail)"
    ),
    "Check History in Memory.ipynb": (
        "IPython's history is off in our kernels (no database, not even in memory, and no "
        "thread writing it); nbclient keeps it in memory, which the notebook asserts"
    ),
    "Parallel Execute A.ipynb": (
        "needs nbclient's parallel harness (two notebooks run at once, a variable injected)"
    ),
    "Parallel Execute B.ipynb": (
        "needs nbclient's parallel harness (two notebooks run at once, a variable injected)"
    ),
    "Sleep1s.ipynb": "prints the wall-clock times of its run: no two runs print the same",
}

#: Cells whose execution count is a race on both sides, and why: the comparison leaves out
#: their ``execution_count`` (and nothing else).
NBCLIENT_RACY_COUNTS: dict[str, tuple[int, str]] = {
    "Autokill.ipynb": (
        0,
        "the kernel SIGTERMs itself in this cell; whether its execute_input message leaves "
        "the process before it dies is a race, so nbclient and we each record 1 or None",
    ),
}

#: Options nbclient's own test_run_all_notebooks passes for these notebooks.
NBCLIENT_OPTIONS: dict[str, dict[str, Any]] = {
    "Interrupt.ipynb": {"timeout": 3, "interrupt_on_timeout": True, "allow_errors": True},
    "Skip Exceptions.ipynb": {"allow_errors": True},
}

PAPERMILL_TESTS = ("test_execute.py", "test_autosave.py", "test_engines.py")


def main(argv: list[str] | None = None) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--nbclient-one"]:
        _nbclient_one(Path(argv[1]), Path(argv[2]), argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=PEERS, action="append")
    parser.add_argument("--keep", type=Path, help="download and unpack here, and keep it")
    parser.add_argument(
        "--kernel", default="python", help="kernel name both runners get (nbclient's tests: python)"
    )
    args = parser.parse_args(argv)
    suites = args.suite or list(PEERS)
    with _workdir(args.keep) as work:
        unexpected = 0
        prefetch((suite, version(suite)) for suite in suites)
        for suite in suites:
            source = _sdist(suite, work)
            if suite == "nbclient":
                unexpected += nbclient_suite(source, work, args.kernel)
            elif suite == "papermill":
                unexpected += papermill_suite(source, work)
            else:
                unexpected += jupytext_suite(source, work)
    return 1 if unexpected else 0


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="peers-") as work:
        yield Path(work)


def _sdist(name: str, work: Path) -> Path:
    """The unpacked sdist of the installed ``name``, downloaded from the package index."""
    return sdist(name, version(name), work)


# -- nbclient ---------------------------------------------------------------------------------


def nbclient_suite(source: Path, work: Path, kernel: str) -> int:
    """Run every notebook of nbclient's tests/files both ways; the count of unexpected
    differences."""
    import importlib

    sys.path.insert(0, str(source))
    # nbclient's own output normalisation, from its test module.
    normalize_output = importlib.import_module("tests.test_client").normalize_output

    from notebook_executor import NotebookExecutor

    files = source / "tests" / "files"
    os.environ.update({"COLUMNS": "80", "LINES": "24"})  # as nbclient's run_notebook
    executor = NotebookExecutor(runs_dir=work / "runs", kernel_name=kernel)
    counts = {"same": 0, "listed exception": 0, "differs": 0}
    try:
        for path in sorted(files.glob("*.ipynb")):
            reason = NBCLIENT_EXCEPTIONS.get(path.name)
            if reason and "harness" in reason:
                counts["listed exception"] += 1
                print(f"  nbclient  {path.name}: not run ({reason})")
                continue
            theirs = _run_nbclient(path, kernel, work)
            ours = _run_ours(executor, path, work)
            racy = NBCLIENT_RACY_COUNTS.get(path.name)
            if racy:
                print(f"      (cell {racy[0]}'s execution_count not compared: {racy[1]})")
            differences = _notebook_differences(
                theirs, ours, normalize_output, racy_count=racy[0] if racy else None
            )
            if not differences:
                counts["same"] += 1
                print(f"  nbclient  {path.name}: same")
            elif reason:
                counts["listed exception"] += 1
                print(f"  nbclient  {path.name}: differs by design ({reason})")
            else:
                counts["differs"] += 1
                print(f"  nbclient  {path.name}: DIFFERS")
                for line in differences[:6]:
                    print(f"      {line}")
    finally:
        executor.close()
    print(f"nbclient: {_counts(counts)} of {sum(counts.values())} notebooks")
    return counts["differs"]


def _cleaned(path: Path) -> Any:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.pop("execution_count", None)
        if cell.cell_type == "code":
            cell["execution_count"] = None
            cell["outputs"] = []
    return nb


def _run_nbclient(path: Path, kernel: str, work: Path) -> Any:
    """``path`` run by nbclient, in a process of its own. nbclient's own run of
    ``Output.ipynb`` (a notebook its tests never run) now and then waits for a reply that
    never comes: such a run is tried again, up to three times in all."""
    import nbformat

    output = work / "nbclient" / path.name
    output.parent.mkdir(exist_ok=True)
    command = [sys.executable, __file__, "--nbclient-one", str(path), str(output), kernel]
    for attempt in range(3):
        done = subprocess.run(command, check=False)
        if done.returncode != NBCLIENT_STUCK:
            break
        print(f"      (nbclient stuck, attempt {attempt + 1})")
    if done.returncode not in (0, NBCLIENT_STUCK):
        raise RuntimeError(f"nbclient's run of {path.name} failed: {done.returncode}")
    return nbformat.read(output, as_version=4)


#: The exit status of a run of nbclient that waited in vain for a reply.
NBCLIENT_STUCK = 3

#: nbclient's limit per cell: far above what any of its notebooks takes.
NBCLIENT_CELL_TIMEOUT = 30


def _nbclient_one(path: Path, output: Path, kernel: str) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = _cleaned(path)
    client = NotebookClient(
        nb,
        kernel_name=kernel,
        resources={"metadata": {"path": str(path.parent)}},
        # Our run records keep each stream joined, with \r and \b applied: nbclient's option
        # that does the same.
        coalesce_streams=True,
        **{"timeout": NBCLIENT_CELL_TIMEOUT, **NBCLIENT_OPTIONS.get(path.name, {})},
    )
    stuck = False
    try:
        client.execute()
    except Exception as exc:  # CellExecutionError, DeadKernelError: the cells stay compared
        print(f"      (nbclient raised {type(exc).__name__})")
        stuck = isinstance(exc, TimeoutError) and path.name not in NBCLIENT_OPTIONS
    nbformat.write(client.nb, output)
    if stuck:
        sys.exit(NBCLIENT_STUCK)


def _run_ours(executor: Any, path: Path, work: Path) -> Any:
    import nbformat

    source = work / "inputs" / path.name
    source.parent.mkdir(exist_ok=True)
    nbformat.write(_cleaned(path), source)
    output = work / "outputs" / path.name
    output.parent.mkdir(exist_ok=True)
    cell_timeout = NBCLIENT_OPTIONS.get(path.name, {}).get("timeout")
    try:
        result = executor.execute(
            source, output_path=output, cwd=path.parent, timeout=120, cell_timeout=cell_timeout
        )
    except Exception as exc:  # refused before any kernel started
        print(f"      (ours refused it: {type(exc).__name__}: {exc})")
        return nbformat.read(source, as_version=4)
    if result.get("status") != "success":
        print(f"      (ours: {result.get('status')}: {result.get('error_kind')})")
    return nbformat.read(output, as_version=4)


def _notebook_differences(
    theirs: Any, ours: Any, normalize: Any, racy_count: int | None = None
) -> list[str]:
    differences: list[str] = []
    if len(theirs.cells) != len(ours.cells):
        return [f"{len(theirs.cells)} cells against {len(ours.cells)}"]
    for index, (a, b) in enumerate(zip(theirs.cells, ours.cells, strict=True)):
        if index != racy_count and a.get("execution_count") != b.get("execution_count"):
            differences.append(
                f"cell {index}: execution_count {a.get('execution_count')} against "
                f"{b.get('execution_count')}"
            )
        left = [normalize(copy.deepcopy(o)) for o in a.get("outputs", [])]
        right = [normalize(copy.deepcopy(o)) for o in b.get("outputs", [])]
        if left != right:
            differences.append(f"cell {index}: outputs {_short(left)} against {_short(right)}")
    if _widget_shape(theirs) != _widget_shape(ours):
        differences.append(f"widgets: {_widget_shape(theirs)} against {_widget_shape(ours)}")
    return differences


def _widget_shape(nb: Any) -> list[tuple[str, str, str]]:
    """The saved widget models as (module, name, state without ids), sorted; the model ids
    are random, so what is compared is which models exist and what they hold."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    models = state.get("state", {})
    shown = {
        output["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in output.get("data", {})
    }
    missing = [("missing", model_id, "") for model_id in sorted(shown - set(models))]
    kept = sorted(
        (
            str(model.get("model_module")),
            str(model.get("model_name")),
            _without_ids(model.get("state", {}), set(models)),
        )
        for model in models.values()
    )
    return [("shown", str(len(shown)), ""), *missing, *kept]


def _without_ids(state: Any, ids: set[str]) -> str:
    text = json.dumps(state, sort_keys=True)
    for model_id in ids:
        text = text.replace(model_id, "<MODEL_ID>")
    return text


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) < 300 else text[:300] + "..."


# -- papermill --------------------------------------------------------------------------------


def papermill_suite(source: Path, work: Path) -> int:
    """Run papermill's engine tests with our engine as its default; the count of unexpected
    failures. A test that fails is run again on papermill's own engine: one that fails there
    too fails for this environment, not for the engine."""
    from papermill_default_engine import EXCEPTIONS

    ours = _papermill_tests(source, work, [f"papermill/tests/{n}" for n in PAPERMILL_TESTS], True)
    counts = {"passed": 0, "failed": 0, "fails on papermill's own engine too": 0}
    counts["listed exception"] = 0
    failed = [name for name, outcome in ours.items() if outcome == "failed"]
    theirs = _papermill_tests(source, work, failed, False) if failed else {}
    for name, outcome in ours.items():
        if name in EXCEPTIONS:
            counts["listed exception"] += 1
            print(f"  papermill {name}: not run (mocks papermill's PapermillNotebookClient)")
        elif outcome != "failed":
            counts[outcome] = counts.get(outcome, 0) + 1
        elif theirs.get(name) == "failed":
            counts["fails on papermill's own engine too"] += 1
            print(f"  papermill {name}: fails on papermill's own engine too")
        else:
            counts["failed"] += 1
            print(f"  papermill {name}: FAILED")
    print(f"papermill: {_counts(counts)} of {sum(counts.values())} tests")
    return counts["failed"] + (0 if ours else 1)


def _papermill_tests(source: Path, work: Path, tests: list[str], ours: bool) -> dict[str, str]:
    """Run papermill's ``tests`` (ids) with pytest, on our engine or on papermill's own;
    each test's outcome (passed, failed, skipped) by id."""
    report = work / f"papermill-{'ours' if ours else 'theirs'}.xml"
    here = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(source), str(here), *filter(None, [env.get("PYTHONPATH")])]
    )
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    if ours:
        command += ["-p", "papermill_default_engine"]
    command += [f"--junitxml={report}", *tests]
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
    if not report.is_file():
        print(done.stdout[-4000:], done.stderr[-4000:])
        return {}
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = str(case.get("classname", "")).split(".")
        # classname is papermill.tests.test_x.Class: back to pytest's id.
        name = f"{'/'.join(module[:-1])}.py::{module[-1]}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[name] = "failed"
        elif case.find("skipped") is not None:
            outcomes[name] = "skipped"
        else:
            outcomes[name] = "passed"
    if ours and any(outcome == "failed" for outcome in outcomes.values()):
        print(done.stdout[-6000:])
    return outcomes


# -- jupytext ---------------------------------------------------------------------------------


def jupytext_suite(source: Path, work: Path) -> int:
    """Read every Python notebook of jupytext's inputs both ways; the count of differences."""
    import jupytext

    from notebook_executor import read_notebook

    inputs = source / "tests" / "data" / "notebooks" / "inputs"
    paths = sorted([*inputs.rglob("*.py"), *(inputs / "ipynb_py").glob("*.ipynb")])
    counts = {"same": 0, "differs": 0}
    for path in paths:
        name = path.relative_to(inputs).as_posix()
        try:
            ours: Any = [_cell_shape(c) for c in read_notebook(path).cells]
        except Exception as exc:
            ours = f"{type(exc).__name__}: {exc}"
        try:
            theirs: Any = [_cell_shape(c) for c in jupytext.read(path).cells]
        except Exception as exc:  # marimo scripts need marimo installed
            theirs = f"refused: {type(exc).__name__}"
        if isinstance(theirs, str) and isinstance(ours, str):
            counts["same"] += 1
            print(f"  jupytext  {name}: same (both refuse: {theirs})")
            continue
        if ours == theirs:
            counts["same"] += 1
            print(f"  jupytext  {name}: same ({len(theirs)} cells)")
        else:
            counts["differs"] += 1
            got = ours if isinstance(ours, str) else f"{len(ours)} cells"
            expected = theirs if isinstance(theirs, str) else f"{len(theirs)} cells"
            print(f"  jupytext  {name}: DIFFERS ({got} against {expected})")
            if not isinstance(ours, str) and not isinstance(theirs, str):
                for index, (a, b) in enumerate(zip(theirs, ours, strict=False)):
                    if a != b:
                        print(f"      cell {index}: {_short(a)} against {_short(b)}")
                        break
    print(f"jupytext: {_counts(counts)} of {sum(counts.values())} notebooks")
    return counts["differs"]


def _cell_shape(cell: Any) -> tuple[str, str, str]:
    metadata = json.dumps(dict(cell.get("metadata", {})), sort_keys=True, default=str)
    return (cell.cell_type, cell.source, metadata)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{value} {key}" for key, value in counts.items())


if __name__ == "__main__":
    sys.exit(main())
