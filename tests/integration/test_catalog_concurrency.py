"""The catalog across processes: concurrent writers and readers, and runs killed mid-way.

Every process here is a real Python process writing into one shared ``runs/`` through the real
executor; the engine is a fake (no kernel), so the test is about the catalog, not kernels. No
assertion depends on timing: processes are waited for, never raced against a clock.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._records.results import RESULT_KEYS
from notebook_executor._records.store import RunStore, read_run_file

NOTEBOOK = """# %% tags=["parameters"]
x: int = 0
worker: str = "none"

# %%
glue("double", x * 2)
glue("worker", worker)
"""

# A worker: runs COUNT notebooks into RUNS_DIR, prints the run ids as one JSON list.
WRITER = r"""
import json, random, sys, time
import nbformat
from notebook_executor import NotebookExecutor
from notebook_executor.engine import ScriptedEngine

namespace = {}

def cell(job, index):
    cell = job.nb.cells[index]
    def glue(name, value):
        payload = {"name": name, "data": value, "encoder": "json", "version": 1}
        cell.outputs.append(nbformat.v4.new_output(
            "display_data", data={"application/scrapbook.scrap.json+json": payload}))
    namespace["glue"] = glue
    exec(cell.source, namespace)
    if index == len(job.nb.cells) - 1:
        time.sleep(random.random() * 0.01)
    return ()

FakeEngine = lambda: ScriptedEngine(cell)

runs_dir, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
ids = []
with NotebookExecutor(runs_dir=runs_dir, engine=FakeEngine()) as ex:
    for x in range(count):
        result = ex.execute("doubler.py", parameters={"x": x, "worker": worker})
        assert result["status"] == "success", result
        ids.append(result["run_id"])
print(json.dumps(ids))
"""

# A reader: queries (and sometimes reindexes) until STOP exists; checks every snapshot.
READER = r"""
import json, math, sys, time
from pathlib import Path
from notebook_executor._catalog.store import Catalog

runs_dir, stop = sys.argv[1], Path(sys.argv[2])
problems, snapshots, largest = [], 0, 0
catalog = Catalog(runs_dir)
while not stop.exists() or snapshots < 3:
    rows = catalog.runs()
    ids = [row["run_id"] for row in rows]
    if len(ids) != len(set(ids)):
        problems.append("duplicate run ids")
    if len(ids) < largest:
        problems.append(f"runs went missing: {len(ids)} < {largest}")
    largest = max(largest, len(ids))
    for row in rows:
        if row["status"] == "success":
            if row["finished_at"] is None or row["scraps"] != {
                "double": row["parameters"]["x"] * 2, "worker": row["parameters"]["worker"]
            }:
                problems.append(f"half-written row {row}")
        elif row["status"] == "running":
            if row["finished_at"] is not None or row["scraps"] != {}:
                problems.append(f"odd running row {row}")
        else:
            problems.append(f"unexpected status {row}")
    frame = catalog.scraps(status="success")
    if not frame.index.is_unique:
        problems.append("duplicate rows in scraps()")
    if len(frame) and not (frame["scraps.double"] == frame["parameters.x"] * 2).all():
        problems.append("scraps() disagrees with parameters")
    if snapshots % 10 == 5:
        catalog.reindex()
    snapshots += 1
    time.sleep(0.01)
catalog.close()
print(json.dumps({"snapshots": snapshots, "largest": largest, "problems": problems[:20]}))
"""

# Begins one run whose engine never returns; the parent SIGKILLs it.
HANGING = r"""
import sys, time
from pathlib import Path
from notebook_executor import NotebookExecutor
from notebook_executor.engine import ScriptedEngine

def hang(job, index):
    Path(sys.argv[2]).write_text("started")
    time.sleep(3600)
    return ()

HangingEngine = lambda: ScriptedEngine(hang)

with NotebookExecutor(runs_dir=sys.argv[1], engine=HangingEngine()) as ex:
    ex.execute("doubler.py", parameters={"x": 21, "worker": "doomed"})
