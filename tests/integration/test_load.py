"""Load: several processes run real notebooks into one ``runs/`` at once while it is read.

``WORKERS`` processes, each with its own executor and kernels, run ``RUNS_EACH`` notebooks
apiece (one of them fails on purpose) into one shared runs directory, while a reader thread of
this process keeps querying ``runs()``, ``scraps()`` and ``get_run()`` and now and then rebuilds
the catalog. Afterwards every run is in the catalog exactly once, every run record is whole and
final, nothing temporary is left, and a ``reindex`` gives back the very same rows.
(``test_catalog_concurrency.py`` does the same for the catalog alone, with a fake engine; here
the kernels are real, so writes land at the pace and in the order real runs produce them.)
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

from notebook_executor import NotebookExecutor
from notebook_executor._records.store import RunStore
from support import report

# Several processes (or a browser, or a cluster) and their kernels on a loaded machine.
pytestmark = [pytest.mark.kernel, pytest.mark.timeout(900)]

WORKERS = 4
RUNS_EACH = 6
#: The run of each worker that fails on purpose, and the cell (source index) it fails in.
FAILING_RUN, FAILING_CELL = 3, 2
PROCESS_LIMIT = 600  # generous: the machine is shared; nothing here races a clock

NOTEBOOK = f"""# %% tags=["parameters"]
worker: str = "none"
n: int = 0

# %%
import os
import time

import scrapbook as sb

sb.glue("worker", worker)
sb.glue("square", n * n)
sb.glue("pid", os.getpid())
print(f"{{worker}} run {{n}}\\n" * 200)
time.sleep(0.1)

# %%
if n == {FAILING_RUN}:
    raise ValueError(f"run {{n}} of {{worker}} fails on purpose")
sb.glue("done", True)
"""

WORKER = r"""
import json, sys
from notebook_executor import NotebookExecutor

runs_dir, notebook, worker, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
done = []
with NotebookExecutor(runs_dir=runs_dir) as ex:
    for n in range(count):
        result = ex.execute(notebook, parameters={"worker": worker, "n": n}, request=f"load {n}")
        done.append({"run_id": result["run_id"], "status": result["status"]})
print(json.dumps(done))
"""


class Reader(threading.Thread):
    """Queries the shared catalog until told to stop; notes anything out of place."""

    def __init__(self, runs_dir: Path) -> None:
        super().__init__(name="catalog-reader")
        self.runs_dir = runs_dir
        self.stop = threading.Event()
        self.problems: list[str] = []
        self.snapshots = 0
        self.reindexes = 0
        self.largest = 0

    def run(self) -> None:
        with NotebookExecutor(runs_dir=self.runs_dir) as reader:
            while not self.stop.is_set() or self.snapshots < 3:
                try:
                    self._snapshot(reader)
                except Exception as exc:  # every failure is a finding, reported at the end
                    self.problems.append(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
                self.snapshots += 1
                time.sleep(0.05)

    def _snapshot(self, reader: NotebookExecutor) -> None:
        rows = reader.runs()
        ids = [row["run_id"] for row in rows]
        if len(ids) != len(set(ids)):
            self.problems.append(f"duplicate run ids in {ids}")
        if len(ids) < self.largest:
            self.problems.append(f"runs went missing: {len(ids)} < {self.largest}")
        self.largest = max(self.largest, len(ids))
        for row in rows:
            self._check_row(row)
        frame = reader.scraps()
        if not frame.index.is_unique:
            self.problems.append("duplicate rows in scraps()")
        if len(frame) < len(ids):
            self.problems.append(f"scraps() has {len(frame)} rows, runs() had {len(ids)}")
        if ids:
            picked = random.choice(ids)
            again = reader.get_run(picked)
            if again["run_id"] != picked:
                self.problems.append(f"get_run({picked}) gave {again['run_id']}")
        if self.snapshots % 15 == 7:
            reader.reindex()
            self.reindexes += 1

    def _check_row(self, row: Mapping[str, Any]) -> None:
        status, n = row["status"], row["parameters"].get("n")
        if status == "running":
            if row["finished_at"] is not None:
                self.problems.append(f"running row with an end: {row['run_id']}")
        elif status == "success":
            if row["scraps"].get("square") != n * n or row["scraps"].get("done") is not True:
                self.problems.append(f"half-written success: {row}")
        elif status == "error":
            failed = row["failed_cell"] or {}
            if (row["error_kind"], failed.get("index"), n) != (
                "cell_error",
                FAILING_CELL,
                FAILING_RUN,
            ):
                self.problems.append(f"unexpected error row: {row}")
        else:
            self.problems.append(f"unknown status: {row}")


def test_processes_share_one_runs_dir_and_lose_nothing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    (tmp_path / "load.py").write_text(NOTEBOOK)
    (tmp_path / "worker.py").write_text(WORKER)
    runs_dir = tmp_path / "runs"
    reader = Reader(runs_dir)
    reader.start()
    workers = [
        subprocess.Popen(
            [sys.executable, "worker.py", str(runs_dir), "load.py", f"w{k}", str(RUNS_EACH)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(WORKERS)
    ]
    try:
        outputs = [worker.communicate(timeout=PROCESS_LIMIT) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        reader.stop.set()
        reader.join(timeout=PROCESS_LIMIT)
    assert [w.returncode for w in workers] == [0] * WORKERS, [err for _, err in outputs]
    assert reader.problems == []
    assert reader.snapshots >= 3

    written = [run for out, _ in outputs for run in json.loads(out)]
    ids = [run["run_id"] for run in written]
    assert len(ids) == len(set(ids)) == WORKERS * RUNS_EACH
    assert Counter(run["status"] for run in written) == {
        "success": WORKERS * (RUNS_EACH - 1),
        "error": WORKERS,
    }

    with NotebookExecutor(runs_dir=runs_dir) as ex:
        rows = ex.runs()
        frame = ex.scraps()
        # Every run exactly once, with the status its process saw.
        assert sorted(row["run_id"] for row in rows) == sorted(ids)
        assert {row["run_id"]: row["status"] for row in rows} == {
            run["run_id"]: run["status"] for run in written
        }
        assert sorted(frame.index) == sorted(ids)
        done = frame[frame["status"] == "success"]
        assert (done["scraps.square"] == done["parameters.n"] ** 2).all()
        assert len({row["scraps"]["pid"] for row in rows}) == len(ids)  # a kernel per run

        # Every run record is whole, valid and final, and says what the catalog says.
        for row in rows:
            path = RunStore(runs_dir).path(row["run_id"])
            nb = nbformat.read(path, as_version=4)
            nbformat.validate(nb)
            record = nb.metadata["notebook_executor"]
            assert record["status"] == row["status"] != "running"
            assert record["finished_at"] is not None
            assert {k: record[k] for k in row if k not in ("notebook", "output_path")} == {
                k: v for k, v in row.items() if k not in ("notebook", "output_path")
            }
            front = path.with_suffix(".md").read_text(encoding="utf-8").split("---\n")[1]
            assert yaml.safe_load(front)["status"] == row["status"]
        assert not [p.name for p in runs_dir.rglob("*") if p.name.endswith(".tmp")]
        assert not list((runs_dir / ".locks").glob("*.lock"))

        # A rebuild from the files gives back the very same catalog.
        assert ex.reindex() == len(ids)
        assert ex.runs() == rows
    report(
        request.config,
        f"\nload: {len(ids)} runs written by {WORKERS} processes, {len(rows)} found once each; "
        f"reader: {reader.snapshots} snapshots, {reader.reindexes} reindexes, "
        f"{len(reader.problems)} problems",
    )
