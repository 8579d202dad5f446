"""Catalogs of older schema versions are rebuilt in place; other programs' databases refused."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from notebook_executor import CatalogError, NotebookExecutor
from notebook_executor._catalog.sql import SCHEMA_VERSION
from notebook_executor.engine import ScriptedEngine

_OLD_RUNS = """CREATE TABLE runs (
    run_id TEXT PRIMARY KEY NOT NULL, status TEXT NOT NULL, error_kind TEXT,
    notebook TEXT NOT NULL, output_path TEXT, parameters TEXT NOT NULL, request TEXT,
    started_at TEXT NOT NULL, finished_at TEXT, duration_seconds REAL, cells_total INTEGER,
    cells_executed INTEGER, failed_cell TEXT, scraps TEXT NOT NULL, {extra}
    notebook_name TEXT NOT NULL, scrap_values TEXT NOT NULL, source_path TEXT,
    source_sha256 TEXT, uuid TEXT, kernel TEXT, host TEXT, pid INTEGER)"""

_V3_TEXT = (
    "CREATE TABLE run_text_keys (id INTEGER PRIMARY KEY, run_id TEXT UNIQUE NOT NULL)",
    "CREATE VIRTUAL TABLE run_text USING fts5(request, parameters, narrative, code, output, "
    "error, scraps, tokenize = 'unicode61 remove_diacritics 2')",
)

#: What older builds left: version 1 (no output_cut, no full-text index), an intermediate
#: version 2 (output_cut, but no full-text index), and version 3 (no edits of modified runs).
OLD_CATALOGS: dict[str, tuple[int, tuple[str, ...]]] = {
    "v1": (1, (_OLD_RUNS.format(extra=""),)),
    "v2-without-fts": (2, (_OLD_RUNS.format(extra="output_cut TEXT NOT NULL,"),)),
    "v3-without-edits": (3, (_OLD_RUNS.format(extra="output_cut TEXT NOT NULL,"), *_V3_TEXT)),
}


def _one_run(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "nb.py").write_text("# %%\nx = 1\n", encoding="utf-8")
    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs, engine=ScriptedEngine()) as ex:
        run_id = ex.execute(tmp_path / "nb.py")["run_id"]
    return runs, run_id


def _replace_catalog(catalog: Path, version: int, *statements: str) -> None:
    for path in catalog.parent.glob("catalog.sqlite*"):
        path.unlink()
    with closing(sqlite3.connect(catalog)) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()


@pytest.mark.parametrize("old", sorted(OLD_CATALOGS))
def test_an_older_catalog_is_rebuilt_without_being_moved_aside(tmp_path: Path, old: str) -> None:
    runs, run_id = _one_run(tmp_path)
    version, statements = OLD_CATALOGS[old]
    _replace_catalog(runs / "catalog.sqlite", version, *statements)
    with NotebookExecutor(runs_dir=runs, engine=ScriptedEngine()) as ex:
        assert [row["run_id"] for row in ex.runs()] == [run_id]
        assert [hit["run_id"] for hit in ex.search("x")] == [run_id]
    assert sorted(p.name for p in runs.glob("catalog.sqlite*")) == ["catalog.sqlite"]
    with closing(sqlite3.connect(runs / "catalog.sqlite")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
        columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        assert {"edited_cells", "edit_notes"} <= columns


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_foreign_database_is_refused_and_left_as_it_is(tmp_path: Path, version: int) -> None:
    runs, run_id = _one_run(tmp_path)
    catalog = runs / "catalog.sqlite"
    _replace_catalog(
        catalog,
        version,
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
        "INSERT INTO notes (body) VALUES ('mine')",
    )
    before = catalog.read_bytes()
    with NotebookExecutor(runs_dir=runs, engine=ScriptedEngine()) as ex:
        with pytest.raises(CatalogError, match="not created by notebook-executor") as caught:
            ex.runs()
        assert str(catalog) in str(caught.value)
        assert ex.get_run(run_id)["run_id"] == run_id  # the run records still answer
    assert catalog.read_bytes() == before
    assert sorted(p.name for p in runs.glob("catalog.sqlite*")) == ["catalog.sqlite"]