"""

WRITERS = 4
RUNS_PER_WRITER = 40
PROCESS_LIMIT = 600  # generous: the machine is shared; nothing here races a clock


def _script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _stored(runs_dir: Path, run_id: str) -> dict[str, Any]:
    record = read_run_file(RunStore(runs_dir).path(run_id)).record
    return {key: record.get(key) for key in RESULT_KEYS}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "doubler.py").write_text(NOTEBOOK)
    return tmp_path


def test_concurrent_writers_lose_and_duplicate_nothing(workdir: Path) -> None:
    runs_dir = workdir / "runs"
    stop = workdir / "stop"
    writer = _script(workdir, "writer.py", WRITER)
    reader = subprocess.Popen(
        [sys.executable, _script(workdir, "reader.py", READER), str(runs_dir), str(stop)],
        cwd=workdir,
        stdout=subprocess.PIPE,
        text=True,
    )
    writers = [
        subprocess.Popen(
            [sys.executable, writer, str(runs_dir), f"w{n}", str(RUNS_PER_WRITER)],
            cwd=workdir,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(WRITERS)
    ]
    try:
        outputs = [proc.communicate(timeout=PROCESS_LIMIT)[0] for proc in writers]
    finally:
        stop.touch()
        report_text = reader.communicate(timeout=PROCESS_LIMIT)[0]
        for proc in [*writers, reader]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in writers] == [0] * WRITERS
    assert reader.returncode == 0
    report = json.loads(report_text)
    assert report["problems"] == []
    assert report["snapshots"] >= 3

    written = [run_id for out in outputs for run_id in json.loads(out)]
    assert len(written) == WRITERS * RUNS_PER_WRITER == len(set(written))
    with NotebookExecutor(runs_dir=runs_dir) as catalog:
        rows = catalog.runs()
        assert sorted(row["run_id"] for row in rows) == sorted(written)
        assert {row["status"] for row in rows} == {"success"}
        assert all(row == _stored(runs_dir, row["run_id"]) for row in rows)
        frame = catalog.scraps()
        assert len(frame) == len(written)
        for n in range(WRITERS):
            mine = frame[frame["parameters.worker"] == f"w{n}"]
            assert sorted(mine["scraps.double"]) == [2 * x for x in range(RUNS_PER_WRITER)]

        assert catalog.reindex() == len(written)
        assert catalog.runs() == rows
    assert not list((runs_dir / ".locks").glob("*.lock"))


def test_a_killed_run_shows_up_as_interrupted(workdir: Path) -> None:
    runs_dir = workdir / "runs"
    started = workdir / "started"
    proc = subprocess.Popen(
        [sys.executable, _script(workdir, "hang.py", HANGING), str(runs_dir), str(started)],
        cwd=workdir,
    )
    try:
        while not started.exists():
            assert proc.poll() is None, "the run ended before it was killed"
            time.sleep(0.05)
        with NotebookExecutor(runs_dir=runs_dir) as catalog:
            [row] = catalog.runs()
            assert row["status"] == "running"
            assert row["parameters"] == {"x": 21, "worker": "doomed"}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=PROCESS_LIMIT)
    assert proc.returncode == -signal.SIGKILL

    run_id = row["run_id"]
    # The files are untouched (they still say running); the catalog knows better.
    assert _stored(runs_dir, run_id)["status"] == "running"
    with NotebookExecutor(runs_dir=runs_dir) as catalog:
        [row] = catalog.runs()
        assert (row["status"], row["error_kind"]) == ("error", "interrupted")
        assert catalog.runs(status="running") == []
        assert catalog.get_run(run_id)["error_kind"] == "interrupted"
        assert catalog.scraps().loc[run_id, "status"] == "error"
    # A rebuild from the files reaches the same verdict.
    for path in runs_dir.glob("catalog.sqlite*"):
        path.unlink()
    with NotebookExecutor(runs_dir=runs_dir) as catalog:
        assert catalog.reindex() == 1
        assert catalog.get_run(run_id)["error_kind"] == "interrupted"
