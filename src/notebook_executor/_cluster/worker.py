"""The worker side of a cluster run: a warm engine per Dask worker, and the task that runs.

Imported on Dask workers (and by :mod:`.dask` on the caller), never by ``import
notebook_executor``. A worker runs :func:`run_on_worker` for each run of a sweep; the
:class:`WorkerKernels` plugin keeps one :class:`~notebook_executor._kernels.kernel_engine.
KernelEngine` per worker, so runs after the first on a worker take a kernel that is already
started. Nothing here writes run records: the executed notebook goes back to the caller.

Before its kernel runs, a task writes its attempt (worker, start time) into the scheduler's
metadata (``Client.set_metadata``, under a key of the sweep) and waits for the write to be
acknowledged. A task of the same run handed out again after its worker died finds the attempts
made before it there; with no retry left it declines (:class:`AlreadyBegun`) instead of running
the notebook a second time.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from distributed import WorkerPlugin, get_worker

from .._kernels.kernel_engine import KernelEngine
from .._kernels.launch import kernel_environment
from .._records.results import redact
from .._records.scrub import scrub_notebook
from .._run.cell_loop import run_job
from .._times import iso, now_utc
from ..engine import CellHooks, CellRan, EngineOutcome, KernelChoice, RunJob

__all__ = [
    "PLUGIN_NAME",
    "AlreadyBegun",
    "WorkerJob",
    "WorkerKernels",
    "WorkerResult",
    "mask",
    "run_on_worker",
    "unmask",
]

#: The name the plugin is registered under on every worker.
PLUGIN_NAME = "notebook-executor-kernels"

#: Copies of shipped folders a worker keeps (least recently used ones beyond are removed).
MAX_FOLDER_COPIES = 8


@dataclass(frozen=True)
class WorkerJob:
    """One run as it travels to a worker: no path of the caller's machine is needed there."""

    #: Identifies the run in the sweep's events.
    run: int
    #: The sweep's event topic (cells completed, run started).
    topic: str
    #: The notebook, parameters injected, as nbformat JSON.
    nb_json: str
    kernel: KernelChoice
    #: Kernel working directory on the worker; None: the shipped folder.
    cwd: str | None
    #: Extra environment variables (not secrets).
    env: dict[str, str]
    #: Secret values, each masked with a one-time pad that travels apart (see :func:`mask`).
    masked: dict[str, bytes]
    cell_timeout: float | None
    timeout: float | None
    #: Times the run may begin again after an attempt was lost with its worker.
    retries: int = 0
    #: The key under which the sweep's attempts are kept in the scheduler's metadata.
    ledger: str = ""


@dataclass(frozen=True)
class WorkerResult:
    """What comes back from a worker: the executed notebook (redacted) and how it went."""

    nb_json: str
    outcome: EngineOutcome
    started: datetime
    finished: datetime
    duration_seconds: float
    worker: str
    #: The attempts begun before this one (each lost with its worker), oldest first.
    earlier: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class AlreadyBegun:
    """What comes back from a task that did not run: its run began before, on a lost worker.

    ``attempts`` lists those begun (``{"worker", "started"}``), oldest first.
    """

    attempts: tuple[dict[str, str], ...]


class WorkerKernels(WorkerPlugin):
    """Keeps a warm :class:`KernelEngine` and the sweeps' shipped folders on one worker.

    Registered once per cluster (idempotent); closed, with every kernel it started and every
    folder it unpacked, when the worker shuts down.
    """

    idempotent = True
    name = PLUGIN_NAME

    # The plugin travels pickled to every worker: what it holds is made there, in setup.
    _lock: threading.Lock
    _engine: KernelEngine | None
    _root: Path | None
    _warm: int

    def setup(self, worker: Any) -> None:
        self._lock = threading.Lock()
        self._engine = None
        self._users: dict[str, int] = {}
        self._used: dict[str, None] = {}  # names of folder copies, least recently used first
        self._root = Path(worker.local_directory) / "notebook-executor"
        self._warm = max(1, int(worker.state.nthreads))

    def teardown(self, worker: Any) -> None:
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    def engine(self) -> KernelEngine:
        """The worker's engine, started on first use."""
        with self._lock:
            if self._engine is None:
                self._engine = KernelEngine(warm_kernels=self._warm)
            return self._engine

    @contextlib.contextmanager
    def folder(self, archive: bytes) -> Iterator[Path]:
        """The worker's copy of a shipped folder while a run uses it, unpacked on first use.

        Copies are named by their content, so the runs of a sweep (and of later sweeps of
        the same folder) share one working directory, as local runs share the notebook's
        folder, and the warm kernels (kept per working directory) serve them all. The least
        recently used copies beyond :data:`MAX_FOLDER_COPIES` are removed when not in use.
        """
        if self._root is None:
            raise RuntimeError("the notebook-executor worker plugin is not set up")
        name = hashlib.sha256(archive).hexdigest()[:24]
        target = self._root / name
        with self._lock:
            if not target.is_dir():
                partial = self._root / f".{name}.partial"
                shutil.rmtree(partial, ignore_errors=True)
                partial.mkdir(parents=True)
                _unpack(archive, partial)
                partial.rename(target)
            self._users[name] = self._users.get(name, 0) + 1
            self._used.pop(name, None)
            self._used[name] = None
        try:
            yield target
        finally:
            with self._lock:
                self._users[name] -= 1
                idle = [n for n in self._used if not self._users.get(n)]
                for old in idle[: max(0, len(self._used) - MAX_FOLDER_COPIES)]:
                    shutil.rmtree(self._root / old, ignore_errors=True)
                    del self._used[old]


