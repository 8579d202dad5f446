"""The facade's record queries: past runs, their scraps, search and digest, as the catalog
and the run store answer them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._errors import CatalogError, NotebookSourceError, RunNotFoundError
from .._records.run_files import RESULT_KEYS
from .._records.scraps import decode_scrap, find_scraps
from .._records.store import executed_cells
from .._run.checks import PathLike, check_path
from .._sources.formats import find_format, load_source
from .._types import RunResult, SearchHit
from .base import ExecutorBase

if TYPE_CHECKING:
    import pandas as pd

    from .._notebook import NotebookNode
    from .._types import Digest

__all__ = ["RecordQueries"]


class RecordQueries(ExecutorBase):
    """Queries over the run records: :meth:`get_run`, :meth:`runs`, :meth:`scraps`,
    :meth:`search`, :meth:`digest`, :meth:`collect_outputs`, :meth:`reindex`."""

    def collect_outputs(self, notebook_path_or_run_id: PathLike) -> dict[str, Any]:
        """The scraps of an executed notebook (a path) or of a past run (a run id), decoded:
        ``{scrap_name: value}`` (a pandas scrap is a DataFrame).

        Named ``collect_outputs``, with the argument ``notebook_path_or_run_id``, by SPEC
        section 3: what it collects are the notebook's scraps (``sb.glue``), not its cell
        outputs. The result's ``scraps`` are the same scraps, JSON-encodable or summarised.
        """
        check_path("notebook_path_or_run_id", notebook_path_or_run_id)
        candidate = Path(notebook_path_or_run_id)
        fmt = find_format(candidate)
        if fmt is not None and not fmt.is_text and candidate.is_file():
            # An executed notebook named by its path (a run's output_path, papermill's output).
            cells = executed_cells(candidate)
        else:
            run_id = os.fspath(notebook_path_or_run_id)
            if not self._store.exists(run_id):
                raise RunNotFoundError(run_id)
            cells = self._store.read(run_id).cells
        return {name: decode_scrap(raw) for name, raw in find_scraps(cells).items()}

    def get_run(self, run_id: str) -> RunResult:
        """The result dict of a past run (a run whose process died shows as interrupted)."""
        if not isinstance(run_id, str):
            raise RunNotFoundError(
                repr(run_id), f"a run id is a string, not {type(run_id).__name__}"
            )
        try:
            return self._open_catalog().get_run(run_id)
        except CatalogError:
            # The files are the truth: an unusable catalog does not hide a run.
            record = self._store.record(run_id)
            found = {key: record.get(key) for key in RESULT_KEYS}
            found["edited_cells"] = found["edited_cells"] or []  # a record of older builds
            return cast("RunResult", found)  # the keys are RunResult's (RESULT_KEYS)

    def runs(
        self,
        notebook: PathLike | None = None,
        status: str | None = None,
        since: Any = None,
        limit: int | None = None,
    ) -> list[RunResult]:
        """Past runs as result dicts, newest first, optionally filtered."""
        return self._open_catalog().runs(notebook=notebook, status=status, since=since, limit=limit)

    def scraps(
        self,
        notebook: PathLike | None = None,
        status: str | None = None,
        since: Any = None,
    ) -> pd.DataFrame:
        """One row per run (index ``run_id``) with its parameters and JSON scraps as columns."""
        frame: pd.DataFrame = self._open_catalog().scraps(
            notebook=notebook, status=status, since=since
        )
        return frame

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
        return self._open_catalog().search(
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
        return self._open_catalog().digest(notebook, since=since, limit_chars=limit_chars)

    def reindex(self) -> int:
        """Rebuild the catalog from the run records; return the number of runs indexed."""
        return self._open_catalog().reindex()

    def _notebook_or_run(self, reference: PathLike) -> NotebookNode:
        check_path("notebook", reference)
        candidate = Path(reference)
        if candidate.is_file():
            return load_source(candidate).nb
        try:
            return self._run_notebook(os.fspath(reference))
        except RunNotFoundError:
            if find_format(candidate) is not None:
                raise NotebookSourceError(os.fspath(reference), "no such file") from None
            raise

    def _run_notebook(self, run_id: str) -> NotebookNode:
        if not isinstance(run_id, str) or not self._store.exists(run_id):
            raise RunNotFoundError(str(run_id))
        # nbformat's node, as nbformat.read gives it; it is a dict like the package's own.
        return cast("NotebookNode", self._store.read(run_id).notebook())
