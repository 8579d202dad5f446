"""The run catalog: indexing, every query and filter, liveness, rebuild and corruption.

No kernel: runs go through the real executor with :class:`FakeEngine`, which runs code cells
with ``exec`` and turns ``glue(...)`` calls into scrapbook-format outputs; other records are
written straight into the catalog or the run records.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest

from notebook_executor import (
    CatalogError,
    NotebookExecutor,
    NotebookExecutorError,
    RunJob,
    RunNotFoundError,
)
from notebook_executor._catalog import store as _catalog
from notebook_executor._catalog.store import Catalog
from notebook_executor._faces.cli import main
from notebook_executor._records import results as _records
from notebook_executor._records.store import RunStore, read_run_file
from notebook_executor._times import iso, now_utc
from notebook_executor._types import RunResult
from notebook_executor.engine import CellFailure, CellReply, ScriptedEngine, ScriptedKernel
from support import failed_cell

ALPHA = """# %% tags=["parameters"]
x: int = 1
label: str = "a"

# %%
if x < 0:
    raise ValueError("x must not be negative")
glue("double", x * 2)
glue("label", label)
"""

BETA = """# %% tags=["parameters"]
y: float = 0.5

# %%
glue("half", y / 2)
glue_frame("table", {"k": [1, 2, 3], "v": [y, y * 2, y * 3]})
"""

GAMMA = """# %%
glue("z", [1, 2])
"""


def _display(cell: Any, mime: str, payload: dict[str, Any]) -> None:
    cell.outputs.append(
        nbformat.v4.new_output(
            "display_data",
            data={mime: payload},
            metadata={"scrapbook": {"name": payload["name"], "data": True, "display": False}},
        )
    )


class FakeKernel(ScriptedKernel):
    """Runs code cells with ``exec`` in one namespace, writing scraps as scrapbook does;
    ``during(job)`` is called as the kernel closes, once its cells ran."""

    def __init__(self, job: RunJob, during: Callable[[RunJob], None] | None) -> None:
        super().__init__(job, self._cell)
        self.namespace: dict[str, Any] = {}
        self.during = during

    def _cell(self, job: RunJob, index: int) -> CellReply:
        cell = job.nb.cells[index]

        def glue(name: str, value: Any) -> None:
            payload = {"name": name, "data": value, "encoder": "json", "version": 1}
            _display(cell, "application/scrapbook.scrap.json+json", payload)

        def glue_frame(name: str, columns: dict[str, list[Any]]) -> None:
            data = base64.b64encode(pd.DataFrame(columns).to_parquet()).decode()
            payload = {"name": name, "data": data, "encoder": "pandas", "version": 1}
            _display(cell, "application/scrapbook.scrap.pandas+json", payload)

        self.namespace.update(glue=glue, glue_frame=glue_frame)
        try:
            exec(cell.source, self.namespace)
        except Exception as exc:
            return CellFailure(index, "cell_error", type(exc).__name__, str(exc), [])
        return ()

    def close(self, *, clean: bool) -> None:
        super().close(clean=clean)
        if self.during is not None:
            self.during(self.job)


class FakeEngine(ScriptedEngine):
    """Kernels that run code cells with ``exec`` (:class:`FakeKernel`)."""

    def __init__(self, during: Callable[[RunJob], None] | None = None) -> None:
        super().__init__()
        self.during = during

    def open(self, job: RunJob) -> FakeKernel:
        self.jobs.append(job)
        return FakeKernel(job, self.during)


@pytest.fixture
def engine() -> FakeEngine:
    """This module's engine, for the tier's ``ex``."""
    return FakeEngine()


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding three notebooks; run paths are recorded relative to it
    (the tier's ``ex`` writes to ``runs`` there)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "notebooks" / "alpha.py").write_text(ALPHA)
    (tmp_path / "other" / "beta.py").write_text(BETA)
    (tmp_path / "other" / "alpha.py").write_text(GAMMA)
    return tmp_path


@pytest.fixture
def history(ex: NotebookExecutor) -> list[RunResult]:
    """Seven runs of three notebooks, oldest first; one of them failed."""
    results = [ex.execute("notebooks/alpha.py", parameters={"x": x}) for x in (1, 2, 3)]
    results.append(ex.execute("notebooks/alpha.py", parameters={"x": -1}))
    results += [ex.execute("other/beta.py", parameters={"y": y}) for y in (1.0, 3.0)]
    results.append(ex.execute("other/alpha.py"))
    return results


def _ids(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return [row["run_id"] for row in rows]


def _stored(run_id: str) -> dict[str, Any]:
    record = read_run_file(RunStore(Path("runs")).path(run_id)).record
    return {key: record.get(key) for key in _records.RESULT_KEYS}


def _record(
    run_id: str, started_at: str, *, status: str = "success", **extra: Any
) -> dict[str, Any]:
    """A run record as the executor stores it (enough of it for the catalog)."""
    record: dict[str, Any] = {
        "run_id": run_id,
        "status": status,
        "error_kind": None,
        "notebook": "notebooks/alpha.py",
        "output_path": f"runs/{run_id}.ipynb",
        "parameters": {"x": 1},
        "request": None,
        "started_at": started_at,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "source": {"path": "notebooks/alpha.py", "sha256": "0" * 64, "format": "percent"},
    }
    if status != "running":
        record.update(
            finished_at=started_at,
            duration_seconds=1.5,
            cells_total=2,
            cells_executed=2,
            failed_cell=None,
            scraps={"double": 2},
        )
    record.update(extra)
    return record


def _write_run_file(runs_dir: Path, record: dict[str, Any]) -> Path:
    notebook = nbformat.v4.new_notebook()
    return RunStore(runs_dir).write(record["run_id"], notebook, record, final=False)


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


# -- recording runs ------------------------------------------------------------------------------


def test_a_run_is_indexed_with_its_stored_record(ex: NotebookExecutor) -> None:
    result = ex.execute("notebooks/alpha.py", parameters={"x": 4}, request="why not")
    [row] = ex.runs()
    assert row == _stored(result["run_id"])
    assert row["status"] == "success"
    assert row["parameters"] == {"x": 4, "label": "a"}
    assert row["scraps"] == {"double": 8, "label": "a"}
    assert row["request"] == "why not"
    assert json.loads(json.dumps(row)) == row


def test_a_run_is_running_while_it_runs(workdir: Path) -> None:
    seen: list[list[RunResult]] = []

    def probe(job: RunJob) -> None:
        # Another connection, as another process would open it: the run's lock is held.
        with Catalog(workdir / "runs") as other:
            seen.append(other.runs(status="running"))

    with NotebookExecutor(runs_dir="runs", engine=FakeEngine(during=probe)) as ex:
        result = ex.execute("notebooks/alpha.py")
        assert _ids(ex.runs()) == [result["run_id"]]
        assert ex.runs(status="running") == []
    [[running]] = seen
    assert running["run_id"] == result["run_id"]
    assert running["status"] == "running"
    assert running["error_kind"] is None
    assert running["finished_at"] is None
    assert not list((workdir / "runs" / ".locks").glob("*.lock"))


def test_begin_and_finish_are_idempotent_and_never_go_back_to_running(tmp_path: Path) -> None:
    run_id = "20260105T101500Z-alpha-0001abcd"
    running = _record(run_id, "2026-01-05T10:15:00.000Z", status="running")
    done = _record(run_id, "2026-01-05T10:15:00.000Z")
    with Catalog(tmp_path) as catalog:
        catalog.begin(running)
        catalog.begin(running)
        catalog.finish(done)
        catalog.finish(done)
        catalog.begin(running)  # a late "running" write must not undo the finish
        [row] = catalog.runs()
    assert row["status"] == "success"
    assert row["scraps"] == {"double": 2}


def test_secret_values_never_reach_the_catalog(ex: NotebookExecutor) -> None:
    ex.execute("notebooks/alpha.py", parameters={"label": "hunter2-xyz"}, secrets={"PW": "hunter2"})
    assert ex.runs()[0]["parameters"]["label"] == "[secret PW]-xyz"
    ex.close()
    for path in Path("runs").glob("catalog.sqlite*"):
        assert b"hunter2" not in path.read_bytes()


def test_the_catalog_and_its_wal_files_are_private_as_the_run_records(
    ex: NotebookExecutor,
) -> None:
    """The catalog holds what the records hold (requests, outputs): mode 0600 like them, its
    ``-wal`` and ``-shm`` files too, under the usual umask (other new files are 0644)."""
    umask = os.umask(0o022)
    try:
        ex.execute("notebooks/alpha.py", request="a request nobody else may read")
        assert ex.runs()
    finally:
        os.umask(umask)
    record = next(Path("runs").rglob("*.ipynb"))
    assert record.stat().st_mode & 0o777 == 0o600
    modes = {path.name: path.stat().st_mode & 0o777 for path in Path("runs").glob("catalog.*")}
    assert set(modes) >= {"catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"}, modes
    assert set(modes.values()) == {0o600}, modes


def test_a_catalog_the_library_did_not_create_keeps_its_mode(tmp_path: Path) -> None:
    """A catalog file made by someone else is opened as it is: never chmod-ed."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "catalog.sqlite").touch()
    (runs / "catalog.sqlite").chmod(0o640)
    with NotebookExecutor(runs_dir=runs) as ex:
        assert ex.runs() == []
        _write_run_file(runs, _record("20250101T000000Z-aaaaaaaa", "2025-01-01T00:00:00Z"))
        assert ex.reindex() == 1
    assert (runs / "catalog.sqlite").stat().st_mode & 0o777 == 0o640


