"""NotebookExecutor: the facade that composes sources, parameters, engine, results and records.

Data flows one way: source -> parameters -> engine -> results -> run records and catalog.

The executor holds what it works with: its engine and its run records
(:class:`~._catalog.records.RunRecords`: the run store and the catalog). What needs no
executor (a source's declared parameters, one cell edited) is a function of
:mod:`._review.sources`, which the executor exposes as a static method.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._dispatch.foreground import run_in_foreground
from ._dispatch.threads import run_all
from ._errors import InvalidArgumentError
from ._history import RunHistory
from ._kernels.kernel_engine import KernelEngine
from ._records.lineage import ParentRun
from ._records.project import find_runs_dir
from ._review import sources
from ._review.run_edits import check_edits
from ._run.checks import PathLike, check_count, check_env, check_hooks, check_path, check_seconds
from ._run.options import RunOptions, sweep_options
from ._run.plan import Plan, Planner
from ._run.runner import prepared_notebook, run_plan
from ._sources.formats import read_notebook, write_notebook
from ._types import (
    USE_DEFAULT,
    CellEdit,
    RunResult,
    UseDefault,
    ValidateAnswer,
)
from .engine import Engine, SupportsPrepare, SupportsPrestart

if TYPE_CHECKING:
    import nbformat

    from ._dispatch.jobs import Job
    from ._review.golden import OutputRules
    from ._review.validate import Checked
    from ._session.session import Session

__all__ = ["NotebookExecutor", "check_notebook"]


class NotebookExecutor(RunHistory):
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
        Most kernels the default engine keeps ready once it has run a notebook (default 2; 0
        disables): one, and this many once a run found none ready (runs coming back to back);
        every run still gets a fresh kernel process, never one that served another.
    progress : bool, optional
        Progress bars on stderr: of cells for a run over a second, of runs in
        :meth:`execute_many` (default: when stderr is a terminal, and not with ``log_output``).
    log_output : bool, default False
        Write cell outputs (streams, the text of results, tracebacks) to stderr as they
        arrive, secrets masked; papermill's ``log_output``.
    base_env : mapping of str to str, optional
        The environment every kernel starts from (default: this process's), overlaid by a
        run's ``env`` and ``secrets``; declared ``env:`` variables are looked for there (then
        in ``.env`` files). A server running notebooks for others (the MCP server) gives a
        minimal one and makes itself not dumpable, so that nothing of its own reaches a kernel.
    dotenv_root : path, optional
        Confines which ``.env`` files declared variables come from to the notebook's folder
        and this folder (no symlink leading out; default: the notebook's folder and the
        working directory); a declared dependency on a local project outside it is a
        :class:`DependencyError`. A server confined to a folder (the MCP server) gives its root.

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
        super().__init__(find_runs_dir().path if runs_dir is None else Path(runs_dir))
        self.progress = progress
        self.log_output = log_output
        self._planner = Planner(
            kernel_name=kernel_name,
            timeout=check_seconds("timeout", timeout),
            cell_timeout=check_seconds("cell_timeout", cell_timeout),
            base_env=None if base_env is None else check_env("base_env", base_env),
            dotenv_root=None if dotenv_root is None else Path(dotenv_root).resolve(),
            check_edits=check_edits,
        )
        if engine is not None and warm_kernels is not None:
            raise InvalidArgumentError("warm_kernels applies to the default engine only")
        check_count("warm_kernels", warm_kernels, minimum=0)
        self._engine: Engine = (
            engine if engine is not None else KernelEngine(warm_kernels=warm_kernels)
        )
        if isinstance(self._engine, SupportsPrepare):
            self._planner.prepare_kernel = self._engine.prepare_kernel
        self._sessions: set[Session] = set()
        self._jobs: list[Job] = []

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> NotebookExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every kernel and release the catalog. Safe to call more than once."""
        if self._closed:
            return
        from ._dispatch.jobs import end_jobs
        from ._session.opening import close_sessions

        end_jobs(self._jobs)  # cancelled, and recorded so, while the executor is still open
        # Sessions finish their records (and catalog rows) while the executor is still open.
        close_sessions(self._sessions)
        self._closed = True
        self._engine.close()
        self._records.close()

    # -- running ---------------------------------------------------------------------------

    def prepare_kernel(self, *, once_read: bool = False) -> None:
        """Give the engine a head start on the first run, before that run is known.

        The default engine starts a template process that imports ipykernel meanwhile, and
        forks the first kernel from it once :meth:`execute` asks for one; no kernel starts
        here. Does nothing with an engine that has no
        :meth:`~notebook_executor.engine.SupportsPrepare.prepare_kernel` hook. With
        ``once_read`` (the command line), the head start waits until the next run's source is
        read, and is given only when that run is on this interpreter's Python kernel. Without
        it the default engine starts the template its first run needs as that run's kernel is
        asked for (the one with the data modules when the notebook imports scrapbook, pandas,
        numpy or pyarrow: a new executor's first three runs of a notebook that glues a scrap,
        ``benchmarks/bench_speed.py``'s step ``first``); called right after the executor is
        made, this starts a template sooner (a first run of a plain notebook, 2 CPUs:
        0.41-0.52 s, against 0.66-0.82 s without).
        """
        self._check_open()
        if once_read:
            self._planner.head_start_pending = True
        elif self._planner.prepare_kernel is not None:
            self._planner.prepare_kernel()

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
        reuse: bool | None = None,
        checkpoints: bool | None = None,
        on_cell: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> RunResult:
        """Run one notebook and return its result dict.

        A failure inside a run (a cell error, a timeout, a dead kernel, even an unexpected
        failure of the engine itself) is never raised: the run is recorded and its result has
        ``status`` ``"error"`` and an ``error_kind``. Only bad input (raised before anything
        starts), ``OutputWriteError`` and a cancel raise.

        Parameters
        ----------
        input_path : path
            ``.ipynb``, percent ``.py`` or markdown ``.md`` source (named ``input_path``, as
            papermill names it; other methods call a source ``path``).
        output_path, parameters, timeout, cell_timeout, request, cwd, env, secrets, edits, \
environment, reuse, checkpoints
            The run options: see :class:`~notebook_executor.RunOptions`, where each is
            described once.
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
            A parameter unknown, missing or mistyped; a declared variable found nowhere.
        InvalidArgumentError
            Another argument is not acceptable (:class:`OutputPathError` for ``output_path``).
        DependencyError, RunsDirError
            Declared dependencies that cannot be installed; a ``runs_dir`` that cannot be used.
        OutputWriteError
            The run is recorded but ``output_path`` could not be written (its ``result``).
        """
        self._check_open()
        check_hooks(on_cell, cancel)
        plan = self._planner.plan(
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
                reuse=reuse,
                checkpoints=checkpoints,
            ),
        )
        return self._foreground(plan, on_cell, cancel)

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

        The checks, errors and options of :meth:`execute`, before any kernel starts; nothing
        runs until :meth:`Session.run`, each step reading the source as it is then, bounded by
        ``timeout`` (its cells by ``cell_timeout``). ``idle_timeout`` (seconds, None: never)
        closes a session left idle; ``checkpoint_memory`` (bytes, None: no limit) bounds its
        checkpoints, the oldest evicted first. The session is a run record under ``runs_dir``,
        brought up to date after every step; :meth:`close` closes every session.
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
            lambda: self._planner.plan(input_path, options),
            self._engine,
            runs_dir=self.runs_dir,
            on_record=self._records.index,
            idle_timeout=idle_timeout,
            checkpoint_memory=checkpoint_memory,
            on_close=self._sessions.discard,
        )
        self._sessions.add(session)
        return session

    def submit(self, input_path: PathLike, **options: Any) -> Job:
        """Start :meth:`execute` ``(input_path, **options)`` and return at once a :class:`Job
        <notebook_executor.Job>`: ``job.status()``, ``job.wait(timeout=None)`` (the result
        dict; ``TimeoutError`` when the timeout passes first), ``job.cancel()``.

        The run goes on a thread of its own; at most one job per core runs at once, the others
        wait (``queued``). Bad input is raised by ``wait``, as ``execute`` raises it. Closing
        the executor cancels its jobs (recorded as cancelled). docs/how-to/jobs.md.
        """
        from ._dispatch.jobs import submit

        self._check_open()
        return submit(self._jobs, self.execute, input_path, options)

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

        Every set is checked before any kernel starts. Runs go in parallel on fresh kernels,
        up to ``max_workers`` (default: the CPUs). ``options``: :meth:`execute`'s but
        ``output_path`` and ``parameters``.

        With ``client`` (a ``distributed.Client``, or a scheduler address such as
        ``"tcp://host:8786"``; the ``[dask]`` extra) each run executes on a Dask worker's
        kernel, the notebook (and, without ``cwd``, a copy of its folder) travelling with it;
        the run records are written here. A run whose worker is lost ends ``"interrupted"``
        unless ``retries`` lets it begin again; a notebook that declares dependencies is
        refused there (:class:`ClusterError`) unless ``environment="current"``. The details
        are in docs/how-to/sweeps.md. Each run's record names the sweep as its ``parent_run``
        (docs/how-to/lineage.md). Ctrl-C cancels the runs not started yet. Raises
        :class:`NotebookExecutorError` for bad input (before anything runs), or a scheduler
        that cannot be reached.
        """
        self._check_open()
        given, all_sets = sweep_options(
            options, parameter_sets, max_workers=max_workers, client=client, retries=retries
        )
        if client is not None:
            from ._dispatch.cluster import refuse_declared_environment_on_dask

            refuse_declared_environment_on_dask(input_path, given.environment)
        plans = [
            self._planner.plan(input_path, given.replace(parameters=values)) for values in all_sets
        ]
        with ParentRun.over("sweep", plans, self.runs_dir) as sweep:  # docs/how-to/lineage.md
            if client is not None:
                from ._dispatch.cluster import run_on_dask

                results = run_on_dask(
                    input_path,
                    plans,
                    client,
                    cwd_given=given.cwd is not None,
                    runs_dir=self.runs_dir,
                    on_record=self._records.index,
                    wanted=self.progress,
                    retries=retries,
                )
            else:
                self._announce(plans)  # the default engine readies kernels for many runs
                workers = min(len(plans), max_workers or os.cpu_count() or 1)
                cancel = getattr(self._engine, "cancel", None)
                results = run_all(self._run, plans, workers, self.progress, cancel)
            sweep.ended(results)
        return results

    def prepare(
        self, input_path: PathLike, output_path: PathLike | None = None, **options: Any
    ) -> nbformat.NotebookNode:
        """Make every check :meth:`execute` makes and prepare the run, but run nothing.

        Papermill's ``prepare_only``: no kernel starts. The prepared notebook has the
        parameters injected and papermill's metadata (with no times), secrets redacted; it is
        written to ``output_path`` when one is given (``.ipynb``: a path or a URL), and
        returned. ``options`` are those of :meth:`execute`. Nothing is recorded. Bad input
        raises as it does in :meth:`execute`.
        """
        import nbformat

        self._check_open()
        given = RunOptions.from_keywords("prepare", {"output_path": output_path, **options})
        plan = self._planner.plan(input_path, given, make_environment=False)
        prepared = prepared_notebook(plan)
        if plan.output_path is not None:
            write_notebook(prepared, plan.output_path)
        nb: nbformat.NotebookNode = nbformat.from_dict(prepared)
        return nb

    # -- sources and review ----------------------------------------------------------------

    inspect_parameters = staticmethod(sources.inspect_parameters)
    inspect_environment = staticmethod(sources.inspect_environment)
    read_notebook = staticmethod(read_notebook)
    write_notebook = staticmethod(write_notebook)
    edit_cell = staticmethod(sources.edit_cell)
    insert_cell = staticmethod(sources.insert_cell)
    delete_cell = staticmethod(sources.delete_cell)

    def validate(
        self, path: PathLike, *, execute: bool = False, **execute_options: Any
    ) -> ValidateAnswer:
        """Check a notebook: ``{"valid": bool, "problems": [{"cell", "severity", "message"}]}``.

        Checks the schema, the parameters cell, that code cells compile, one language, an
        installed kernel and the declared environment variables. ``execute=True`` also runs it
        (options as for :meth:`execute`; not recorded), honouring nbval's markers (``#
        NBVAL_SKIP``, tags ``skip-execution``, ``nbval-skip``, ``raises-exception``, ``#
        NBVAL_CHECK_OUTPUT``). ``cell``: an index of ``read_notebook(path).cells`` or None;
        ``severity``: ``"error"`` or ``"warning"``; valid when there is no error.
        """
        from ._review.validate import validate_notebook

        self._check_open()
        check_path("path", path)
        return validate_notebook(
            path,
            execute=execute,
            plan=self._planner.plan_keywords,
            engine=self._engine,
            options=execute_options,
        )

    def reproduce(self, run_id: str) -> dict[str, Any]:
        """Run past run ``run_id``'s source again with its parameters and compare every cell's
        outputs with the record's (docs/how-to/reproduce.md): ``{"reproduced": bool, "run_id": the
        new run, "first_difference": None | {"cell", "diff"}, "inputs_changed": [...], ...}``
        (see :func:`~notebook_executor._review.reproduce.reproduce_run`)."""
        from ._review.reproduce import reproduce_run

        self._check_open()
        return reproduce_run(run_id, self._records, self.runs_dir, self.execute)

    def resume(
        self, run_id: str, *, edits: Sequence[CellEdit] | None = None, **options: Any
    ) -> RunResult:
        """Go on with failed, timed-out, cancelled or interrupted run ``run_id`` from its
        failed cell, the state before it read back from that run's checkpoints
        (docs/how-to/resume.md). The notebook's file is read as it is now, with the earlier
        run's parameters unless ``parameters`` is given; ``edits`` and ``options`` are
        :meth:`execute`'s. An edit before the failed cell goes back to the run's last
        checkpoint before the edited cell. Returns the result dict of a new run, whose
        ``resumed_from`` is ``run_id`` and whose ``reused_cells`` came from it;
        ``state_notes`` says what was not undone (files the earlier run wrote) and why a
        checkpoint was not used.

        Raises
        ------
        RunNotFoundError
            No run ``run_id``.
        InvalidArgumentError
            The run succeeded, still runs, is a session's, or its notebook file is gone; an
            option :meth:`execute` refuses.
        """
        from ._review.resume import resume_target

        self._check_open()
        target = resume_target(run_id, self._records, self.runs_dir)
        given = dict(options)
        given.setdefault("parameters", target.parameters)
        given.setdefault("request", f"resume {run_id}")
        if edits is not None:
            given["edits"] = edits
        on_cell, cancel = given.pop("on_cell", None), given.pop("cancel", None)
        check_hooks(on_cell, cancel)
        plan = self._planner.plan(target.notebook, RunOptions.from_keywords("resume", given))
        plan.resume_of = (run_id, plan.cell_map.to_job(target.failed_cell))
        plan.resume_note = target.note
        plan.parent_run = target.parent_run  # lineage: the run this one continues
        return self._foreground(plan, on_cell, cancel)

    def collect_checkpoints(self, max_bytes: int | None = None) -> dict[str, int]:
        """Free the disk durable checkpoints take (docs/how-to/incremental.md): the oldest
        beyond the limits (512 MiB per notebook, 2 GiB in all; ``max_bytes``: fewer in all)
        are evicted, then what no checkpoint names is removed. Returns ``{"freed_bytes",
        "checkpoints", "objects", "bytes", "notebooks"}``, the last four what is kept."""
        from ._checkpoints.store import CheckpointStore, Limits

        self._check_open()
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0
        ):
            raise InvalidArgumentError(
                f"max_bytes must be a whole number of bytes, 0 or more, got {max_bytes!r}",
                argument="max_bytes",
            )
        store = CheckpointStore(self.runs_dir)
        freed = store.collect(Limits(), keep=max_bytes) if store.root.is_dir() else 0
        usage = store.usage()
        return {
            "freed_bytes": freed,
            "checkpoints": usage.checkpoints,
            "objects": usage.objects,
            "bytes": usage.bytes,
            "notebooks": usage.notebooks,
        }

    # -- internals -------------------------------------------------------------------------

    def _announce(self, plans: list[Plan]) -> None:
        """Get ready for ``plans``: the runs folder made, each run's kernel started (when the
        engine can) while its run records are written."""
        self._records.store.prepare()
        if isinstance(self._engine, SupportsPrestart):
            for plan in plans:
                self._engine.prestart(plan.job)

    def _foreground(
        self,
        plan: Plan,
        on_cell: Callable[[int, int], None] | None,
        cancel: threading.Event | None,
    ) -> RunResult:
        """Run ``plan`` on this thread, with its bar of cells and live output."""
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

    def _run(self, plan: Plan) -> RunResult:
        return run_plan(plan, self._engine, self.runs_dir, self._records.index)

    def _recorded_run(self, plan: Plan) -> RunResult:
        self._announce([plan])
        return self._run(plan)


def check_notebook(
    executor: NotebookExecutor,
    path: PathLike,
    *,
    execute: bool,
    record: bool = False,
    outputs: OutputRules | None = None,
    skip_unset: bool = True,
    base_env: Mapping[str, str] | None = None,
    **execute_options: Any,
) -> Checked:
    """The verdict ``check`` and ``pytest --notebooks`` both give (one code: they never
    disagree): :meth:`~NotebookExecutor.validate`'s answer, the run's result and output diffs,
    or why the notebook is skipped (``skip_unset``: a required input not given). ``record``
    keeps the run under ``runs_dir``; ``base_env`` replaces the executor's for this run."""
    from ._review.validate import check_notebook as check

    executor._check_open()
    check_path("path", path)
    return check(
        path,
        execute=execute,
        plan=functools.partial(executor._planner.plan_keywords, base_env=base_env),
        engine=executor._engine,
        options=execute_options,
        run=executor._recorded_run if record else None,
        outputs=outputs,
        skip_unset=skip_unset,
    )
