"""What every group of the facade shares: the executor's state, its catalog and its planning.

:class:`~notebook_executor._executor.NotebookExecutor` sets the state in ``__init__``; the
groups (:mod:`.records`, :mod:`.review`) and the facade itself reach the catalog and plan
runs only through these methods.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import ExecutorClosedError, NotebookExecutorError
from .._records.store import RunStore
from .._run.checks import PathLike
from .._run.options import RunOptions
from .._run.plan import Plan, plan_run
from .._run.runner import run_plan
from .._types import RunResult
from ..engine import Engine, SupportsPrepare, SupportsPrestart

if TYPE_CHECKING:
    from .._catalog.store import Catalog
    from .._session.session import Session

__all__ = ["ExecutorBase"]

logger = logging.getLogger("notebook_executor._executor")


class ExecutorBase:
    """The state of a :class:`NotebookExecutor` and the internals its groups share."""

    runs_dir: Path
    _store: RunStore
    dotenv_root: Path | None
    base_env: dict[str, str] | None
    progress: bool | None
    log_output: bool
    kernel_name: str | None
    timeout: float | None
    cell_timeout: float | None
    _engine: Engine
    _catalog: Catalog | None
    # execute_many's threads may all reach for the catalog at once: it is opened once.
    _catalog_lock: threading.Lock
    _closed: bool
    _sessions: set[Session]
    # prepare_kernel(once_read=True) was called: the next run's planner gives the head start.
    _prepare_once_read: bool

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorClosedError("this NotebookExecutor is closed")

    def _open_catalog(self) -> Catalog:
        self._check_open()
        with self._catalog_lock:
            if self._catalog is None:
                from .._catalog.store import Catalog

                self._catalog = Catalog(self.runs_dir)
            return self._catalog

    def _catalog_call(
        self, method: str, record: Mapping[str, Any], cells: Sequence[Any] | None = None
    ) -> None:
        # The files are the truth; a catalog that cannot be written is rebuilt by reindex.
        # ``cells``: a finished run's cells as written (``_run.runner.OnRecord``).
        try:
            catalog = self._open_catalog()
            if method == "finish":
                catalog.finish(record, cells)
            else:
                getattr(catalog, method)(record)
        except NotebookExecutorError as exc:
            logger.warning("run %s not indexed: %s", record.get("run_id"), exc)

    def _announce(self, plans: list[Plan]) -> None:
        """Get ready for ``plans``: the runs folder made, each run's kernel started (when the
        engine can) while its run records are written."""
        self._store.prepare()
        if isinstance(self._engine, SupportsPrestart):
            for plan in plans:
                self._engine.prestart(plan.job)

    def _run(self, plan: Plan) -> RunResult:
        return run_plan(plan, self._engine, self.runs_dir, self._catalog_call)

    def _plan(
        self, input_path: PathLike, options: RunOptions, *, make_environment: bool = True
    ) -> Plan:
        from .._review.run_edits import check_edits

        head_start, self._prepare_once_read = self._prepare_once_read, False
        return plan_run(
            input_path,
            options,
            kernel_name=self.kernel_name,
            default_timeout=self.timeout,
            default_cell_timeout=self.cell_timeout,
            base_env=self.base_env,
            dotenv_root=self.dotenv_root,
            make_environment=make_environment,
            check_edits=check_edits,
            head_start=self._head_start if head_start else None,
        )

    def _head_start(self) -> None:
        """``prepare_kernel(once_read=True)``'s head start, now that the run is known to be
        on this interpreter's Python kernel (the planner calls it once the source is read)."""
        if isinstance(self._engine, SupportsPrepare):
            self._engine.prepare_kernel()

    def _plan_keywords(
        self, input_path: PathLike, *, make_environment: bool = True, **given: Any
    ) -> Plan:
        """:meth:`_plan` for options given as :meth:`validate`'s keywords."""
        return self._plan(
            input_path,
            RunOptions.from_keywords("validate", given),
            make_environment=make_environment,
        )