def test_catalog_is_wal_and_versioned(history: list[dict[str, Any]]) -> None:
    conn = sqlite3.connect("runs/catalog.sqlite")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == _catalog.SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == len(history)
    finally:
        conn.close()


# -- runs() and its filters ----------------------------------------------------------------------


def test_runs_are_newest_first(ex: NotebookExecutor, history: list[dict[str, Any]]) -> None:
    assert _ids(ex.runs()) == _ids(history)[::-1]
    assert [row["started_at"] for row in ex.runs()] == sorted(
        (row["started_at"] for row in history), reverse=True
    )


def test_limit_keeps_the_newest(ex: NotebookExecutor, history: list[dict[str, Any]]) -> None:
    assert _ids(ex.runs(limit=2)) == _ids(history)[::-1][:2]
    assert len(ex.runs(limit=100)) == len(history)


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, "3"])
def test_bad_limit_is_refused(ex: NotebookExecutor, limit: Any) -> None:
    with pytest.raises(NotebookExecutorError, match="limit"):
        ex.runs(limit=limit)


def test_status_filter(ex: NotebookExecutor, history: list[dict[str, Any]]) -> None:
    failed = [row for row in history if row["status"] == "error"]
    assert len(failed) == 1
    assert _ids(ex.runs(status="error")) == _ids(failed)
    assert ex.runs(status="error")[0]["error_kind"] == "cell_error"
    assert failed_cell(ex.runs(status="error")[0])["ename"] == "ValueError"
    assert len(ex.runs(status="success")) == len(history) - 1
    assert ex.runs(status="running") == []
    with pytest.raises(NotebookExecutorError, match="status must be one of"):
        ex.runs(status="failed")


