"""The catalog's SQLite side: the ``runs`` table, its statements, transactions and filters.

One table, one row per run (see :mod:`notebook_executor._catalog.rows` for what a row holds),
indexed by start time, notebook name and status, plus the full-text index of
:mod:`notebook_executor._catalog.search`. ``PRAGMA user_version`` holds
:data:`SCHEMA_VERSION`; an older catalog is dropped and rebuilt, a newer one refused, and a
database holding tables not ours (another program's file) is refused and left alone. Every
write is one short ``BEGIN IMMEDIATE`` transaction (:func:`write`), so a busy database waits
out its busy timeout instead of failing on a read-to-write upgrade.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from .._errors import CatalogError, InvalidArgumentError
from .._records.identity import notebook_identity
from .._records.provenance import display_path
from .._records.results import RESULT_KEYS
from .._run.checks import check_path
from .._times import iso, parse_time
from . import search as _search
from .rows import STATUSES

__all__ = [
    "NEWEST_FIRST",
    "SCHEMA_VERSION",
    "SELECT_RESULT",
    "UPSERT",
    "check_limit",
    "connect",
    "describe",
    "filters",
    "healthy",
    "is_corruption",
    "upsert",
    "write",
]

#: Bumped whenever the tables change; an older catalog is rebuilt from the run records.
#: 1: the ``runs`` table. 2: ``output_cut`` (and, in later builds also numbered 2, the
#: full-text index of :mod:`notebook_executor._catalog.search`). 3: both, for certain: a
#: version-2 catalog may lack the index, so every catalog older than 3 is rebuilt. 4: the
#: edits of a modified run (``edited_cells``, ``edit_notes``), read by the digest. 5: what a
#: run took from checkpoints (``reused_cells``, ``reused_from``, ``resumed_from``,
#: ``state_notes``).
SCHEMA_VERSION = 5
#: The objects a catalog of ours holds (tables, their indexes, the full-text index's own
#: tables); a database holding anything else was not made here and is never changed.
_OURS = ("runs", "run_text", "run_text_keys")
_OURS_PREFIXES = ("runs_by_", "run_text_", "sqlite_")

_COLUMNS = (
    *RESULT_KEYS,
    "notebook_name",
    "scrap_values",
    "edit_notes",
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
        output_cut TEXT NOT NULL,
        notebook_name TEXT NOT NULL,
        scrap_values TEXT NOT NULL,
        edited_cells TEXT NOT NULL,
        edit_notes TEXT NOT NULL,
        reused_cells TEXT NOT NULL,
        reused_from TEXT,
        resumed_from TEXT,
        state_notes TEXT NOT NULL,
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
    *_search.SCHEMA,
)
# A "running" record never replaces a finished row: begin, finish and reindex may land in any
# order when several processes share the catalog.
UPSERT = (
    f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join(':' + c for c in _COLUMNS)}) "
    f"ON CONFLICT(run_id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
    + " WHERE excluded.status != 'running' OR runs.status = 'running'"
)
SELECT_RESULT = f"SELECT {', '.join(RESULT_KEYS)} FROM runs"
NEWEST_FIRST = " ORDER BY started_at DESC, run_id DESC"


# -- connection and transactions -----------------------------------------------------------------


def connect(
    path: Path, busy_timeout: float, *, in_memory: bool = False
) -> tuple[sqlite3.Connection, bool]:
    """Open the catalog at ``path``, its schema ensured.

    Parameters
    ----------
    path : Path
        The database file (created when missing).
    busy_timeout : float
        Seconds a write waits for another process's transaction.
    in_memory : bool, default False
        Work on a copy in memory, for a runs folder that cannot be written: the file, when
        there is one that can be read, is copied in; nothing is ever written to the folder.

    Returns
    -------
    tuple of (sqlite3.Connection, bool)
        The connection (autocommit, usable from any thread) and whether this call created the
        schema, in which case the table is still empty.
    """
    target = ":memory:" if in_memory else path
    if not in_memory:
        _create_private(path)
    conn = sqlite3.connect(
        target, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        if in_memory:
            _copy_read_only(path, conn)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.create_function("path_matches", 2, _path_matches, deterministic=True)
        created = _ensure_schema(conn, str(path))
    except BaseException:
        conn.close()
        raise
    return conn, created


def _create_private(path: Path) -> None:
    """Create the catalog file, empty (an empty file is an empty database), mode 0600 as run
    records are, when there is none: SQLite gives its ``-wal`` and ``-shm`` files the mode of
    the database, so they are 0600 too. An existing file is left as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600))


def _copy_read_only(path: Path, memory: sqlite3.Connection) -> None:
    """Copy the catalog at ``path`` into ``memory`` without writing anything beside it; a
    catalog that cannot be read so is left out (the caller rebuilds it from the run records)."""
    if not path.is_file():
        return
    try:
        source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return
    try:
        source.backup(memory)
    except sqlite3.Error:
        return
    finally:
        source.close()


