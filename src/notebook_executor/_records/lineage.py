"""OpenLineage run events for runs and sessions, sent in the background (docs/how-to/lineage.md).

Active when the OpenLineage client is configured the standard way (``OPENLINEAGE_URL``,
``OPENLINEAGE_CONFIG``, an ``openlineage.yml`` in the working folder or
``~/.openlineage/``) and ``OPENLINEAGE_DISABLED`` is not ``true``; the ``openlineage-python``
client (the ``lineage`` extra) is imported only then. Each run record gives one ``START`` as
it begins and one ``COMPLETE``, ``FAIL`` or ``ABORT`` as it ends: the job is the notebook
(namespace ``OPENLINEAGE_NAMESPACE``, default ``notebook-executor``), the run id the record's
uuid, the files the notebook read and wrote are input and output datasets (namespace
``file``), and a ``notebook_executor`` run facet holds the parameters (as recorded: secrets
redacted) and the failing cell; ``errorMessage`` says why a run failed, ``parent`` names the
run this one is part of or continues when the record says so (``parent_run``, made by
:class:`ParentRun`: ``{"kind", "uuid", "job"}``, and ``run_id`` when the parent is itself a run;
``job`` defaults to the record's ``notebook``). A session's record gives its ending event when
the session closes, not at each step. A run made of runs (a sweep) is a :class:`ParentRun`: its
own ``START`` as it begins, ``COMPLETE`` when all its runs succeeded, else ``FAIL``, ``ABORT``
when it was interrupted; its job is ``sweep:`` and the notebook.

A run never waits for an endpoint: events go on a queue that one background thread sends in
order, retrying an event that could not be sent (backing off up to :data:`RETRY_SECONDS`), so
events are not lost while an endpoint is down for a while; the failure is logged once.
Closing waits :data:`CLOSE_SECONDS` at most for the queue to empty, then says how many events
were not sent.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from .._times import iso, now_utc
from .provenance import package_versions

__all__ = ["CLOSE_SECONDS", "LineageEmitter", "ParentRun", "configured", "emitter"]

logger = logging.getLogger(__name__)

#: Longest a closing executor waits for unsent events.
CLOSE_SECONDS = 2.0
#: Longest wait between two tries of an event that could not be sent.
RETRY_SECONDS = 5.0
#: Most events waiting to be sent; beyond, new ones are dropped (and counted).
MAX_QUEUED = 10_000

_PRODUCER = "https://pypi.org/project/notebook-executor/"
_FACET_SCHEMA = "https://pypi.org/project/notebook-executor/#notebook-executor-run-facet"
_ENDED = {"success": "COMPLETE", "error": "FAIL"}
_ABORTED = ("cancelled", "interrupted")


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether OpenLineage is configured the standard way and not disabled."""
    env = os.environ if environ is None else environ
    if env.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OPENLINEAGE_URL") or env.get("OPENLINEAGE_CONFIG"):
        return True
    return any(
        path.is_file()
        for path in (Path("openlineage.yml"), Path.home() / ".openlineage" / "openlineage.yml")
    )


@functools.lru_cache(maxsize=1)
def _shared() -> LineageEmitter | None:
    try:
        return LineageEmitter()
    except ImportError:
        logger.warning(
            "OpenLineage is configured but its client is not installed: "
            "pip install 'notebook-executor[lineage]'; no lineage events are sent"
        )
        return None


def emitter() -> LineageEmitter | None:
    """The process's emitter when OpenLineage is configured, else None."""
    return _shared() if configured() else None


