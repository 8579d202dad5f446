"""OpenLineage run events for runs and sessions, sent in the background (SPEC section 23).

Active when the OpenLineage client is configured the standard way (``OPENLINEAGE_URL``,
``OPENLINEAGE_CONFIG``, an ``openlineage.yml`` in the working folder or
``~/.openlineage/``) and ``OPENLINEAGE_DISABLED`` is not ``true``; the ``openlineage-python``
client (the ``lineage`` extra) is imported only then. Each run record gives one ``START`` as
it begins and one ``COMPLETE``, ``FAIL`` or ``ABORT`` as it ends: the job is the notebook
(namespace ``OPENLINEAGE_NAMESPACE``, default ``notebook-executor``), the run id the record's
uuid, the files the notebook read and wrote are input and output datasets (namespace
``file``), and a ``notebook_executor`` run facet holds the parameters (as recorded: secrets
redacted) and the failing cell; ``errorMessage`` says why a run failed, ``parent`` names the
run this one continues when the record says so (``parent_run``: ``{"run_id", "uuid",
"notebook"}``).

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .provenance import package_versions

__all__ = ["CLOSE_SECONDS", "LineageEmitter", "configured", "emitter"]

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
        facets: dict[str, Any] = {
            "notebook_executor": _run_facet(record, producer),
        }
        failed = record.get("failed_cell")
        if state == "FAIL" and isinstance(failed, Mapping):
            facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=f"{failed.get('ename')}: {failed.get('evalue')}",
                programmingLanguage="python",
                stackTrace="\n".join(map(str, failed.get("traceback") or ())) or None,
                producer=producer,
            )
        parent = record.get("parent_run")
        if isinstance(parent, Mapping) and isinstance(parent.get("uuid"), str):
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=parent["uuid"]),
                job=parent_run.Job(namespace=namespace, name=str(parent.get("notebook"))),
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
            job=Job(namespace=namespace, name=str(record.get("notebook"))),
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