@contextlib.contextmanager
def write(conn: sqlite3.Connection) -> Iterator[None]:
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


def upsert(conn: sqlite3.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Upsert ``rows`` in one transaction; a ``running`` row never replaces a final one."""
    with write(conn):
        conn.executemany(UPSERT, rows)


def _ensure_schema(conn: sqlite3.Connection, where: str) -> bool:
    """Create (or rebuild an older) schema; True when this call created it.

    A database below this version that holds anything not ours (another program's SQLite
    file) is refused with :class:`CatalogError`, never dropped, changed or moved aside.
    """
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return False
    # Before anything is written (even the journal mode, which changes the file's header).
    _refuse_foreign(conn, where)
    conn.execute("PRAGMA journal_mode = WAL")
    with write(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:  # another process got there first
            return False
        if version > SCHEMA_VERSION:
            raise CatalogError(where, f"written by a newer notebook-executor (schema {version})")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return True


def _refuse_foreign(conn: sqlite3.Connection, where: str) -> None:
    """Raise :class:`CatalogError` when the database holds an object that is not ours."""
    foreign = sorted(
        name
        for (name,) in conn.execute("SELECT name FROM sqlite_master")
        if name not in _OURS and not name.startswith(_OURS_PREFIXES)
    )
    if foreign:
        raise CatalogError(
            where,
            f"not created by notebook-executor (it holds {', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); it is left as it is: move it away, "
            "then reindex",
        )


# -- corruption ----------------------------------------------------------------------------------


def is_corruption(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the database file is damaged (rather than busy or misused)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
        return True
    text = str(exc).lower()
    # A catalog whose version is right but whose table is not (another program's database)
    # is damaged too: reindex could never mend it in place.
    return any(
        sign in text for sign in ("malformed", "not a database", "no such table", "no such column")
    )


def healthy(path: Path) -> bool:
    """Whether the database at ``path`` passes ``PRAGMA quick_check`` and, once it claims
    this schema version, has the table (or does not exist)."""
    if not path.exists():
        return True
    try:
        conn = sqlite3.connect(path, timeout=5.0)
        try:
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                return False
            if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM runs LIMIT 0")
                _search.check_index(conn)
            return True
        finally:
            conn.close()
    except sqlite3.Error:
        return False


# -- filters -------------------------------------------------------------------------------------


def filters(
    notebook: str | os.PathLike[str] | None,
    status: str | None,
    since: str | date | None,
    runs_dir: str | os.PathLike[str] | None = None,
) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause (empty when no filter is given) and its values; see ``Catalog``.

    With ``runs_dir``, a ``notebook`` naming an existing file is matched by the name the
    records give it (:func:`~.._records.identity.notebook_identity`), from any working
    directory.

    Raises
    ------
    NotebookExecutorError
        ``notebook`` is not a path, or ``status`` or ``since`` is not a valid value.
    """
    clauses: list[str] = []
    values: list[Any] = []
    if notebook is not None:
        check_path("notebook", notebook)
        given = display_path(os.fspath(notebook))
        if runs_dir is not None and _is_file(notebook):
            given = notebook_identity(notebook, runs_dir)
        clauses.append("notebook_name = ? AND path_matches(notebook, ?)")
        values += [PurePosixPath(given).name, given]
    if status is not None:
        if status not in STATUSES:
            raise InvalidArgumentError(
                f"status must be one of {', '.join(STATUSES)}, got {status!r}"
            )
        clauses.append("status = ?")
        values.append(status)
    if since is not None:
        clauses.append("started_at >= ?")
        values.append(iso(_since(since)))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", values


def check_limit(limit: Any) -> int:
    """``limit`` when it is a positive int.

    Raises
    ------
    NotebookExecutorError
        It is not.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgumentError(f"limit must be a positive int, got {limit!r}")
    return limit


def _is_file(path: str | os.PathLike[str]) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def _path_matches(stored: str | None, given: str) -> bool:
    if stored is None:
        return False
    return stored == given or stored.endswith("/" + given) or given.endswith("/" + stored)


def _since(value: Any) -> datetime:
    moment: datetime
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        parsed = parse_time(value)
        if parsed is None:
            raise InvalidArgumentError(
                f"since must be an ISO date or datetime, got {value!r} "
                "(for example 2026-01-31 or 2026-01-31T12:00:00Z)"
            )
        moment = parsed
    else:
        raise InvalidArgumentError(
            f"since must be an ISO date/datetime string or a datetime, got {type(value).__name__}"
        )
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def describe(exc: BaseException) -> str:
    """The first line of an error's message (at most 300 characters), for a catalog error."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