class LineageEmitter:
    """Run records made OpenLineage run events, sent in order by a background thread."""

    def __init__(self) -> None:
        from openlineage.client import OpenLineageClient

        self._client = OpenLineageClient()
        self._queue: queue.Queue[Any] = queue.Queue(MAX_QUEUED)
        self._ended: set[str] = set()
        self._started: set[str] = set()
        self._lock = threading.Lock()
        self._failing = False
        self._dropped = 0
        self._thread = threading.Thread(target=self._send_all, name="openlineage", daemon=True)
        self._thread.start()

    def record(self, method: str, record: Mapping[str, Any]) -> None:
        """Queue the event run record ``record`` stands for (``method`` as the catalog's):
        ``START`` once as it begins, one ending event once it is no longer running."""
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            return
        status = record.get("status")
        with self._lock:
            if method == "begin" and uuid not in self._started:
                self._started.add(uuid)
                state = "START"
            elif method == "finish" and status != "running" and uuid not in self._ended:
                if _open_session(record):
                    return
                self._ended.add(uuid)
                state = (
                    "ABORT"
                    if record.get("error_kind") in _ABORTED
                    else _ENDED.get(str(status), "FAIL")
                )
            else:
                return
        try:
            event = self._event(state, record)
        except Exception as exc:  # a record the client's classes refuse: never the run's problem
            logger.warning("no OpenLineage event for run %s: %s", record.get("run_id"), exc)
            return
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._dropped += 1

    def close(self, timeout: float = CLOSE_SECONDS) -> int:
        """Wait ``timeout`` seconds at most for the queue to empty; the events left unsent."""
        ends = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < ends:
            time.sleep(0.02)
        left = self._queue.unfinished_tasks + self._dropped
        if left:
            logger.warning("%d OpenLineage events were not sent", left)
        return left

    def _send_all(self) -> None:
        while True:
            event = self._queue.get()
            wait = 0.1
            while True:
                try:
                    self._client.emit(event)
                    break
                except Exception as exc:
                    if not self._failing:
                        self._failing = True
                        logger.warning("OpenLineage events cannot be sent (retrying): %s", exc)
                    time.sleep(wait)
                    wait = min(wait * 2, RETRY_SECONDS)
            if self._failing:
                self._failing = False
                logger.info("OpenLineage events are sent again")
            self._queue.task_done()

    def _event(self, state: str, record: Mapping[str, Any]) -> Any:
        from openlineage.client.event_v2 import (
            InputDataset,
            Job,
            OutputDataset,
            Run,
            RunEvent,
            RunState,
        )
        from openlineage.client.facet_v2 import error_message_run, parent_run

        namespace = os.environ.get("OPENLINEAGE_NAMESPACE", "notebook-executor")
        producer = _PRODUCER + package_versions().get("notebook-executor", "")
        facets: dict[str, Any] = {}
        if "run_id" in record:
            facets["notebook_executor"] = _run_facet(record, producer)
        failed = record.get("failed_cell")
        if state == "FAIL" and isinstance(record.get("why_failed"), str):  # a ParentRun's
            facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=record["why_failed"], programmingLanguage="python", producer=producer
            )
        elif state == "FAIL" and isinstance(failed, Mapping):
            facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=f"{failed.get('ename')}: {failed.get('evalue')}",
                programmingLanguage="python",
                stackTrace="\n".join(map(str, failed.get("traceback") or ())) or None,
                producer=producer,
            )
        parent = record.get("parent_run")
        if isinstance(parent, Mapping) and isinstance(parent.get("uuid"), str):
            job = parent.get("job") or parent.get("notebook")
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=parent["uuid"]),
                job=parent_run.Job(namespace=namespace, name=str(job)),
                producer=producer,
            )
        files = record.get("files")
        listed = files.get("files") if isinstance(files, Mapping) else None
        inputs = [
            InputDataset(namespace="file", name=str(entry["path"]))
            for entry in listed or ()
            if isinstance(entry, Mapping) and entry.get("read")
        ]
        outputs = [
            OutputDataset(namespace="file", name=str(entry["path"]))
            for entry in listed or ()
            if isinstance(entry, Mapping) and entry.get("written")
        ]
        time_key = "started_at" if state == "START" else "finished_at"
        return RunEvent(
            eventType=getattr(RunState, state),
            eventTime=str(record.get(time_key) or record.get("started_at")),
            run=Run(runId=str(record["uuid"]), facets=facets),
            job=Job(namespace=namespace, name=str(record.get("job") or record.get("notebook"))),
            inputs=inputs,
            outputs=outputs,
            producer=producer,
        )


@functools.cache
def _facet_class() -> Any:
    """The ``notebook_executor`` run facet's class (made once the client is imported)."""
    import attr
    from openlineage.client.generated.base import RunFacet

    @attr.define
    class NotebookExecutorRunFacet(RunFacet):  # type: ignore[misc]
        run_id: str
        parameters: dict[str, Any]
        failed_cell: dict[str, Any] | None = None

        @staticmethod
        def _get_schema() -> str:
            return _FACET_SCHEMA

    return NotebookExecutorRunFacet


def _run_facet(record: Mapping[str, Any], producer: str) -> Any:
    failed = record.get("failed_cell")
    return _facet_class()(
        run_id=str(record.get("run_id")),
        parameters=dict(record.get("parameters") or {}),
        failed_cell=None
        if not isinstance(failed, Mapping)
        else {k: failed.get(k) for k in ("index", "ename", "evalue")},
        producer=producer,
    )


def _open_session(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a session's still open (its steps' writes are no ending)."""
    session = record.get("session")
    return isinstance(session, Mapping) and session.get("open") is True


class ParentRun:
    """A run made of runs (a sweep; later, a resumed run's chain): the ``parent_run`` its
    runs' records hold (:attr:`record`), and its own lineage events when OpenLineage is
    configured. ``START`` is sent when made; used as a context manager, the block's end sends
    ``ABORT`` on Ctrl-C, ``FAIL`` on another exception, else what :meth:`ended` was told:
    ``COMPLETE`` when every run succeeded, ``FAIL`` naming how many did not."""

    def __init__(self, kind: str, notebook: str) -> None:
        self.record: dict[str, Any] = {
            "kind": kind,
            "uuid": str(uuid.uuid4()),
            "job": f"{kind}:{notebook}",
        }
        self._event: dict[str, Any] = {**self.record, "started_at": iso(now_utc())}
        self._failed: str | None = None
        self._send("begin", "running")

    @classmethod
    def over(cls, kind: str, plans: Sequence[Any], runs_dir: Path) -> ParentRun:
        """The parent run of ``plans`` (runs of one notebook), each plan's ``parent_run``
        set to its :attr:`record`."""
        from .identity import notebook_identity

        parent = cls(kind, notebook_identity(plans[0].notebook, runs_dir) if plans else "-")
        for plan in plans:
            plan.parent_run = parent.record
        return parent

    def ended(self, results: Sequence[Mapping[str, Any]]) -> None:
        """The runs' results: any not ``success`` makes the parent's ending a ``FAIL``."""
        failed = sum(1 for result in results if result.get("status") != "success")
        self._failed = f"{failed} of {len(results)} runs did not succeed" if failed else None

    def __enter__(self) -> ParentRun:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        why = self._failed if exc is None else f"{type(exc).__name__}: {exc}"
        aborted = isinstance(exc, KeyboardInterrupt)
        self._send(
            "finish",
            "success" if why is None else "error",
            error_kind="interrupted" if aborted else None,
            why_failed=None if aborted else why,
        )

    def _send(self, method: str, status: str, **more: Any) -> None:
        lineage = emitter()
        if lineage is None:
            return
        if method == "finish":
            self._event["finished_at"] = iso(now_utc())
        lineage.record(method, {**self._event, "status": status, **more})
