"""Benchmark the run catalog against scrapbook, side by side in one process.

1. Runs ``notebooks/dataframe.py`` (it glues a small DataFrame and a JSON value) a few times with
   the real executor and real kernels.
2. Clones those run files into ``--runs`` runs (new run ids, uuids and start times spread over
   30 days), as the executor would have written them.
3. Times: building the catalog from the files, an explicit ``reindex`` (with and without the
   full-text index), ``scraps()`` over every run, opening the catalog, the cost ``begin`` +
   ``finish`` add to one run (and what the full-text index adds to it), and scrapbook reading a
   ``--subset`` of the same files into the same DataFrame (scaled to all runs).
4. Full-text search: the median time of ``search()`` over every run for queries from rare (one
   run) to common (every run), and the catalog's size per 1,000 runs with and without the
   index (both vacuumed).
5. ``digest()`` of every run (one in ten of the clones failed, in one of three ways), and of
   one notebook, on an open catalog.

Usage::

    python benchmarks/bench_catalog.py [--runs 10000] [--subset 1000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from notebook_executor import NotebookExecutor
from notebook_executor._catalog import store as _store
from notebook_executor._catalog.store import Catalog
from notebook_executor._records import run_markdown as _records
from notebook_executor._records.store import RunStore
from notebook_executor._times import iso

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "dataframe.py"
TEMPLATE_SIZES = (3, 5, 8)

TARGET_SCRAPS_SECONDS = 0.2
TARGET_SPEEDUP = 500.0
TARGET_INDEX_MS = 5.0
TARGET_REINDEX_SECONDS = 60.0
TARGET_SEARCH_MS = 50.0
TARGET_FULL_TEXT_MS = 2.0
TARGET_DIGEST_MS = 100.0
#: One cloned run in ten failed: (cell, exception name, message).
FAILURES = (
    (3, "ValueError", "negative row count"),
    (3, "KeyError", "'squares'"),
    (4, "ZeroDivisionError", "division by zero"),
)
#: Requests the cloned runs carry, so the index holds varied text (a word per run, too).
REQUESTS = (
    "weekly check of station {station}",
    "compare the vibration spectrum after the {station} repair",
    "rerun with the new calibration table for {station}",
    "investigate the drift reported on {station}",
)
#: (label, query): from a word in one run to words in every run.
QUERIES = (
    ("rare word (1 run)", "token{rare:08x}"),
    ("station id (1% of runs)", "KX-17"),
    ("phrase (25%)", '"vibration spectrum"'),
    ("prefix (25%)", "calib*"),
    ("two words (25%)", "drift station"),
    ("OR (50%)", "drift OR calibration"),
    ("common word (every run)", "DataFrame"),
)


def real_runs(workdir: Path) -> list[Path]:
    """Run the example notebook on real kernels; return the run files."""
    with NotebookExecutor(runs_dir=workdir / "real") as ex:
        results = [ex.execute(NOTEBOOK, parameters={"n": n}) for n in TEMPLATE_SIZES]
    for result in results:
        if result["status"] != "success":
            raise SystemExit(f"the template run failed: {json.dumps(result)[:2000]}")
    return [RunStore(workdir / "real").path(r["run_id"]) for r in results]


def clone_runs(templates: list[Path], runs_dir: Path, count: int) -> None:
    """Write ``count`` run files cloned from ``templates``, as the executor lays them out."""
    loaded = [json.loads(path.read_text(encoding="utf-8")) for path in templates]
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    step = timedelta(days=30) / max(count, 1)
    for index in range(count):
        notebook = loaded[index % len(loaded)]
        record = notebook["metadata"][_records.RECORD_KEY]
        started = start + index * step
        run_id = f"{started:%Y%m%dT%H%M%S}Z-dataframe-{index:08x}"
        path = RunStore(runs_dir).path(run_id)
        station = f"KX-{index % 100}"
        failure: dict[str, Any] = {}
        if index % 10 == 3:
            cell, ename, evalue = FAILURES[index // 10 % len(FAILURES)]
            failure = {
                "status": "error",
                "error_kind": "cell_error",
                "failed_cell": {
                    "index": cell,
                    "source": "...",
                    "ename": ename,
                    "evalue": evalue,
                    "traceback": [f"{ename}: {evalue}"] * 5,
                },
            }
        clone = {
            **record,
            **failure,
            "request": REQUESTS[index % len(REQUESTS)].format(station=station)
            + f" token{index:08x}",
            "parameters": {**record["parameters"], "station": station},
            "run_id": run_id,
            "uuid": str(uuid.uuid4()),
            "started_at": iso(started),
            "finished_at": iso(started + timedelta(seconds=record["duration_seconds"])),
            "output_path": path.as_posix(),
        }
        text = json.dumps(
            {**notebook, "metadata": {**notebook["metadata"], "notebook_executor": clone}}
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def scrapbook_frame(paths: list[Path]) -> Any:
    """What a scrapbook user writes to get the scraps() table: read every notebook, decode every
    scrap (validated against scrapbook's JSON schema), keep the JSON ones."""
    import pandas as pd
    import scrapbook as sb

    rows = []
    for path in paths:
        nb = sb.read_notebook(str(path))
        record = nb.metadata["notebook_executor"]
        row: dict[str, Any] = {
            "run_id": record["run_id"],
            "notebook": record["notebook"],
            "status": record["status"],
            "started_at": record["started_at"],
            "duration_seconds": record["duration_seconds"],
        }
        row.update((f"parameters.{k}", v) for k, v in record["parameters"].items())
        row.update(
            (f"scraps.{name}", scrap.data)
            for name, scrap in nb.scraps.items()
            if scrap.encoder in ("json", "text")
        )
        rows.append(row)
    frame = pd.DataFrame(rows).set_index("run_id")
    return frame.sort_values("started_at", ascending=False, kind="stable")


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    value = action()
    return time.perf_counter() - began, value


def best_of(repeat: int, action: Callable[[], Any]) -> tuple[float, float]:
    """(best, median) seconds of ``repeat`` calls."""
    times = [timed(action)[0] for _ in range(repeat)]
    return min(times), statistics.median(times)


def without_full_text() -> Any:
    """The catalog as it was before the full-text index: rows only (for comparisons)."""
    from unittest import mock

    return mock.patch.multiple(
        _store,
        index_runs=lambda conn, runs: None,
        run_texts=lambda record, cells: {},
        clear_index=lambda conn, run_ids=None: None,
    )


def indexing_cost(runs_dir: Path, template: Path, samples: int, tag: str) -> list[float]:
    """Seconds that begin + finish add to each of ``samples`` runs, in a full catalog. Each
    run has its run file, as it would (finish indexes its text from there)."""
    notebook = json.loads(template.read_text(encoding="utf-8"))
    record = notebook["metadata"]["notebook_executor"]
    costs = []
    with Catalog(runs_dir) as catalog:
        catalog.runs(limit=1)  # open outside the timing, as a long-lived executor would
        for index in range(samples):
            run_id = f"20270101T000000Z-indexing{tag}-{index:08x}"
            final = {**record, "run_id": run_id, "uuid": str(uuid.uuid4())}
            path = RunStore(runs_dir).path(run_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            with_record = {**notebook["metadata"], "notebook_executor": final}
            path.write_text(json.dumps({**notebook, "metadata": with_record}), encoding="utf-8")
            running = {k: v for k, v in final.items() if k not in _FINAL_KEYS}
            running["status"] = "running"
            began = time.perf_counter()
            catalog.begin(running)
            catalog.finish(final)
            costs.append(time.perf_counter() - began)
    return costs


_FINAL_KEYS = {
    "finished_at",
    "duration_seconds",
    "cells_total",
    "cells_executed",
    "failed_cell",
    "scraps",
}


def search_times(runs_dir: Path, count: int, repeat: int) -> list[tuple[str, float, int]]:
    """(label, median seconds, hits) of each query in QUERIES, on an open catalog."""
    measured = []
    with Catalog(runs_dir) as catalog:
        catalog.search("warm")  # open outside the timing
        for label, query in QUERIES:
            query = query.format(rare=count // 2)
            hits = len(catalog.search(query))

            def run(query: str = query) -> Any:
                return catalog.search(query)

            _, median = best_of(repeat, run)
            measured.append((label, median, hits))
    return measured


def catalog_sizes(runs_dir: Path, scratch: Path) -> tuple[int, int]:
    """Bytes of the catalog with and without the full-text index, each vacuumed."""
    sizes = []
    for drop in (False, True):
        copy = scratch / f"size-{drop}.sqlite"
        source = sqlite3.connect(runs_dir / _store.CATALOG_NAME)
        target = sqlite3.connect(copy)
        source.backup(target)
        source.close()
        if drop:
            target.execute("DROP TABLE run_text")
            target.execute("DROP TABLE run_text_keys")
        target.execute("VACUUM")
        target.close()
        sizes.append(copy.stat().st_size)
        copy.unlink()
    return sizes[0], sizes[1]


def check_same_frame(ours: Any, theirs: Any) -> str:
    import pandas as pd

    mine = ours.loc[theirs.index, list(theirs.columns)]
    try:
        pd.testing.assert_frame_equal(mine, theirs, check_dtype=False, check_index_type=False)
    except AssertionError as exc:
        return f"DIFFERENT: {str(exc).splitlines()[0]}"
    return f"identical ({len(theirs)} rows x {len(theirs.columns)} columns)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the catalog")
    parser.add_argument("--subset", type=int, default=1_000, help="runs scrapbook reads")
    parser.add_argument("--samples", type=int, default=300, help="runs timed for indexing cost")
    parser.add_argument("--repeat", type=int, default=21, help="timings per search query")
    parser.add_argument("--workdir", type=Path, help="keep the files here (default: a temp dir)")
    args = parser.parse_args(argv)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-catalog-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runs_dir = workdir / "runs"
    if runs_dir.exists():
        shutil.rmtree(runs_dir)
    try:
        import pandas  # noqa: F401  (both sides need it; keep its import out of the timings)
        import scrapbook  # noqa: F401

        print(f"python {sys.version.split()[0]}, workdir {workdir}", flush=True)
        seconds, templates = timed(lambda: real_runs(workdir))
        print(f"{len(templates)} real runs on kernels: {seconds:.1f} s", flush=True)
        seconds, _ = timed(lambda: clone_runs(templates, runs_dir, args.runs))
        print(f"cloned {args.runs} run files: {seconds:.1f} s", flush=True)

        catalog = Catalog(runs_dir)
        build, _ = timed(lambda: catalog.runs(limit=1))  # a missing catalog is built on open
        reindex, count = timed(catalog.reindex)
        assert count == args.runs, count
        with without_full_text():
            reindex_rows, _ = timed(catalog.reindex)
        catalog.reindex()
        scraps_best, scraps_median = best_of(5, catalog.scraps)
        ours = catalog.scraps()
        assert len(ours) == args.runs
        runs_best, _ = best_of(5, lambda: catalog.runs(limit=500))
        digest_best, digest_median = best_of(args.repeat, catalog.digest)
        digest = catalog.digest()
        assert digest["runs"] == args.runs and len(digest["errors"]) == len(FAILURES)
        one_best, _ = best_of(args.repeat, lambda: catalog.digest("dataframe.py"))
        catalog.close()

        def cold() -> Any:
            with Catalog(runs_dir) as fresh:
                return fresh.scraps()

        cold_best, _ = best_of(3, cold)
        open_best, open_median = best_of(20, lambda: Catalog(runs_dir).runs(limit=1))

        subset_paths = [RunStore(runs_dir).path(run_id) for run_id in ours.index[: args.subset]]
        print(f"scrapbook reading {len(subset_paths)} run files ...", flush=True)
        sb_seconds, theirs = timed(lambda: scrapbook_frame(subset_paths))
        sb_scaled = sb_seconds * args.runs / len(subset_paths)
        same = check_same_frame(ours, theirs)

        searches = search_times(runs_dir, args.runs, args.repeat)
        with_index, without_index = catalog_sizes(runs_dir, workdir)

        costs = indexing_cost(runs_dir, templates[0], args.samples, "a")
        with without_full_text():
            bare_costs = indexing_cost(runs_dir, templates[0], args.samples, "b")
        costs_ms = sorted(c * 1000 for c in costs)
        index_mean = statistics.fmean(costs_ms)
        index_p95 = costs_ms[int(len(costs_ms) * 0.95) - 1]
        full_text_ms = index_mean - statistics.fmean(c * 1000 for c in bare_costs)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    speedup = sb_scaled / scraps_best
    scale = args.runs / 10_000
    rows = [
        ("build catalog from files (missing catalog)", f"{build:.2f} s", ""),
        (f"reindex {args.runs} runs, rows only (no full-text)", f"{reindex_rows:.2f} s", ""),
        (
            f"reindex {args.runs} runs",
            f"{reindex:.2f} s",
            _verdict(
                reindex <= TARGET_REINDEX_SECONDS * scale,
                f"<= {TARGET_REINDEX_SECONDS * scale:g} s",
            ),
        ),
        (
            f"scraps() over {args.runs} runs (best of 5)",
            f"{scraps_best * 1000:.1f} ms (median {scraps_median * 1000:.1f})",
            _verdict(
                scraps_best <= TARGET_SCRAPS_SECONDS, f"<= {TARGET_SCRAPS_SECONDS * 1000:g} ms"
            ),
        ),
        ("scraps() with a fresh Catalog (open + query)", f"{cold_best * 1000:.1f} ms", ""),
        ("runs(limit=500)", f"{runs_best * 1000:.1f} ms", ""),
        (
            f"digest() of {args.runs} runs (best of {args.repeat})",
            f"{digest_best * 1000:.1f} ms (median {digest_median * 1000:.1f})",
            _verdict(digest_median * 1000 <= TARGET_DIGEST_MS, f"<= {TARGET_DIGEST_MS:g} ms"),
        ),
        (f"digest('dataframe.py') of {args.runs} runs", f"{one_best * 1000:.1f} ms", ""),
        (
            "open catalog + runs(limit=1)",
            f"{open_best * 1000:.2f} ms (median {open_median * 1000:.2f})",
            "",
        ),
        (
            f"scrapbook, {len(subset_paths)} runs",
            f"{sb_seconds:.2f} s",
            "",
        ),
        (f"scrapbook, scaled to {args.runs} runs", f"{sb_scaled:.1f} s", ""),
        (
            "speedup of scraps() over scrapbook",
            f"{speedup:,.0f}x",
            _verdict(speedup >= TARGET_SPEEDUP, f">= {TARGET_SPEEDUP:g}x"),
        ),
        ("same DataFrame as scrapbook's", same, ""),
        (
            f"indexing per run, begin+finish (mean of {len(costs_ms)})",
            f"{index_mean:.2f} ms (p95 {index_p95:.2f})",
            _verdict(index_mean <= TARGET_INDEX_MS, f"<= {TARGET_INDEX_MS:g} ms"),
        ),
        (
            "  of which the full-text index (mean difference)",
            f"{full_text_ms:.2f} ms",
            _verdict(full_text_ms <= TARGET_FULL_TEXT_MS, f"<= {TARGET_FULL_TEXT_MS:g} ms"),
        ),
        (
            "catalog size per 1,000 runs, with full-text index",
            f"{with_index / 1e6 / (args.runs / 1000):.2f} MB",
            "",
        ),
        (
            "catalog size per 1,000 runs, without",
            f"{without_index / 1e6 / (args.runs / 1000):.2f} MB",
            "",
        ),
    ]
    rows += [
        (
            f"search {label}, {hits} hits (median of {args.repeat})",
            f"{median * 1000:.1f} ms",
            _verdict(median * 1000 <= TARGET_SEARCH_MS, f"<= {TARGET_SEARCH_MS:g} ms"),
        )
        for label, median, hits in searches
    ]
    overall = statistics.median(median for _, median, _ in searches)
    rows.append(
        (
            f"search over {args.runs} runs, median of the queries",
            f"{overall * 1000:.1f} ms",
            _verdict(overall * 1000 <= TARGET_SEARCH_MS, f"<= {TARGET_SEARCH_MS:g} ms"),
        )
    )
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    print()
    print(f"{'measure':<{width}}  {'result':<{value_width}}  target")
    print(f"{'-' * width}  {'-' * value_width}  {'-' * 16}")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:<{value_width}}  {target}")
    return 0


def _verdict(ok: bool, target: str) -> str:
    return f"{target}  {'ok' if ok else 'MISSED'}"


if __name__ == "__main__":
    raise SystemExit(main())