def test_notebook_filter_by_path_name_and_absolute_path(
    ex: NotebookExecutor, history: list[dict[str, Any]], workdir: Path
) -> None:
    alpha = [row["run_id"] for row in history if row["notebook"] == "notebooks/alpha.py"]
    other_alpha = [row["run_id"] for row in history if row["notebook"] == "other/alpha.py"]
    assert len(alpha) == 4
    assert len(other_alpha) == 1
    assert set(_ids(ex.runs(notebook="notebooks/alpha.py"))) == set(alpha)
    assert set(_ids(ex.runs(notebook="./notebooks/alpha.py"))) == set(alpha)
    assert set(_ids(ex.runs(notebook=workdir / "notebooks" / "alpha.py"))) == set(alpha)
    assert set(_ids(ex.runs(notebook="alpha.py"))) == set(alpha + other_alpha)
    assert set(_ids(ex.runs(notebook="other/alpha.py"))) == set(other_alpha)
    assert len(ex.runs(notebook=Path("other/beta.py"))) == 2
    assert ex.runs(notebook="elsewhere/alpha.py") == []
    assert ex.runs(notebook="lpha.py") == []


def test_filters_combine(ex: NotebookExecutor, history: list[dict[str, Any]]) -> None:
    rows = ex.runs(notebook="alpha.py", status="success", limit=2)
    expected = [
        row["run_id"]
        for row in history[::-1]
        if row["notebook"].endswith("alpha.py") and row["status"] == "success"
    ]
    assert len(expected) == 4
    assert _ids(rows) == expected[:2]


