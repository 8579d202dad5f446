"""What ``resume`` goes on from: a failed run's notebook, parameters and failed cell
(docs/how-to/resume.md).

The new run is planned from the notebook's file as it is now (a fix made there is what the
resume is for) with the earlier run's parameters, unless others are given. It reads back only
the checkpoints of the earlier run (and of the runs its state came from, when it was itself a
resume), taken after cells before the failed one; the prefix of code
cells whose sources are unchanged decides which (:mod:`notebook_executor._checkpoints.keeper`):
an edit before the failed cell goes back to the last checkpoint before the edited cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgumentError
from .reproduce import recorded_notebook_file

if TYPE_CHECKING:
    from .._catalog.records import RunRecords

__all__ = ["RESUMABLE", "ResumeTarget", "resume_target"]

#: The endings a run can be resumed from.
RESUMABLE = ("cell_error", "timeout", "kernel_died", "cancelled", "interrupted")


@dataclass(frozen=True)
class ResumeTarget:
    """The earlier run, as a resume starts it again."""

    run_id: str
    notebook: Path
    parameters: dict[str, Any]
    #: The failed cell, as ``failed_cell.index`` (a source index).
    failed_cell: int
    #: What the resume does not undo, in words.
    note: str
    #: The new run's ``parent_run``: the earlier run (docs/how-to/lineage.md).
    parent_run: dict[str, Any]


def resume_target(run_id: str, records: RunRecords, runs_dir: Path) -> ResumeTarget:
    """The run ``run_id`` to resume.

    Raises :class:`~notebook_executor.RunNotFoundError` for an unknown run, and
    :class:`~notebook_executor.InvalidArgumentError` for one that cannot be resumed: it
    succeeded, it still runs, it is a session's, or its notebook file is gone.
    """
    result = records.get_run(run_id)
    status, kind = result.get("status"), result.get("error_kind")
    if status == "success":
        raise InvalidArgumentError(
            f"run {run_id!r} succeeded: there is nothing to resume (run it again, or with "
            "reuse, to start from its checkpoints)",
            argument="run_id",
        )
    if status == "running":
        raise InvalidArgumentError(f"run {run_id!r} is still running", argument="run_id")
    failed = result.get("failed_cell")
    if kind not in RESUMABLE or not isinstance(failed, Mapping):
        raise InvalidArgumentError(
            f"run {run_id!r} cannot be resumed: it names no failed cell", argument="run_id"
        )
    record = records.run_notebook(run_id).get("metadata", {}).get("notebook_executor")
    if not isinstance(record, Mapping) or "session" in record:
        raise InvalidArgumentError(
            f"run {run_id!r} cannot be resumed: it is a session's record", argument="run_id"
        )
    notebook = recorded_notebook_file(record, runs_dir)
    if notebook is None or not notebook.is_file():
        raise InvalidArgumentError(
            f"run {run_id!r} cannot be resumed: its notebook {record.get('notebook')!r} is not "
            "a file here",
            argument="run_id",
        )
    index = int(failed["index"])
    files = record.get("files")
    listed = files.get("files") if isinstance(files, Mapping) else None
    written = sorted(
        str(entry.get("path"))
        for entry in listed or []
        if isinstance(entry, Mapping) and entry.get("written")
    )
    note = (
        f"resumed run {run_id} at cell {index}; what its cells did outside the kernel was not "
        f"undone (cell {index} may have run in part)"
    )
    if written:
        shown = ", ".join(written[:5]) + (
            f" and {len(written) - 5} more" if len(written) > 5 else ""
        )
        note += f"; the files it wrote are as it left them: {shown}"
    parameters = dict(result.get("parameters") or {})
    parent = {
        "kind": "resume",
        "uuid": str(record.get("uuid") or ""),
        "job": str(record.get("job") or record.get("notebook") or ""),
        "run_id": run_id,
    }
    return ResumeTarget(run_id, notebook, parameters, index, note, parent)
