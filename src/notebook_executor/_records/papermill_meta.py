"""Papermill's metadata on executed notebooks, so papermill-aware tools read our runs.

Papermill writes ``metadata.papermill`` on the notebook (``parameters``, ``input_path``,
``output_path``, ``start_time``, ``end_time``, ``duration``, ``exception``,
``environment_variables``, ``default_parameters``, ``version``) and on every cell (``status``,
``start_time``, ``end_time``, ``duration``, ``exception``). Scrapbook reads ``parameters`` and
the cells' ``duration`` from there. The meanings are papermill's:

- times are ISO-8601 UTC with an offset (``2026-11-23T19:32:11.123456+00:00``), durations in
  seconds;
- the notebook's ``exception`` is null for a run that succeeded and true for one that failed;
- a cell is ``completed`` (``exception`` false), ``failed`` (``exception`` true) or
  ``pending`` (never ran: no times, ``exception`` null); markdown and raw cells before the
  point where a run stopped (an error, or ``sys.exit()``) are ``completed`` with no times;
- ``parameters`` are the values the caller gave (not the defaults), ``default_parameters``
  the notebook's declared literal defaults, ``environment_variables`` stays empty (papermill
  records none; neither do we record environment values).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from ..engine import EngineOutcome

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "PAPERMILL_KEY",
    "annotate_papermill",
    "annotate_papermill_cells",
    "papermill_time",
    "papermill_version",
]

PAPERMILL_KEY = "papermill"


def papermill_version() -> str:
    """The installed papermill's version, as the run records name it (read without importing
    papermill, once a process: :func:`~notebook_executor._records.provenance.package_versions`,
    which the run server reads before it forks a command's child; read again in every child,
    it cost 5-10 ms of a served run's 60)."""
    from .provenance import package_versions

    return package_versions().get("papermill", "unknown")


def papermill_time(moment: datetime) -> str:
    """``moment`` as papermill writes times: ISO-8601 in UTC with its offset."""
    return moment.astimezone(timezone.utc).isoformat()


def annotate_papermill(
    nb: NotebookNode,
    outcome: EngineOutcome | None,
    *,
    parameters: Mapping[str, Any],
    default_parameters: Mapping[str, Any],
    input_path: str,
    output_path: str | None,
    started: datetime | None,
    finished: datetime | None,
) -> None:
    """Write papermill's notebook and cell metadata into ``nb``, which ran with ``outcome``.

    ``outcome`` None means the notebook was only prepared (papermill's ``prepare_only``):
    every cell is pending and no times are set.
    """
    failed_at = None if outcome is None or outcome.failure is None else outcome.failure.index
    nb.metadata[PAPERMILL_KEY] = {
        "default_parameters": dict(default_parameters),
        "parameters": dict(parameters),
        "environment_variables": {},
        "version": papermill_version(),
        "input_path": input_path,
        "output_path": output_path,
        "start_time": None if started is None else papermill_time(started),
        "end_time": None if finished is None else papermill_time(finished),
        "duration": (
            None if started is None or finished is None else (finished - started).total_seconds()
        ),
        "exception": True if failed_at is not None else None,
    }
    annotate_papermill_cells(nb, outcome)


def annotate_papermill_cells(nb: NotebookNode, outcome: EngineOutcome | None) -> None:
    """Write papermill's metadata into every cell of ``nb``, which ran with ``outcome``."""
    failed_at = None if outcome is None or outcome.failure is None else outcome.failure.index
    completed = set() if outcome is None else set(outcome.completed)
    # Papermill marks every cell before the one that failed (or all, on success) completed;
    # after a clean exit (``sys.exit()``) nothing past the exit ran.
    stop = len(nb.cells) if outcome is None or failed_at is None else failed_at
    if outcome is not None and outcome.exited is not None:
        stop = min(stop, outcome.exited + 1)
    for index, cell in enumerate(nb.cells):
        info: dict[str, Any] = {
            "exception": None,
            "start_time": None,
            "end_time": None,
            "duration": None,
            "status": "pending",
        }
        if outcome is not None:
            ran = index in completed or index == failed_at
            if cell.cell_type == "code" and ran:
                info.update(_cell_times(outcome, index))
                info["exception"] = index == failed_at
                info["status"] = "failed" if index == failed_at else "completed"
            elif cell.cell_type != "code" and index < stop:
                info["status"] = "completed"
        cell.metadata[PAPERMILL_KEY] = info


def _cell_times(outcome: EngineOutcome, index: int) -> dict[str, Any]:
    began = outcome.cell_started.get(index)
    seconds = outcome.cell_seconds.get(index)
    if began is None:
        return {}
    start = datetime.fromisoformat(began.replace("Z", "+00:00"))
    times: dict[str, Any] = {"start_time": papermill_time(start)}
    if seconds is not None:
        times["end_time"] = papermill_time(start + timedelta(seconds=seconds))
        times["duration"] = seconds
    return times