def test_since_filter(tmp_path: Path) -> None:
    with Catalog(tmp_path) as catalog:
        for day in (1, 2, 3):
            run_id = f"2026010{day}T120000Z-alpha-0000000{day}"
            catalog.finish(_record(run_id, f"2026-01-0{day}T12:00:00.000Z"))
        newer = ["20260103T120000Z-alpha-00000003", "20260102T120000Z-alpha-00000002"]
        assert _ids(catalog.runs(since="2026-01-02")) == newer
        assert _ids(catalog.runs(since="2026-01-02T12:00:00Z")) == newer
        assert _ids(catalog.runs(since="2026-01-02T12:00:00.001Z")) == newer[:1]
        assert _ids(catalog.runs(since="2026-01-02T13:00:00+02:00")) == newer
        assert _ids(catalog.runs(since=datetime(2026, 1, 2, 12, 0, 1))) == newer[:1]
        aware = datetime(2026, 1, 2, 7, 0, tzinfo=timezone(timedelta(hours=-5)))
        assert _ids(catalog.runs(since=aware)) == newer
        assert _ids(catalog.runs(since=date(2026, 1, 3))) == newer[:1]
        assert catalog.runs(since="2027-01-01") == []
        assert len(catalog.scraps(since="2026-01-02")) == 2
        with pytest.raises(NotebookExecutorError, match="ISO date"):
            catalog.runs(since="last tuesday")
        with pytest.raises(NotebookExecutorError, match="since"):
            catalog.runs(since=12)  # type: ignore[arg-type]


def test_started_at_is_normalised_for_sorting(tmp_path: Path) -> None:
    with Catalog(tmp_path) as catalog:
        catalog.finish(_record("20260101T120000Z-a-00000001", "2026-01-01T13:00:00+01:00"))
        catalog.finish(_record("20260101T120001Z-a-00000002", "2026-01-01T12:00:01.5Z"))
        rows = catalog.runs()
    assert [row["started_at"] for row in rows] == [
        "2026-01-01T12:00:01.500Z",
        "2026-01-01T12:00:00.000Z",
    ]


# -- get_run() and collect_outputs() -------------------------------------------------------------


def test_get_run(ex: NotebookExecutor, history: list[dict[str, Any]]) -> None:
    with Catalog("runs") as catalog:
        for row in history:
            assert catalog.get_run(row["run_id"]) == _stored(row["run_id"])
        with pytest.raises(RunNotFoundError):
            catalog.get_run("20260101T000000Z-nope-00000000")
        with pytest.raises(RunNotFoundError):
            catalog.get_run("not-a-run-id")


def test_get_run_reads_and_indexes_a_file_the_catalog_missed(
    history: list[dict[str, Any]],
) -> None:
    run_id = history[0]["run_id"]
    conn = sqlite3.connect("runs/catalog.sqlite")
    with conn:
        conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    conn.close()
    with Catalog("runs") as catalog:
        assert catalog.get_run(run_id) == _stored(run_id)
        assert run_id in _ids(catalog.runs())


def test_the_first_query_brings_in_a_record_the_catalog_missed(
    history: list[dict[str, Any]],
) -> None:
    # A host killed between writing a run's first record and its row leaves a record with no
    # row: runs, search and digest of any process opened later must see it without reindex.
    run_id = history[0]["run_id"]
    with closing(sqlite3.connect("runs/catalog.sqlite")) as conn, conn:
        conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    with Catalog("runs") as catalog:
        assert run_id in _ids(catalog.runs())
        assert catalog.get_run(run_id) == _stored(run_id)


