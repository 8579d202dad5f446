"""The index and the notebook pages: the runs grouped by notebook, each group in its own table.

The index has one section per notebook: a summary line (runs, failures, last run, last error),
its charts, and a table of its newest runs whose columns are that notebook's own parameters and
scraps. Every notebook also gets pages of :data:`PER_PAGE` runs, so that no page grows with the
number of runs: at 10,000 runs the index still holds only :data:`INDEX_ROWS` rows a notebook.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._records.results import modified_mark
from .charts import charts_for, render_svg
from .values import Cell, Previews, cell_for, clip

__all__ = ["INDEX_ROWS", "PER_PAGE", "Group", "group_runs", "page_name", "table_for"]

#: Rows a notebook shows on the index (its newest runs).
INDEX_ROWS = 25
#: Rows on each of a notebook's pages.
PER_PAGE = 200
#: At most this many parameter and scrap columns each; the rest are on the run pages.
MAX_COLUMNS = 12


def page_name(run_id: str) -> str:
    """Where a run's page is, from the site's folder."""
    return f"runs/{run_id}.html"


@dataclass(frozen=True)
class Row:
    status: str
    status_text: str
    run_id: str
    href: str
    started: str
    duration: float | None
    request: str
    parameters: list[Cell]
    scraps: list[Cell]
    error: str


@dataclass(frozen=True)
class Table:
    parameters: list[str]
    scraps: list[str]
    rows: list[Row]
    requests: bool  # any run has a request: else no column for them
    errors: bool  # any run failed: else no column for errors


@dataclass(frozen=True)
class PageLink:
    number: int
    href: str | None  # None: an ellipsis between page numbers
    current: bool = False


@dataclass(frozen=True)
class LastError:
    run_id: str
    href: str
    text: str


@dataclass
class Group:
    """One notebook's runs (newest first) and what its section shows."""

    notebook: str
    slug: str
    runs: list[Mapping[str, Any]]
    parameters: list[str]
    scraps: list[str]
    failed: int
    last_run: str
    last_error: LastError | None
    charts: list[str] = field(default_factory=list)
    table: Table | None = None

    @property
    def count(self) -> int:
        return len(self.runs)

    @property
    def per_page(self) -> int:
        return PER_PAGE

    @property
    def page_count(self) -> int:
        return max(1, -(-len(self.runs) // PER_PAGE))

    def page_href(self, number: int, prefix: str = "") -> str:
        return f"{prefix}notebooks/{self.slug}-{number}.html"

    @property
    def pages(self) -> list[PageLink]:
        return self.pager(0)

    def pager(self, current: int, prefix: str = "") -> list[PageLink]:
        """Links to the pages: all of them up to 15, else the ends and the current's
        neighbours with ellipses between."""
        total = self.page_count
        wanted = set(range(1, total + 1)) if total <= 15 else (
            {1, 2, 3, total - 2, total - 1, total} | set(range(current - 2, current + 3))
        )  # fmt: skip
        links: list[PageLink] = []
        for number in sorted(n for n in wanted if 1 <= n <= total):
            if links and number > links[-1].number + 1:
                links.append(PageLink(number - 1, None))
            links.append(PageLink(number, self.page_href(number, prefix), number == current))
        return links


def slug(notebook: str) -> str:
    """A file name for a notebook's pages: readable, and unique by a digest of the full path."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", notebook.rsplit("/", 1)[-1]).strip("-")[:40] or "notebook"
    return f"{stem}-{hashlib.sha256(notebook.encode('utf-8')).hexdigest()[:8]}"


def error_text(run: Mapping[str, Any]) -> str:
    failed = run.get("failed_cell")
    if not isinstance(failed, Mapping):
        return ""
    return f"cell {failed.get('index')}: {failed.get('ename')}: {failed.get('evalue')}"


def _names(runs: Sequence[Mapping[str, Any]], key: str) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs:
        for name in run.get(key) or {}:
            seen.setdefault(str(name), None)
            if len(seen) >= MAX_COLUMNS:
                return list(seen)
    return list(seen)


def group_runs(runs: Sequence[Mapping[str, Any]]) -> list[Group]:
    """``runs`` (newest first) by notebook, the notebook run last first."""
    by_notebook: dict[str, list[Mapping[str, Any]]] = {}
    for run in runs:
        by_notebook.setdefault(str(run.get("notebook") or ""), []).append(run)
    groups: list[Group] = []
    for notebook, own in by_notebook.items():
        failures = [run for run in own if run.get("status") == "error"]
        last_error = None
        if failures:
            worst = failures[0]
            last_error = LastError(
                str(worst["run_id"]), page_name(str(worst["run_id"])), clip(error_text(worst), 200)
            )
        groups.append(
            Group(
                notebook=notebook,
                slug=slug(notebook),
                runs=own,
                parameters=_names(own, "parameters"),
                scraps=_names(own, "scraps"),
                failed=len(failures),
                last_run=str(own[0].get("started_at") or ""),
                last_error=last_error,
            )
        )
    return groups


def _row(run: Mapping[str, Any], group: Group, prefix: str, frames: Mapping[str, Any]) -> Row:
    status = str(run.get("status") or "")
    kind = f" ({run['error_kind']})" if run.get("error_kind") else ""
    duration = run.get("duration_seconds")
    parameters = run.get("parameters") or {}
    scraps = run.get("scraps") or {}
    run_id = str(run["run_id"])
    return Row(
        status=status,
        status_text=status + kind + modified_mark(run),
        run_id=run_id,
        href=prefix + page_name(run_id),
        started=str(run.get("started_at") or ""),
        duration=float(duration) if isinstance(duration, (int, float)) else None,
        request=clip(str(run.get("request") or "")),
        parameters=[cell_for(parameters, name) for name in group.parameters],
        scraps=[cell_for(scraps, name, frames.get(name)) for name in group.scraps],
        error=clip(error_text(run), 200),
    )


def table_for(
    group: Group,
    runs: Sequence[Mapping[str, Any]],
    *,
    prefix: str = "",
    previews: Previews | None = None,
) -> Table:
    """The table of ``runs`` (some of ``group``'s), with links relative to ``prefix``; with
    ``previews``, DataFrame scraps get a preview read from their run records."""
    rows = [_row(run, group, prefix, previews(run) if previews is not None else {}) for run in runs]
    return Table(
        group.parameters,
        group.scraps,
        rows,
        requests=any(run.get("request") for run in group.runs),
        errors=group.failed > 0,
    )


def chart_svgs(group: Group) -> list[str]:
    return [render_svg(chart) for chart in charts_for(group.runs)]
