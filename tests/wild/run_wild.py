"""Real notebooks from other projects, run by nbclient and by us, compared cell by cell
(``nox -s wild``; issue 33).

The notebooks come from the pinned sdists of projects on the package index (:data:`SOURCES`),
downloaded when the script runs (at once, and once: tests/sdists.py keeps the archives in the
checkout's ignored ``.nox/sdists``) and unpacked in a temporary folder; nothing of them is kept
in this repository. Sphinx-gallery scripts (matplotlib's gallery and tutorials) are turned
into ``.ipynb`` by jupytext (``py:sphinx``), so that both runners get the same notebook.

Each notebook is run:

- by nbclient, on a kernel it launches (the reference), and again when the outputs differ, to
  tell output that changes from run to run (timings, random numbers) from a real difference;
- by :meth:`NotebookExecutor.execute` on forked kernels: the first run of a new executor, a
  later run of the same executor, and a run through ``execute_many``; the notebooks of
  :data:`OURS` also by the last run of a two-run sweep, which waits for the template that
  preloads the data modules and so runs on a kernel forked from it;
- in a session, when our first run succeeded: ``run()``, then ``rerun_from`` at two points (the
  middle code cell and the last one), each compared with a fresh ``execute()`` from that cell
  on, and timed against it (the ``rerun_from``/``execute()`` time ratios are printed).

Outputs are compared after normalisation (:func:`~notebook_executor._review.diff.
normalised_outputs`: no execution counts, metadata, ANSI colours or memory addresses; images
compared by presence and type, not by their bytes): the same outputs, mime types, images and
errors. Every difference left is printed with its reason, from :func:`reason_for` (automatic:
output that differs between two nbclient runs; figures lost to issue 33's item 1) or
:data:`KNOWN` (by notebook); the rest are unexplained, and make the script exit 1.

With ``--reuse-check``, each notebook is run by us alone instead (durable checkpoints, SPEC
section 21): a fresh run, then one code cell two thirds of the way down edited (a line
``_nbx_probe = 1`` appended, in the file, put back afterwards), and the edited notebook run
fresh, with ``reuse=True``, and fresh again (the fresh runs write no checkpoint); the reused
run and the last compared as above. Printed per notebook: the cells reused, same or differs;
then a summary. A difference that the two fresh runs also show is output that changes from
run to run; any other makes the script exit 1. A run writes checkpoints only once its cells
took 0.5 s: a quicker notebook may reuse nothing (the summary counts those that did).

Usage: ``python tests/wild/run_wild.py [--sample N] [--only TEXT] [--keep DIR] [--reuse-check]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script: tests/ holds the shared download of pinned sdists.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sdists import prefetch, sdist

#: The sdists the corpus comes from (pinned; the nox session installs what they need to run),
#: and which of their files are notebooks: (folder, glob, how many at most, left out).
SOURCES: dict[str, tuple[str, list[tuple[str, str, int | None]]]] = {
    "nbclient": ("0.11.0", [("tests/files", "*.ipynb", None)]),
    "papermill": ("2.7.0", [("papermill/tests/notebooks", "*.ipynb", None)]),
    "jupytext": ("1.19.6", [("tests/data/notebooks/inputs/ipynb_py", "*.ipynb", None)]),
    "ipython": ("8.30.0", [("examples", "**/*.ipynb", None)]),
    "matplotlib": (
        "3.7.5",
        [
            ("tutorials/introductory", "*.py", None),
            ("tutorials/intermediate", "*.py", None),
            ("plot_types/basic", "*.py", None),
            ("examples/statistics", "*.py", 6),
        ],
    ),
}

#: Notebooks of ours, run with every sample, by name (``ours/<name>``): cells whose output
#: depends on what a library fixed at import from what it saw of its host (issue 47: pandas
#: imported by the template outside any kernel made ``display.max_columns`` 0, not 20, and
#: a wide DataFrame printed as ``col0 col1 ... col11`` where nbclient wraps its columns).
OURS: dict[str, list[str]] = {
    "wide_dataframe.ipynb": [
        "import pandas as pd\npd.get_option('display.max_columns')",
        "pd.DataFrame({f'column_{i}': range(3) for i in range(12)})",
        "print(pd.DataFrame({f'column_{i}': [i * 1000] for i in range(12)}))",
        "import sys\nprint(type(sys.stdout).__name__, sys.stdout.isatty(), sys.stdout.encoding)",
    ],
}

#: Notebooks not run at all, and why.
NOT_RUN: dict[str, str] = {
    "nbclient/Parallel Execute A.ipynb": "needs nbclient's parallel harness (a variable injected)",
    "nbclient/Parallel Execute B.ipynb": "needs nbclient's parallel harness (a variable injected)",
    "nbclient/Output.ipynb": (
        "nbclient 0.11.0 fails on it here, with ipywidgets 8 (an AssertionError in its Output "
        "widget handling after 236 s); tests/peers compares it"
    ),
    "papermill/keyboard_interrupt.ipynb": (
        "sleeps 60 s for papermill's tests to interrupt it: four minutes of waiting, the same "
        "on both sides when tried"
    ),
    "nbclient/Interrupt.ipynb": (
        "an endless cell that nbclient's tests interrupt on a 3 s timeout (both runners time out)"
    ),
}

#: Differences by design, by notebook (``project/name``): why ours differs from nbclient's.
KNOWN: dict[str, str] = {
    "nbclient/Check History in Memory.ipynb": (
        "IPython's history is off in our kernels (no database, not even in memory); the "
        "notebook asserts nbclient's in-memory history"
    ),
    "nbclient/Autokill.ipynb": (
        "the kernel SIGTERMs itself: whether its execute_input leaves before it dies is a race"
    ),
}

#: Notebooks our executor refuses before any kernel starts, by design, and why.
KNOWN_REFUSED: dict[str, str] = {
    "papermill/complex_parameters.ipynb": (
        "refused: its parameters cell is not valid Python (issue 33 item 5: papermill runs it "
        "and reports the cell's error; one behaviour is being chosen on branch i33core)"
    ),
}

#: A difference explained by issue 33's item 1 (fixed on its own branch): the figures a
#: forked kernel drew were lost (the backend resolved to agg before IPython existed).
FIGURES_LOST = (
    "figures lost on forked kernels (issue 33 item 1: a preloaded papermill engine imports "
    "matplotlib.pyplot before IPython exists; fixed on branch i33core)"
)
NONDETERMINISTIC = "the output changes from run to run: two nbclient runs differ in this cell"

#: The variant of :data:`OURS`' runs made on a kernel forked from the full template (the one
#: that preloads pandas), where a setting a library fixed at import shows.
FULL_TEMPLATE = "sweep (full template)"

CELL_TIMEOUT = 120.0
KERNEL = "python3"


@dataclass
class Notebook:
    project: str
    path: Path  # the .ipynb both runners get

    @property
    def name(self) -> str:
        return f"{self.project}/{self.path.name}"


@dataclass
class Totals:
    notebooks: int = 0
    matching: int = 0
    comparisons: int = 0
    same: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    unexplained: list[str] = field(default_factory=list)
    reruns: int = 0
    reruns_same: int = 0
    ratios: list[float] = field(default_factory=list)
    #: The same against the quickest of our three runs of the notebook.
    strict: list[float] = field(default_factory=list)
    restored: Counter[str] = field(default_factory=Counter)
    spent: dict[str, float] = field(default_factory=lambda: defaultdict(float))


def main(argv: list[str] | None = None) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, help="run only N notebooks, spread over the corpus")
    parser.add_argument("--only", help="run only notebooks whose project/name contains this")
    parser.add_argument("--keep", type=Path, help="download and unpack here, and keep it")
    parser.add_argument("--no-session", action="store_true", help="skip the rerun_from part")
    parser.add_argument(
        "--reuse-check",
        action="store_true",
        help="instead: after an edit two thirds down, reuse=True against a fresh run",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.update({"COLUMNS": "80", "LINES": "24", "MPLBACKEND": ""})
    os.environ.pop("MPLBACKEND")
    with _workdir(args.keep) as work:
        notebooks = corpus(work)
        total = len(notebooks)
        if args.only:
            notebooks = [nb for nb in notebooks if args.only in nb.name]
        if args.sample:
            step = max(1, len(notebooks) / args.sample)
            notebooks = [notebooks[int(i * step)] for i in range(min(args.sample, len(notebooks)))]
        notebooks += [nb for nb in ours(work) if not args.only or args.only in nb.name]
        print(
            f"corpus: {total} notebooks from {len(SOURCES)} projects and {len(OURS)} of ours; "
            f"running {len(notebooks)}"
        )
        for name, why in NOT_RUN.items():
            print(f"  not run: {name}: {why}")
        if args.reuse_check:
            checks = ReuseTotals()
            for nb in notebooks:
                reuse_check(nb, work, checks)
            return reuse_report(checks)
        totals = Totals()
        for nb in notebooks:
            run_one(nb, work, totals, session=not args.no_session)
    report(totals)
    return 1 if totals.unexplained else 0


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="wild-") as work:
        yield Path(work)


def corpus(work: Path) -> list[Notebook]:
    """Every notebook of :data:`SOURCES`, as ``.ipynb`` files in their unpacked sdists."""
    found: list[Notebook] = []
    prefetch((project, version) for project, (version, _) in SOURCES.items())
    for project, (version, parts) in SOURCES.items():
        root = sdist(project, version, work)
        for folder, pattern, most in parts:
            paths = sorted(p for p in (root / folder).glob(pattern) if p.is_file())
            if pattern.endswith(".py"):
                paths = [p for p in paths if not p.name.startswith("_")]
            for path in paths[:most]:
                ipynb = path if path.suffix == ".ipynb" else _gallery_notebook(path)
                nb = Notebook(project, ipynb)
                if nb.name not in NOT_RUN:
                    found.append(nb)
    return found


def ours(work: Path) -> list[Notebook]:
    """The notebooks of :data:`OURS`, written as ``.ipynb`` files under ``work``."""
    import nbformat

    folder = work / "ours"
    folder.mkdir(exist_ok=True)
    found = []
    for name, sources in OURS.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
        nb.metadata["kernelspec"] = {
            "name": KERNEL,
            "display_name": "Python 3",
            "language": "python",
        }
        nbformat.write(nb, folder / name)
        found.append(Notebook("ours", folder / name))
    return found


def _gallery_notebook(path: Path) -> Path:
    import jupytext

    target = path.with_suffix(".ipynb")
    if not target.exists():
        notebook = jupytext.read(path, fmt="py:sphinx")
        notebook.metadata["kernelspec"] = {
            "name": KERNEL,
            "display_name": "Python 3",
            "language": "python",
        }
        jupytext.write(notebook, target, fmt="ipynb")
    return target


# -- running ----------------------------------------------------------------------------------


def run_nbclient(path: Path) -> dict[str, Any]:
    """The notebook as nbclient leaves it (stopped at the first error, as we stop)."""
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=int(CELL_TIMEOUT),
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError:
        pass
    except Exception as exc:  # a timeout or a dead kernel: the notebook as it was left
        print(f"      nbclient: {type(exc).__name__}: {str(exc)[:120]}")
    notebook: dict[str, Any] = json.loads(nbformat.writes(nb))
    return notebook


def _saved(result: Mapping[str, Any]) -> dict[str, Any]:
    notebook: dict[str, Any] = json.loads(Path(result["output_path"]).read_text("utf-8"))
    return notebook


def run_one(nb: Notebook, work: Path, totals: Totals, *, session: bool) -> None:
    from notebook_executor import NotebookExecutor, NotebookExecutorError

    totals.notebooks += 1
    began = time.monotonic()
    reference = run_nbclient(nb.path)
    nbclient_seconds = time.monotonic() - began
    second: list[dict[str, Any]] = []  # nbclient's second run, made when needed

    def reference_again() -> dict[str, Any]:
        if not second:
            second.append(run_nbclient(nb.path))
        return second[0]

    runs: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    results: dict[str, Mapping[str, Any]] = {}
    ex = NotebookExecutor(
        runs_dir=work / "runs", kernel_name=KERNEL, cell_timeout=CELL_TIMEOUT, progress=False
    )
    try:
        variants = ["first run", "later run", "execute_many"]
        if nb.project == "ours":
            variants.append(FULL_TEMPLATE)
        for variant in variants:
            clock = time.monotonic()
            try:
                if variant == "execute_many":
                    result = ex.execute_many(nb.path, [None])[0]
                elif variant == FULL_TEMPLATE:
                    # A sweep waits for the template that preloads the data modules (pandas):
                    # its last run is on a kernel forked from it, whatever the ones before had.
                    result = ex.execute_many(nb.path, [None, None])[-1]
                else:
                    result = ex.execute(nb.path)
            except NotebookExecutorError as exc:
                why = KNOWN_REFUSED.get(nb.name)
                print(f"  {nb.name}: REFUSED ({type(exc).__name__}: {exc}): {why or 'UNEXPLAINED'}")
                if why is None:
                    totals.unexplained.append(f"{nb.name}: refused: {exc}")
                else:
                    totals.reasons[why] += 1
                return
            seconds[variant] = time.monotonic() - clock
            results[variant] = result
            runs[variant] = _saved(result)
        same = True
        lines = []
        for variant, ours in runs.items():
            totals.comparisons += 1
            differing = compare(reference, ours)
            if not differing:
                totals.same += 1
                continue
            same = False
            for cell, ref_out, our_out in differing:
                why = reason_for(nb, cell, ref_out, our_out, reference_again)
                lines.append(f"      {variant}, cell {cell}: {why or 'UNEXPLAINED'}")
                if why is None:
                    lines.append(f"        nbclient: {_short(ref_out)}")
                    lines.append(f"        ours:     {_short(our_out)}")
                    totals.unexplained.append(f"{nb.name} ({variant}, cell {cell})")
                else:
                    totals.reasons[why] += 1
        totals.matching += same
        status = results["first run"]["status"]
        print(
            f"  {nb.name}: {'same' if same else 'DIFFERS'} (ours {status}; nbclient "
            f"{nbclient_seconds:.1f} s, ours {seconds['first run']:.1f}/"
            f"{seconds['later run']:.1f}/{seconds['execute_many']:.1f} s)"
        )
        for line in lines:
            print(line)
        if session and status == "success":
            reruns(
                ex,
                nb,
                runs["later run"],
                runs["first run"],
                (seconds["later run"], min(seconds.values())),
                totals,
            )
    finally:
        ex.close()


def reruns(
    ex: Any,
    nb: Notebook,
    fresh_run: dict[str, Any],
    other: dict[str, Any],
    fresh: tuple[float, float],
    totals: Totals,
) -> None:
    """``rerun_from`` at two points of a session that ran the whole notebook, each compared
    with the fresh run ``fresh_run`` from that cell on, and timed against it (``fresh``: its
    seconds, and the quickest of our runs; ``other``, another fresh run, tells output that
    changes from run to run)."""
    cells = _source_cells(fresh_run)
    others = _source_cells(other)
    # The cells the fresh run ran (not those after a sys.exit(0)).
    code = [
        i
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "code" and cell.get("execution_count") is not None
    ]
    if len(code) < 2:
        return
    points = sorted({code[len(code) // 2], code[-1]})
    with ex.open_session(nb.path, cell_timeout=CELL_TIMEOUT, idle_timeout=None) as session:
        # Where a step's time goes: the kernel's calls timed (restore, fresh start, cells
        # replayed or asked for, checkpoints); the rest is reading the source and the record.
        timed = _Timed(session._kernel)
        session._kernel = timed
        step = session.run()
        if step["status"] != "success":
            print(f"      session run: {step['status']} ({step.get('error_kind')})")
            totals.unexplained.append(f"{nb.name} (session run: {step['status']})")
            return
        for point in points:
            timed.calls.clear()
            clock = time.monotonic()
            step = session.rerun_from(point)
            took = time.monotonic() - clock
            spent = timed.spent(point)
            for name, value in spent.items():
                totals.spent[name] += value
            totals.spent["total"] += took
            fresh_seconds, quickest = fresh
            totals.spent["execute()"] += fresh_seconds
            ratio = took / fresh_seconds
            totals.strict.append(took / quickest)
            totals.reruns += 1
            totals.ratios.append(ratio)
            totals.restored[str(step["restored"])] += 1
            rerun = _source_cells(_saved(step))
            differing = [
                i
                for i in range(point, len(cells))
                if cells[i]["cell_type"] == "code"
                and cells[i].get("execution_count") is not None
                and _normalised(rerun[i].get("outputs", []))
                != _normalised(cells[i].get("outputs", []))
            ]
            print(
                f"      rerun_from({point}): {took:.2f} s = {ratio:.2f}x execute() "
                f"({step['restored']}; {len(step['cells_run'])} cells run; "
                + ", ".join(f"{name} {value:.2f}" for name, value in spent.items())
                + ")"
                + (f"; differs in cells {differing}" if differing else "")
            )
            if not differing:
                totals.reruns_same += 1
                continue
            why = KNOWN_RERUN.get(nb.name)
            if why is None and all(
                _normalised(cells[i].get("outputs", []))
                != _normalised(others[i].get("outputs", []))
                for i in differing
            ):
                why = "the output changes from run to run: two fresh runs differ in this cell"
            if why is None:
                totals.unexplained.append(f"{nb.name} (rerun_from({point}), cells {differing})")
            else:
                totals.reasons[why] += 1


#: Notebooks whose rerun_from output differs from a fresh run's by design, and why.
KNOWN_RERUN: dict[str, str] = {}


class _Timed:
    """A session's kernel with its calls timed (for the breakdown of a step's time)."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.calls: list[tuple[str, Any, float]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.kernel, name)
        if name not in ("start", "restore", "execute", "checkpoint"):
            return method

        def timed(*args: Any, **kwargs: Any) -> Any:
            clock = time.monotonic()
            try:
                return method(*args, **kwargs)
            finally:
                index = args[1] if name == "execute" else None
                self.calls.append((name, index, time.monotonic() - clock))

        return timed

    def spent(self, point: int) -> dict[str, float]:
        """Seconds by kind of call since the last clear (job indices: close enough to the
        source's for telling replayed cells from those asked for)."""
        spent: dict[str, float] = defaultdict(float)
        for name, index, seconds in self.calls:
            if name == "execute":
                name = "replay" if index < point else "cells"
            spent[name] += seconds
        return dict(spent)