def test_collect_outputs_decodes_every_scrap(
    ex: NotebookExecutor, history: list[dict[str, Any]]
) -> None:
    beta = next(row for row in history if row["notebook"] == "other/beta.py")
    outputs = ex.collect_outputs(beta["run_id"])
    with pytest.raises(RunNotFoundError):
        ex.collect_outputs("20260101T000000Z-nope-00000000")
    assert outputs["half"] == 0.5
    expected = pd.DataFrame({"k": [1, 2, 3], "v": [1.0, 2.0, 3.0]})
    pd.testing.assert_frame_equal(outputs["table"], expected)
    assert beta["scraps"]["table"]["encoder"] == "pandas"


# -- scraps() ------------------------------------------------------------------------------------


def test_scraps_frame(ex: NotebookExecutor, history: list[dict[str, Any]]) -> None:
    frame = ex.scraps()
    assert frame.index.name == "run_id"
    assert list(frame.index) == _ids(history)[::-1]
    assert list(frame.columns[:4]) == ["notebook", "status", "started_at", "duration_seconds"]
    assert set(frame.columns[4:]) == {
        "parameters.x",
        "parameters.label",
        "parameters.y",
        "scraps.double",
        "scraps.label",
        "scraps.half",
        "scraps.z",
    }
    names = list(frame.columns[4:])
    assert max(names.index(c) for c in names if c.startswith("parameters.")) < min(
        names.index(c) for c in names if c.startswith("scraps.")
    )
    for row in history:
        line = frame.loc[row["run_id"]]
        assert line["notebook"] == row["notebook"]
        assert line["status"] == row["status"]
        assert line["started_at"] == row["started_at"]
        assert line["duration_seconds"] == pytest.approx(row["duration_seconds"])
        for name, value in row["parameters"].items():
            assert line[f"parameters.{name}"] == value
        for name, value in row["scraps"].items():
            if name != "table":
                assert line[f"scraps.{name}"] == value
    # The failed run glued nothing; a notebook without y has no y.
    failed = next(row["run_id"] for row in history if row["status"] == "error")
    assert pd.isna(frame.loc[failed, "scraps.double"])
    assert pd.isna(frame.loc[history[0]["run_id"], "parameters.y"])
    assert frame.loc[history[-1]["run_id"], "scraps.z"] == [1, 2]


def test_scraps_filters(ex: NotebookExecutor, history: list[dict[str, Any]]) -> None:
    beta = ex.scraps(notebook="beta.py")
    assert sorted(beta["parameters.y"]) == [1.0, 3.0]
    assert list(beta.columns) == [
        "notebook",
        "status",
        "started_at",
        "duration_seconds",
        "parameters.y",
        "scraps.half",
    ]
    assert list(ex.scraps(status="error").index) == _ids(ex.runs(status="error"))
    assert ex.scraps(status="running").empty


def test_scraps_of_an_empty_catalog(tmp_path: Path) -> None:
    with Catalog(tmp_path) as catalog:
        frame = catalog.scraps()
    assert frame.empty
    assert frame.index.name == "run_id"
    assert list(frame.columns) == ["notebook", "status", "started_at", "duration_seconds"]


def test_no_runs_dir_means_no_runs_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    with Catalog(missing) as catalog:
        assert catalog.runs() == []
        assert catalog.scraps().empty
        assert catalog.reindex() == 0
        with pytest.raises(RunNotFoundError):
            catalog.get_run("20260101T000000Z-nope-00000000")
    assert not missing.exists()


# -- reindex, rebuild, corruption ----------------------------------------------------------------


def test_reindex_agrees_with_the_catalog(
    ex: NotebookExecutor, history: list[dict[str, Any]]
) -> None:
    before = ex.runs()
    frame = ex.scraps()
    assert ex.reindex() == len(history)
    assert ex.runs() == before
    pd.testing.assert_frame_equal(ex.scraps(), frame)


def test_reindex_drops_runs_whose_files_are_gone(
    ex: NotebookExecutor, history: list[dict[str, Any]]
) -> None:
    gone = history[2]["run_id"]
    RunStore(Path("runs")).path(gone).unlink()
    assert ex.reindex() == len(history) - 1
    assert gone not in _ids(ex.runs())


