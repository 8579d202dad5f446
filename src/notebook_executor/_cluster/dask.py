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
  notebook, a failure) is scrubbed there as a run record is: secrets written in pieces, or inside
  base64 or parquet payloads, are found too;
- the notebook's folder (when no ``cwd=`` is given) is scattered the same way, once per
  sweep, and unpacked once per worker and content (:mod:`.folder`). Both are copied to every
  worker, so where they lie does not decide where runs go. Dask later keeps fewer copies (its
  memory manager drops those no task waits on); when a worker dies with the last one, the
  value is scattered again for the runs still to begin.

Faults: a run runs at most once unless ``retries`` says otherwise. Before its kernel runs, a
task records its attempt (worker, start time) in the scheduler's metadata, under the key of a
small task the sweep holds (the scheduler drops the entry with that task, when the sweep
ends), and waits for the acknowledgement (:func:`.worker.run_on_worker`). That costs two
round trips to the scheduler per run, nothing per cell. When a worker dies mid-run:

- a scheduler that reschedules the tasks of dead workers (``distributed.scheduler.
  allowed-failures``, 3 by default) gives the task to another worker, which finds the attempt
  and, with no retry left, returns :class:`.worker.AlreadyBegun` without running anything;
- a scheduler that does not (or has run out of them) fails the task with ``KilledWorker``,
  and the caller reads the attempts from the same metadata; so does it for a task dropped
  with data the dead worker held.

