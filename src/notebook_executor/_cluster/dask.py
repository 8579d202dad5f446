"""Sweeps on a Dask cluster: runs execute on the workers, records are written here.

The caller checks every set (the plans are made before this module is reached), submits one
task per run with the notebook inside it, and writes each run's record and catalog entry as
its executed notebook comes back, so cluster runs read like local ones.

What travels where (``dask.distributed`` moves the data; nothing here opens a connection of
its own):

- a task's arguments (the notebook, parameters injected; the kernel choice; ``env=``; limits)
  go through the scheduler, which keeps them while the task exists;
- secrets do not travel in a usable form that way: each secret's value is XOR-ed with a random
  pad made for this sweep, and only the masked bytes are in the tasks. The pad goes from the
  caller straight to the workers (``Client.scatter(direct=True)``): the scheduler learns its
  key and size, never its bytes, and the value is put together again only in the worker
  process that hands it to the kernel's environment. What a worker sends back (the executed
  notebook, a failure) is scrubbed there as a run file is: secrets written in pieces, or inside
  base64 or parquet payloads, are found too;
- the notebook's folder (when no ``cwd=`` is given) is scattered the same way, once per
  sweep, and unpacked once per worker and content (:mod:`.folder`). Both are copied to every
  worker, so where they lie does not decide where runs go.

Faults: a run whose task fails after it began on a worker (the worker died; it reported its
start and each completed cell as Dask events) ends as ``error`` / ``interrupted``, naming the
cell that was running; a run lost before it began is submitted again (at most
:data:`MAX_RESUBMITS` times), so it is never executed twice on our account. A scheduler that
itself retries tasks of dead workers (``distributed.scheduler.allowed-failures``, 3 by default)
may run a notebook again before we hear of the failure.
"""

from __future__ import annotations

import logging
import os
import secrets as _random
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._errors import NotebookExecutorError
from .._run import records as _records
from .._run.plan import Plan
from .._run.runner import begin_run, finish_run, first_unfinished_cell
from .._times import now_utc
from ..engine import CellFailure, EngineOutcome

__all__ = ["CONNECT_TIMEOUT", "run_on_cluster"]

logger = logging.getLogger(__name__)

#: Seconds to wait for a scheduler given by its address before giving up.
CONNECT_TIMEOUT = 10.0

#: Times a run lost before it began on a worker is submitted again.
MAX_RESUBMITS = 3

OnRecord = Callable[[str, Mapping[str, Any]], None]


def run_on_cluster(
    plans: list[Plan],
    client: Any,
    *,
    runs_dir: Path,
    on_record: OnRecord,
    folder: Path | None,
    progress: Any = None,
) -> list[dict[str, Any]]:
    """Run every plan on the cluster of ``client``; results in the order of ``plans``.

    ``client`` is a ``distributed.Client`` or a scheduler address. ``folder`` is shipped to
    the workers as the kernels' working directory (None: each plan's ``cwd`` is used as is, on
    the worker). The folder is packed, and the scheduler reached, before anything is submitted.
    ``progress`` is a bar (tqdm-like: ``update()``) told of each finished run, or None.
    """
    archive = None
    if folder is not None:
        from .folder import pack_folder

        archive = pack_folder(folder, exclude=runs_dir)
    if not plans:
        return []
    dask_client, owned = _connect(client)
    try:
        _records.prepare_runs_dir(runs_dir)
        return _Sweep(dask_client, plans, runs_dir, on_record, archive).run(progress)
    finally:
        if owned:
            dask_client.close()


