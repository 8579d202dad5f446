"""The digest page of :meth:`Catalog.digest <notebook_executor._catalog.store.Catalog.digest>`:
its argument checked, the notebook's recorded paths matched, the rows folded and rendered."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from .._errors import CatalogError, InvalidArgumentError
from .._types import Digest
from .digest import gather, nothing
from .digest_text import MIN_LIMIT_CHARS, render
from .sql import describe, filters

__all__ = ["digest_page"]

#: How the catalog runs a read: the action on its connection, None when there is no catalog.
Query = Callable[[Callable[[sqlite3.Connection], dict[str, Any]]], dict[str, Any] | None]


def digest_page(
    query: Query,
    path: Path,
    notebook: str | os.PathLike[str] | None,
    since: str | date | None,
    limit_chars: int,
) -> Digest:
    """The digest of the runs ``query`` reaches; ``path`` names the catalog in errors."""
    if (
        isinstance(limit_chars, bool)
        or not isinstance(limit_chars, int)
        or limit_chars < MIN_LIMIT_CHARS
    ):
        raise InvalidArgumentError(
            f"limit_chars must be an int of at least {MIN_LIMIT_CHARS}, got {limit_chars!r}",
            argument="limit_chars",
        )
    where, values = filters(None, None, since)
    named, named_values = filters(notebook, None, None, path.parent)

    def digest_of(conn: sqlite3.Connection) -> dict[str, Any]:
        if notebook is None:
            return gather(conn, where, values)
        # The notebook's recorded paths, matched once (path_matches is Python): the
        # digest's queries then compare plain text.
        paths = [p for (p,) in conn.execute(f"SELECT DISTINCT notebook FROM runs{named}",
                                            named_values)]  # fmt: skip
        if not paths:
            return nothing()
        clause = f"notebook IN ({', '.join('?' * len(paths))})"
        clause = f"{where} AND {clause}" if where else f" WHERE {clause}"
        return gather(conn, clause, [*values, *paths])

    try:
        found = query(digest_of) or nothing()
    except (ValueError, TypeError, AttributeError) as exc:
        raise CatalogError(str(path), f"unreadable rows: {describe(exc)}") from None
    digest: Digest = {
        "notebook": None if notebook is None else os.fspath(notebook),
        "since": values[0] if since is not None else None,
        "runs": found["runs"],
        "statuses": found["statuses"],
        "parameters": found["parameters"],
        "scraps": found["scraps"],
        "trends": found["trends"],
        "errors": found["errors"],
        "notes": found["notes"],
        "omitted": found["omitted"],
        "text": "",
    }
    digest["text"] = render(digest, limit_chars)
    return digest
