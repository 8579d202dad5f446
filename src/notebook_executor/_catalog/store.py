"""The run catalog: ``runs/catalog.sqlite``, an index of every run, queried in milliseconds.

The run records (``runs/YYYY-MM-DD/<run_id>.ipynb``) are the truth; the catalog is derived data
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
its run record, or else becomes ``status: "error"``, ``error_kind: "interrupted"``. Runs of other
hosts are left as they are: their liveness cannot be known from here. A run's first record is
written before its row: a process killed in between leaves a record with no row, which the
first query of every process (and any later query, for the day folders changed since) brings
in, as interrupted when its process is gone.

A runs folder that cannot be written (read-only, no permission) can still be browsed: the
catalog is then copied into memory (or built there from the run records) and never written back;
:meth:`Catalog.reindex` refuses such a folder with :class:`~notebook_executor.RunsDirError`.

A missing catalog is built from the files when first opened. A corrupt one (garbage bytes, a
truncated file) is moved aside as ``catalog.sqlite.corrupt-<timestamp>`` and rebuilt; when that
fails, :class:`~notebook_executor.CatalogError` (whose message names ``reindex``) is raised. A
database that another program made (it holds tables not ours) is refused with ``CatalogError``
and never moved aside, changed or dropped. No raw ``sqlite3`` error leaves this module.

Full-text search: a run's texts (request, parameters, narrative, code, outputs, errors,
scraps), read from its run record as written (so redacted), are indexed in the same transaction
as its finished row, and rebuilt by :meth:`Catalog.reindex`; :meth:`Catalog.search` queries
them.

This module holds :class:`Catalog`; the table and its SQL are in ``sql``, the
record <-> row conversion in ``rows``, the full-text index in ``search``, the lock files
and process checks in ``liveness``, and the digest (:meth:`Catalog.digest`) in ``digest_page``,
``digest`` and ``digest_text``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._errors import CatalogError, NotebookExecutorError, RunsDirError
from .._records.identity import project_folder, project_notebooks, repaired_identity
from .._records.ids import DAY_FOLDER, is_run_id
from .._records.project import CATALOG_NAME
from .._records.results import RESULT_KEYS
from .._records.store import NOTEBOOK_SUFFIX, RunFile, RunStore, unwritable
from .._types import Digest, RunResult, SearchHit
from .digest_page import digest_page
from .liveness import LOCKS_DIR, RunLocks, flocked
from .rows import going, mark_interrupted, open_session, result, row_from_record, scrap_frame
from .search import clear_index, index_runs, match_expression, run_texts
from .search import search as _search
from .sql import (
    NEWEST_FIRST,
    SCHEMA_VERSION,
    SELECT_RESULT,
    UPSERT,
    check_limit,
    connect,
    describe,
    filters,
    healthy,
    is_corruption,
    upsert,
    write,
)

if TYPE_CHECKING:
    import pandas as pd

    from .._notebook import NotebookNode

__all__ = ["CATALOG_NAME", "SCHEMA_VERSION", "Catalog"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_SECONDS = 30.0
#: A day folder changed this recently is matched with its rows again at the next query.
_SETTLE_SECONDS = 2.0


class Catalog:
    """The SQLite index of the runs under ``runs_dir``.

    Opening is cheap (the connection is made on first use, one per process) and never changes
    the run records. Every method is safe to call from several threads and processes at once.

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

    def __init__(
        self, runs_dir: str | os.PathLike[str], *, busy_timeout: float = BUSY_TIMEOUT_SECONDS
    ) -> None:
        self.runs_dir = Path(runs_dir)
        self.store = RunStore(self.runs_dir)
        self.path = self.runs_dir / CATALOG_NAME
        self.busy_timeout = busy_timeout
        self._mutex = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._owner_pid = os.getpid()
        self._locks = RunLocks(self.runs_dir)
        self._project_notebooks: list[str] | None = None
        # Each day folder's modification time when its records were last matched with rows.
        self._day_stamps: dict[str, int] = {}

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
        row = row_from_record(record)
        with self._mutex:
            self._locks.take(row["run_id"])
            self._with_connection(lambda conn: upsert(conn, [row]))

    def at_cell(self, record: Mapping[str, Any]) -> None:
        """Note that run ``record["run_id"]`` (begun here) is in code cell ``record["cell"]``:
        said in its liveness lock, no row written (:meth:`RunLocks.note_cell`)."""
        with self._mutex:
            self._locks.note_cell(record["run_id"], record.get("cell"))

    def finish(self, record: Mapping[str, Any], cells: Sequence[Any] | None = None) -> None:
        """Record a run's final record, then release its liveness lock.

        The row and the run's full-text index are written in one transaction. The index is of
        ``cells``, the run file's cells as the caller wrote them (redacted); without them, of
        the cells read from the run file.
        """
        row = row_from_record(record)
        if cells is None:
            cells = self._run_cells(row["run_id"])
        texts = run_texts(record, cells)
        with self._mutex:
            try:
                self._with_connection(lambda conn: _store(conn, row, texts))
            finally:
                # A session's record is final after each step; its lock is held till it closes.
                if not open_session(record):
                    self._locks.release(row["run_id"])

    def reindex(self) -> int:
        """Rebuild the catalog from the run records; return the number of runs indexed.

        Unreadable run records are skipped with a warning. Runs whose files still say
        ``running`` but whose process is gone are indexed as interrupted. Rows whose run record
        no longer exists are dropped.

        Raises
        ------
        RunsDirError
            The runs folder cannot be written, so the catalog cannot be rebuilt in it.
        """
        problem = unwritable(self.runs_dir) if self.runs_dir.is_dir() else None
        if problem is not None:
            raise RunsDirError(
                os.fspath(self.runs_dir),
                f"{problem}, so its catalog cannot be rebuilt (runs, search and show still "
                "read it)",
            )
        with self._mutex:
            count = self._with_connection(self._reindex, create=False)
        return count or 0

    def close(self) -> None:
        """Release the connection (and any run lock still held). A later call reconnects."""
        with self._mutex:
            self._locks.release_all()
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
    ) -> list[RunResult]:
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
            Result dicts (docs/reference/results.md); a run still going has ``status: "running"``.
        """
        where, values = filters(notebook, status, since, self.runs_dir)
        sql = SELECT_RESULT + where + NEWEST_FIRST
        if limit is not None:
            sql += " LIMIT ?"
            values.append(check_limit(limit))
        rows = self._query(lambda conn: conn.execute(sql, values).fetchall())
        try:
            found = [result(dict(zip(RESULT_KEYS, row, strict=True))) for row in rows or ()]
        except ValueError as exc:
            raise CatalogError(str(self.path), f"unreadable rows: {describe(exc)}") from None
        return [self._at_cell(one) for one in found]

    def _at_cell(self, found: RunResult) -> RunResult:
        """``found``, with ``cell`` (the code cell it is in, as ``failed_cell.index`` counts;
        None when not known) when it is still going: its liveness lock says it."""
        if found["status"] == "running":
            cast("dict[str, Any]", found)["cell"] = self._locks.cell(found["run_id"])
        return found

    def get_run(self, run_id: str) -> RunResult:
        """The result dict of one run; a run missing from the catalog is read from its file.

        Raises
        ------
        RunNotFoundError
            No run has this id.
        """
        found = self._query(
            lambda conn: conn.execute(SELECT_RESULT + " WHERE run_id = ?", (run_id,)).fetchone()
        )
        if found:
            return self._at_cell(result(dict(zip(RESULT_KEYS, found, strict=True))))
        run_file = self.store.read(str(run_id))
        record, cells = run_file.record, run_file.cells
        row = row_from_record({**record, "run_id": run_file.run_id})
        if self._gone(record, row):
            mark_interrupted(row)
            self._locks.forget(row["run_id"])
        texts = run_texts(record, cells)
        with self._mutex:
            self._with_connection(lambda conn: _store(conn, row, texts), create=False)
        return result(row)

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
        out: ``NotebookExecutor.collect_outputs`` decodes them. Filters as in the class notes.
        """
        where, values = filters(notebook, status, since, self.runs_dir)
        sql = (
            "SELECT run_id, notebook, status, started_at, duration_seconds, parameters, "
            "scrap_values FROM runs" + where + NEWEST_FIRST
        )
        rows = self._query(lambda conn: conn.execute(sql, values).fetchall()) or []
        try:
            return scrap_frame(rows)
        except (ValueError, AttributeError) as exc:
            raise CatalogError(str(self.path), f"unreadable rows: {describe(exc)}") from None

    def search(
        self,
        query: str,
        *,
        notebook: str | os.PathLike[str] | None = None,
        status: str | None = None,
        since: str | date | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Full-text search over every run record, best hit first, one hit per run.

        Parameters
        ----------
        query : str
            Words (all must match), ``"exact phrases"``, ``prefix*``, ``OR``, ``NOT``, ``AND``
            and parentheses; see :func:`notebook_executor._catalog.search.match_expression`.
        notebook, status, since
            Filters, as in the class notes.
        limit : int, default 20
            At most this many hits.

        Returns
        -------
        list of dict
            ``{"run_id", "notebook", "status", "started_at", "where", "snippet", "score"}``;
            ``where`` is one of ``request``, ``parameters``, ``narrative``, ``code``,
            ``output``, ``error``, ``scraps``; ``snippet`` the matching text around the hit,
            matched words in ``**``; ``score`` the BM25 relevance (higher is better).

        Raises
        ------
        NotebookExecutorError
            The query is malformed, or a filter or ``limit`` is not valid.
        """
        expression = match_expression(query)
        where, values = filters(notebook, status, since, self.runs_dir)
        count = check_limit(limit)
        hits = self._query(lambda conn: _search(conn, expression, where, values, count))
        return hits or []

    def digest(
        self,
        notebook: str | os.PathLike[str] | None = None,
        *,
        since: str | date | None = None,
        limit_chars: int = 4000,
    ) -> Digest:
        """What earlier runs found, in one page: see :mod:`notebook_executor._catalog.digest`.

        Raises
        ------
        NotebookExecutorError
            A filter is not valid, or ``limit_chars`` is not an int of at least
            :data:`~notebook_executor._catalog.digest_text.MIN_LIMIT_CHARS`.
        """
        return digest_page(self._query, self.path, notebook, since, limit_chars)

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
                if attempt == 1 and is_corruption(exc):
                    try:
                        self._recover(exc)
                    except OSError as failure:
                        raise CatalogError(str(self.path), describe(failure)) from None
                    continue
                raise CatalogError(str(self.path), describe(exc)) from None
            except OSError as exc:
                raise CatalogError(str(self.path), describe(exc)) from None
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
        read_only = unwritable(self.runs_dir) is not None
        conn, created = connect(self.path, self.busy_timeout, in_memory=read_only)
        self._conn = conn
        if created:
            logger.info("building run catalog %s from the run records", self.path)
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
        self._locks.abandon()
        self._owner_pid = os.getpid()

    def _recover(self, exc: sqlite3.Error) -> None:
        with flocked(self.runs_dir / LOCKS_DIR / "catalog.lock"):
            if healthy(self.path):  # another process already recovered it
                return
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            aside = self.path.with_name(f"{CATALOG_NAME}.corrupt-{stamp}-{os.getpid()}")
            logger.warning(
                "run catalog %s is unreadable (%s); moved to %s, rebuilding it from the run "
                "records",
                self.path,
                describe(exc),
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
        texts = []
        self._project_notebooks = None
        for path in self.store.paths():
            try:
                run_file = self.store.read_path(path)
                record, cells = self._repaired(run_file), run_file.cells
                row = row_from_record({**record, "run_id": path.stem})
                texts.append((path.stem, run_texts(record, cells)))
            except (NotebookExecutorError, TypeError, ValueError, AttributeError) as exc:
                logger.warning("reindex: skipping unreadable run record %s: %s", path, exc)
                continue
            if self._gone(record, row):
                mark_interrupted(row)
                self._locks.forget(row["run_id"])
            rows.append(row)
        seen = {row["run_id"] for row in rows}
        with write(conn):
            conn.executemany(UPSERT, rows)
            clear_index(conn)
            index_runs(conn, texts)
            indexed = [r for (r,) in conn.execute("SELECT run_id FROM runs")]
            gone = [(r,) for r in indexed if r not in seen and not self.store.path(r).exists()]
            conn.executemany("DELETE FROM runs WHERE run_id = ?", gone)
            clear_index(conn, (r for (r,) in gone))
        logger.info("indexed %d runs in %s", len(rows), self.path)
        return len(rows)

    def _repaired(self, run_file: RunFile) -> dict[str, Any]:
        """``run_file``'s record, its notebook named by today's rule
        (:func:`~.._records.identity.repaired_identity`); a finished record that named it
        otherwise is rewritten so (its ``.ipynb`` and ``.md``)."""
        record = run_file.record
        recorded = record.get("notebook")
        if not isinstance(recorded, str):
            return record
        named = repaired_identity(recorded, self.runs_dir, self._notebooks)
        if named == recorded:
            return record
        source = dict(record.get("source") or {})
        if isinstance(source.get("path"), str):
            source["path"] = repaired_identity(source["path"], self.runs_dir, self._notebooks)
        repaired = {**record, "notebook": named, "source": source}
        if record.get("status") in ("success", "error"):
            logger.info("reindex: run %s names its notebook %s (was %s)", run_file.run_id,
                        named, recorded)  # fmt: skip
            try:
                nb = cast("NotebookNode", run_file.notebook())  # nbformat's node: a dict too
                self.store.write(run_file.run_id, nb, repaired, final=True)
            except OSError as exc:
                logger.warning("reindex: cannot rewrite %s: %s", run_file.path, exc)
        return repaired

    def _notebooks(self) -> list[str]:
        """The project's notebooks, found once per reindex (when an old name needs them)."""
        if self._project_notebooks is None:
            project = project_folder(self.runs_dir)
            self._project_notebooks = [] if project is None else project_notebooks(project)
        return self._project_notebooks

    def _run_cells(self, run_id: str) -> list[Any]:
        """The cells of a run's file as written (redacted); none when it cannot be read."""
        try:
            return self.store.read(run_id).cells
        except NotebookExecutorError:
            return []

    def _sweep(self, conn: sqlite3.Connection) -> None:
        """Bring in run records that have no row, and settle rows still ``running`` whose
        process is gone."""
        self._bring_in(conn)
        running = conn.execute(
            "SELECT run_id, host, pid, started_at FROM runs WHERE status = 'running'"
        ).fetchall()
        for run_id, host, pid, started_at in running:
            row = {"run_id": run_id, "host": host, "pid": pid, "started_at": started_at}
            if run_id in self._locks or self._locks.is_alive(row):
                continue
            self._settle(conn, run_id)
        self._sweep_sessions(conn)

    def _sweep_sessions(self, conn: sqlite3.Connection) -> None:
        """Settle sessions whose process died while they were open: their row says how the
        last step ended, their lock file is left and free. A free lock file of a run whose
        row is final is only removed."""
        try:
            names = [entry.name for entry in os.scandir(self.runs_dir / LOCKS_DIR)]
        except OSError:
            return
        for name in names:
            run_id = name[: -len(".lock")]
            if not name.endswith(".lock") or not is_run_id(run_id) or run_id in self._locks:
                continue
            found = conn.execute(
                "SELECT status, host, pid, started_at FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if found is None or found[0] == "running":
                continue  # brought in, or settled, by the sweeps above
            row = {"run_id": run_id, "host": found[1], "pid": found[2], "started_at": found[3]}
            if self._locks.is_alive(row):
                continue
            try:
                record = self.store.read(run_id).record
            except NotebookExecutorError:
                record = {}
            if open_session(record):
                logger.warning("session run %s was interrupted: its process is gone", run_id)
                with write(conn):
                    conn.execute(
                        "UPDATE runs SET status = 'error', error_kind = 'interrupted' "
                        "WHERE run_id = ?",
                        (run_id,),
                    )
            self._locks.forget(run_id)

    def _gone(self, record: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
        """Whether a run whose record says it is going (a ``running`` run, an open session)
        has lost its process."""
        return (
            row["run_id"] not in self._locks
            and going(record, row)
            and not self._locks.is_alive(row)
        )

    def _bring_in(self, conn: sqlite3.Connection) -> None:
        """Index the run records that have no row (a process killed between writing a run's
        first record and its row), from the day folders changed since the last look.

        The first query of a process looks at every day folder; later ones at those whose
        modification time moved (a record was added or replaced), so a long-lived process
        (the MCP server) sees records other processes left behind too. A folder changed less
        than :data:`_SETTLE_SECONDS` ago is looked at again next time: a file system's clock
        may not tell two changes within one tick apart.
        """
        try:
            days = [
                entry
                for entry in os.scandir(self.runs_dir)
                if DAY_FOLDER.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
            ]
        except OSError:
            return
        now = time.time_ns()
        for day in days:
            try:
                stamp = day.stat(follow_symlinks=False).st_mtime_ns
                if self._day_stamps.get(day.name) == stamp:
                    continue
                names = [
                    entry.name[: -len(NOTEBOOK_SUFFIX)]
                    for entry in os.scandir(day.path)
                    if entry.name.endswith(NOTEBOOK_SUFFIX)
                ]
            except OSError:
                continue
            files = {name for name in names if is_run_id(name)}
            prefix = day.name.replace("-", "")
            rows = {
                run_id
                for (run_id,) in conn.execute(
                    "SELECT run_id FROM runs WHERE run_id >= ? AND run_id < ?",
                    (prefix, prefix + "~"),
                )
            }
            for run_id in sorted(files - rows):
                self._bring(conn, run_id)
            if now - stamp > _SETTLE_SECONDS * 1e9:
                self._day_stamps[day.name] = stamp

    def _bring(self, conn: sqlite3.Connection, run_id: str) -> None:
        """Index one run record that has no row (nothing when it cannot be read)."""
        try:
            run_file = self.store.read(run_id)
            row = row_from_record({**run_file.record, "run_id": run_id})
            texts = run_texts(run_file.record, run_file.cells)
        except (NotebookExecutorError, TypeError, ValueError, AttributeError) as exc:
            logger.debug("run record %s not indexed: %s", run_id, exc)
            return
        if self._gone(run_file.record, row):
            logger.warning("run %s was interrupted: its process is gone", run_id)
            mark_interrupted(row)
            self._locks.forget(run_id)
        logger.info("indexing run %s, which had a record but no catalog row", run_id)
        _store(conn, row, texts)

    def _settle(self, conn: sqlite3.Connection, run_id: str) -> None:
        # The run record may know better (the run finished but its catalog write failed).
        try:
            run_file = self.store.read(run_id)
            record, cells = run_file.record, run_file.cells
            final = row_from_record({**record, "run_id": run_id})
            texts = run_texts(record, cells)
            if open_session(record):
                mark_interrupted(final)
        except (NotebookExecutorError, TypeError, ValueError, AttributeError):
            final = None
        with write(conn):
            if final is not None and final["status"] != "running":
                conn.execute(UPSERT, final)
                index_runs(conn, [(run_id, texts)])
            else:
                logger.warning("run %s was interrupted: its process is gone", run_id)
                conn.execute(
                    "UPDATE runs SET status = 'error', error_kind = 'interrupted' "
                    "WHERE run_id = ? AND status = 'running'",
                    (run_id,),
                )
        self._locks.forget(run_id)


def _store(conn: sqlite3.Connection, row: Mapping[str, Any], texts: Mapping[str, str]) -> None:
    """Upsert a run's row and replace its full-text index, in one transaction."""
    with write(conn):
        conn.execute(UPSERT, row)
        index_runs(conn, [(row["run_id"], texts)])
