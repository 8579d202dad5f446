"""Benchmark the HTML report: build time and index size for many runs.

1. Runs ``notebooks/dataframe.py`` a few times on real kernels and clones those run files into
   ``--runs`` runs (as ``bench_catalog.py`` does), then indexes them.
2. Times a first build of the report (every run page rendered by nbconvert), a rebuild with
   nothing new (incremental: no page rendered), and a rebuild after one new run.
3. Prints the size of ``index.html`` and of the whole site.

Usage::

    python benchmarks/bench_report.py [--runs 1000 10000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_catalog import clone_runs, real_runs

from notebook_executor import NotebookExecutor
from notebook_executor._faces.report import build_report

#: An index of 10,000 runs must stay far below this.
TARGET_INDEX_BYTES = 100 * 1024 * 1024


def _size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def measure(templates: list[Path], workdir: Path, count: int) -> None:
    runs_dir = workdir / f"runs-{count}"
    clone_runs(templates, runs_dir, count)
    with NotebookExecutor(runs_dir=runs_dir) as ex:
        ex.reindex()
        runs = ex.runs()
    site = workdir / f"site-{count}"
    started = time.perf_counter()
    first = build_report(runs, runs_dir, site)
    first_seconds = time.perf_counter() - started
    started = time.perf_counter()
    again = build_report(runs, runs_dir, site)
    again_seconds = time.perf_counter() - started
    index_bytes = (site / "index.html").stat().st_size
    verdict = "ok" if index_bytes < TARGET_INDEX_BYTES else "OVER"
    print(f"{count:>6} runs: first build {first_seconds:7.1f} s "
          f"({first_seconds / count * 1000:.1f} ms/run, {first.pages_written} pages); "
          f"rebuild {again_seconds:5.2f} s ({again.pages_written} pages rendered); "
          f"index.html {index_bytes / 1e6:.2f} MB ({verdict}, limit 100 MB); "
          f"site {_size(site) / 1e6:.1f} MB", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        templates = real_runs(workdir)
        for count in args.runs:
            measure(templates, workdir, count)


if __name__ == "__main__":
    main()
