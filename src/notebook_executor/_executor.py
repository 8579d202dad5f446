"""NotebookExecutor: the facade that composes sources, parameters, engine, results and records.

Data flows one way: source -> parameters -> engine -> results -> run records and catalog.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._dispatch.foreground import run_in_foreground
from ._dispatch.threads import run_all
from ._errors import InvalidArgumentError
from ._facade.review import ReviewMethods
from ._kernels.kernel_engine import KernelEngine
from ._records.store import RunStore
from ._run.checks import PathLike, check_count, check_env, check_seconds
from ._run.options import RunOptions
from ._run.runner import prepared_notebook
from ._sources.formats import write_notebook as _write_notebook
from ._types import USE_DEFAULT, CellEdit, RunResult, UseDefault
from .engine import Engine, SupportsPrepare

if TYPE_CHECKING:
    import nbformat

    from ._catalog.store import Catalog
    from ._kernels.forkserver import ForkChannel
    from ._run.plan import Plan
    from ._session.session import Session

__all__ = ["NotebookExecutor"]


class NotebookExecutor(ReviewMethods):
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
        MCP server) gives a minimal one, so that no variable of its own reaches a kernel. A
        kernel can still read ``/proc/<pid>/environ`` of this process unless it is not
        dumpable (the MCP server makes itself so: ``PR_SET_DUMPABLE``).
    dotenv_root : path, optional
        Where a notebook's declared ``env:`` variables may be read from ``.env`` files: with
        it, only the ``.env`` of the notebook's folder (when inside this folder) and of this
        folder itself, never the working directory's, and neither through a symlink that
        leads out of this folder. By default, the notebook's folder and the working
        directory. A server confined to a folder (the MCP server) gives its root, so that no
        file outside the root feeds a kernel.

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
        self._store = RunStore(self.runs_dir)
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
        self._catalog: Catalog | None = None
        self._catalog_lock = threading.Lock()
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
        with self._catalog_lock:
            catalog, self._catalog = self._catalog, None
        if catalog is not None:
            catalog.close()

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
            runs_dir=self.runs_dir,
            on_record=self._catalog_call,
            idle_timeout=idle_timeout,
            checkpoint_memory=checkpoint_memory,
            on_close=self._sessions.discard,
            template=self._session_template,
        )
        self._sessions.add(session)
        return session

    def _session_template(self, plan: Plan) -> ForkChannel | None:
        """The template a session's kernel forks from: the engine's, as ``execute`` does."""
        if not isinstance(self._engine, KernelEngine):
            return None
        job = plan.job
        return self._engine.template(job.kernel, job.cwd, job.env)

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
                on_record=self._catalog_call,
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
            _write_notebook(prepared, plan.output_path)
        nb: nbformat.NotebookNode = nbformat.from_dict(prepared)
        return nb