def test_reindex_skips_an_unreadable_file_with_a_warning(
    ex: NotebookExecutor, history: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    broken = RunStore(Path("runs")).path(history[1]["run_id"])
    broken.write_text('{"cells": [')
    stranger = broken.with_name("20260101T000000Z-stranger-00000000.ipynb")
    stranger.write_text(json.dumps(nbformat.v4.new_notebook()))
    with caplog.at_level(logging.WARNING, logger="notebook_executor._catalog"):
        assert ex.reindex() == len(history) - 1
    assert broken.name in caplog.text
    assert stranger.name in caplog.text
    # The unreadable run keeps its row: its file still exists, it may be mended.
    assert len(ex.runs()) == len(history)


def test_a_missing_catalog_is_rebuilt_on_open(history: list[dict[str, Any]]) -> None:
    for path in Path("runs").glob("catalog.sqlite*"):
        path.unlink()
    with Catalog("runs") as catalog:
        rows = catalog.runs()
    assert _ids(rows) == _ids(history)[::-1]
    assert rows == [_stored(run_id) for run_id in _ids(rows)]


def test_garbage_catalog_is_moved_aside_and_rebuilt(
    ex: NotebookExecutor, history: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    ex.close()  # checkpoints the WAL: every page now lives in catalog.sqlite alone
    assert not Path("runs/catalog.sqlite-wal").exists()
    Path("runs/catalog.sqlite").write_bytes(b"this is not a database, just some bytes" * 100)
    with caplog.at_level(logging.WARNING), Catalog("runs") as catalog:
        assert _ids(catalog.runs()) == _ids(history)[::-1]
    assert len(list(Path("runs").glob("catalog.sqlite.corrupt-*"))) == 1
    assert "rebuilding" in caplog.text


def test_truncated_catalog_is_recovered(tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    records = [
        _record(f"20260101T1200{i:02d}Z-a-{i:08x}", f"2026-01-01T12:00:{i:02d}.000Z")
        for i in range(60)
    ]
    for record in records:
        record["request"] = "r" * 2000  # several rows per page, many pages
        _write_run_file(runs_dir, record)
    with Catalog(runs_dir) as catalog:
        assert catalog.reindex() == 60
    path = runs_dir / "catalog.sqlite"
    assert not path.with_name("catalog.sqlite-wal").exists()
    size = path.stat().st_size
    assert size > 8 * 4096
    with path.open("r+b") as handle:
        handle.truncate(size // 3)
    with Catalog(runs_dir) as catalog:
        rows = catalog.runs()
        assert len(rows) == 60
        assert len(catalog.scraps()) == 60
    assert list(runs_dir.glob("catalog.sqlite.corrupt-*"))


def test_an_unusable_catalog_raises_catalog_error_naming_reindex(tmp_path: Path) -> None:
    (tmp_path / "catalog.sqlite").mkdir()
    with Catalog(tmp_path) as catalog, pytest.raises(CatalogError, match="reindex"):
        catalog.runs()


def test_a_mangled_row_raises_catalog_error_until_reindexed(
    ex: NotebookExecutor, history: list[dict[str, Any]]
) -> None:
    conn = sqlite3.connect("runs/catalog.sqlite")
    with conn:
        conn.execute("UPDATE runs SET parameters = '{', scraps = 'nope'")
    conn.close()
    with pytest.raises(CatalogError, match="reindex"):
        ex.scraps()
    with pytest.raises(CatalogError, match="reindex"):
        ex.runs()
    assert ex.reindex() == len(history)
    assert len(ex.scraps()) == len(history)
    assert ex.runs() == [_stored(run_id) for run_id in _ids(history)[::-1]]


def test_a_newer_schema_is_not_overwritten(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "catalog.sqlite")
    conn.execute(f"PRAGMA user_version = {_catalog.SCHEMA_VERSION + 1}")
    conn.close()
    with Catalog(tmp_path) as catalog, pytest.raises(CatalogError, match="newer"):
        catalog.runs()


def test_an_older_schema_is_rebuilt(history: list[dict[str, Any]]) -> None:
    conn = sqlite3.connect("runs/catalog.sqlite")
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    with Catalog("runs") as catalog:
        assert len(catalog.runs()) == len(history)


def test_the_executor_survives_an_unusable_catalog(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (workdir / "runs").mkdir()
    (workdir / "runs" / "catalog.sqlite").mkdir()
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        result = ex.execute("notebooks/alpha.py")
    assert result["status"] == "success"
    assert "not indexed" in caplog.text


# -- interrupted runs ----------------------------------------------------------------------------


def _running_file(runs_dir: Path, run_id: str, **extra: Any) -> None:
    _write_run_file(runs_dir, _record(run_id, iso(now_utc()), status="running"))
    if extra:
        record = {
            **read_run_file(RunStore(runs_dir).path(run_id)).record,
            **extra,
        }
        _write_run_file(runs_dir, record)


def test_a_running_file_of_a_dead_process_is_interrupted(tmp_path: Path) -> None:
    run_id = "20260101T120000Z-a-00000001"
    _running_file(tmp_path, run_id, pid=_dead_pid())
    with Catalog(tmp_path) as catalog:
        [row] = catalog.runs()
        assert (row["status"], row["error_kind"]) == ("error", "interrupted")
        assert catalog.reindex() == 1
        assert catalog.runs()[0]["error_kind"] == "interrupted"
        assert catalog.get_run(run_id)["error_kind"] == "interrupted"


def test_a_reused_pid_does_not_keep_a_run_alive(tmp_path: Path) -> None:
    # Our own pid is alive, but this process started long after the run did.
    _running_file(tmp_path, "20000101T120000Z-a-00000001", started_at="2000-01-01T12:00:00Z")
    with Catalog(tmp_path) as catalog:
        assert catalog.runs()[0]["error_kind"] == "interrupted"


def test_a_live_process_keeps_its_run_running(tmp_path: Path) -> None:
    _running_file(tmp_path, "20260101T120000Z-a-00000001")
    with Catalog(tmp_path) as catalog:
        assert catalog.runs()[0]["status"] == "running"


def test_runs_of_another_host_are_left_alone(tmp_path: Path) -> None:
    _running_file(tmp_path, "20260101T120000Z-a-00000001", pid=_dead_pid(), host="elsewhere")
    with Catalog(tmp_path) as catalog:
        assert catalog.runs()[0]["status"] == "running"


def test_a_free_run_lock_means_the_run_is_gone(tmp_path: Path) -> None:
    run_id = "20260101T120000Z-a-00000001"
    _running_file(tmp_path, run_id)  # our pid, alive: only the lock can tell
    (tmp_path / ".locks").mkdir()
    (tmp_path / ".locks" / f"{run_id}.lock").touch()
    with Catalog(tmp_path) as catalog:
        assert catalog.runs()[0]["error_kind"] == "interrupted"
    assert not (tmp_path / ".locks" / f"{run_id}.lock").exists()


def test_a_held_run_lock_keeps_the_run_running(tmp_path: Path) -> None:
    run_id = "20260101T120000Z-a-00000001"
    record = _record(run_id, iso(now_utc()), status="running", pid=_dead_pid())
    _write_run_file(tmp_path, record)
    with Catalog(tmp_path) as runner, Catalog(tmp_path) as reader:
        runner.begin(record)
        assert reader.runs()[0]["status"] == "running"
        runner.finish(_record(run_id, record["started_at"]))
        assert reader.runs()[0]["status"] == "success"


def test_a_dead_running_row_is_settled_from_its_file(tmp_path: Path) -> None:
    # The run finished and wrote its file, but its final catalog write never happened.
    run_id = "20260101T120000Z-a-00000001"
    started = iso(now_utc())
    running = _record(run_id, started, status="running", pid=_dead_pid())
    with Catalog(tmp_path) as catalog:
        catalog.begin(running)
    _write_run_file(tmp_path, _record(run_id, started, pid=running["pid"]))
    with Catalog(tmp_path) as catalog:
        [row] = catalog.runs()
    assert row["status"] == "success"
    assert row["error_kind"] is None


def test_a_record_written_before_its_row_is_brought_in_as_interrupted(tmp_path: Path) -> None:
    # The host died between writing the run's first record and its row: the catalog exists
    # (other runs), a reader already open sees the record at its next query, as interrupted.
    with Catalog(tmp_path) as reader:
        reader.begin(_record("20260101T110000Z-a-00000000", iso(now_utc()), status="running"))
        reader.finish(_record("20260101T110000Z-a-00000000", iso(now_utc())))
        assert len(reader.runs()) == 1
        run_id = "20260101T120000Z-a-00000001"
        _running_file(tmp_path, run_id, pid=_dead_pid(), request="where did it go")
        by_id = {row["run_id"]: row for row in reader.runs()}
        assert (by_id[run_id]["status"], by_id[run_id]["error_kind"]) == ("error", "interrupted")
        assert run_id in [hit["run_id"] for hit in reader.search("where did it go")]


def _session_record(run_id: str, pid: int, *, open_: bool = True) -> dict[str, Any]:
    return {
        **_record(run_id, iso(now_utc()), pid=pid),
        "session": {"id": "s1", "open": open_, "dropped": 0, "log": []},
    }


def test_an_open_session_whose_process_died_is_interrupted(tmp_path: Path) -> None:
    # A session's record is final after every step (status success) while it stays open; its
    # process holds the run's lock till it closes. Killed, it leaves the lock file, free.
    run_id = "20260101T120000Z-a-00000001"
    record = _session_record(run_id, _dead_pid())
    with Catalog(tmp_path) as host, Catalog(tmp_path) as reader:
        host.begin({**record, "status": "running"})
        _write_run_file(tmp_path, record)
        host.finish(record)  # a step: the record says success, the session is open
        assert reader.runs()[0]["status"] == "success"  # its host holds the lock
        host._locks.abandon()  # what the kernel does when the host is killed
        [row] = reader.runs()
        assert (row["status"], row["error_kind"]) == ("error", "interrupted")
        assert reader.get_run(run_id)["error_kind"] == "interrupted"
        assert reader.reindex() == 1
        assert reader.runs()[0]["error_kind"] == "interrupted"
    assert not (tmp_path / ".locks" / f"{run_id}.lock").exists()


def test_a_closed_session_stays_as_it_ended(tmp_path: Path) -> None:
    run_id = "20260101T120000Z-a-00000001"
    record = _session_record(run_id, _dead_pid(), open_=False)
    with Catalog(tmp_path) as host:
        host.begin({**record, "status": "running"})
        _write_run_file(tmp_path, record)
        host.finish(record)
    assert not (tmp_path / ".locks" / f"{run_id}.lock").exists()
    with Catalog(tmp_path) as reader:
        assert reader.runs()[0]["status"] == "success"
        assert reader.reindex() == 1
        assert reader.runs()[0]["status"] == "success"


# -- command line --------------------------------------------------------------------------------


def test_cli_catalog_commands(
    history: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--json", "--notebook", "alpha.py", "--limit", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert (
        _ids(rows) == [r["run_id"] for r in history[::-1] if r["notebook"].endswith("alpha.py")][:2]
    )
    assert main(["runs", "--csv", "--status", "error"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("run_id,status,error_kind")
    assert len(lines) == 2
    assert main(["scraps", "--csv", "--notebook", "other/beta.py"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out), index_col="run_id")
    assert sorted(frame["scraps.half"]) == [0.5, 1.5]
    assert main(["scraps", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(history)
    assert main(["show", history[0]["run_id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == _stored(history[0]["run_id"])
    assert main(["reindex"]) == 0
    assert f"indexed {len(history)} runs" in capsys.readouterr().err
    assert main(["runs", "--since", "soon"]) == 2
    assert "ISO date" in capsys.readouterr().err


def test_the_catalog_is_opened_once_when_threads_race_to_open_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_executor._catalog import store

    opened: list[object] = []
    real_init = store.Catalog.__init__

    def counting_init(self: store.Catalog, *args: Any, **kwargs: Any) -> None:
        opened.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(store.Catalog, "__init__", counting_init)
    # Switch threads as often as the interpreter can: the race shows in every round.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(20):
            ex = NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine())
            barrier = threading.Barrier(16)
            seen: list[object] = []

            def open_it(
                ex: NotebookExecutor = ex,
                barrier: threading.Barrier = barrier,
                seen: list[object] = seen,
            ) -> None:
                barrier.wait()
                seen.append(ex._catalog())

            threads = [threading.Thread(target=open_it) for _ in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            ex.close()
            assert len(seen) == 16
            assert len({id(catalog) for catalog in seen}) == 1
    finally:
        sys.setswitchinterval(interval)
    assert len(opened) == 20