def run_on_worker(
    job: WorkerJob, pad: dict[str, bytes] | None, archive: bytes | None
) -> WorkerResult | AlreadyBegun:
    """Run ``job`` on this worker's warm engine; return a :class:`WorkerResult`.

    ``pad`` unmasks the secrets (it comes from the caller straight to the workers, never
    through the scheduler); ``archive`` is the shipped notebook folder, when one is used.
    When more than ``job.retries`` attempts of the run began before (on workers since lost),
    nothing runs: the result is an :class:`AlreadyBegun`.
    """
    worker = get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if not isinstance(plugin, WorkerKernels):
        raise RuntimeError("the notebook-executor worker plugin is not registered")
    earlier, may_run = _claim(worker, job)
    if not may_run:
        return AlreadyBegun(earlier)
    secrets = unmask(job.masked, pad or {})
    with contextlib.ExitStack() as stack:
        if job.cwd is not None:
            cwd = Path(job.cwd)
        elif archive is not None:
            cwd = stack.enter_context(plugin.folder(archive))
        else:
            raise RuntimeError("no working directory and no shipped folder")
        return replace(_run(plugin, worker, job, cwd, secrets), earlier=earlier)


def _claim(worker: Any, job: WorkerJob) -> tuple[tuple[dict[str, str], ...], bool]:
    """The attempts of this run begun before this one, and whether this one may run.

    They are read from the scheduler's metadata; when this one may run, it is added there,
    and the write is acknowledged before any kernel runs, so a lost attempt is known to
    whichever worker runs the task next. (Read and write are two steps: a run is handed out
    again only once its worker is gone, long after that worker's write.)
    """
    from distributed import get_client

    client = get_client()
    keys = [job.ledger, str(job.run)]
    stored = client.get_metadata(keys, default=None) or []
    earlier = tuple({"worker": str(a["worker"]), "started": str(a["started"])} for a in stored)
    if len(earlier) > job.retries:
        return earlier, False
    attempt = {"worker": str(worker.address), "started": iso(now_utc())}
    client.set_metadata(keys, [*earlier, attempt])
    return earlier, True


def _run(
    plugin: WorkerKernels, worker: Any, job: WorkerJob, cwd: Path, secrets: dict[str, str]
) -> WorkerResult:
    import nbformat

    def on_cell(ran: CellRan) -> None:
        if ran.completed:
            worker.log_event(job.topic, {"run": job.run, "cell": ran.index})

    nb = nbformat.reads(job.nb_json, as_version=4)
    task_job = RunJob(
        nb=nb,
        kernel=job.kernel,
        cwd=cwd,
        env=kernel_environment({**job.env, **secrets}),
        cell_timeout=job.cell_timeout,
        timeout=job.timeout,
        hooks=CellHooks(on_cell_executed=[on_cell]),
    )
    worker.log_event(job.topic, {"run": job.run, "started": worker.address})
    started = now_utc()
    clock = time.perf_counter()
    try:
        outcome = run_job(plugin.engine(), task_job)
    except Exception as exc:
        # What goes back (to the scheduler, too) must not carry a secret.
        raise RuntimeError(redact(f"{type(exc).__name__}: {exc}", secrets)) from None
    duration = time.perf_counter() - clock
    if outcome.failure is not None:
        outcome = replace(outcome, failure=redact_failure(outcome.failure, secrets))
    # Scrubbed as a run record is: a secret sent in pieces or inside a payload stays here too.
    executed = scrub_notebook(nb, secrets)
    return WorkerResult(
        nb_json=nbformat.writes(executed),
        outcome=outcome,
        started=started,
        finished=now_utc(),
        duration_seconds=duration,
        worker=str(worker.address),
    )


def redact_failure(failure: Any, secrets: dict[str, str]) -> Any:
    """``failure`` with secret values masked in its message and traceback."""
    return replace(
        failure,
        evalue=redact(failure.evalue, secrets),
        traceback=redact(list(failure.traceback), secrets),
    )


def mask(secrets: dict[str, str], pad: dict[str, bytes]) -> dict[str, bytes]:
    """Each secret's UTF-8 bytes XOR its own random pad (a one-time pad per sweep)."""
    return {name: _xor(value.encode("utf-8"), pad[name]) for name, value in secrets.items()}


def unmask(masked: dict[str, bytes], pad: dict[str, bytes]) -> dict[str, str]:
    """The secrets back from :func:`mask`'s output and the same pad."""
    return {name: _xor(value, pad[name]).decode("utf-8") for name, value in masked.items()}


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad, strict=True))


def _unpack(archive: bytes, target: Path) -> None:
    """Unpack a folder archive made by :func:`~.folder.pack_folder`: files and folders only."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if (
                member.name.startswith("/")
                or ".." in parts
                or not (member.isfile() or member.isdir())
            ):
                raise RuntimeError(f"refusing archive member {member.name!r}")
            destination = target.joinpath(*parts)
            if member.isdir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                continue
            with contextlib.closing(source), destination.open("wb") as out:
                shutil.copyfileobj(source, out)