# -- reuse after an edit (--reuse-check) ------------------------------------------------------

PROBE = "_nbx_probe = 1"


@dataclass
class ReuseTotals:
    checked: int = 0
    same: int = 0
    #: Notebooks whose reused run reused at least one cell, and the cells reused in all.
    reusing: int = 0
    reused_cells: int = 0
    code_cells: int = 0
    changing: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    #: Seconds of the reused run over the fresh run's, of the notebooks that reused cells.
    ratios: list[float] = field(default_factory=list)


def _probe_cell(cells: list[dict[str, Any]]) -> int | None:
    """The code cell two thirds of the way down the code cells (not a cell magic's: a line
    of Python appended there would be the magic's input)."""
    code = [
        i
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "code" and not "".join(cell["source"]).lstrip().startswith("%%")
    ]
    return code[min(len(code) - 1, len(code) * 2 // 3)] if code else None


def reuse_check(nb: Notebook, work: Path, totals: ReuseTotals) -> None:
    """A fresh run, then after an edit two thirds down, ``reuse=True`` and a fresh run: the
    same outputs?"""
    from notebook_executor import NotebookExecutor, NotebookExecutorError

    original = nb.path.read_text(encoding="utf-8")
    # A runs folder of its own: no checkpoint of an earlier check (of the edited source) is
    # there to reuse (--keep keeps the folder).
    runs = Path(tempfile.mkdtemp(prefix="runs-reuse-", dir=work))
    ex = NotebookExecutor(
        runs_dir=runs, kernel_name=KERNEL, cell_timeout=CELL_TIMEOUT, progress=False
    )
    try:
        try:
            first = ex.execute(nb.path)
        except NotebookExecutorError as exc:
            totals.skipped.append(f"{nb.name}: refused ({type(exc).__name__})")
            print(f"  {nb.name}: skipped (refused: {type(exc).__name__})")
            return
        if first["status"] != "success":
            totals.skipped.append(f"{nb.name}: {first['status']} ({first['error_kind']})")
            print(f"  {nb.name}: skipped (its fresh run: {first['error_kind']})")
            return
        data = json.loads(original)
        index = _probe_cell(data["cells"])
        if index is None:
            totals.skipped.append(f"{nb.name}: no code cell")
            return
        cell = data["cells"][index]
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        cell["source"] = text.rstrip("\n") + "\n" + PROBE
        nb.path.write_text(json.dumps(data, indent=1), encoding="utf-8")
        # The fresh runs write no checkpoint: the reused run has only the unedited run's.
        # One before it (the executor's kernels warm alike for both), one after to compare.
        before = ex.execute(nb.path, checkpoints=False)
        clock = time.monotonic()
        reused = ex.execute(nb.path, reuse=True)
        reused_seconds = time.monotonic() - clock
        clock = time.monotonic()
        fresh = ex.execute(nb.path, checkpoints=False)
        fresh_seconds = time.monotonic() - clock
        differing = [c for c, _, _ in compare(_saved(fresh), _saved(reused))]
        verdict = "same"
        if differing:
            again = [c for c, _, _ in compare(_saved(fresh), _saved(before))]
            if set(differing) <= set(again):
                verdict = f"differs in cells {differing}: as two fresh runs do"
                totals.changing.append(nb.name)
            else:
                verdict = f"DIFFERS in cells {differing}"
                totals.differing.append(f"{nb.name} (cells {differing})")
    finally:
        nb.path.write_text(original, encoding="utf-8")
        ex.close()
        shutil.rmtree(runs, ignore_errors=True)
    code = sum(1 for c in data["cells"] if c["cell_type"] == "code")
    cells = reused["reused_cells"]
    totals.checked += 1
    totals.same += not differing
    totals.code_cells += code
    totals.reused_cells += len(cells)
    if cells:
        totals.reusing += 1
        totals.ratios.append(reused_seconds / fresh_seconds)
    shown = f"{cells[0]}-{cells[-1]}" if cells else "none"
    print(
        f"  {nb.name}: edit in cell {index}; reused cells {shown} ({len(cells)} of {code} code "
        f"cells); {verdict} (reuse {reused_seconds:.2f} s, fresh {fresh_seconds:.2f} s, "
        f"{reused['status']}/{fresh['status']})"
    )
    if not cells:
        for note in reused["state_notes"][:2]:
            print(f"      {note}")


def reuse_report(totals: ReuseTotals) -> int:
    """The summary of ``--reuse-check``; the exit status (1: a difference not explained)."""
    print()
    print(
        f"reuse check: {totals.checked} notebooks, {totals.same} the same as a fresh run, "
        f"{len(totals.changing)} differing as two fresh runs do, {len(totals.differing)} "
        f"differing otherwise; {len(totals.skipped)} skipped"
    )
    print(
        f"  cells reused: {totals.reused_cells} of {totals.code_cells} code cells; "
        f"{totals.reusing} notebooks reused some"
        + (
            f" (time of the reused run / the fresh run's: median "
            f"{statistics.median(totals.ratios):.2f}, max {max(totals.ratios):.2f})"
            if totals.ratios
            else ""
        )
    )
    for line in totals.differing:
        print(f"  DIFFERS: {line}")
    for line in totals.skipped:
        print(f"  skipped: {line}")
    return 1 if totals.differing else 0


# -- comparing --------------------------------------------------------------------------------


def _source_cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells of a notebook as its source has them (a run's injected cell left out)."""
    return [
        cell
        for cell in nb["cells"]
        if "injected-parameters" not in cell.get("metadata", {}).get("tags", [])
    ]


def _normalised(outputs: list[dict[str, Any]]) -> list[Any]:
    """What a cell shows: images by their type only (their bytes are the renderer's)."""
    from notebook_executor._review.diff import normalised_outputs

    plain = []
    for output in outputs:
        data = output.get("data")
        if isinstance(data, dict):
            output = {
                **output,
                "data": {
                    mime: "<image>" if _raster(mime) else value for mime, value in data.items()
                },
            }
        plain.append(output)
    return normalised_outputs(plain)


def _raster(mime: str) -> bool:
    return mime.startswith("image/") and mime != "image/svg+xml"


def compare(
    reference: dict[str, Any], ours: dict[str, Any]
) -> list[tuple[int, list[Any], list[Any]]]:
    """The code cells whose outputs differ: (index, nbclient's, ours), and whether each ran."""
    theirs, mine = _source_cells(reference), _source_cells(ours)
    differing = []
    stop = _stop(theirs)
    for index, (a, b) in enumerate(zip(theirs, mine, strict=False)):
        if a["cell_type"] != "code" or index > stop:
            # After the cell that stopped nbclient, its cells keep the source's outputs
            # (ours keep none: they did not run).
            continue
        ran_a, ran_b = a.get("execution_count") is not None, b.get("execution_count") is not None
        out_a, out_b = _normalised(a.get("outputs", [])), _normalised(b.get("outputs", []))
        if out_a != out_b or ran_a != ran_b:
            differing.append((index, [*out_a, ["ran", ran_a]], [*out_b, ["ran", ran_b]]))
    if len(theirs) != len(mine):
        differing.append((-1, [["cells", len(theirs)]], [["cells", len(mine)]]))
    return differing


def _stop(cells: list[dict[str, Any]]) -> int:
    """The index of the cell whose error stopped the run (nbclient's), else the last one."""
    for index, cell in enumerate(cells):
        tags = cell.get("metadata", {}).get("tags", [])
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if cell["cell_type"] == "code" and errors and "raises-exception" not in tags:
            return index
    return len(cells)


def _without_figures(outputs: list[Any]) -> list[Any]:
    kept = []
    for item in outputs:
        if item[0] == "display":
            data = json.loads(item[1])
            if any(m.startswith("image/") for m in data) or "<Figure" in str(
                data.get("text/plain", "")
            ):
                continue
        kept.append(item)
    return kept


def reason_for(
    nb: Notebook,
    cell: int,
    theirs: list[Any],
    ours: list[Any],
    reference_again: Any,
) -> str | None:
    """Why cell ``cell`` of ``nb`` differs, or None when nothing explains it."""
    if nb.name in KNOWN:
        return KNOWN[nb.name]
    has_images = any(i[0] == "display" and '"image/' in i[1] for i in theirs)
    if has_images and _without_figures(theirs) == _without_figures(ours):
        return FIGURES_LOST
    second = _source_cells(reference_again())
    if 0 <= cell < len(second):
        out = [
            *_normalised(second[cell].get("outputs", [])),
            ["ran", second[cell].get("execution_count") is not None],
        ]
        if out != theirs:
            return NONDETERMINISTIC
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:300] + "..."


def report(totals: Totals) -> None:
    print()
    print(
        f"notebooks: {totals.notebooks}; the same as nbclient in all their runs: "
        f"{totals.matching}; runs compared: {totals.comparisons}, the same: {totals.same}"
    )
    for why, count in totals.reasons.most_common():
        print(f"  {count} cell difference(s): {why}")
    print(f"  {len(totals.unexplained)} unexplained difference(s)")
    for line in totals.unexplained:
        print(f"    {line}")
    if totals.ratios:
        print(
            f"rerun_from: {totals.reruns} calls, {totals.reruns_same} the same as a fresh run; "
            f"time / execute() time: median {statistics.median(totals.ratios):.2f}, "
            f"max {max(totals.ratios):.2f}; restored by {dict(totals.restored)}"
        )
        print(
            "  against the quickest of our three runs of each notebook: median "
            f"{statistics.median(totals.strict):.2f}, max {max(totals.strict):.2f}"
        )
        print(
            "rerun_from's time, summed (s): "
            + ", ".join(
                f"{name} {value:.1f}"
                for name, value in sorted(totals.spent.items(), key=lambda item: -item[1])
            )
        )


if __name__ == "__main__":
    sys.exit(main())
