"""NotebookExecutor: the facade that composes sources, parameters, engine, results and records.

Data flows one way: source -> parameters -> engine -> results -> run records and catalog.

The executor holds what it works with: its engine and its run records
(:class:`~._facade.records.RunRecords`: the run store and the catalog). What needs no
executor (a source's declared parameters, one cell edited) is a function of
:mod:`._facade.sources`, which the executor exposes as a static method.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._dispatch.foreground import run_in_foreground
from ._dispatch.threads import run_all
from ._errors import ExecutorClosedError, InvalidArgumentError
from ._facade import sources
from ._facade.records import RunRecords
from ._kernels.kernel_engine import KernelEngine
from ._records.project import find_runs_dir
from ._run.checks import PathLike, check_count, check_env, check_path, check_seconds
from ._run.options import RunOptions
from ._run.plan import Plan, plan_run
from ._run.runner import prepared_notebook, run_plan
from ._sources.formats import read_notebook, write_notebook
from ._types import (
    USE_DEFAULT,
    CellEdit,
    NotebookDiff,
    RunDiff,
    RunResult,
    SearchHit,
    UseDefault,
    ValidateAnswer,
)
from .engine import Engine, SupportsPrepare, SupportsPrestart

if TYPE_CHECKING:
    import nbformat
    import pandas as pd

    from ._catalog.store import Catalog
    from ._review.golden import OutputRules
    from ._review.validate import Checked
    from ._session.session import Session
    from ._types import Digest

__all__ = ["NotebookExecutor"]


class NotebookExecutor:
    """Run notebooks as parameterized tasks and keep every run as an audit record.

    Parameters
    ----------
    runs_dir : path, optional
        Where run records go: ``<runs_dir>/YYYY-MM-DD/<run_id>.ipynb`` and ``.md``, plus
        ``catalog.sqlite``. By default the project's runs folder, found from the working
        directory: the nearest ``runs/`` holding a catalog up to the project folder (the
        first one holding ``.git`` or ``pyproject.toml``), else the ``runs-dir`` of
        ``[tool.notebook-executor]`` in its ``pyproject.toml``, else ``runs``
        (:func:`~._records.project.find_runs_dir`). A bad setting there is an
        :class:`InvalidArgumentError`.
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
        MCP server) gives a minimal one, so that no variable of its own reaches a kernel. A
        kernel can still read ``/proc/<pid>/environ`` of this process unless it is not
        dumpable (the MCP server makes itself so: ``PR_SET_DUMPABLE``).
    dotenv_root : path, optional
        Where a notebook's declared ``env:`` variables may be read from ``.env`` files: with
        it, only the ``.env`` of the notebook's folder (when inside this folder) and of this
        folder itself, never the working directory's, and neither through a symlink that
        leads out of this folder. By default, the notebook's folder and the working
        directory. A server confined to a folder (the MCP server) gives its root, so that no
        file outside the root feeds a kernel. With it, a declared dependency naming a local
        project outside this folder (``name @ file:///dir``) is a :class:`DependencyError`:
        making the environment would run that project's build code.

    Examples
    --------
    >>> with NotebookExecutor(runs_dir="runs") as ex:  # doctest: +SKIP
    ...     result = ex.execute("notebooks/hello.py", parameters={"name": "Ada"})
    """

    def __init__(
        self,
        runs_dir: PathLike | None = None,
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
        self.runs_dir = find_runs_dir().path if runs_dir is None else Path(runs_dir)
        self._records = RunRecords(self.runs_dir)
        self.dotenv_root = None if dotenv_root is None else Path(dotenv_root).resolve()
        self.base_env = None if base_env is None else dict(check_env("base_env", base_env))
        self.progress = progress
        self.log_output = log_output
        self.kernel_name = kernel_name
        self.timeout = check_seconds("timeout", timeout)
        self.cell_timeout = check_seconds("cell_timeout", cell_timeout)
        if engine is not None and warm_kernels is not None:
            raise InvalidArgumentError("warm_kernels applies to the default engine only")
        check_count("warm_kernels", warm_kernels, minimum=0)
        self._engine: Engine = (
            engine if engine is not None else KernelEngine(warm_kernels=warm_kernels)
        )
        self._closed = False
        self._sessions: set[Session] = set()
        self._prepare_once_read = False

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> NotebookExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every kernel and release the catalog. Safe to call more than once."""
        if self._closed:
            return
        from ._session.opening import close_sessions

        # Sessions finish their records (and catalog rows) while the executor is still open.
        close_sessions(self._sessions)
        self._closed = True
        self._engine.close()
        self._records.close()

    # -- running ---------------------------------------------------------------------------

    def prepare_kernel(self, *, once_read: bool = False) -> None:
        """Give the engine a head start on the first run, before that run is known.

        For a caller that runs one notebook and has work to do before :meth:`execute` (the
        command line, with ``once_read``: its work is reading and checking the run). The
        default engine starts a template process that imports ipykernel meanwhile, and forks
        the first kernel from it once :meth:`execute` asks for one. No kernel starts here, so
        bad input still starts none. Does nothing with an engine that has no
        :meth:`~notebook_executor.engine.SupportsPrepare.prepare_kernel` hook.

        With ``once_read``, the head start waits until the next run's source is read, and is
        given only when that run is on this interpreter's Python kernel (not on another
        kernelspec, nor in the environment made for the notebook's declared dependencies,
        whose kernels start from elsewhere): for a caller that cannot tell beforehand without
        reading the source itself (the command line).
        """
        self._check_open()
        if once_read:
            self._prepare_once_read = True
        elif isinstance(self._engine, SupportsPrepare):
            self._engine.prepare_kernel()

    def execute(
        self,
        input_path: PathLike,
        output_path: PathLike | None = None,
        parameters: Mapping[str, Any] | None = None,
        timeout: float | UseDefault | None = USE_DEFAULT,
        *,
        cell_timeout: float | UseDefault | None = USE_DEFAULT,
        request: str | None = None,
        cwd: PathLike | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        edits: Sequence[CellEdit] | None = None,
        environment: str | None = None,
        on_cell: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RunResult:
        """Run one notebook and return its result dict.

        Never raises for a failure inside the notebook (the result says ``"status": "error"``);
        raises for bad input before any kernel starts.

        Parameters
        ----------
        input_path : path
            ``.ipynb``, percent ``.py`` or markdown ``.md`` source (named ``input_path``, as
            papermill names it, by SPEC section 3; other methods call a source ``path``).
        output_path : path, optional
            The caller's copy: also write the whole executed notebook here (``.ipynb``, the
            usual file mode; the stream cap is for the run record only; secrets redacted as
            there). The run record is always kept under ``runs_dir``. The source itself is
            refused. The result's ``output_path`` is this copy when given, else the run
            record's ``.ipynb`` (SPEC section 4: the path of the executed notebook).
        parameters : mapping, optional
            Values for the notebook's declared parameters.
        timeout, cell_timeout : float or None, optional
            Limits in seconds for the whole run and for each cell. Not given
            (:data:`~notebook_executor.USE_DEFAULT`), the executor's; ``None``, no limit for
            this run even when the executor has one.
        request : str, optional
            Free-text reason for the run, kept in the record.
        cwd : path, optional
            Working directory of the kernel; default the notebook's folder.
        env : mapping, optional
            Extra environment variables for the kernel (their names are recorded, not values).
        secrets : mapping, optional
            Environment variables whose values are never written anywhere: not to the result,
            the run records, the catalog or logs. Occurrences in outputs are redacted; an output
            or scrap that holds one where text search cannot reach (an image's bytes, a
            DataFrame) is withheld. Values shorter than 6 characters are not searched for
            (they would damage ordinary text); the record lists them and a warning is logged.
        edits : list of CellEdit, optional
            A modified run: ``[{"index": i, "source": text, "note": why}]`` replaces cell
            ``i`` (as in ``failed_cell.index``; a code or markdown cell, not the parameters
            cell) for this run only; the source file is not touched. Parameters, placeholders
            and secrets work as in a plain run. The run's ``.md`` shows each edited cell's
            template code, the note (or the request), then the code as run; the ``.ipynb``
            keeps the template code in ``cell.metadata.notebook_executor.original_source``;
            the result lists ``edited_cells``. A bad edit (an index out of range, a text that
            would split the cell in the source's format, an unknown key) is refused before
            any kernel starts.
        environment : {None, "declared", "current"}, optional
            A notebook that declares dependencies (a PEP 723 block, front matter
            ``dependencies:``, ``.ipynb`` metadata ``notebook_executor.dependencies``) runs
            by default on a kernel in an environment made by uv for them, cached by a hash of
            the declaration and the Python (made before the kernel starts, reused after);
            ``"current"`` runs it on the executor's own interpreter instead. Without a
            declaration, every run is on the executor's own interpreter.
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
            A parameter is unknown, missing, or of the wrong type; or a declared environment
            variable is found nowhere.
        InvalidArgumentError
            Another argument is not acceptable (:class:`OutputPathError` for ``output_path``).
        DependencyError
            The declared dependencies cannot be installed (a requirement uv cannot resolve,
            no Python satisfying ``requires-python``, no network with nothing cached).
        RunsDirError
            ``runs_dir`` cannot hold run records.
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
            raise InvalidArgumentError(
                f"cancel must be a threading.Event (or None), got {type(cancel).__name__}"
            )
        if on_cell is not None and not callable(on_cell):
            raise InvalidArgumentError(
                f"on_cell must be a callable (or None), got {type(on_cell).__name__}"
            )
        plan = self._plan(
            input_path,
            RunOptions(
                output_path=output_path,
                parameters=parameters,
                timeout=timeout,
                cell_timeout=cell_timeout,
                request=request,
                cwd=cwd,
                env=env,
                secrets=secrets,
                edits=edits,
                environment=environment,
            ),
        )
        # The kernel starts while the run records are written.
        self._announce([plan])
        return run_in_foreground(
            plan,
            self._run,
            progress=self.progress,
            log_output=self.log_output,
            on_cell=on_cell,
            cancel=cancel,
        )

    def open_session(
        self,
        input_path: PathLike,
        parameters: Mapping[str, Any] | None = None,
        *,
        request: str | None = None,
        cwd: PathLike | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
        timeout: float | UseDefault | None = USE_DEFAULT,
        cell_timeout: float | UseDefault | None = USE_DEFAULT,
        idle_timeout: float | None = 1800,
        checkpoint_memory: int | None = None,
        environment: str | None = None,
    ) -> Session:
        """Start a live kernel on a notebook, to step through it: a :class:`Session`.

        The same checks and errors as :meth:`execute`, before any kernel starts; nothing runs
        until :meth:`Session.run`. Each step reads the source as it is then. ``timeout`` bounds
        each step, ``cell_timeout`` each cell (not given: the executor's; None: no limit);
        ``idle_timeout`` (seconds, None: never) closes a session left idle;
        ``checkpoint_memory`` (bytes, None: no limit) bounds the memory of its checkpoints, the
        oldest evicted first. The session is a run record under ``runs_dir``, brought up to
        date after every step; :meth:`close` closes every session.
        ``environment`` is :meth:`execute`'s: a notebook that declares dependencies runs in the
        environment made for them unless it is ``"current"``.
        """
        self._check_open()
        from ._session.opening import open_session

        options = RunOptions(
            parameters=None if parameters is None else dict(parameters),
            request=request,
            cwd=cwd,
            env=env,
            secrets=secrets,
            timeout=timeout,
            cell_timeout=cell_timeout,
            environment=environment,
        )
        session = open_session(
            lambda: self._plan(input_path, options),
            self._engine,
            runs_dir=self.runs_dir,
            on_record=self._records.index,
            idle_timeout=idle_timeout,
            checkpoint_memory=checkpoint_memory,
            on_close=self._sessions.discard,
        )
        self._sessions.add(session)
        return session

    def execute_many(
        self,
        input_path: PathLike,
        parameter_sets: Iterable[Mapping[str, Any] | None],
        *,
        max_workers: int | None = None,
        client: Any = None,
        retries: int = 0,
        **options: Any,
    ) -> list[RunResult]:
        """Run one notebook once per parameter set; results come in the order of the sets.

        Every set is checked before the first run starts, so bad input raises before any
        kernel starts. Runs go in parallel, each on its own fresh kernel, up to ``max_workers``
        at a time (default: the number of CPUs); a progress bar shows on a terminal.
        ``options`` are those of :meth:`execute` but ``output_path`` and ``parameters`` (an
        unknown name is refused).

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
        A notebook that declares dependencies is refused on a cluster (:class:`ClusterError`,
        before anything is submitted) unless ``environment="current"``: its workers' own
        interpreters then run it.

        Raises
        ------
        NotebookExecutorError
            Bad input (before anything runs), or a scheduler that cannot be reached.
        """
        self._check_open()
        given = RunOptions.from_keywords("execute_many", options)
        if given.output_path is not None:
            raise InvalidArgumentError("execute_many does not take output_path")
        if given.parameters is not None:
            raise InvalidArgumentError("execute_many takes its parameters from parameter_sets")
        check_count("max_workers", max_workers, minimum=1)
        if client is not None and max_workers is not None:
            raise InvalidArgumentError("max_workers applies to local runs, not with client")
        check_count("retries", retries, minimum=0)
        if retries and client is None:
            raise InvalidArgumentError("retries applies to runs on a Dask cluster (client=)")
        try:
            all_sets = list(parameter_sets)
        except TypeError:
            raise InvalidArgumentError(
                "parameter_sets must be an iterable of parameter mappings, "
                f"got {type(parameter_sets).__name__}"
            ) from None
        if client is not None:
            from ._dispatch.cluster import refuse_declared_environment_on_dask

            refuse_declared_environment_on_dask(input_path, given.environment)
        plans = [self._plan(input_path, given.replace(parameters=values)) for values in all_sets]
        if client is not None:
            from ._dispatch.cluster import run_on_dask

            return run_on_dask(
                input_path,
                plans,
                client,
                cwd_given=given.cwd is not None,
                runs_dir=self.runs_dir,
                on_record=self._records.index,
                wanted=self.progress,
                retries=retries,
            )
        # Every run is checked: announce them all, so the engine knows a sweep is coming
        # (the default engine then readies its kernels for many runs, not one).
        self._announce(plans)
        workers = min(len(plans), max_workers or os.cpu_count() or 1)
        return run_all(
            self._run, plans, workers, self.progress, getattr(self._engine, "cancel", None)
        )

    def prepare(
        self, input_path: PathLike, output_path: PathLike | None = None, **options: Any
    ) -> nbformat.NotebookNode:
        """Make every check :meth:`execute` makes and prepare the run, but run nothing.

        Papermill's ``prepare_only``: no kernel starts. The prepared notebook has the
        parameters injected and papermill's metadata (with no times), secrets redacted; it is
        written to ``output_path`` when one is given (``.ipynb``: a path or a URL), and
        returned. ``options`` are those of :meth:`execute`. Nothing is recorded.

        Raises
        ------
        NotebookSourceError, ParameterError, NotebookExecutorError
            Bad input, as :meth:`execute` raises it.
        """
        import nbformat

        self._check_open()
        given = RunOptions.from_keywords("prepare", {"output_path": output_path, **options})
        plan = self._plan(input_path, given, make_environment=False)
        prepared = prepared_notebook(plan)
        if plan.output_path is not None:
            write_notebook(prepared, plan.output_path)
        nb: nbformat.NotebookNode = nbformat.from_dict(prepared)
        return nb

    # -- past runs -------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunResult:
        """The result dict of a past run (a run whose process died shows as interrupted)."""
        self._check_open()
        return self._records.get_run(run_id)

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

        Named ``collect_outputs``, with the argument ``notebook_path_or_run_id``, by SPEC
        section 3: what it collects are the notebook's scraps (``sb.glue``), not its cell
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

    # -- sources and review ----------------------------------------------------------------

    inspect_parameters = staticmethod(sources.inspect_parameters)
    inspect_environment = staticmethod(sources.inspect_environment)
    read_notebook = staticmethod(read_notebook)
    write_notebook = staticmethod(write_notebook)
    edit_cell = staticmethod(sources.edit_cell)
    insert_cell = staticmethod(sources.insert_cell)
    delete_cell = staticmethod(sources.delete_cell)

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

    def validate(
        self, path: PathLike, *, execute: bool = False, **execute_options: Any
    ) -> ValidateAnswer:
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
        return validate_notebook(
            path,
            execute=execute,
            plan=self._plan_keywords,
            engine=self._engine,
            options=execute_options,
        )

    def _check_notebook(
        self,
        path: PathLike,
        *,
        execute: bool,
        record: bool = False,
        outputs: OutputRules | None = None,
        skip_unset: bool = True,
        **execute_options: Any,
    ) -> Checked:
        """The verdict ``check`` and ``pytest --notebooks`` both give (one code, so the two
        never disagree): :meth:`validate`'s answer, the run's result and output diffs, or the
        reason the notebook is skipped (with ``skip_unset``: a required parameter or declared
        environment variable not given). With ``record`` the run is kept under ``runs_dir``
        and indexed, as any run."""
        from ._review.validate import check_notebook

        self._check_open()
        check_path("path", path)
        return check_notebook(
            path,
            execute=execute,
            plan=self._plan_keywords,
            engine=self._engine,
            options=execute_options,
            run=self._recorded_run if record else None,
            outputs=outputs,
            skip_unset=skip_unset,
        )

    # -- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorClosedError("this NotebookExecutor is closed")

    def _catalog(self) -> Catalog:
        self._check_open()
        return self._records.catalog()

    def _plan(
        self, input_path: PathLike, options: RunOptions, *, make_environment: bool = True
    ) -> Plan:
        from ._review.run_edits import check_edits

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

    def _announce(self, plans: list[Plan]) -> None:
        """Get ready for ``plans``: the runs folder made, each run's kernel started (when the
        engine can) while its run records are written."""
        self._records.store.prepare()
        if isinstance(self._engine, SupportsPrestart):
            for plan in plans:
                self._engine.prestart(plan.job)

    def _run(self, plan: Plan) -> RunResult:
        return run_plan(plan, self._engine, self.runs_dir, self._records.index)

    def _recorded_run(self, plan: Plan) -> RunResult:
        self._announce([plan])
        return self._run(plan)
