"""Full-text search over every run record: an SQLite FTS5 index inside ``catalog.sqlite``.

Each run is indexed as up to seven texts, one per place it can match (:data:`WHERE`): the
request (and the notes of a modified run's edits), the parameters (``name: value`` lines), the
narrative (markdown and raw cells), the code (the injected-parameters cell left out), the
outputs (streams, plain text and markdown results), the errors (error outputs with their
tracebacks, the failed cell, the error kind) and the scraps (``name: value`` lines). The texts
come from the run records as written, so they are already redacted: a secret's value never
reaches the index. Each text is cut at
:data:`MAX_TEXT_CHARS`.

Tables: ``run_text_keys`` gives each run a small integer key; the FTS5 table ``run_text`` holds
one row per run (``rowid`` its key), one column per place. A query matches a run as a whole
(``KX-7 ZeroDivisionError`` finds a run whose request names the one and whose error the other);
the place of a hit is the column that scores best for it.

Tokenizer: ``unicode61`` with diacritics folded; ``_``, ``-`` and ``.`` separate tokens. Every
term of a query is searched as a phrase of its pieces, so ``read_csv`` finds ``read_csv`` (the
tokens ``read``, ``csv`` side by side), ``KX-7`` finds ``KX-7`` and ``3.14`` finds ``3.14``,
while ``csv`` alone still finds ``read_csv``. Query syntax (see :func:`match_expression`):
words (all must match), ``"exact phrases"``, ``prefix*``, ``OR``, ``NOT``, ``AND`` and
parentheses. Hits are ranked by BM25; a run appears once, at the place it matches best.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import NotebookExecutorError, SearchQueryError
from .._records.text import strip_ansi
from .._types import SearchHit

__all__ = [
    "MAX_TEXT_CHARS",
    "SCHEMA",
    "WHERE",
    "check_index",
    "clear_index",
    "index_runs",
    "match_expression",
    "run_texts",
    "search",
]

#: The places a run can match: the columns of the index, in order.
WHERE = ("request", "parameters", "narrative", "code", "output", "error", "scraps")
#: BM25 weight of a match in each place: a request, an error, a parameter or scrap value is
#: more telling than a word in a long output.
_WEIGHTS = (2.0, 1.5, 1.0, 1.0, 1.0, 2.0, 1.5)
#: Equal scores go to the place that says most about what a run found: a word printed by the
#: code it is in counts as output.
_TIES = tuple(WHERE.index(w) for w in ("request", "error", "parameters", "scraps", "output"))
_TIES += tuple(WHERE.index(w) for w in ("narrative", "code"))
#: Longest text indexed per place of a run; the rest is not searchable.
MAX_TEXT_CHARS = 200_000
#: Longest query accepted.
MAX_QUERY_CHARS = 1_000

SCHEMA = (
    "DROP TABLE IF EXISTS run_text",
    "DROP TABLE IF EXISTS run_text_keys",
    "CREATE TABLE run_text_keys (id INTEGER PRIMARY KEY, run_id TEXT UNIQUE NOT NULL)",
    f"CREATE VIRTUAL TABLE run_text USING fts5({', '.join(WHERE)}, "
    "tokenize = 'unicode61 remove_diacritics 2')",
)

_SNIPPET_TOKENS = 12
_MARK = "**"
#: Best first; equal scores newest indexed first.
_BEST = " ORDER BY rank, rid DESC"


# -- what is indexed ---------------------------------------------------------------------------


def run_texts(record: Mapping[str, Any], cells: Sequence[Any]) -> dict[str, str]:
    """The searchable texts of one run, by place, from its record and its executed cells."""
    texts: dict[str, list[str]] = {where: [] for where in WHERE}
    request = record.get("request")
    if isinstance(request, str):
        texts["request"].append(request)
    for edit in record.get("edits") or ():
        # A modified run's notes say why, as a request does (the edited text is code).
        if isinstance(edit, Mapping) and isinstance(edit.get("note"), str):
            texts["request"].append(edit["note"])
    texts["parameters"] += _name_values(record.get("parameters"))
    texts["scraps"] += _name_values(record.get("scraps"))
    for cell in cells:
        if not isinstance(cell, Mapping):
            continue
        kind = cell.get("cell_type")
        source = _joined(cell.get("source"))
        if kind in ("markdown", "raw"):
            texts["narrative"].append(source)
            continue
        if kind != "code":
            continue
        tags = (cell.get("metadata") or {}).get("tags") or []
        if "injected-parameters" not in tags:
            texts["code"].append(source)
        for output in cell.get("outputs") or ():
            if isinstance(output, Mapping):
                _add_output(texts, output)
    failed = record.get("failed_cell")
    if isinstance(failed, Mapping) and not texts["error"]:
        texts["error"].append(f"{failed.get('ename')}: {failed.get('evalue')}")
        texts["error"] += [strip_ansi(str(line)) for line in failed.get("traceback") or ()]
    if record.get("error_kind"):
        texts["error"].append(str(record["error_kind"]))
    return {
        where: "\n".join(part for part in parts if part)[:MAX_TEXT_CHARS]
        for where, parts in texts.items()
        if any(parts)
    }


def _add_output(texts: dict[str, list[str]], output: Mapping[str, Any]) -> None:
    kind = output.get("output_type")
    if kind == "stream":
        texts["output"].append(strip_ansi(_joined(output.get("text"))))
    elif kind == "error":
        texts["error"].append(f"{output.get('ename')}: {output.get('evalue')}")
        texts["error"] += [strip_ansi(str(line)) for line in output.get("traceback") or ()]
    elif kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        if any(str(key).startswith("application/scrapbook.scrap.") for key in data):
            return  # a scrap: indexed from the record's scraps
        for mime in ("text/markdown", "text/plain"):
            if mime in data:
                texts["output"].append(strip_ansi(_joined(data[mime])))
                break


def _joined(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return "" if value is None else str(value)


def _name_values(values: Any) -> list[str]:
    if not isinstance(values, Mapping):
        return []
    return [
        f"{name}: {json.dumps(value, ensure_ascii=False, default=str)}"
        for name, value in values.items()
    ]


# -- writing -----------------------------------------------------------------------------------

_INSERT = f"INSERT INTO run_text (rowid, {', '.join(WHERE)}) VALUES (?{', ?' * len(WHERE)})"


def index_runs(conn: sqlite3.Connection, runs: Iterable[tuple[str, Mapping[str, str]]]) -> None:
    """Replace the indexed texts of each ``(run_id, texts)``; call inside a write transaction."""
    for run_id, texts in runs:
        conn.execute("INSERT OR IGNORE INTO run_text_keys (run_id) VALUES (?)", (run_id,))
        (key,) = conn.execute("SELECT id FROM run_text_keys WHERE run_id = ?", (run_id,)).fetchone()
        conn.execute("DELETE FROM run_text WHERE rowid = ?", (key,))
        conn.execute(_INSERT, (key, *(texts.get(where) for where in WHERE)))


def clear_index(conn: sqlite3.Connection, run_ids: Iterable[str] | None = None) -> None:
    """Drop the indexed texts of ``run_ids`` (of every run when None); inside a transaction."""
    if run_ids is None:
        conn.execute("DELETE FROM run_text")
        conn.execute("DELETE FROM run_text_keys")
        return
    for run_id in run_ids:
        found = conn.execute("SELECT id FROM run_text_keys WHERE run_id = ?", (run_id,)).fetchone()
        if found is not None:
            key = found[0]
            conn.execute("DELETE FROM run_text WHERE rowid = ?", (key,))
            conn.execute("DELETE FROM run_text_keys WHERE id = ?", (key,))


def check_index(conn: sqlite3.Connection) -> None:
    """Raise ``sqlite3.Error`` when the index is damaged (FTS5's own integrity check).

    The check is written as an insert, so it waits for the write lock: when another process
    holds it past the busy timeout the index cannot be checked and is taken as sound (moving
    a sound catalog aside would be worse than one more failed attempt).
    """
    try:
        conn.execute("INSERT INTO run_text (run_text) VALUES ('integrity-check')")
    except sqlite3.OperationalError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        busy = code & 0xFF in (5, 6) if isinstance(code, int) else "locked" in str(exc)
        if not busy:  # SQLITE_BUSY, SQLITE_LOCKED
            raise


# -- queries -----------------------------------------------------------------------------------

_QUERY_TOKEN = re.compile(r'\s*(?:(\()|(\))|"([^"]*)"(\*?)|([^\s()"]+)|("))')
_OPERATORS = frozenset({"AND", "OR", "NOT"})


def match_expression(query: str) -> str:
    """The FTS5 expression for a user's query.

    Syntax: words separated by spaces must all match; ``"an exact phrase"``; ``prefix*`` (also
    ``"a phrase"*``); ``OR``, ``NOT`` (``a NOT b``) and ``AND`` in capitals between terms;
    parentheses group. Every word is matched as the sequence of its letters and digits, so
    punctuation inside it (``read_csv``, ``KX-7``, ``3.14``) is kept in order; a word with no
    letter or digit is ignored.

    Raises
    ------
    NotebookExecutorError
        The query is empty, too long, or malformed (an unbalanced quote or parenthesis, an
        operator with a side missing), with a message saying what is wrong.
    """
    if not isinstance(query, str):
        raise SearchQueryError(f"query must be a string, got {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchQueryError(f"search query too long (over {MAX_QUERY_CHARS} characters)")
    tokens: list[str] = []  # "(", ")", operators, or quoted FTS5 phrases
    for match in _QUERY_TOKEN.finditer(query.rstrip()):
        opening, closing, phrase, star, word, stray = match.groups()
        if stray:
            raise _malformed(query, "a quote is not closed")
        if opening or closing:
            tokens.append(opening or closing)
        elif phrase is not None:
            if not _searchable(phrase):
                raise _malformed(query, f'the phrase "{phrase}" has no letter or digit')
            tokens.append(f'"{phrase}"' + ("*" if star else ""))
        elif word in _OPERATORS:
            tokens.append(word)
        else:
            stem = word.rstrip("*")
            if _searchable(stem):
                tokens.append(f'"{stem}"' + ("*" if stem != word else ""))
    if not tokens:
        raise SearchQueryError("empty search query: give at least one word to look for")
    _check_grammar(query, tokens)
    return " ".join(tokens)


def _searchable(text: str) -> bool:
    return any(char.isalnum() for char in text)


def _check_grammar(query: str, tokens: list[str]) -> None:
    depth = 0
    previous = None  # None (start), "term", "op", "("
    for token in tokens:
        if token in _OPERATORS:
            if previous in (None, "op", "("):
                raise _malformed(query, f"{token} needs a term before it")
            previous = "op"
        elif token == "(":
            depth += 1
            previous = "("
        elif token == ")":
            if depth == 0:
                raise _malformed(query, "a ')' has no '('")
            if previous == "(":
                raise _malformed(query, "empty parentheses")
            if previous == "op":
                raise _malformed(query, "an operator needs a term after it")
            depth -= 1
            previous = "term"
        else:
            previous = "term"
    if previous == "op":
        raise _malformed(query, f"{tokens[-1]} needs a term after it")
    if depth:
        raise _malformed(query, "a '(' is not closed")


def _malformed(query: str, reason: str) -> NotebookExecutorError:
    shown = query if len(query) <= 80 else query[:77] + "..."
    return SearchQueryError(
        f'malformed search query {shown!r}: {reason} (syntax: words, "exact phrase", '
        "prefix*, OR, NOT, AND, parentheses)"
    )


def search(
    conn: sqlite3.Connection,
    expression: str,
    where: str,
    values: Sequence[Any],
    limit: int,
) -> list[SearchHit]:
    """Hits for an FTS5 ``expression``, best first, one per run, at most ``limit``.

    ``where`` and ``values`` filter the ``runs`` table (a ``WHERE`` clause as
    :func:`notebook_executor._catalog.sql.filters` builds it, or empty).
    """
    weights = ", ".join(str(weight) for weight in _WEIGHTS)
    ranked = (
        f"SELECT rowid AS rid, bm25(run_text, {weights}) AS rank FROM run_text "
        "WHERE run_text MATCH ?"
    )
    if where:
        # Filtered: every hit joined with its row, then the best kept.
        source, tail = f"({ranked})", where + _BEST + " LIMIT ?"
        arguments = [expression, *values, limit]
    else:
        # Unfiltered: FTS5 keeps the best while it ranks; only those are joined (twice as fast
        # for a word found in every run).
        source, tail = f"({ranked} ORDER BY rank, rid DESC LIMIT ?)", _BEST
        arguments = [expression, limit]
    sql = (
        "SELECT runs.run_id, notebook, status, started_at, rid, rank FROM "
        f"{source} AS hits "
        "JOIN run_text_keys ON run_text_keys.id = hits.rid "
        "JOIN runs ON runs.run_id = run_text_keys.run_id" + tail
    )
    try:
        rows = conn.execute(sql, arguments).fetchall()
        places = _best_places(conn, expression, [row[4] for row in rows])
        hits: list[SearchHit] = []
        for run_id, notebook, status, started_at, rid, rank in rows:
            place = places.get(rid, 0)
            found = conn.execute(
                "SELECT snippet(run_text, ?, ?, ?, '...', ?) FROM run_text "
                "WHERE run_text MATCH ? AND rowid = ?",
                (place, _MARK, _MARK, _SNIPPET_TOKENS, expression, rid),
            ).fetchone()
            hits.append(
                {
                    "run_id": run_id,
                    "notebook": notebook,
                    "status": status,
                    "started_at": started_at,
                    "where": WHERE[place],
                    "snippet": " ".join((found[0] if found else "").split()),
                    "score": round(-rank, 6),
                }
            )
    except sqlite3.OperationalError as exc:
        if str(exc).startswith("fts5:"):
            raise SearchQueryError(f"malformed search query: {exc}") from None
        raise
    return hits


def _best_places(conn: sqlite3.Connection, expression: str, rids: list[int]) -> dict[int, int]:
    """For each hit, the column (place) that scores best on its own.

    BM25 with one column weighted 1 and the others 0 counts matches in that column only.
    """
    if not rids:
        return {}
    columns = ", ".join(
        "bm25(run_text, "
        + ", ".join("1" if other == place else "0" for other in range(len(WHERE)))
        + ")"
        for place in range(len(WHERE))
    )
    rows = conn.execute(
        f"SELECT rowid, {columns} FROM run_text WHERE run_text MATCH ? "
        f"AND rowid IN ({', '.join('?' * len(rids))})",
        [expression, *rids],
    ).fetchall()
    return {
        row[0]: min(range(len(WHERE)), key=lambda place: (row[place + 1], _TIES.index(place)))
        for row in rows
    }
