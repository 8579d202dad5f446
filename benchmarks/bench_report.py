"""Benchmark the HTML report: build time and index size for many runs.

1. Runs ``notebooks/dataframe.py`` a few times on real kernels and clones those run files into
   ``--runs`` runs (as ``bench_catalog.py`` does), then indexes them.
2. Times a first build of the report (every run page rendered by nbconvert), a rebuild with
   nothing new (incremental: no page rendered), and a rebuild after one new run.
3. Prints the size of ``index.html``, of the largest notebook page and of the whole site.
4. With Chromium installed: opens ``index.html`` and the first notebook page in headless
   Chromium (over the DevTools protocol, ``tests/chromium.py``) and prints, from the page's own
   Performance timeline, the time to DOMContentLoaded and to the first contentful paint, and
   the wall time from the navigation command to the load event.

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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_catalog import clone_runs, real_runs

from chromium import Chromium, find_chromium
from notebook_executor import NotebookExecutor
from notebook_executor._faces.report import build_report

#: The first page of a report of 10,000 runs must open (first paint) within this.
TARGET_OPEN_MS = 1000.0


def _size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def open_times(page: Path, profile: Path) -> tuple[float, float, float]:
    """(DOMContentLoaded, first contentful paint, navigation to load event), in ms."""
    with Chromium(profile) as browser:
        started = time.perf_counter()
        browser.open(page.as_uri())
        wall = (time.perf_counter() - started) * 1000 - 300  # open() waits 300 ms after load
        timing = browser.evaluate(
            "[performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd,"
            " (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || -1]"
        )
    return float(timing[0]), float(timing[1]), wall


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
    pages = sorted((site / "notebooks").glob("*.html"), key=lambda p: p.stat().st_size)
    print(f"{count:>6} runs: first build {first_seconds:7.1f} s "
          f"({first_seconds / count * 1000:.1f} ms/run, {first.pages_written} pages); "
          f"rebuild {again_seconds:5.2f} s ({again.pages_written} pages rendered, index and "
          f"{len(pages)} notebook pages rewritten); index.html {index_bytes / 1e3:.0f} kB, "
          f"largest notebook page {pages[-1].stat().st_size / 1e3:.0f} kB; "
          f"site {_size(site) / 1e6:.1f} MB", flush=True)  # fmt: skip
    if find_chromium() is None:
        print("        (chromium not installed: no open times)", flush=True)
        return
    first_page = next(page for page in pages if page.name.endswith("-1.html"))
    for name, page in (("index.html", site / "index.html"), (first_page.name, first_page)):
        loaded, painted, wall = open_times(page, workdir / f"profile-{count}-{name}")
        verdict = "ok" if painted <= TARGET_OPEN_MS else "SLOW"
        print(f"        open {name}: DOMContentLoaded {loaded:.0f} ms, first contentful paint "
              f"{painted:.0f} ms ({verdict}, target {TARGET_OPEN_MS:.0f} ms), "
              f"navigation to load event {wall:.0f} ms", flush=True)  # fmt: skip


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