Either way the run ends as ``error`` / ``interrupted``, naming the cell that was running (the
worker reported each completed cell as a Dask event), and its record lists the attempts. With
``retries=N`` a run whose latest attempt died with its worker begins again while no more than
N attempts began (the caller submits it again when Dask does not), and its record lists every
attempt and how it ended. A run lost before it began is submitted again (at most
:data:`MAX_RESUBMITS` times): it never ran, so that costs no second execution.
"""

from __future__ import annotations

import logging
import os
import secrets as _random
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._errors import ClusterError, InvalidArgumentError, install_hint
from .._records.store import RunStore
from .._run.plan import Plan
from .._run.runner import begin_run, finish_run, first_unfinished_cell
from .._times import iso, now_utc, parse_time
from .._types import RunResult
from ..engine import CellFailure, EngineOutcome

__all__ = ["CONNECT_TIMEOUT", "run_on_cluster"]

logger = logging.getLogger(__name__)

#: Seconds to wait for a scheduler given by its address before giving up.
CONNECT_TIMEOUT = 10.0

#: Times a run lost before it began on a worker is submitted again.
MAX_RESUBMITS = 3

OnRecord = Callable[[str, Mapping[str, Any]], None]

#: One attempt of a run as its worker recorded it: ``{"worker", "started"}`` (ISO, UTC).
Attempt = dict[str, str]


def run_on_cluster(
    plans: list[Plan],
    client: Any,
    *,
    runs_dir: Path,
    on_record: OnRecord,
    folder: Path | None,
    progress: Any = None,
    retries: int = 0,
) -> list[RunResult]:
    """Run every plan on the cluster of ``client``; results in the order of ``plans``.

    ``client`` is a ``distributed.Client`` or a scheduler address. ``folder`` is shipped to
    the workers as the kernels' working directory (None: each plan's ``cwd`` is used as is, on
    the worker). The folder is packed, and the scheduler reached, before anything is submitted.
    ``progress`` is a bar (tqdm-like: ``update()``) told of each finished run, or None.
    ``retries``: times a run lost with its worker begins again (0: it ends ``interrupted``).
    """
    archive = None
    if folder is not None:
        from .folder import pack_folder

        archive = pack_folder(folder, exclude=runs_dir)
    if not plans:
        return []
    dask_client, owned = _connect(client)
    try:
        RunStore(runs_dir).prepare()
        sweep = _Sweep(dask_client, plans, runs_dir, on_record, archive, retries)
        return sweep.run(progress)
    finally:
        if owned:
            dask_client.close()


def _connect(client: Any) -> tuple[Any, bool]:
    """The ``distributed.Client`` to use and whether it is ours to close."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(
            f"running on a Dask cluster needs dask.distributed: {install_hint('dask')}"
        ) from None
    if isinstance(client, Client):
        if client.status not in ("running", "connecting"):
            raise ClusterError(f"the Dask client is {client.status}")
        return client, False
    if not isinstance(client, str) or not client:
        raise InvalidArgumentError(
            "client must be a distributed.Client or a scheduler address such as "
            f"'tcp://host:8786', got {type(client).__name__}"
        )
    try:
        return Client(client, timeout=CONNECT_TIMEOUT, set_as_default=False), True
    except (OSError, TimeoutError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ClusterError(f"cannot reach the Dask scheduler at {client!r}: {reason}") from None


class _Sweep:
    """One ``execute_many`` on a cluster: submit, follow, record."""

    def __init__(
        self,
        client: Any,
        plans: list[Plan],
        runs_dir: Path,
        on_record: OnRecord,
        archive: bytes | None,
        retries: int,
    ) -> None:
        self.client = client
        self.retries = retries
        self.plans = plans
        self.runs_dir = runs_dir
        self.on_record = on_record
        self.archive = archive
        self.id = uuid.uuid4().hex[:16]
        self.topic = f"notebook-executor-{self.id}"
        #: The task key the attempts of the runs are recorded under.
        self.ledger = f"notebook-executor-{self.id}-attempts"
        #: The values sent to every worker (the pad, the folder), and their current futures.
        self._shared: dict[str, Any] = {}
        self._futures: dict[str, Any] = {}
        #: Futures released when the sweep ends.
        self._held: list[Any] = []
        self._lock = threading.Lock()
        #: Per run: the cells its latest attempt completed (from its events).
        self._completed: dict[int, list[int]] = {}

    def run(self, progress: Any) -> list[RunResult]:
        from distributed import as_completed

        from .worker import WorkerKernels, run_on_worker

        client = self.client
        client.register_plugin(WorkerKernels())
        client.subscribe_topic(self.topic, self._on_event)
        futures: list[Any] = []
        try:
            # The attempts are kept in the scheduler's metadata under this task's key: the
            # scheduler drops them when the task is released, at the end of the sweep. (A
            # computed task, unlike scattered data, is computed again if its worker dies.)
            ledger = client.submit(int, 0, key=self.ledger, pure=False)
            self._held.append(ledger)
            masked = self._secrets()
            if self.archive is not None:
                self._shared["folder"] = self.archive
            jobs = [self._job(index, plan, masked) for index, plan in enumerate(self.plans)]
            submitted = [0] * len(jobs)
            unbegun = [0] * len(jobs)
            index_of: dict[Any, int] = {}

            def submit(index: int) -> Any:
                submitted[index] += 1
                future = client.submit(
                    run_on_worker,
                    jobs[index],
                    self._scattered("pad"),
                    self._scattered("folder"),
                    key=f"notebook-executor-{self.id}-{index}-{submitted[index]}",
                    pure=False,
                    retries=0,
                )
                index_of[future.key] = index
                futures.append(future)
                return future

            waiting = as_completed([submit(index) for index in range(len(jobs))], loop=client.loop)
            results: list[RunResult | None] = [None] * len(jobs)
            for future in waiting:
                index = index_of[future.key]
                if future.status in ("error", "cancelled", "lost"):
                    began = self._begun(index)
                    if not began and unbegun[index] < MAX_RESUBMITS:
                        # Lost with its worker (or with the data it needed) before it began:
                        # safe to run elsewhere.
                        unbegun[index] += 1
                        waiting.add(submit(index))
                        continue
                    if began and len(began) <= self.retries and self._worker_lost(future, began):
                        waiting.add(submit(index))
                        continue
                    results[index] = self._lost(index, _reason(future), began)
                else:
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
            if self._held:
                client.cancel(self._held)

    def _scattered(self, name: str) -> Any:
        """The future of the shared value ``name`` on the workers (None: there is none).

        Sent straight to every worker; sent again when lost, as when the scheduler kept a
        single copy (it drops extra ones) and that copy's worker died.
        """
        value = self._shared.get(name)
        if value is None:
            return None
        future = self._futures.get(name)
        if future is None or future.status != "finished":
            # (In a list: a mapping given to scatter is read as keys and values.)
            [future] = self.client.scatter([value], direct=True, hash=False, broadcast=True)
            self._futures[name] = future
            self._held.append(future)
        return future

    def _begun(self, index: int) -> tuple[Attempt, ...]:
        """The attempts of run ``index`` begun so far, as its workers recorded them."""
        stored = self.client.get_metadata([self.ledger, str(index)], default=None)
        return tuple(
            {"worker": str(a["worker"]), "started": str(a["started"])} for a in stored or []
        )

    def _worker_lost(self, future: Any, began: tuple[Attempt, ...]) -> bool:
        """True when the latest attempt of ``future``'s run ended with its worker.

        Dask says so (``KilledWorker``), or that worker has left the cluster (the task was
        then dropped with data it needed, which that worker held). Otherwise the attempt
        may still be running: it is not run again.
        """
        from distributed.scheduler import KilledWorker

        if future.status == "error" and isinstance(future.exception(), KilledWorker):
            return True
        return began[-1]["worker"] not in self.client.nthreads()

    def _secrets(self) -> dict[str, bytes]:
        """The masked secrets of the sweep; their pad is kept to be sent to the workers.

        The pad goes straight to the workers (:meth:`_scattered`): the scheduler only learns
        its key.
        """
        from .worker import mask

        values = self.plans[0].secrets
        if not values:
            return {}
        pad = {name: _random.token_bytes(len(v.encode("utf-8"))) for name, v in values.items()}
        self._shared["pad"] = pad
        return mask(values, pad)

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
            retries=self.retries,
            ledger=self.ledger,
        )

    def _on_event(self, event: tuple[float, Any]) -> None:
        _, message = event
        if not isinstance(message, dict) or not isinstance(message.get("run"), int):
            return
        with self._lock:
            run = message["run"]
            if "started" in message:
                self._completed[run] = []
            elif isinstance(message.get("cell"), int):
                self._completed.setdefault(run, []).append(message["cell"])

    def _record(self, index: int, future: Any) -> RunResult:
        """Write the run records of run ``index`` from its finished future; return its result."""
        import nbformat

        from .worker import AlreadyBegun

        plan = self.plans[index]
        done = future.result()
        if isinstance(done, AlreadyBegun):
            return self._lost(index, "not run again (retries exhausted)", done.attempts)
        executed = nbformat.reads(done.nb_json, as_version=4)
        plan = replace(plan, nb=executed, job=replace(plan.job, nb=executed))
        failure = done.outcome.failure
        last = _ended(
            {"worker": done.worker, "started": iso(done.started)},
            "success" if failure is None else "error",
            None if failure is None else failure.kind,
        )
        start = begin_run(
            plan,
            self.runs_dir,
            self.on_record,
            started=done.started,
            provenance=_provenance(done.earlier, last),
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

    def _lost(self, index: int, reason: str, attempts: tuple[Attempt, ...]) -> RunResult:
        """The result of a run whose worker was lost (or whose task failed): interrupted.

        ``attempts`` are those begun (none: the task failed before any began).
        """
        plan = self.plans[index]
        with self._lock:
            completed = list(self._completed.get(index, []))
        if not attempts:
            message = f"the run was lost before it started on a worker: {reason}"
        else:
            message = (
                f"the worker {attempts[-1]['worker']} was lost while this cell was running: "
                f"{reason}"
            )
        outcome = EngineOutcome(
            completed=completed,
            failure=CellFailure(
                first_unfinished_cell(plan.nb, completed),
                "interrupted",
                "WorkerLost",
                message,
                [],
            ),
        )
        now = now_utc()
        began = parse_time(attempts[-1]["started"]) if attempts else None
        started = now if began is None else min(now, began)
        provenance = (
            _provenance(attempts[:-1], _ended(attempts[-1], "error", "interrupted"))
            if attempts
            else {}
        )
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


def _ended(attempt: Attempt, status: str, error_kind: str | None) -> dict[str, Any]:
    """``attempt`` as the record lists it: where and when it began, how it ended."""
    return {
        "worker": attempt["worker"],
        "started": attempt["started"],
        "status": status,
        "error_kind": error_kind,
    }


def _provenance(earlier: tuple[Attempt, ...], last: dict[str, Any]) -> dict[str, Any]:
    """What the record adds for a cluster run: its worker and every attempt, oldest first.

    Every attempt before the last was lost with its worker.
    """
    attempts = [_ended(a, "error", "interrupted") for a in earlier]
    return {"dask_worker": last["worker"], "dask_attempts": [*attempts, last]}


def _reason(future: Any) -> str:
    """Why ``future``'s task failed: the first line of its exception, or its status."""
    if future.status != "error":
        return f"the task was {future.status}"
    exc = future.exception()
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
