"""NotebookExecutor: the facade that composes sources, parameters, engine, results and records.

Data flows one way: source -> parameters -> engine -> results -> run files and catalog.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import CatalogError, NotebookExecutorError, NotebookSourceError, RunNotFoundError
from ._kernels.kernel_engine import KernelEngine
from ._notebook import from_dict
from ._parameters.declared import declared_parameters
from ._progress import cell_progress, output_printer, run_progress
from ._records import run_files as _records
from ._records.scraps import decode_scrap, find_scraps
from ._run.plan import PathLike, Plan, check_env, check_path, check_seconds, plan_run
from ._run.runner import run_plan
from ._sources.formats import load_source
from ._sources.formats import read_notebook as _read_notebook
from ._sources.formats import write_notebook as _write_notebook
from ._sources.remote import is_url
from .engine import Engine, SupportsPrepare, SupportsPrestart

if TYPE_CHECKING:
    import nbformat
    import pandas as pd

    from ._catalog.store import Catalog
    from ._notebook import NotebookNode

__all__ = ["NotebookExecutor"]

logger = logging.getLogger(__name__)


class NotebookExecutor:
    """Run notebooks as parameterized tasks and keep every run as an audit record.

    Parameters
    ----------
    runs_dir : path, default "runs"
        Where run records go: ``<runs_dir>/YYYY-MM-DD/<run_id>.ipynb`` and ``.md``, plus
        ``catalog.sqlite``.
    kernel_name : str, optional
        Kernel for every run, overriding the notebooks' kernelspecs. By default a notebook runs on
        its kernelspec, or on this interpreter's Python kernel when it names none (or ``python3``).
    timeout : float, optional
        Default limit in seconds for a whole run.
    cell_timeout : float, optional
        Default limit in seconds for each cell.
    engine : Engine, optional
        What runs notebooks; the default starts a fresh Jupyter kernel per run. Tests hand in a
        fake one.
    warm_kernels : int, optional
        Kernels the default engine keeps started and ready once it has run a notebook, so the
        next run pays only for its own cells (default 2; 0 disables). Every run still gets a
        fresh kernel process: a kernel never serves two runs.
    progress : bool, optional
        Show progress bars on stderr: of cells while :meth:`execute` runs a notebook for longer
        than a second, of runs in :meth:`execute_many`. By default only when stderr is a
        terminal, and not with ``log_output``.
    log_output : bool, default False
        Write cell outputs (streams, the text of results, tracebacks) to stderr as they
        arrive, secrets masked; papermill's ``log_output``.
    base_env : mapping of str to str, optional
        The environment every kernel starts from, overlaid by a run's ``env`` and
        ``secrets``; a notebook's declared ``env:`` variables are looked for there (then in
        ``.env`` files) instead of in this process's environment. By default kernels start
        from this process's whole environment. A server running notebooks for others (the
        MCP server) gives a minimal one, so that no variable of its own reaches a kernel.
    dotenv_root : path, optional
        Where a notebook's declared ``env:`` variables may be read from ``.env`` files: with
        it, only the ``.env`` of the notebook's folder (when inside this folder) and of this
        folder itself, never the working directory's. By default, the notebook's folder and
        the working directory. A server confined to a folder (the MCP server) gives its root,
        so that no file outside the root feeds a kernel.

    Examples
    --------
    >>> with NotebookExecutor(runs_dir="runs") as ex:  # doctest: +SKIP
    ...     result = ex.execute("notebooks/hello.py", parameters={"name": "Ada"})
    """

    def __init__(
        self,
        runs_dir: PathLike = "runs",
        *,
        kernel_name: str | None = None,
        timeout: float | None = None,
        cell_timeout: float | None = None,
        engine: Engine | None = None,
        warm_kernels: int | None = None,
        progress: bool | None = None,
        log_output: bool = False,
        base_env: Mapping[str, str] | None = None,
        dotenv_root: PathLike | None = None,
    ) -> None:
        self.runs_dir = Path(runs_dir)
        self.dotenv_root = None if dotenv_root is None else Path(dotenv_root).resolve()
        self.base_env = None if base_env is None else dict(check_env("base_env", base_env))
        self.progress = progress
        self.log_output = log_output
        self.kernel_name = kernel_name
        self.timeout = check_seconds("timeout", timeout)
        self.cell_timeout = check_seconds("cell_timeout", cell_timeout)
        if engine is not None and warm_kernels is not None:
            raise NotebookExecutorError("warm_kernels applies to the default engine only")
        if warm_kernels is not None and (
            isinstance(warm_kernels, bool) or not isinstance(warm_kernels, int) or warm_kernels < 0
        ):
            raise NotebookExecutorError(f"warm_kernels must be an int >= 0, got {warm_kernels!r}")
        self._engine: Engine = (
            engine if engine is not None else KernelEngine(warm_kernels=warm_kernels)
        )
        self._catalog: Catalog | None = None
        # execute_many's threads may all reach for the catalog at once: it is opened once.
        self._catalog_lock = threading.Lock()
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> NotebookExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every kernel and release the catalog. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._engine.close()
        with self._catalog_lock:
            catalog, self._catalog = self._catalog, None
        if catalog is not None:
            catalog.close()

    # -- running ---------------------------------------------------------------------------

    def prepare_kernel(self) -> None:
        """Give the engine a head start on the first run, before that run is known.

        For a caller that runs one notebook and has work to do before :meth:`execute`: the
        command line calls this, then reads and checks the source and the parameters. The
        default engine starts a template process that imports ipykernel meanwhile, and forks
        the first kernel from it once :meth:`execute` asks for one. No kernel starts here, so
        bad input still starts none. Does nothing with an engine that has no
        :meth:`~notebook_executor.engine.SupportsPrepare.prepare_kernel` hook.
        """
        self._check_open()
        if isinstance(self._engine, SupportsPrepare):
            self._engine.prepare_kernel()

    def execute(
        self,
        input_path: PathLike,
        output_path: PathLike | None = None,
        parameters: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        *,
        cell_timeout: float | None = None,
        request: str | None = None,
        cwd: PathLike | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        on_cell: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Run one notebook and return its result dict.

        Never raises for a failure inside the notebook (the result says ``"status": "error"``);
        raises for bad input before any kernel starts.

        Parameters
        ----------
        input_path : path
            ``.ipynb``, percent ``.py`` or markdown ``.md`` source.
        output_path : path, optional
            Also write the whole executed notebook here (``.ipynb``, the usual file mode; the
            stream cap is for the run files only; secrets redacted as there). The run record
            is always kept under ``runs_dir``. The source itself is refused.
        parameters : mapping, optional
            Values for the notebook's declared parameters.
        timeout, cell_timeout : float, optional
            Limits in seconds for the whole run and for each cell; default to the executor's.
        request : str, optional
            Free-text reason for the run, kept in the record.
        cwd : path, optional
            Working directory of the kernel; default the notebook's folder.
        env : mapping, optional
            Extra environment variables for the kernel (their names are recorded, not values).
        secrets : mapping, optional
            Environment variables whose values are never written anywhere: not to the result,
            the run files, the catalog or logs. Occurrences in outputs are redacted; an output
            or scrap that holds one where text search cannot reach (an image's bytes, a
            DataFrame) is withheld. Values shorter than 6 characters are not searched for
            (they would damage ordinary text); the record lists them and a warning is logged.
        on_cell : callable, optional
            Progress hook: ``on_cell(done, total)`` each time a code cell completes, ``total``
            counting the code cells that run (the injected parameters cell included). Called
            from the engine's thread; what it raises is logged and ignored.
        cancel : threading.Event, optional
            Set it from another thread to cancel the run: the kernel is stopped, the run is
            recorded with ``error_kind`` ``"cancelled"`` and :class:`RunCancelled
            <notebook_executor.engine.RunCancelled>` (a ``KeyboardInterrupt``) is raised here.

        Raises
        ------
        NotebookSourceError
            The source is missing, malformed or unsupported, or its kernel is not installed.
        ParameterError
            A parameter is unknown, missing, or of the wrong type.
        OutputWriteError
            The run finished and is recorded, but ``output_path`` could not be written; the
            error's ``result`` is the run's result dict.

        Notes
        -----
        A failure inside a run (a cell error, a timeout, a dead kernel, or even an unexpected
        failure of the engine itself) is never raised: the run is recorded and its result has
        ``status`` ``"error"`` and an ``error_kind``. Only bad input (above, raised before
        anything starts), ``OutputWriteError`` and a cancel raise.
        """
        self._check_open()
        if cancel is not None and not callable(getattr(cancel, "is_set", None)):
            raise NotebookExecutorError(
                f"cancel must be a threading.Event (or None), got {type(cancel).__name__}"
            )
        if on_cell is not None and not callable(on_cell):
            raise NotebookExecutorError(
                f"on_cell must be a callable (or None), got {type(on_cell).__name__}"
            )
        plan = self._plan(
            input_path,
            output_path=output_path,
            parameters=parameters,
            timeout=timeout,
            cell_timeout=cell_timeout,
            request=request,
            cwd=cwd,
            env=env,
            secrets=secrets,
        )
        _records.prepare_runs_dir(self.runs_dir)
        # The kernel starts while the run files are written.
        if isinstance(self._engine, SupportsPrestart):
            self._engine.prestart(plan.job)
        cells = sum(1 for cell in plan.nb.cells if cell.cell_type == "code")
        plan.job.cancel = cancel
        progress = self.progress
        printer = None
        if self.log_output:
            printer = plan.job.on_output = output_printer(plan.secrets)
            progress = progress or False  # a bar between outputs helps nobody
        with cell_progress(cells, Path(plan.notebook).name, progress) as bar:
            plan.job.on_cell = _cell_hook(bar, on_cell, cells)
            try:
                return self._run(plan)
            finally:
                if printer is not None:
                    printer.flush()

    def execute_many(
        self,
        input_path: PathLike,
        parameter_sets: Iterable[Mapping[str, Any] | None],
        *,
        max_workers: int | None = None,
        client: Any = None,
        retries: int = 0,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """Run one notebook once per parameter set; results come in the order of the sets.

        Every set is checked before the first run starts, so bad input raises before any
        kernel starts. Runs go in parallel, each on its own fresh kernel, up to ``max_workers``
        at a time (default: the number of CPUs); a progress bar shows on a terminal.
        ``options`` are those of :meth:`execute` (``output_path`` excepted).

        With ``client`` (a ``distributed.Client``, or a Dask scheduler address such as
        ``"tcp://host:8786"``; needs the ``[dask]`` extra) each run executes on a kernel of a
        Dask worker, which needs this package installed but no copy of the notebook: the
        notebook travels with the run. The executed notebooks come back and their run records
        and catalog entries are written here. Without ``cwd``, a run's working directory is a
        copy of the notebook's folder on its worker (at most 10 MB; hidden entries and
        ``runs_dir`` left out; what the run writes there is discarded); with ``cwd``, that
        folder must exist on every worker (a shared path). ``secrets`` reach the workers'
        kernels only, never the scheduler. A run runs at most once: one whose worker is lost
        ends as ``"error"``, ``error_kind`` ``"interrupted"`` (even when Dask hands its task to
        another worker), unless ``retries`` (with ``client``) lets it begin again up to that
        many times; its record lists every attempt. Ctrl-C cancels the runs not started yet.

        Raises
        ------
        NotebookExecutorError
            Bad input (before anything runs), or a scheduler that cannot be reached.
        """
        self._check_open()
        if "output_path" in options:
            raise NotebookExecutorError("execute_many does not take output_path")
        if max_workers is not None and (
            isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
        ):
            raise NotebookExecutorError(f"max_workers must be a positive int, got {max_workers!r}")
        if client is not None and max_workers is not None:
            raise NotebookExecutorError("max_workers applies to local runs, not with client")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise NotebookExecutorError(f"retries must be an int >= 0, got {retries!r}")
        if retries and client is None:
            raise NotebookExecutorError("retries applies to runs on a Dask cluster (client=)")
        try:
            all_sets = list(parameter_sets)
        except TypeError:
            raise NotebookExecutorError(
                "parameter_sets must be an iterable of parameter mappings, "
                f"got {type(parameter_sets).__name__}"
            ) from None
        plans = [
            self._plan(input_path, output_path=None, parameters=values, **options)
            for values in all_sets
        ]
        if client is not None:
            from ._cluster.dask import run_on_cluster

            if options.get("cwd") is None and is_url(input_path):
                raise NotebookExecutorError(
                    "a notebook at a URL has no folder to ship to the workers: "
                    "pass cwd= a path that exists on every worker"
                )
            folder = None if options.get("cwd") is not None else Path(input_path).resolve().parent
            progress = run_progress(len(plans), self.progress)
            try:
                return run_on_cluster(
                    plans,
                    client,
                    runs_dir=self.runs_dir,
                    on_record=self._catalog_call,
                    folder=folder,
                    progress=progress,
                    retries=retries,
                )
            finally:
                if progress is not None:
                    progress.close()
        _records.prepare_runs_dir(self.runs_dir)
        # Every run is checked: announce them all, so the engine knows a sweep is coming
        # (the default engine then readies its kernels for many runs, not one).
        if isinstance(self._engine, SupportsPrestart):
            for plan in plans:
                self._engine.prestart(plan.job)
        workers = min(len(plans), max_workers or os.cpu_count() or 1)
        return _run_all(
            self._run, plans, workers, self.progress, getattr(self._engine, "cancel", None)
        )

    # -- parameters and sources --------------------------------------------------------------

    def inspect_parameters(self, notebook_path: PathLike) -> dict[str, dict[str, Any]]:
        """The parameters ``notebook_path`` declares: ``{name: {name, type, default, help,
        required}}``."""
        declared = declared_parameters(load_source(notebook_path).nb)
        return {name: parameter.as_dict() for name, parameter in declared.items()}

    @staticmethod
    def read_notebook(path: PathLike) -> nbformat.NotebookNode:
        """Read any supported source as an nbformat 4 notebook."""
        import nbformat

        nb: nbformat.NotebookNode = nbformat.from_dict(_read_notebook(path))
        return nb

    @staticmethod
    def write_notebook(nb: Mapping[str, Any], path: PathLike) -> Path:
        """Write ``nb`` (an nbformat 4 notebook) in the format ``path``'s extension names;
        return the path."""
        return _write_notebook(from_dict(nb), path)

    # -- authoring and review ----------------------------------------------------------------

    @staticmethod
    def edit_cell(
        path: PathLike, index: int, source: str, *, expect: str | None = None
    ) -> NotebookNode:
        """Replace the source of cell ``index`` in the file, in its own format.

        Every other cell's text stays byte-identical; the file is written atomically. Indices
        are those of ``read_notebook(path).cells`` (and of a result's ``failed_cell.index``).
        ``expect``, the source the caller read, refuses the edit when the cell changed since.
        A new text that would split or merge cells in this format (``# %%`` in a percent
        script, a fence in markdown) is refused with :class:`NotebookSourceError`.

        Returns
        -------
        NotebookNode
            ``read_notebook(path)`` after the edit.
        """
        from ._review.edit import edit_cell

        return edit_cell(path, index, source, expect=expect)

    @staticmethod
    def insert_cell(
        path: PathLike, index: int, source: str, cell_type: str = "code"
    ) -> NotebookNode:
        """Insert a cell at ``index`` (``len(cells)`` appends); same rules as :meth:`edit_cell`."""
        from ._review.edit import insert_cell

        return insert_cell(path, index, source, cell_type)

    @staticmethod
    def delete_cell(path: PathLike, index: int, *, expect: str | None = None) -> NotebookNode:
        """Delete cell ``index``; same rules as :meth:`edit_cell`."""
        from ._review.edit import delete_cell

        return delete_cell(path, index, expect=expect)

    def diff_notebooks(self, a: PathLike, b: PathLike, *, outputs: bool = False) -> dict[str, Any]:
        """Compare two notebooks, each a source path (any format) or a run id.

        Returns ``{"identical", "cells", "metadata_changed"}``; ``cells`` lists the cells
        ``"added"``, ``"removed"`` or ``"modified"`` with ``index_a``, ``index_b`` (indices of
        ``read_notebook``; a run's injected parameters cell is left out), a unified
        ``source_diff`` and ``outputs_changed`` (compared only with ``outputs=True``, without
        execution counts, timings or memory addresses).
        """
        from ._review.diff import diff_cells

        return diff_cells(
            self._notebook_or_run(a),
            self._notebook_or_run(b),
            outputs=outputs,
            labels=(os.fspath(a), os.fspath(b)),
        )

    def diff_runs(self, run_a: str, run_b: str) -> dict[str, Any]:
        """What differs between two past runs: ``{"status": [a, b], "parameters": {name:
        [a, b]}, "scraps": {name: [a, b]}, "cells": [...]}`` (only differing names; ``cells``
        as in :meth:`diff_notebooks` with outputs compared)."""
        from ._review.diff import diff_records

        return diff_records(
            self.get_run(run_a),
            self.get_run(run_b),
            self._run_notebook(run_a),
            self._run_notebook(run_b),
        )

    def validate(
        self, path: PathLike, *, execute: bool = False, **execute_options: Any
    ) -> dict[str, Any]:
        """Check a notebook: ``{"valid": bool, "problems": [{"cell", "severity", "message"}]}``.

        Checks the nbformat schema, that the parameters cell parses, that code cells compile,
        one language, an installed kernel and the declared environment variables. With
        ``execute=True`` it also runs the notebook (options as for :meth:`execute`; the run is
        not recorded) and honours nbval's markers: ``# NBVAL_SKIP`` / tags ``skip-execution``,
        ``nbval-skip``; ``raises-exception`` (the cell must raise; the run goes on);
        ``# NBVAL_CHECK_OUTPUT`` (outputs must equal the stored ones, sanitised). ``cell`` is
        an index of ``read_notebook(path).cells`` or None; ``severity`` is ``"error"`` or
        ``"warning"``; the notebook is valid when there is no error.
        """
        from ._review.validate import validate_notebook

        self._check_open()
        check_path("path", path)
        if self.kernel_name is not None:
            execute_options.setdefault("kernel_name", self.kernel_name)
        return validate_notebook(
            path, execute=execute, plan=self._plan, engine=self._engine, options=execute_options
        )

    def _notebook_or_run(self, reference: PathLike) -> NotebookNode:
        check_path("notebook", reference)
        candidate = Path(reference)
        if candidate.is_file():
            return _read_notebook(candidate)
        try:
            return self._run_notebook(os.fspath(reference))
        except RunNotFoundError:
            if candidate.suffix.lower() in (".ipynb", ".py", ".md"):
                raise NotebookSourceError(os.fspath(reference), "no such file") from None
            raise

    def _run_notebook(self, run_id: str) -> NotebookNode:
        import nbformat

        try:
            path = _records.run_notebook_path(self.runs_dir, run_id)
        except NotebookExecutorError:
            raise RunNotFoundError(run_id) from None
        if not path.is_file():
            raise RunNotFoundError(run_id)
        try:
            nb: NotebookNode = nbformat.read(path, as_version=4)
        except Exception as exc:  # a damaged run file can break nbformat in many ways
            raise NotebookSourceError(str(path), f"unreadable run notebook: {exc}") from None
        return nb

    # -- records ---------------------------------------------------------------------------

    def collect_outputs(self, notebook_path_or_run_id: PathLike) -> dict[str, Any]:
        """Every scrap of an executed notebook (a path) or of a past run (a run id), decoded."""
        check_path("notebook_path_or_run_id", notebook_path_or_run_id)
        candidate = Path(notebook_path_or_run_id)
        if candidate.suffix == ".ipynb" and candidate.exists():
            path = candidate
        else:
            path = _records.run_notebook_path(self.runs_dir, os.fspath(notebook_path_or_run_id))
            if not path.exists():
                raise RunNotFoundError(os.fspath(notebook_path_or_run_id))
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError, UnicodeDecodeError, AttributeError) as exc:
            raise NotebookSourceError(str(path), f"unreadable notebook: {exc}") from None
        return {name: decode_scrap(raw) for name, raw in find_scraps(cells).items()}

    def get_run(self, run_id: str) -> dict[str, Any]:
        """The result dict of a past run (a run whose process died shows as interrupted)."""
        if not isinstance(run_id, str):
            raise RunNotFoundError(
                repr(run_id), f"a run id is a string, not {type(run_id).__name__}"
            )
        try:
            return self._open_catalog().get_run(run_id)
        except CatalogError:
            # The files are the truth: an unusable catalog does not hide a run.
            record = _records.read_record(_records.run_notebook_path(self.runs_dir, run_id))
            return {key: record.get(key) for key in _records.RESULT_KEYS}

    def runs(
        self,
        notebook: PathLike | None = None,
        status: str | None = None,
        since: Any = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
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
    ) -> list[dict[str, Any]]:
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

    def reindex(self) -> int:
        """Rebuild the catalog from the run files; return the number of runs indexed."""
        return self._open_catalog().reindex()

    # -- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise NotebookExecutorError("this NotebookExecutor is closed")

    def _open_catalog(self) -> Catalog:
        self._check_open()
        with self._catalog_lock:
            if self._catalog is None:
                from ._catalog.store import Catalog

                self._catalog = Catalog(self.runs_dir)
            return self._catalog

    def _run(self, plan: Plan) -> dict[str, Any]:
        return run_plan(plan, self._engine, self.runs_dir, self._catalog_call)

    def _plan(self, input_path: PathLike, **options: Any) -> Plan:
        return plan_run(
            input_path,
            kernel_name=self.kernel_name,
            default_timeout=self.timeout,
            default_cell_timeout=self.cell_timeout,
            base_env=self.base_env,
            dotenv_root=self.dotenv_root,
            **options,
        )

    def _catalog_call(self, method: str, record: Mapping[str, Any]) -> None:
        # The files are the truth; a catalog that cannot be written is rebuilt by reindex.
        try:
            getattr(self._open_catalog(), method)(record)
        except NotebookExecutorError as exc:
            logger.warning("run %s not indexed: %s", record.get("run_id"), exc)


