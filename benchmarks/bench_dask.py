"""A sweep on a Dask cluster against the same sweep here and against papermill.

On one notebook (it imports scrapbook and glues a value), ``--runs`` parameter sets:

1. papermill, run after run (a new kernel per run);
2. ``execute_many`` on this machine (``max_workers`` = ``--workers``);
3. ``execute_many(client=...)`` on a ``LocalCluster`` of ``--workers`` worker processes of one
   thread each: the first sweep (workers start their engines and first kernels) and a second
   one (warm);
4. the per-run overhead Dask adds: a one-worker cluster against one local run at a time, both
   warm, the difference divided by the number of runs; and the caller's own cost per run
   (writing the run files and the catalog entry of a result that came back), which does not
   spread over workers.

From the per-run figures it prints what to expect of a cluster of N single-thread workers:
about ``runs * (run + dask) / N`` while that exceeds ``runs * caller``, after which the caller
writing records is the bound. Medians of ``--repeat`` timings where repeated; the load
average is printed because other work on the machine moves every figure.

Usage::

    python benchmarks/bench_dask.py [--runs 40] [--workers 2] [--repeat 1] [--skip-papermill]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NOTEBOOK = """# %% tags=["parameters"]
x = 1

# %%
import scrapbook as sb

sb.glue("y", x + 1)
"""


def _papermill(folder: Path, runs: int) -> float:
    import papermill

    source = folder / "nb.ipynb"
    from notebook_executor import read_notebook, write_notebook

    write_notebook(read_notebook(folder / "nb.py"), source)
    began = time.perf_counter()
    for i in range(runs):
        papermill.execute_notebook(
            os.fspath(source),
            os.fspath(folder / f"pm-{i}.ipynb"),
            parameters={"x": i},
            progress_bar=False,
            kernel_name="python3",
        )
    return time.perf_counter() - began


def _sweep(ex: Any, notebook: Path, runs: int, **options: Any) -> float:
    began = time.perf_counter()
    results = ex.execute_many(notebook, [{"x": i} for i in range(runs)], **options)
    elapsed = time.perf_counter() - began
    bad = [r for r in results if r["status"] != "success"]
    if bad:
        raise SystemExit(f"a run failed: {bad[0]}")
    return elapsed


def _cluster(workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
    )


def _timed_records() -> list[float]:
    """Time the caller's share of each cluster run (run files and catalog entry)."""
    from notebook_executor._cluster import dask as cluster_dask

    spent: list[float] = []
    original = cluster_dask._Sweep._record

    def timed(self: Any, index: int, future: Any) -> dict[str, Any]:
        future.result()  # the wait for the run is not the caller's cost
        began = time.perf_counter()
        result = original(self, index, future)
        spent.append(time.perf_counter() - began)
        return result

    cluster_dask._Sweep._record = timed  # type: ignore[method-assign]
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--skip-papermill", action="store_true")
    args = parser.parse_args()

    from distributed import Client

    from notebook_executor import NotebookExecutor

    folder = Path(tempfile.mkdtemp(prefix="bench-dask-"))
    try:
        notebook = folder / "nb.py"
        notebook.write_text(NOTEBOOK)
        runs_dir = folder.parent / f"{folder.name}-runs"
        n, w = args.runs, args.workers
        print(f"{n} runs, {w} workers, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")

        figures: dict[str, float] = {}
        if not args.skip_papermill:
            figures["papermill, run after run"] = _papermill(folder, n)
        with NotebookExecutor(runs_dir=runs_dir) as ex:
            _sweep(ex, notebook, w, max_workers=w)  # warm this executor's kernels
            figures[f"execute_many, max_workers={w}"] = statistics.median(
                _sweep(ex, notebook, n, max_workers=w) for _ in range(args.repeat)
            )
        began = time.perf_counter()
        cluster = _cluster(w)
        started = time.perf_counter() - began
        spent = _timed_records()
        with cluster, Client(cluster, set_as_default=False) as client:
            client.wait_for_workers(w)
            with NotebookExecutor(runs_dir=runs_dir) as ex:
                figures[f"LocalCluster({w} workers), first sweep"] = _sweep(
                    ex, notebook, n, client=client
                )
                figures[f"LocalCluster({w} workers), warm"] = statistics.median(
                    _sweep(ex, notebook, n, client=client) for _ in range(args.repeat)
                )
        caller = statistics.median(spent)

        with _cluster(1) as single, Client(single, set_as_default=False) as client:
            client.wait_for_workers(1)
            with NotebookExecutor(runs_dir=runs_dir) as ex:
                _sweep(ex, notebook, 4, client=client)
                on_one = statistics.median(
                    _sweep(ex, notebook, n, client=client) for _ in range(args.repeat)
                )
        with NotebookExecutor(runs_dir=runs_dir) as ex:
            _sweep(ex, notebook, 4, max_workers=1)
            here = statistics.median(
                _sweep(ex, notebook, n, max_workers=1) for _ in range(args.repeat)
            )

        print(f"\nLocalCluster start: {started:.2f} s (not counted below)")
        base = figures.get("papermill, run after run")
        for name, seconds in figures.items():
            ratio = f"  {seconds / base:.2f}x papermill" if base else ""
            print(f"{name:40} {seconds:7.2f} s  {1000 * seconds / n:7.1f} ms/run{ratio}")
        run_cost = here / n
        dask_cost = (on_one - here) / n
        print(f"\none run at a time, here:        {1000 * run_cost:7.1f} ms/run")
        print(f"one run at a time, one worker:  {1000 * on_one / n:7.1f} ms/run")
        print(f"per-run overhead Dask adds:     {1000 * dask_cost:7.1f} ms/run")
        print(f"caller's share per run:         {1000 * caller:7.1f} ms/run (records, catalog)")
        print("\nexpected on N single-thread workers (on separate machines), per sweep:")
        ceiling = (run_cost + dask_cost) / caller if caller > 0 else float("inf")
        for count in (2, 8, 32, 128):
            spread = n * (run_cost + dask_cost) / count
            floor = n * caller
            print(f"  N={count:<4} ~{max(spread, floor):6.2f} s for {n} runs")
        print(f"  the caller writing records is the bound beyond N ~ {ceiling:.0f} workers")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(folder.parent / f"{folder.name}-runs", ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
