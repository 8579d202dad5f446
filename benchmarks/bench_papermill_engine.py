"""Papermill's own engine beside the ``notebook_executor`` engine, run by papermill itself.

1. The command line: ``papermill --engine E IN OUT -p ...`` once per process, in back-to-back
   pairs (papermill's default nbclient engine, then ours), so both see the same machine load.
2. The API: ``papermill.execute_notebook(..., engine_name=E)`` ``--runs`` times in one process,
   where our engine keeps kernels warm between runs.

Prints the median seconds of each and the ratio ours / papermill's (below 1: ours is faster).

Usage::

    python benchmarks/bench_papermill_engine.py [--pairs 5] [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ENGINES = ("nbclient", "notebook_executor")


def _notebook(path: Path) -> Path:
    v4 = nbformat.v4
    params = v4.new_code_cell("n = 10")
    params.metadata["tags"] = ["parameters"]
    nb = v4.new_notebook(
        cells=[
            params,
            v4.new_code_cell("total = sum(range(n))"),
            v4.new_code_cell("print(total)"),
            v4.new_markdown_cell("done"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    nbformat.write(nb, path)
    return path


def _cli(source: Path, out: Path, engine: str) -> float:
    command = [sys.executable, "-m", "papermill", "--engine", engine, str(source), str(out)]
    began = time.perf_counter()
    subprocess.run(
        [*command, "-p", "n", "20", "--no-progress-bar"], check=True, capture_output=True
    )
    return time.perf_counter() - began


def _api(source: Path, out: Path, engine: str, runs: int) -> list[float]:
    import papermill as pm

    times = []
    for index in range(runs):
        began = time.perf_counter()
        pm.execute_notebook(
            str(source),
            str(out),
            parameters={"n": index},
            engine_name=engine,
            progress_bar=False,
        )
        times.append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5, help="command-line runs of each engine")
    parser.add_argument("--runs", type=int, default=10, help="API runs of each engine")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        source = _notebook(work / "bench.ipynb")
        cli: dict[str, list[float]] = {engine: [] for engine in ENGINES}
        for _ in range(args.pairs):
            for engine in ENGINES:
                cli[engine].append(_cli(source, work / f"{engine}.ipynb", engine))
        api = {engine: _api(source, work / "api.ipynb", engine, args.runs) for engine in ENGINES}
        from notebook_executor._faces.papermill_engine import NotebookExecutorEngine

        NotebookExecutorEngine.close()
    for label, table in (("papermill CLI", cli), ("papermill API", api)):
        theirs, ours = (statistics.median(table[engine]) for engine in ENGINES)
        print(
            f"{label}: nbclient {theirs:.3f} s, notebook_executor {ours:.3f} s "
            f"(median), ratio {ours / theirs:.2f}"
        )


if __name__ == "__main__":
    main()