def _cell_hook(
    bar: Callable[[int], None] | None,
    hook: Callable[[int, int], None] | None,
    total: int,
) -> Callable[[int], None] | None:
    """The engine's per-cell callback: the progress bar's and the caller's ``(done, total)``,
    whichever are given."""
    if hook is None:
        return bar
    done = 0

    def on_cell(index: int) -> None:
        nonlocal done
        done += 1
        if bar is not None:
            bar(index)
        hook(done, total)

    return on_cell


def _run_all(
    run: Callable[[Plan], dict[str, Any]],
    plans: list[Plan],
    workers: int,
    wanted: bool | None,
    cancel: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """``[run(plan) for plan in plans]`` on up to ``workers`` threads, with a progress bar.

    On Ctrl-C, runs not started yet never start, and ``cancel`` (the engine's, if it has one)
    stops those running at once: each is recorded as cancelled, then the interrupt goes on.
    """
    progress = run_progress(len(plans), wanted)
    try:
        if workers <= 1:
            results = []
            for plan in plans:
                results.append(run(plan))
                if progress is not None:
                    progress.update()
            return results
        from concurrent.futures import ThreadPoolExecutor, wait

        pool = ThreadPoolExecutor(workers, thread_name_prefix="notebook-executor-run")
        futures = []
        try:
            futures = [pool.submit(run, plan) for plan in plans]
            if progress is not None:
                for future in futures:
                    future.add_done_callback(lambda _: progress.update())
            return [future.result() for future in futures]
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            # A run may reach its engine after the first call: cancel until all have ended.
            while not all(future.done() for future in futures):
                if cancel is not None:
                    cancel()
                wait(futures, timeout=0.1)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        if progress is not None:
            progress.close()