def _connect(client: Any) -> tuple[Any, bool]:
    """The ``distributed.Client`` to use and whether it is ours to close."""
    try:
        from distributed import Client
    except ImportError:
        raise NotebookExecutorError(
            "running on a Dask cluster needs dask.distributed: "
            "pip install 'notebook-executor[dask]'"
        ) from None
    if isinstance(client, Client):
        if client.status not in ("running", "connecting"):
            raise NotebookExecutorError(f"the Dask client is {client.status}")
        return client, False
    if not isinstance(client, str) or not client:
        raise NotebookExecutorError(
            "client must be a distributed.Client or a scheduler address such as "
            f"'tcp://host:8786', got {type(client).__name__}"
        )
    try:
        return Client(client, timeout=CONNECT_TIMEOUT, set_as_default=False), True
    except (OSError, TimeoutError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NotebookExecutorError(
            f"cannot reach the Dask scheduler at {client!r}: {reason}"
        ) from None


class _Sweep:
    """One ``execute_many`` on a cluster: submit, follow, record."""

    def __init__(
        self,
        client: Any,
        plans: list[Plan],
        runs_dir: Path,
        on_record: OnRecord,
        archive: bytes | None,
    ) -> None:
        self.client = client
        self.plans = plans
        self.runs_dir = runs_dir
        self.on_record = on_record
        self.archive = archive
        self.id = uuid.uuid4().hex[:16]
        self.topic = f"notebook-executor-{self.id}"
        self._lock = threading.Lock()
        #: Per run: the worker it started on and when, and the cells it completed (from its
        #: events; times on the scheduler's clock).
        self._started: dict[int, tuple[str, float]] = {}
        self._completed: dict[int, list[int]] = {}

    def run(self, progress: Any) -> list[dict[str, Any]]:
        from distributed import as_completed

        from .worker import WorkerKernels

        client = self.client
        client.register_plugin(WorkerKernels())
        client.subscribe_topic(self.topic, self._on_event)
        shared: list[Any] = []
        futures: list[Any] = []
        try:
            pad, masked = self._secrets(shared)
            folder = None
            if self.archive is not None:
                [folder] = client.scatter([self.archive], direct=True, hash=False, broadcast=True)
                shared.append(folder)
            jobs = [self._job(index, plan, masked) for index, plan in enumerate(self.plans)]
            from .worker import run_on_worker

            attempts = [0] * len(jobs)
            index_of: dict[Any, int] = {}

            def submit(index: int) -> Any:
                attempts[index] += 1
                future = client.submit(
                    run_on_worker,
                    jobs[index],
                    pad,
                    folder,
                    key=f"notebook-executor-{self.id}-{index}-{attempts[index]}",
                    pure=False,
                    retries=0,
                )
                index_of[future.key] = index
                futures.append(future)
                return future

            waiting = as_completed([submit(index) for index in range(len(jobs))], loop=client.loop)
            results: list[dict[str, Any] | None] = [None] * len(jobs)
            for future in waiting:
                index = index_of[future.key]
                if future.status == "error" and self._never_started(index, attempts[index]):
                    # Lost with its worker before it began: safe to run elsewhere.
                    waiting.add(submit(index))
                    continue
                results[index] = self._record(index, future)
                if progress is not None:
                    progress.update()
            return [result for result in results if result is not None]
        except BaseException:
            # Ctrl-C or a failure here: runs not started never start.
            if futures:
                client.cancel(futures)
            raise
        finally:
            client.unsubscribe_topic(self.topic)
            if shared:
                client.cancel(shared)

    def _never_started(self, index: int, attempts: int) -> bool:
        """True when run ``index`` failed before any worker began it (and may be resubmitted)."""
        with self._lock:
            return index not in self._started and attempts <= MAX_RESUBMITS

    def _secrets(self, shared: list[Any]) -> tuple[Any, dict[str, bytes]]:
        """The scattered pad (a future, or None) and the masked secrets of the sweep."""
        from .worker import mask

        values = self.plans[0].secrets
        if not values:
            return None, {}
        pad = {name: _random.token_bytes(len(v.encode("utf-8"))) for name, v in values.items()}
        masked = mask(values, pad)
        # Straight to the workers: the scheduler only learns the key.
        # (In a list: a mapping given to scatter is read as keys and values.)
        [future] = self.client.scatter([pad], direct=True, hash=False, broadcast=True)
        shared.append(future)
        return future, masked

    def _job(self, index: int, plan: Plan, masked: dict[str, bytes]) -> Any:
        import nbformat

        from .worker import WorkerJob

        job = plan.job
        extra = {name: job.env[name] for name in plan.env_names}
        return WorkerJob(
            run=index,
            topic=self.topic,
            nb_json=nbformat.writes(plan.nb),
            kernel=job.kernel,
            cwd=None if self.archive is not None else os.fspath(job.cwd),
            env=extra,
            masked=masked,
            cell_timeout=job.cell_timeout,
            timeout=job.timeout,
        )

    def _on_event(self, event: tuple[float, Any]) -> None:
        stamp, message = event
        if not isinstance(message, dict) or not isinstance(message.get("run"), int):
            return
        with self._lock:
            run = message["run"]
            if "started" in message:
                self._started[run] = (str(message["started"]), float(stamp))
                self._completed[run] = []
            elif isinstance(message.get("cell"), int):
                self._completed.setdefault(run, []).append(message["cell"])

    def _record(self, index: int, future: Any) -> dict[str, Any]:
        """Write the run files of run ``index`` from its finished future; return its result."""
        import nbformat

        plan = self.plans[index]
        try:
            done = future.result()
        except Exception as exc:
            return self._lost(index, exc)
        executed = nbformat.reads(done.nb_json, as_version=4)
        plan = replace(plan, nb=executed, job=replace(plan.job, nb=executed))
        start = begin_run(
            plan,
            self.runs_dir,
            self.on_record,
            started=done.started,
            provenance={"dask_worker": done.worker},
        )
        return finish_run(
            plan,
            start,
            done.outcome,
            self.runs_dir,
            self.on_record,
            finished=done.finished,
            duration_seconds=done.duration_seconds,
        )

    def _lost(self, index: int, exc: BaseException) -> dict[str, Any]:
        """The result of a run whose task failed (its worker died): error, interrupted."""
        plan = self.plans[index]
        with self._lock:
            worker, stamp = self._started.get(index, (None, None))
            completed = list(self._completed.get(index, []))
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if worker is None:
            message = f"the run was lost before it started on a worker: {reason}"
        else:
            message = f"the worker {worker} was lost while this cell was running: {reason}"
        outcome = EngineOutcome(
            completed=completed,
            failure=CellFailure(
                first_unfinished_cell(plan.nb, completed),
                "interrupted",
                type(exc).__name__,
                message,
                [],
            ),
        )
        now = now_utc()
        started = now if stamp is None else min(now, datetime.fromtimestamp(stamp, timezone.utc))
        provenance = {"dask_worker": worker} if worker is not None else {}
        start = begin_run(
            plan, self.runs_dir, self.on_record, started=started, provenance=provenance
        )
        return finish_run(
            plan,
            start,
            outcome,
            self.runs_dir,
            self.on_record,
            finished=now,
            duration_seconds=(now - started).total_seconds(),
        )
