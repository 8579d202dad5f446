"""The run catalog: ``runs/catalog.sqlite``, an index of every run, queried in milliseconds.

The run files (``runs/YYYY-MM-DD/<run_id>.ipynb``) are the truth; the catalog is derived data
that :meth:`Catalog.reindex` rebuilds from them. One row per run holds the result dict's keys,
the parameters and scraps as JSON text, and the provenance needed to tell a live run from a dead
one (source path and sha256, uuid, kernel, host, pid); never an environment or secret value.

Several processes may run notebooks into one ``runs/`` at once: the database is in WAL mode,
every write is one short ``BEGIN IMMEDIATE`` transaction behind a busy timeout, and rows are
upserted by ``run_id`` so begin, finish and reindex are idempotent. A ``running`` row never
overwrites a finished one, whatever order the writes land in.

Interrupted runs: :meth:`Catalog.begin` takes an exclusive ``flock`` on
``runs/.locks/<run_id>.lock`` for the length of the run; the kernel drops it when the process
dies, however it dies. A row still ``running`` on this host whose lock is free (or, with no lock
file, whose ``pid`` is gone or now belongs to a process started after the run) is settled from
its run file, or else becomes ``status: "error"``, ``error_kind: "interrupted"``. Runs of other
hosts are left as they are: their liveness cannot be known from here.

A missing catalog is built from the files when first opened. A corrupt one (garbage bytes, a
truncated file) is moved aside as ``catalog.sqlite.corrupt-<timestamp>`` and rebuilt; when that
fails, :class:`~notebook_executor.CatalogError` (whose message names ``reindex``) is raised. No
raw ``sqlite3`` error leaves this module.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, datetime, timezone
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from . import _records
from ._errors import CatalogError, NotebookExecutorError, RunNotFoundError
from ._scraps import JSON_ENCODERS, decode_scrap, find_scraps

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CATALOG_NAME", "SCHEMA_VERSION", "Catalog"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

CATALOG_NAME = "catalog.sqlite"
#: Bumped whenever the table changes; an older catalog is rebuilt from the run files.
SCHEMA_VERSION = 1
STATUSES = ("success", "error", "running")
#: How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_SECONDS = 30.0
#: Slack between a process's start time as the kernel reports it and the run's ``started_at``.
_CLOCK_SLACK_SECONDS = 2.0
_LOCKS_DIR = ".locks"

_JSON_KEYS = frozenset({"parameters", "scraps", "failed_cell"})
_COLUMNS = (
    *_records.RESULT_KEYS,
    "notebook_name",
    "scrap_values",
    "source_path",
    "source_sha256",
    "uuid",
    "kernel",
    "host",
    "pid",
)
_SCHEMA = (
    "DROP TABLE IF EXISTS runs",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY NOT NULL,
        status TEXT NOT NULL,
        error_kind TEXT,
        notebook TEXT NOT NULL,
        output_path TEXT,
        parameters TEXT NOT NULL,
        request TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        duration_seconds REAL,
        cells_total INTEGER,
        cells_executed INTEGER,
        failed_cell TEXT,
        scraps TEXT NOT NULL,
        notebook_name TEXT NOT NULL,
        scrap_values TEXT NOT NULL,
        source_path TEXT,
        source_sha256 TEXT,
        uuid TEXT,
        kernel TEXT,
        host TEXT,
        pid INTEGER
    )""",
    "CREATE INDEX runs_by_start ON runs (started_at, run_id)",
    "CREATE INDEX runs_by_name ON runs (notebook_name, started_at)",
    "CREATE INDEX runs_by_status ON runs (status, started_at)",
)
# A "running" record never replaces a finished row: begin, finish and reindex may land in any
# order when several processes share the catalog.
_UPSERT = (
    f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join(':' + c for c in _COLUMNS)}) "
    f"ON CONFLICT(run_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
    + " WHERE excluded.status != 'running' OR runs.status = 'running'"
)
_SELECT_RESULT = f"SELECT {', '.join(_records.RESULT_KEYS)} FROM runs"
_NEWEST_FIRST = " ORDER BY started_at DESC, run_id DESC"


