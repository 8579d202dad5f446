"""The run records as the facade reaches them: the run store, and the catalog opened once.

:class:`RunRecords` is what :class:`~notebook_executor._executor.NotebookExecutor` holds of
``runs_dir``: the files (the truth) and the catalog derived from them, with the answers that
need both (a run shown from its files when the catalog cannot be used, a notebook named by a
path or a run id).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._errors import (
    CatalogError,
    ExecutorClosedError,
    NotebookExecutorError,
    NotebookSourceError,
    RunNotFoundError,
)
from .._records.lineage import configured, emitter
from .._records.results import RESULT_KEYS
from .._records.scraps import decode_scrap, find_scraps
from .._records.store import RunStore, executed_cells
from .._run.checks import PathLike, check_path
from .._sources.formats import find_format, load_source
from .._types import RunResult

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .store import Catalog

__all__ = ["RunRecords"]

logger = logging.getLogger("notebook_executor._executor")


class RunRecords:
    """The run records under ``runs_dir`` and their catalog, opened when first asked for.

    Parameters
    ----------
    runs_dir : Path
        Where the run records are.
    """

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self.store = RunStore(runs_dir)
        self._catalog: Catalog | None = None
        # execute_many's threads may all reach for the catalog at once: it is opened once.
        self._lock = threading.Lock()
        self._closed = False

    def catalog(self) -> Catalog:
        """The catalog, opened on the first call.

        Raises
        ------
        ExecutorClosedError
            After :meth:`close`.
        """
        with self._lock:
            if self._closed:
                raise ExecutorClosedError("this NotebookExecutor is closed")
            if self._catalog is None:
                from .store import Catalog

                self._catalog = Catalog(self.runs_dir)
            return self._catalog

    def index(
        self, method: str, record: Mapping[str, Any], cells: Sequence[Any] | None = None
    ) -> None:
        """Hand ``record`` to the catalog's ``method`` (``begin``, ``finish``...): the runs'
        ``on_record`` hook; ``cells``: a finished run's cells as written
        (``_run.runner.OnRecord``), so the catalog need not read the run file back. A catalog
        that cannot be written is logged, not raised: the files are the truth, and reindex
        rebuilds the catalog from them."""
        try:
            catalog = self.catalog()
            if method == "finish":
                catalog.finish(record, cells)
            else:
                getattr(catalog, method)(record)
        except NotebookExecutorError as exc:
            logger.warning("run %s not indexed: %s", record.get("run_id"), exc)
        # docs/how-to/lineage.md: OpenLineage run events, when configured (sent in the background).
        lineage = emitter() if method in ("begin", "finish") else None
        if lineage is not None:
            lineage.record(method, record)

    def close(self) -> None:
        """Release the catalog; the records stay. Safe to call more than once. Waits a
        few seconds at most for OpenLineage events not yet sent (:mod:`.._records.lineage`)."""
        lineage = emitter() if configured() else None
        if lineage is not None:
            lineage.close()
        with self._lock:
            self._closed = True
            catalog, self._catalog = self._catalog, None
        if catalog is not None:
            catalog.close()

    def get_run(self, run_id: str) -> RunResult:
        """The result dict of a past run, from the catalog, else from its files."""
        if not isinstance(run_id, str):
            raise RunNotFoundError(
                repr(run_id), f"a run id is a string, not {type(run_id).__name__}"
            )
        try:
            return self.catalog().get_run(run_id)
        except CatalogError:
            # The files are the truth: an unusable catalog does not hide a run.
            record = self.store.record(run_id)
            found = {key: record.get(key) for key in RESULT_KEYS}
            for key in ("edited_cells", "reused_cells", "state_notes"):
                found[key] = found[key] or []  # a record of older builds
            return cast("RunResult", found)  # the keys are RunResult's (RESULT_KEYS)

    def scraps(self, notebook_path_or_run_id: PathLike) -> dict[str, Any]:
        """The decoded scraps of an executed notebook (a path) or of a past run (a run id)."""
        check_path("notebook_path_or_run_id", notebook_path_or_run_id)
        candidate = Path(notebook_path_or_run_id)
        fmt = find_format(candidate)
        if fmt is not None and not fmt.is_text and candidate.is_file():
            # An executed notebook named by its path (a run's output_path, papermill's output).
            cells = executed_cells(candidate)
        else:
            run_id = os.fspath(notebook_path_or_run_id)
            if not self.store.exists(run_id):
                raise RunNotFoundError(run_id)
            cells = self.store.read(run_id).cells
        return {name: decode_scrap(raw) for name, raw in find_scraps(cells).items()}

    def notebook(self, reference: PathLike) -> NotebookNode:
        """The notebook a source path or a run id names (the path first)."""
        check_path("notebook", reference)
        candidate = Path(reference)
        if candidate.is_file():
            return load_source(candidate).nb
        try:
            return self.run_notebook(os.fspath(reference))
        except RunNotFoundError:
            if find_format(candidate) is not None:
                raise NotebookSourceError(os.fspath(reference), "no such file") from None
            raise

    def run_notebook(self, run_id: str) -> NotebookNode:
        """The executed notebook of a past run."""
        if not isinstance(run_id, str) or not self.store.exists(run_id):
            raise RunNotFoundError(str(run_id))
        # nbformat's node, as nbformat.read gives it; it is a dict like the package's own.
        return cast("NotebookNode", self.store.read(run_id).notebook())
