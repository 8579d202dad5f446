"""NotebookExecutor: the facade that composes sources, parameters, engine, results and records.

Data flows one way: source -> parameters -> engine -> results -> run files and catalog.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _records
from ._engine import CellFailure, Engine, EngineOutcome, KernelEngine, RunJob
from ._errors import CatalogError, NotebookExecutorError, NotebookSourceError, RunNotFoundError
from ._kernels import choose_kernel, kernel_environment
from ._parameters import (
    INJECTED_TAG,
    declared_parameters,
    inject_parameters,
    validate_parameters,
)
from ._progress import cell_progress, run_progress
from ._results import CellMap, annotate_cells, build_result, redact
from ._scraps import decode_scrap, find_scraps
from ._sources import load_source
from ._sources import read_notebook as _read_notebook
from ._sources import write_notebook as _write_notebook

if TYPE_CHECKING:
    import pandas as pd
    from nbformat import NotebookNode

    from ._catalog import Catalog

__all__ = ["NotebookExecutor"]

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


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
        terminal.

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
    ) -> None:
        self.runs_dir = Path(runs_dir)
        self.progress = progress
        self.kernel_name = kernel_name
        self.timeout = _check_seconds("timeout", timeout)
        self.cell_timeout = _check_seconds("cell_timeout", cell_timeout)
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
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None

    # -- running ---------------------------------------------------------------------------

    def _prepare_first_kernel(self) -> None:
        """Let the engine prepare the first kernel start now, before any run is known.

        For the command line, which runs one notebook and has the source to read and check
        meanwhile. The default engine starts a template that imports ipykernel and forks the
        first kernel once a run asks for one; no kernel starts before that. An engine without
        ``anticipate`` does nothing.
        """
        self._check_open()
        anticipate = getattr(self._engine, "anticipate", None)
        if anticipate is not None:
            anticipate()

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
    ) -> dict[str, Any]:
        """Run one notebook and return its result dict.

        Never raises for a failure inside the notebook (the result says ``"status": "error"``);
        raises for bad input before any kernel starts.

        Parameters
        ----------
        input_path : path
            ``.ipynb``, percent ``.py`` or markdown ``.md`` source.
        output_path : path, optional
            Also write the executed notebook here (``.ipynb``). The run record is always kept
            under ``runs_dir``.
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
            the run files, the catalog or logs. Occurrences in outputs are redacted.

        Raises
        ------
        NotebookSourceError
            The source is missing, malformed or unsupported, or its kernel is not installed.
        ParameterError
            A parameter is unknown, missing, or of the wrong type.
        """
        self._check_open()
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
        # The kernel starts while the run files are written (an optional engine method).
        prestart = getattr(self._engine, "prestart", None)
        if prestart is not None:
            prestart(plan.job)
        cells = sum(1 for cell in plan.notebook.cells if cell.cell_type == "code")
        with cell_progress(cells, Path(plan.shown).name, self.progress) as on_cell:
            plan.job.on_cell = on_cell
            return self._run(plan)

    def execute_many(
        self,
        input_path: PathLike,
        parameter_sets: Iterable[Mapping[str, Any] | None],
        *,
        max_workers: int | None = None,
        **options: Any,
    ) -> list[dict[str, Any]]:
        """Run one notebook once per parameter set; results come in the order of the sets.

        Every set is checked before the first run starts, so bad input raises before any
        kernel starts. Runs go in parallel, each on its own fresh kernel, up to ``max_workers``
        at a time (default: the number of CPUs); a progress bar shows on a terminal.
        ``options`` are those of :meth:`execute` (``output_path`` excepted).
        """
        self._check_open()
        if "output_path" in options:
            raise NotebookExecutorError("execute_many does not take output_path")
        if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
            raise NotebookExecutorError(f"max_workers must be a positive int, got {max_workers!r}")
        plans = [
            self._plan(input_path, output_path=None, parameters=values, **options)
            for values in list(parameter_sets)
        ]
        workers = min(len(plans), max_workers or os.cpu_count() or 1)
        return _run_all(self._run, plans, workers, self.progress)

    # -- parameters and sources --------------------------------------------------------------

    def inspect_parameters(self, notebook_path: PathLike) -> dict[str, dict[str, Any]]:
        """The parameters ``notebook_path`` declares: ``{name: {name, type, default, help,
        required}}``."""
        declared = declared_parameters(load_source(notebook_path).notebook)
        return {name: parameter.as_dict() for name, parameter in declared.items()}

    @staticmethod
    def read_notebook(path: PathLike) -> NotebookNode:
        """Read any supported source as an nbformat 4 notebook."""
        return _read_notebook(path)

    @staticmethod
    def write_notebook(nb: NotebookNode, path: PathLike) -> Path:
        """Write ``nb`` in the format ``path``'s extension names; return the path."""
        return _write_notebook(nb, path)

    # -- records ---------------------------------------------------------------------------

    def collect_outputs(self, notebook_path_or_run_id: PathLike) -> dict[str, Any]:
        """Every scrap of an executed notebook (a path) or of a past run (a run id), decoded."""
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

    def reindex(self) -> int:
        """Rebuild the catalog from the run files; return the number of runs indexed."""
        return self._open_catalog().reindex()

    # -- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise NotebookExecutorError("this NotebookExecutor is closed")

    def _open_catalog(self) -> Catalog:
        self._check_open()
        if self._catalog is None:
            from ._catalog import Catalog

            self._catalog = Catalog(self.runs_dir)
        return self._catalog

    def _plan(
        self,
        input_path: PathLike,
        *,
        output_path: PathLike | None,
        parameters: Mapping[str, Any] | None,
        timeout: float | None = None,
        cell_timeout: float | None = None,
        request: str | None = None,
        cwd: PathLike | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> _Plan:
        _check_path("input_path", input_path)
        if output_path is not None:
            _check_path("output_path", output_path)
        if cwd is not None:
            _check_path("cwd", cwd)
        shown = os.fspath(input_path)
        if parameters is not None and not isinstance(parameters, Mapping):
            raise NotebookExecutorError(
                f"parameters must be a mapping of name to value, got {type(parameters).__name__}"
            )
        if request is not None and not isinstance(request, str):
            raise NotebookExecutorError(f"request must be a string, got {type(request).__name__}")
        extra_env = _check_env("env", env)
        secret_env = _check_env("secrets", secrets)
        if output_path is not None and Path(output_path).suffix.lower() != ".ipynb":
            raise NotebookExecutorError(f"output_path must end in .ipynb, got {output_path!r}")
        run_timeout = _check_seconds("timeout", timeout if timeout is not None else self.timeout)
        per_cell = _check_seconds(
            "cell_timeout", cell_timeout if cell_timeout is not None else self.cell_timeout
        )
        loaded = load_source(input_path)
        declared = declared_parameters(loaded.notebook)
        given = dict(parameters or {})
        effective = validate_parameters(declared, given)
        kernel = choose_kernel(shown, self.kernel_name, loaded.notebook.metadata.get("kernelspec"))
        if cwd is not None:
            workdir = Path(cwd)
            if not workdir.is_dir():
                raise NotebookExecutorError(f"cwd {os.fspath(cwd)!r} is not a directory")
        else:
            workdir = loaded.path.parent
        notebook = loaded.notebook
        _start_afresh(notebook)
        injected_at = inject_parameters(
            notebook, {name: effective[name] for name in given}, kernel.language
        )
        environment = kernel_environment({**extra_env, **secret_env})
        return _Plan(
            shown=shown,
            loaded_path=loaded.path,
            sha256=loaded.sha256,
            source_format=loaded.format.name,
            notebook=notebook,
            cell_map=CellMap(injected_at),
            parameters=effective,
            request=request,
            output_path=None if output_path is None else Path(output_path),
            job=RunJob(
                notebook=notebook,
                kernel=kernel,
                cwd=workdir.resolve(),
                env=environment,
                cell_timeout=per_cell,
                timeout=run_timeout,
            ),
            env_names=sorted(extra_env),
            secrets=secret_env,
        )

    def _run(self, plan: _Plan) -> dict[str, Any]:
        started = _records.now_utc()
        clock = time.perf_counter()
        run_id = _records.new_run_id(plan.loaded_path, started)
        run_path = _records.run_notebook_path(self.runs_dir, run_id)
        output_path = plan.output_path or run_path
        provenance = {
            "record_version": _records.RECORD_VERSION,
            "uuid": str(uuid.uuid4()),
            "source": {
                "path": _records.display_path(plan.loaded_path),
                "sha256": plan.sha256,
                "format": plan.source_format,
            },
            "kernel": {"name": plan.job.kernel.name, "language": plan.job.kernel.language},
            "environment": _records.environment_record(),
            "env_names": plan.env_names,
            "secret_names": sorted(plan.secrets),
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        record: dict[str, Any] = {
            "run_id": run_id,
            "status": "running",
            "error_kind": None,
            "notebook": _records.display_path(plan.shown),
            "output_path": _records.display_path(output_path),
            "parameters": redact(plan.parameters, plan.secrets),
            "request": redact(plan.request, plan.secrets),
            "started_at": _records.iso(started),
            **provenance,
        }
        # The injected parameters may hold a secret's value too: the first write is redacted.
        started_notebook = redact(plan.notebook, plan.secrets)
        _records.write_run_files(self.runs_dir, run_id, started_notebook, record, final=False)
        self._catalog_call("begin", record)
        interrupted: BaseException | None = None
        try:
            outcome = self._engine.run(plan.job)
        except KeyboardInterrupt as exc:
            interrupted = exc
            partial = getattr(exc, "outcome", None)
            outcome = partial if isinstance(partial, EngineOutcome) else EngineOutcome()
            if outcome.failure is None:
                outcome.failure = CellFailure(
                    _cancelled_cell(plan.notebook, outcome),
                    "cancelled",
                    "KeyboardInterrupt",
                    "the run was cancelled",
                    [],
                )
        finished = _records.now_utc()
        annotate_cells(plan.notebook, outcome)
        result = build_result(
            run_id=run_id,
            notebook_path=plan.shown,
            output_path=os.fspath(output_path),
            parameters=plan.parameters,
            request=plan.request,
            started_at=_records.iso(started),
            finished_at=_records.iso(finished),
            duration_seconds=time.perf_counter() - clock,
            executed=plan.notebook,
            outcome=outcome,
            cell_map=plan.cell_map,
        )
        result = dict(redact(result, plan.secrets))
        executed = redact(plan.notebook, plan.secrets)
        stored = {
            **result,
            "notebook": record["notebook"],
            "output_path": record["output_path"],
            **provenance,
        }
        _records.write_run_files(self.runs_dir, run_id, executed, stored, final=True)
        if plan.output_path is not None:
            _write_notebook(executed, plan.output_path)
        self._catalog_call("finish", stored)
        if interrupted is not None:
            raise interrupted
        return result

    def _catalog_call(self, method: str, record: Mapping[str, Any]) -> None:
        # The files are the truth; a catalog that cannot be written is rebuilt by reindex.
        try:
            getattr(self._open_catalog(), method)(record)
        except NotebookExecutorError as exc:
            logger.warning("run %s not indexed: %s", record.get("run_id"), exc)


@dataclass
class _Plan:
    """A checked run, ready to start: everything validated, nothing started."""

    shown: str
    loaded_path: Path
    sha256: str
    source_format: str
    notebook: NotebookNode
    cell_map: CellMap
    parameters: dict[str, Any]
    request: str | None
    output_path: Path | None
    job: RunJob
    env_names: list[str]
    secrets: dict[str, str]


def _run_all(
    run: Callable[[_Plan], dict[str, Any]],
    plans: list[_Plan],
    workers: int,
    wanted: bool | None,
) -> list[dict[str, Any]]:
    """``[run(plan) for plan in plans]`` on up to ``workers`` threads, with a progress bar."""
    progress = run_progress(len(plans), wanted)
    try:
        if workers <= 1:
            results = []
            for plan in plans:
                results.append(run(plan))
                if progress is not None:
                    progress.update()
            return results
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(workers, thread_name_prefix="notebook-executor-run")
        try:
            futures = [pool.submit(run, plan) for plan in plans]
            if progress is not None:
                for future in futures:
                    future.add_done_callback(lambda _: progress.update())
            return [future.result() for future in futures]
        finally:
            # On Ctrl-C, runs not started yet never start; those running finish first.
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        if progress is not None:
            progress.close()


def _check_seconds(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise NotebookExecutorError(f"{name} must be a positive number of seconds, got {value!r}")
    if math.isinf(value):
        return None
    return float(value)


def _check_path(name: str, value: object) -> None:
    if isinstance(value, (str, os.PathLike)):
        return
    hint = " (parameters go in parameters=...)" if isinstance(value, Mapping) else ""
    raise NotebookExecutorError(f"{name} must be a path, got {type(value).__name__}{hint}")


def _check_env(kind: str, values: Mapping[str, str] | None) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise NotebookExecutorError(f"{kind} must be a mapping of names to strings")
    checked: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
            raise NotebookExecutorError(f"{kind}: {name!r} is not a valid environment name")
        if not isinstance(value, str) or "\x00" in value:
            raise NotebookExecutorError(f"{kind}: the value of {name!r} must be a string")
        checked[name] = value
    return checked


def _start_afresh(notebook: NotebookNode) -> None:
    """Drop what an executed ``.ipynb`` source carries over from an earlier run.

    Its outputs and execution counts would pass for this run's in cells that never run (and
    its scraps for this run's scraps); its injected parameters would override this run's.
    Cells are kept, so indices still match ``read_notebook(source).cells``.
    """
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if INJECTED_TAG in tags:
            cell.metadata["tags"] = [tag for tag in tags if tag != INJECTED_TAG]
            cell.source = "# Parameters injected by an earlier run: not applied to this run."


def _cancelled_cell(notebook: NotebookNode, outcome: EngineOutcome) -> int:
    """The code cell that was running when the run was cancelled: the first not completed."""
    done = set(outcome.completed)
    codes = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    return next((i for i in codes if i not in done), codes[-1] if codes else 0)
