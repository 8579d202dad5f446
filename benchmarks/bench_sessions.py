"""Sessions against whole runs, side by side in one process (issue 26's figures).

1. ``rerun``: a notebook whose cells 0-3 do 10 s of work (sleeps, so that the figure does not
   move with the machine's load) and whose cell 4 fails. After the fix, ``rerun_from(4)``
   against ``execute()`` of the fixed notebook and papermill on it: the ratios must be >= 50x,
   with ``restored: "checkpoint"``, and ``rerun_from`` must take <= 0.2 s plus cell 4's own
   time.
2. ``cells``: a 100-cell notebook of trivial cells, run in a session (one ``run()``) against
   ``execute()`` on a warm executor: at most 5 ms more per cell.

Usage::

    python benchmarks/bench_sessions.py [--only rerun|cells] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_speed import Report

SLOW_CELL = "import time\ntime.sleep(2.5)\nv{i} = {i}"
BROKEN = "result = v0 + v1 + v2 + v3 + missing"
FIXED = "result = v0 + v1 + v2 + v3"


def _percent(cells: list[str]) -> str:
    return "".join(f"# %%\n{cell}\n\n" for cell in cells)


def _ipynb(source: Path) -> Path:
    import jupytext
    import nbformat

    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    target = source.with_suffix(".ipynb")
    nbformat.write(nb, target)
    return target


def _cell_seconds(runs: Path, run_id: str, index: int) -> float:
    path = next(runs.rglob(f"{run_id}.ipynb"))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return float(cells[index]["metadata"]["notebook_executor"]["duration_seconds"])


def bench_rerun(report: Report, workdir: Path, args: Any) -> None:
    """Rerun after an edit: ``rerun_from(4)`` against ``execute()`` and papermill."""
    import papermill

    from notebook_executor import NotebookExecutor

    source = workdir / "slow.py"
    cells = [SLOW_CELL.format(i=i) for i in range(4)]
    source.write_text(_percent([*cells, BROKEN]), encoding="utf-8")
    runs = workdir / "runs"
    with NotebookExecutor(runs_dir=runs) as ex:
        with ex.open_session(source) as session:
            first = session.run()
            assert first["status"] == "error", first["failed_cell"]
            ex.edit_cell(source, 4, FIXED)
            reruns = []
            for _ in range(args.repeat):
                began = time.perf_counter()
                step = session.rerun_from(4)
                reruns.append((time.perf_counter() - began, step))
            rerun, step = min(reruns, key=lambda pair: pair[0])
            own = _cell_seconds(runs, session.run_id, 4)
            report.figure("rerun: restored", str(step["restored"]))
            if step["restore_reason"]:
                report.figure("rerun: restore reason", str(step["restore_reason"]))
        began = time.perf_counter()
        fresh = ex.execute(source)
        ours = time.perf_counter() - began
        assert fresh["status"] == "success"
    ipynb = _ipynb(source)
    began = time.perf_counter()
    papermill.execute_notebook(str(ipynb), str(workdir / "pm-out.ipynb"), progress_bar=False)
    pm = time.perf_counter() - began
    report.figure("rerun: rerun_from(4) (best of repeats)", f"{rerun * 1000:.0f} ms")
    report.figure("rerun: cell 4's own time", f"{own * 1000:.1f} ms")
    report.figure("rerun: execute() of the fixed notebook", f"{ours:.2f} s")
    report.figure("rerun: papermill on it", f"{pm:.2f} s")
    report.target("rerun: rerun_from(4) less cell 4's time", rerun - own, "<=", 0.2, " s")
    report.target("rerun: execute() / rerun_from(4)", ours / rerun, ">=", 50.0, "x")
    report.target("rerun: papermill / rerun_from(4)", pm / rerun, ">=", 50.0, "x")
    report.target(
        "rerun: restored from a checkpoint", float(step["restored"] == "checkpoint"), ">=", 1.0
    )


def bench_cells(report: Report, workdir: Path, args: Any) -> None:
    """A 100-cell notebook of trivial cells: in a session against ``execute()``."""
    from notebook_executor import NotebookExecutor

    source = workdir / "hundred.py"
    source.write_text(_percent([f"x{i} = {i}" for i in range(100)]), encoding="utf-8")
    with NotebookExecutor(runs_dir=workdir / "runs-cells") as ex:
        ex.execute(source)  # the executor's kernels are warm from here on
        session_times, execute_times, opens = [], [], []
        for _ in range(args.repeat):
            began = time.perf_counter()
            execute = ex.execute(source)
            execute_times.append(time.perf_counter() - began)
            assert execute["status"] == "success"
            began = time.perf_counter()
            with ex.open_session(source) as session:
                opens.append(time.perf_counter() - began)
                began = time.perf_counter()
                step = session.run()
                session_times.append(time.perf_counter() - began)
                assert step["status"] == "success" and len(step["cells_run"]) == 100
    in_session = statistics.median(session_times)
    whole = statistics.median(execute_times)
    report.figure("cells: execute() of 100 cells (warm)", f"{whole * 1000:.0f} ms")
    report.figure("cells: session run() of 100 cells", f"{in_session * 1000:.0f} ms")
    report.figure("cells: open_session (kernel start)", f"{statistics.median(opens):.2f} s")
    report.target(
        "cells: session - execute() per cell", (in_session - whole) * 1000 / 100, "<=", 5.0, " ms"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the session benchmarks and print the table; return 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["rerun", "cells"], action="append")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of each measurement")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="nbx-bench-sessions-"))
    workdir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    report = Report()
    steps = {"rerun": bench_rerun, "cells": bench_cells}
    try:
        for name, step in steps.items():
            if args.only is None or name in args.only:
                step(report, workdir, args)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report.print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