class Catalog:
    """The SQLite index of the runs under ``runs_dir``.

    Opening is cheap (the connection is made on first use, one per process) and never changes
    the run files. Every method is safe to call from several threads and processes at once.

    Parameters
    ----------
    runs_dir : path
        The runs directory; the catalog is ``runs_dir / "catalog.sqlite"``.
    busy_timeout : float, default 30
        Seconds a write waits for another process's transaction.

    Notes
    -----
    Filters shared by :meth:`runs` and :meth:`scraps`:

    ``notebook``
        Matches a run when its recorded notebook path (as the run stored it, relative to the
        working directory of the time) equals the given one, or one ends with the other at a
        path separator. So ``"hello.py"`` matches every run of a notebook named ``hello.py``,
        ``"notebooks/hello.py"`` matches runs recorded as ``notebooks/hello.py`` or
        ``~/proj/notebooks/hello.py``, and an absolute path matches runs recorded relative to it.
    ``status``
        One of ``"success"``, ``"error"``, ``"running"``.
    ``since``
        Runs started at or after this moment: an ISO date or datetime string, a ``date`` or a
        ``datetime``. Naive values are taken as UTC.
    """

    def __init__(self, runs_dir: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.runs_dir = Path(runs_dir)
        self.path = self.runs_dir / CATALOG_NAME
        self.busy_timeout = busy_timeout
        self._mutex = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._owner_pid = os.getpid()
        self._run_locks: dict[str, int] = {}
        self._host = socket.gethostname()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Catalog({os.fspath(self.runs_dir)!r})"

    # -- writing ------------------------------------------------------------------------------

    def begin(self, record: Mapping[str, Any]) -> None:
        """Record that a run started (``record["status"] == "running"``).

        Takes the run's liveness lock, held until :meth:`finish`, then upserts its row.
        """
        row = _row_from_record(record)
        with self._mutex:
            self._take_run_lock(row["run_id"])
            self._with_connection(lambda conn: _upsert(conn, [row]))

    def finish(self, record: Mapping[str, Any]) -> None:
        """Record a run's final record, then release its liveness lock."""
        row = _row_from_record(record)
        with self._mutex:
            try:
                self._with_connection(lambda conn: _upsert(conn, [row]))
            finally:
                self._release_run_lock(row["run_id"])

    def reindex(self) -> int:
        """Rebuild the catalog from the run files; return the number of runs indexed.

        Unreadable run files are skipped with a warning. Runs whose files still say
        ``running`` but whose process is gone are indexed as interrupted. Rows whose run file
        no longer exists are dropped.
        """
        with self._mutex:
            count = self._with_connection(self._reindex, create=False)
        return count or 0

    def close(self) -> None:
        """Release the connection (and any run lock still held). A later call reconnects."""
        with self._mutex:
            for run_id in list(self._run_locks):
                self._release_run_lock(run_id)
            if self._conn is not None and self._owner_pid == os.getpid():
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
            self._conn = None

    # -- queries ------------------------------------------------------------------------------

    def runs(
        self,
        notebook: str | os.PathLike[str] | None = None,
        status: str | None = None,
        since: str | date | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Past runs as result dicts, newest first; see the class notes for the filters.

        Parameters
        ----------
        notebook, status, since
            Filters, combined with AND.
        limit : int, optional
            At most this many runs (the newest ones).

        Returns
        -------
        list of dict
            Result dicts (SPEC section 4); a run still going has ``status: "running"``.
        """
        where, values = _filters(notebook, status, since)
        sql = _SELECT_RESULT + where + _NEWEST_FIRST
        if limit is not None:
            sql += " LIMIT ?"
            values.append(_check_limit(limit))
        rows = self._query(lambda conn: conn.execute(sql, values).fetchall())
        try:
            return [
                _result(dict(zip(_records.RESULT_KEYS, row, strict=True))) for row in rows or ()
            ]
        except ValueError as exc:
            raise CatalogError(str(self.path), f"unreadable rows: {_describe(exc)}") from None

    def get_run(self, run_id: str) -> dict[str, Any]:
        """The result dict of one run; a run missing from the catalog is read from its file.

        Raises
        ------
        RunNotFoundError
            No run has this id.
        """
        found = self._query(
            lambda conn: conn.execute(_SELECT_RESULT + " WHERE run_id = ?", (run_id,)).fetchone()
        )
        if found:
            return _result(dict(zip(_records.RESULT_KEYS, found, strict=True)))
        path = _records.run_notebook_path(self.runs_dir, str(run_id))
        row = _row_from_record({**_records.read_record(path), "run_id": path.stem})
        if row["status"] == "running" and not self._is_alive(row):
            _mark_interrupted(row)
            self._forget_run_lock(row["run_id"])
        with self._mutex:
            self._with_connection(lambda conn: _upsert(conn, [row]), create=False)
        return _result(row)

    def collect_outputs(self, run_id: str) -> dict[str, Any]:
        """Every scrap of a run, fully decoded (a pandas scrap is a DataFrame).

        Raises
        ------
        RunNotFoundError
            No run file has this id.
        """
        path = _records.run_notebook_path(self.runs_dir, str(run_id))
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except FileNotFoundError:
            raise RunNotFoundError(str(run_id)) from None
        except (OSError, ValueError, AttributeError) as exc:
            raise RunNotFoundError(str(run_id), f"unreadable run file: {exc}") from None
        return {name: decode_scrap(raw) for name, raw in find_scraps(cells).items()}

    def scraps(
        self,
        notebook: str | os.PathLike[str] | None = None,
        status: str | None = None,
        since: str | date | None = None,
    ) -> pd.DataFrame:
        """Parameters and JSON scraps of past runs as a DataFrame, newest run first.

        Index ``run_id``; columns ``notebook``, ``status``, ``started_at`` (ISO-8601 UTC
        strings), ``duration_seconds``, then ``parameters.<name>`` and ``scraps.<name>``
        (names sorted within a run, new names added as met). A run lacking a name has a
        missing value there. Scraps that are not JSON (DataFrames, display-only) are left
        out: :meth:`collect_outputs` decodes them. Filters as in the class notes.
        """
        where, values = _filters(notebook, status, since)
        sql = (
            "SELECT run_id, notebook, status, started_at, duration_seconds, parameters, "
            "scrap_values FROM runs" + where + _NEWEST_FIRST
        )
        rows = self._query(lambda conn: conn.execute(sql, values).fetchall()) or []
        try:
            return _scrap_frame(rows)
        except (ValueError, AttributeError) as exc:
            raise CatalogError(str(self.path), f"unreadable rows: {_describe(exc)}") from None

    # -- connection ---------------------------------------------------------------------------

    def _query(self, action: Callable[[sqlite3.Connection], T]) -> T | None:
        def swept(conn: sqlite3.Connection) -> T:
            self._sweep(conn)
            return action(conn)

        with self._mutex:
            return self._with_connection(swept, create=False)

    def _with_connection(
        self, action: Callable[[sqlite3.Connection], T], create: bool = True
    ) -> T | None:
        """Run ``action`` on this process's connection; None when there is no runs dir and
        ``create`` is false. A corrupt catalog is recovered once, then the action retried."""
        for attempt in (1, 2):
            try:
                conn = self._connection(create)
                return None if conn is None else action(conn)
            except sqlite3.Error as exc:
                self._drop_connection()
                if attempt == 1 and _is_corruption(exc):
                    try:
                        self._recover(exc)
                    except OSError as failure:
                        raise CatalogError(str(self.path), _describe(failure)) from None
                    continue
                raise CatalogError(str(self.path), _describe(exc)) from None
            except OSError as exc:
                raise CatalogError(str(self.path), _describe(exc)) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(self, create: bool) -> sqlite3.Connection | None:
        if self._owner_pid != os.getpid():
            self._after_fork()
        if self._conn is not None:
            return self._conn
        if not self.runs_dir.is_dir():
            if not create:
                return None
            self.runs_dir.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.create_function("path_matches", 2, _path_matches, deterministic=True)
            created = _ensure_schema(conn, str(self.path))
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        if created:
            logger.info("building run catalog %s from the run files", self.path)
            self._reindex(conn)
        return conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _after_fork(self) -> None:
        # A connection must not cross fork; and the child must not keep the parent's run
        # locks alive (closing its copies leaves the parent's lock in place).
        self._conn = None
        for fd in self._run_locks.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._run_locks.clear()
        self._owner_pid = os.getpid()

    def _recover(self, exc: sqlite3.Error) -> None:
        with _flocked(self.runs_dir / _LOCKS_DIR / "catalog.lock"):
            if _healthy(self.path):  # another process already recovered it
                return
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            aside = self.path.with_name(f"{CATALOG_NAME}.corrupt-{stamp}-{os.getpid()}")
            logger.warning(
                "run catalog %s is unreadable (%s); moved to %s, rebuilding it from the run files",
                self.path,
                _describe(exc),
                aside.name,
            )
            self.path.replace(aside)
            for suffix in ("-wal", "-shm"):
                side = self.path.with_name(CATALOG_NAME + suffix)
                if side.exists():
                    side.replace(aside.with_name(aside.name + suffix))

    # -- indexing -----------------------------------------------------------------------------

    def _reindex(self, conn: sqlite3.Connection) -> int:
        rows = []
        for path in _records.iter_run_notebooks(self.runs_dir):
            try:
                record = _records.read_record(path)
                row = _row_from_record({**record, "run_id": path.stem})
            except (NotebookExecutorError, TypeError, ValueError) as exc:
                logger.warning("reindex: skipping unreadable run file %s: %s", path, exc)
                continue
            if row["status"] == "running" and not self._is_alive(row):
                _mark_interrupted(row)
                self._forget_run_lock(row["run_id"])
            rows.append(row)
        seen = {row["run_id"] for row in rows}
        with _write(conn):
            conn.executemany(_UPSERT, rows)
            indexed = [r for (r,) in conn.execute("SELECT run_id FROM runs")]
            gone = [
                (r,)
                for r in indexed
                if r not in seen and not _records.run_notebook_path(self.runs_dir, r).exists()
            ]
            conn.executemany("DELETE FROM runs WHERE run_id = ?", gone)
        logger.info("indexed %d runs in %s", len(rows), self.path)
        return len(rows)

    def _sweep(self, conn: sqlite3.Connection) -> None:
        """Settle rows still ``running`` whose process is gone."""
        running = conn.execute(
            "SELECT run_id, host, pid, started_at FROM runs WHERE status = 'running'"
        ).fetchall()
        for run_id, host, pid, started_at in running:
            row = {"run_id": run_id, "host": host, "pid": pid, "started_at": started_at}
            if run_id in self._run_locks or self._is_alive(row):
                continue
            self._settle(conn, run_id)

    def _settle(self, conn: sqlite3.Connection, run_id: str) -> None:
        # The run file may know better (the run finished but its catalog write failed).
        try:
            path = _records.run_notebook_path(self.runs_dir, run_id)
            final = _row_from_record({**_records.read_record(path), "run_id": run_id})
        except (NotebookExecutorError, TypeError, ValueError):
            final = None
        with _write(conn):
            if final is not None and final["status"] != "running":
                conn.execute(_UPSERT, final)
            else:
                logger.warning("run %s was interrupted: its process is gone", run_id)
                conn.execute(
                    "UPDATE runs SET status = 'error', error_kind = 'interrupted' "
                    "WHERE run_id = ? AND status = 'running'",
                    (run_id,),
                )
        self._forget_run_lock(run_id)

    # -- liveness -----------------------------------------------------------------------------

    def _lock_path(self, run_id: str) -> Path:
        return self.runs_dir / _LOCKS_DIR / f"{run_id}.lock"

    def _is_alive(self, row: Mapping[str, Any]) -> bool:
        """Whether a ``running`` row's process may still be running it (True when unknown)."""
        if row.get("host") != self._host:
            return True
        held = _lock_held(self._lock_path(row["run_id"]))
        if held is not None:
            return held
        return _pid_alive(row.get("pid"), _epoch(row.get("started_at")))

    def _forget_run_lock(self, run_id: str) -> None:
        """Remove the lock file a dead run left behind."""
        with contextlib.suppress(OSError):
            self._lock_path(run_id).unlink()

    def _take_run_lock(self, run_id: str) -> None:
        if sys.platform == "win32" or run_id in self._run_locks:
            return
        import fcntl

        target = self._lock_path(run_id)
        # Lock a private file, then move it into place: the lock file never exists unlocked.
        staging = target.with_name(f".{run_id}.{os.getpid()}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            logger.debug("no liveness lock for run %s: %s", run_id, exc)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            staging.replace(target)
        except OSError as exc:
            logger.debug("no liveness lock for run %s: %s", run_id, exc)
            os.close(fd)
            with contextlib.suppress(OSError):
                staging.unlink()
            return
        self._run_locks[run_id] = fd

    def _release_run_lock(self, run_id: str) -> None:
        fd = self._run_locks.pop(run_id, None)
        if fd is None:
            return
        # Unlink while still holding it, so no one finds a free lock for a finished run.
        with contextlib.suppress(OSError):
            self._lock_path(run_id).unlink()
        with contextlib.suppress(OSError):
            os.close(fd)


# -- rows ----------------------------------------------------------------------------------------


def _row_from_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The catalog row of a run record (the dict stored in the run notebook's metadata)."""
    run_id = record.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("the record has no run_id")
    source = _mapping(record.get("source"))
    kernel = _mapping(record.get("kernel"))
    scraps = _mapping(record.get("scraps"))
    notebook = str(record.get("notebook") or source.get("path") or "")
    status = record.get("status")
    failed = record.get("failed_cell")
    return {
        "run_id": run_id,
        "status": status if status in STATUSES else "error",
        "error_kind": _text(record.get("error_kind")),
        "notebook": notebook,
        "output_path": _text(record.get("output_path")),
        "parameters": _dumps(_mapping(record.get("parameters"))),
        "request": _text(record.get("request")),
        "started_at": _canonical_time(record.get("started_at")) or "",
        "finished_at": _canonical_time(record.get("finished_at")),
        "duration_seconds": _number(record.get("duration_seconds"), float),
        "cells_total": _number(record.get("cells_total"), int),
        "cells_executed": _number(record.get("cells_executed"), int),
        "failed_cell": None if failed is None else _dumps(failed),
        "scraps": _dumps(scraps),
        "notebook_name": PurePosixPath(notebook).name,
        "scrap_values": _dumps({k: v for k, v in scraps.items() if not _is_summary(v)}),
        "source_path": _text(source.get("path")),
        "source_sha256": _text(source.get("sha256")),
        "uuid": _text(record.get("uuid")),
        "kernel": _text(kernel.get("name")),
        "host": _text(record.get("host")),
        "pid": _number(record.get("pid"), int),
    }


def _result(row: Mapping[str, Any]) -> dict[str, Any]:
    """The result dict (SPEC section 4) of a catalog row."""
    return {
        key: (None if row[key] is None else json.loads(row[key])) if key in _JSON_KEYS else row[key]
        for key in _records.RESULT_KEYS
    }


def _mark_interrupted(row: dict[str, Any]) -> None:
    row["status"] = "error"
    row["error_kind"] = "interrupted"


def _is_summary(value: Any) -> bool:
    # How the result dict shows a scrap that is not JSON (see _scraps.summarize_scrap).
    return (
        isinstance(value, dict)
        and isinstance(value.get("encoder"), str)
        and value["encoder"] not in JSON_ENCODERS
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any, kind: type[int] | type[float]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)


def _dumps(value: Any) -> str:
    # Sorted like nbformat writes the run files, so a row reads the same after a reindex.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)


def _upsert(conn: sqlite3.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    with _write(conn):
        conn.executemany(_UPSERT, rows)


def _scrap_frame(rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """The scraps() frame, built column-wise: one pass, one list per column."""
    import pandas as pd

    count = len(rows)
    ids, notebooks, statuses, starts, durations, parameters, scraps = (
        [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(7)]
    )
    columns: dict[str, list[Any]] = {
        "notebook": notebooks,
        "status": statuses,
        "started_at": starts,
        "duration_seconds": durations,
    }
    for prefix, texts in (("parameters.", parameters), ("scraps.", scraps)):
        found: dict[str, list[Any]] = {}
        # One parse of one JSON array is several times faster than a json.loads per row.
        for index, mapping in enumerate(json.loads("[" + ",".join(texts) + "]")):
            for name, value in mapping.items():
                column = found.get(name)
                if column is None:
                    column = found[name] = [None] * count
                column[index] = value
        columns.update((prefix + name, column) for name, column in found.items())
    frame: pd.DataFrame = pd.DataFrame(columns, index=pd.Index(ids, name="run_id", dtype=object))
    return frame


# -- filters -------------------------------------------------------------------------------------


def _filters(
    notebook: str | os.PathLike[str] | None, status: str | None, since: str | date | None
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    values: list[Any] = []
    if notebook is not None:
        given = _records.display_path(os.fspath(notebook))
        clauses.append("notebook_name = ? AND path_matches(notebook, ?)")
        values += [PurePosixPath(given).name, given]
    if status is not None:
        if status not in STATUSES:
            raise NotebookExecutorError(
                f"status must be one of {', '.join(STATUSES)}, got {status!r}"
            )
        clauses.append("status = ?")
        values.append(status)
    if since is not None:
        clauses.append("started_at >= ?")
        values.append(_records.iso(_since(since)))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", values


def _path_matches(stored: str | None, given: str) -> bool:
    if stored is None:
        return False
    return stored == given or stored.endswith("/" + given) or given.endswith("/" + stored)


def _check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise NotebookExecutorError(f"limit must be a positive int, got {limit!r}")
    return limit


def _since(value: Any) -> datetime:
    moment: datetime
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        parsed = _parse_time(value)
        if parsed is None:
            raise NotebookExecutorError(
                f"since must be an ISO date or datetime, got {value!r} "
                "(for example 2026-01-31 or 2026-01-31T12:00:00Z)"
            )
        moment = parsed
    else:
        raise NotebookExecutorError(
            f"since must be an ISO date/datetime string or a datetime, got {type(value).__name__}"
        )
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _parse_time(text: str) -> datetime | None:
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _canonical_time(value: Any) -> str | None:
    """``value`` as the catalog's sortable ``YYYY-MM-DDTHH:MM:SS.fffZ`` (as is if unparsable)."""
    if not isinstance(value, str):
        return None
    parsed = _parse_time(value)
    if parsed is None:
        return value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return _records.iso(parsed.astimezone(timezone.utc))


def _epoch(value: Any) -> float | None:
    parsed = _parse_time(value) if isinstance(value, str) else None
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


# -- sqlite plumbing -----------------------------------------------------------------------------


@contextlib.contextmanager
def _write(conn: sqlite3.Connection) -> Iterator[None]:
    """One short write transaction; IMMEDIATE takes the write lock up front, so a busy
    database waits (busy_timeout) instead of failing on a read-to-write upgrade."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _ensure_schema(conn: sqlite3.Connection, where: str) -> bool:
    """Create (or rebuild an older) schema; True when this call created it."""
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return False
    conn.execute("PRAGMA journal_mode = WAL")
    with _write(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:  # another process got there first
            return False
        if version > SCHEMA_VERSION:
            raise CatalogError(where, f"written by a newer notebook-executor (schema {version})")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return True


def _is_corruption(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _healthy(path: Path) -> bool:
    if not path.exists():
        return True
    try:
        conn = sqlite3.connect(path, timeout=5.0)
        try:
            return bool(conn.execute("PRAGMA quick_check").fetchone()[0] == "ok")
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# -- processes and locks -------------------------------------------------------------------------


@contextlib.contextmanager
def _flocked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a no-op where ``flock`` does not exist)."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _lock_held(path: Path) -> bool | None:
    """Whether some process holds the run lock at ``path``; None when there is none to test."""
    if sys.platform == "win32":
        return None
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)
    return False


def _pid_alive(pid: Any, run_started: float | None) -> bool:
    """Whether ``pid`` may still be the process that started a run at ``run_started``."""
    if sys.platform == "win32" or not isinstance(pid, int) or pid <= 0:
        return True  # unknown (on Windows, os.kill(pid, 0) would send CTRL_C_EVENT)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # it exists, owned by someone else
    started = _process_start(pid)
    if started is None:
        return True
    state, began = started
    if state == "Z":
        return False
    # A process started after the run is a new one that reuses the pid.
    return run_started is None or began <= run_started + _CLOCK_SLACK_SECONDS


def _process_start(pid: int) -> tuple[str, float] | None:
    """``(state, start time as epoch seconds)`` of a process, from /proc (Linux only)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        fields = stat.rsplit(")", 1)[1].split()
        return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
