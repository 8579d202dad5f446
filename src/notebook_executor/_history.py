"""What a :class:`~notebook_executor.NotebookExecutor` answers about past runs: the run records
of its ``runs_dir`` (:class:`~._catalog.records.RunRecords`: the files and the catalog), read,
searched, summed up and compared. Nothing here starts a kernel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._catalog.records import RunRecords
from ._errors import ExecutorClosedError
from ._run.checks import PathLike
from ._types import NotebookDiff, RunDiff, RunResult, SearchHit

if TYPE_CHECKING:
    import pandas as pd

    from ._catalog.store import Catalog
    from ._types import Digest

__all__ = ["RunHistory"]


class RunHistory:
    """The past runs under ``runs_dir``: the half of :class:`~notebook_executor.NotebookExecutor`
    that reads its run records (the executor is a run history that also runs notebooks)."""

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self._records = RunRecords(runs_dir)
        self._closed = False

    def get_run(self, run_id: str) -> RunResult:
        """The result dict of a past run (a run whose process died shows as interrupted)."""
        self._check_open()
        return self._records.get_run(run_id)

    def resumed_by(self, run_id: str) -> list[str]:
        """The runs that resumed run ``run_id`` (their ``resumed_from``), newest first: the
        other way of the link (docs/how-to/resume.md)."""
        notebook = self.get_run(run_id)["notebook"]
        return [
            found["run_id"]
            for found in self.runs(notebook=notebook)
            if found.get("resumed_from") == run_id
        ]

    def runs(
        self,
        notebook: PathLike | None = None,
        status: str | None = None,
        since: Any = None,
        limit: int | None = None,
    ) -> list[RunResult]:
        """Past runs as result dicts, newest first, optionally filtered."""
        return self._catalog().runs(notebook=notebook, status=status, since=since, limit=limit)

    def scraps(
        self,
        notebook: PathLike | None = None,
        status: str | None = None,
        since: Any = None,
    ) -> pd.DataFrame:
        """One row per run (index ``run_id``) with its parameters and JSON scraps as columns."""
        frame: pd.DataFrame = self._catalog().scraps(notebook=notebook, status=status, since=since)
        return frame

    def collect_outputs(self, notebook_path_or_run_id: PathLike) -> dict[str, Any]:
        """The scraps of an executed notebook (a path) or of a past run (a run id), decoded:
        ``{scrap_name: value}`` (a pandas scrap is a DataFrame).

        Named ``collect_outputs``, with the argument ``notebook_path_or_run_id``, as
        docs/reference/api.md: what it collects are the notebook's scraps (``sb.glue``), not its
        cell
        outputs. The result's ``scraps`` are the same scraps, JSON-encodable or summarised.
        """
        return self._records.scraps(notebook_path_or_run_id)

    def search(
        self,
        query: str,
        *,
        notebook: PathLike | None = None,
        status: str | None = None,
        since: Any = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Full-text search over every run record; hits best first, one per run.

        Each hit is ``{"run_id", "notebook", "status", "started_at", "where", "snippet",
        "score"}``; ``where`` says where the run matched best (``request``, ``parameters``,
        ``narrative``, ``code``, ``output``, ``error`` or ``scraps``). Query syntax: words (all
        must match), ``"exact phrases"``, ``prefix*``, ``OR``, ``NOT``, ``AND``, parentheses.
        Filters as in :meth:`runs`.

        Raises
        ------
        NotebookExecutorError
            The query is malformed (an unbalanced quote, a bare ``AND``...).
        """
        return self._catalog().search(
            query, notebook=notebook, status=status, since=since, limit=limit
        )

    def digest(
        self,
        notebook: PathLike | None = None,
        *,
        since: Any = None,
        limit_chars: int = 4000,
    ) -> Digest:
        """What earlier runs of a notebook (or of every notebook) found, in one page.

        Computed from the catalog: runs by status with the first and last run times; the
        parameter values tried, as ranges or sets; the scraps of the latest successful run
        and how each numeric scrap moved across runs; the errors grouped by cell and name,
        each with its count and the last run that had it; the requests and edit notes,
        newest first. Every item names run ids that :meth:`get_run` and :meth:`search`
        accept. Filters as in :meth:`runs`.

        Parameters
        ----------
        notebook : path, optional
            Only runs of this notebook; all runs by default.
        since : str, date or datetime, optional
            Only runs started at or after this moment.
        limit_chars : int, default 4000
            Longest ``text``; whole items are left out to keep within it, and a last line
            says how many.

        Returns
        -------
        Digest
            ``{"notebook", "since", "runs", "statuses", "parameters", "scraps", "trends",
            "errors", "notes", "omitted", "text"}`` (see :class:`notebook_executor.Digest`);
            ``text`` is the same digest as markdown.
        """
        return self._catalog().digest(notebook, since=since, limit_chars=limit_chars)

    def reindex(self) -> int:
        """Rebuild the catalog from the run records; return the number of runs indexed."""
        return self._catalog().reindex()

    def diff_notebooks(self, a: PathLike, b: PathLike, *, outputs: bool = False) -> NotebookDiff:
        """Compare two notebooks, each a source path (any format) or a run id.

        Returns ``{"identical", "cells", "metadata_changed"}``; ``cells`` lists the cells
        ``"added"``, ``"removed"`` or ``"modified"`` with ``index_a``, ``index_b`` (indices of
        ``read_notebook``; a run's injected parameters cell is left out), a unified
        ``source_diff`` and ``outputs_changed`` (compared only with ``outputs=True``, without
        execution counts, timings or memory addresses).
        """
        from ._review.diff import diff_cells

        return diff_cells(
            self._records.notebook(a),
            self._records.notebook(b),
            outputs=outputs,
            labels=(os.fspath(a), os.fspath(b)),
        )

    def diff_runs(self, run_a: str, run_b: str) -> RunDiff:
        """What differs between two past runs: ``{"status": [a, b], "parameters": {name:
        [a, b]}, "scraps": {name: [a, b]}, "packages": {name: [a, b]}, "cells": [...]}`` (only
        differing names; ``packages``: the versions that ran, those of the notebook's own
        environment when it declares dependencies; ``cells`` as in :meth:`diff_notebooks`
        with outputs compared)."""
        from ._review.diff import diff_records

        return diff_records(
            self.get_run(run_a),
            self.get_run(run_b),
            self._records.run_notebook(run_a),
            self._records.run_notebook(run_b),
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorClosedError("this NotebookExecutor is closed")

    def _catalog(self) -> Catalog:
        self._check_open()
        return self._records.catalog()
