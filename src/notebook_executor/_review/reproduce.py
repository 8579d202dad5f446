"""Could this run be reproduced? Run the record's source again and compare
(docs/how-to/reproduce.md).

:func:`reproduce_run` runs the source a record holds, with the record's parameters: the notebook
file itself when it is unchanged (its sha256 is the record's: the run is then recorded under the
notebook's own name, in its own declared environment if it has one), else the source as the
record holds it, written to a temporary ``.ipynb``. It then compares every code cell's outputs
with the record's, normalised as the output checks of ``check --execute`` and ``pytest
--notebooks`` normalise them (:func:`~._review.golden.comparable`: text outputs only, addresses,
timestamps and uuids replaced), and says which recorded inputs differ
(:func:`~._review.diff.differing_inputs`: files, packages, the git commit, the machine).

The answer is stored as the original run's last reproduction,
``<runs_dir>/reproductions/<run_id>.json``, which the report's run page shows.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgumentError
from .._parameters.declared import INJECTED_TAG
from .._records.identity import project_folder
from .._times import iso, now_utc
from .diff import changed_input_names, differing_inputs, run_packages
from .golden import OutputRules, comparable, readable_diff

if TYPE_CHECKING:
    from .._catalog.records import RunRecords
    from .._notebook import NotebookNode
    from .._types import RunResult

__all__ = ["REPRODUCTIONS", "last_reproduction", "recorded_notebook_file", "reproduce_run"]

#: The folder of the runs folder that holds each run's last reproduction.
REPRODUCTIONS = "reproductions"


def reproduce_run(
    run_id: str,
    records: RunRecords,
    runs_dir: Path,
    execute: Callable[..., RunResult],
) -> dict[str, Any]:
    """Reproduce past run ``run_id``; ``execute(path, parameters=..., request=...)`` runs.

    Returns ``{"reproduced", "run_id", "original_run_id", "status", "first_difference",
    "inputs_changed", "source"}``: ``first_difference`` null or ``{"cell", "diff"}`` (``cell``
    as ``failed_cell.index``), ``inputs_changed`` one name per input that differs (``file
    data.csv``, ``package pandas``, ``git commit``, ``source``...), ``source`` ``"file"`` (the
    unchanged notebook ran) or ``"record"`` (the recorded source ran).

    Raises :class:`~notebook_executor.RunNotFoundError` for an unknown run, and
    :class:`~notebook_executor.InvalidArgumentError` for a run that cannot be reproduced
    (a session's record, a run still running, a record without its source).
    """
    original = records.get_run(run_id)
    old_nb = records.run_notebook(run_id)
    record = old_nb.get("metadata", {}).get("notebook_executor")
    if not isinstance(record, Mapping) or not isinstance(record.get("source"), Mapping):
        raise InvalidArgumentError(
            f"run {run_id!r} cannot be reproduced: its record holds no source", argument="run_id"
        )
    if original.get("status") == "running" or "session" in record:
        raise InvalidArgumentError(
            f"run {run_id!r} cannot be reproduced: it is a session or still running",
            argument="run_id",
        )
    parameters = dict(original.get("parameters") or {})
    request = f"reproduce {run_id}"
    notebook = _unchanged_file(record, runs_dir)
    if notebook is not None:
        new = execute(notebook, parameters=parameters, request=request)
    else:
        with tempfile.TemporaryDirectory(prefix="nbx-reproduce-") as folder:
            name = Path(str(record.get("notebook") or "notebook")).stem + ".ipynb"
            recorded = Path(folder) / name
            recorded.write_text(json.dumps(_recorded_source(old_nb)), encoding="utf-8")
            new = execute(recorded, parameters=parameters, request=request)
    new_nb = records.run_notebook(new["run_id"])
    new_record = new_nb.get("metadata", {}).get("notebook_executor") or {}
    difference = first_difference(old_nb, new_nb)
    packages = _differing(run_packages(old_nb), run_packages(new_nb))
    changed = changed_input_names(differing_inputs(record, new_record), packages)
    if notebook is None:
        changed.insert(0, "source")
    answer: dict[str, Any] = {
        "reproduced": difference is None and original.get("status") == new.get("status"),
        "run_id": new["run_id"],
        "original_run_id": run_id,
        "status": [original.get("status"), new.get("status")],
        "first_difference": difference,
        "inputs_changed": changed,
        "source": "file" if notebook is not None else "record",
        "reproduced_at": iso(now_utc()),
    }
    _store(runs_dir, run_id, answer)
    return answer


def first_difference(old: NotebookNode, new: NotebookNode) -> dict[str, Any] | None:
    """The first code cell whose compared outputs differ: ``{"cell", "diff"}`` (``cell`` the
    index in the source's cells, the injected parameters cell not counted), or None."""
    rules = OutputRules()
    cells_a, cells_b = _source_cells(old), _source_cells(new)
    for index in range(max(len(cells_a), len(cells_b))):
        a = cells_a[index] if index < len(cells_a) else None
        b = cells_b[index] if index < len(cells_b) else None
        if a is None or b is None or a.get("cell_type") != b.get("cell_type"):
            return {"cell": index, "diff": "the cells differ: the source changed"}
        if a.get("cell_type") != "code":
            continue
        want = comparable(a.get("outputs", []), rules)
        got = comparable(b.get("outputs", []), rules)
        if want != got:
            return {"cell": index, "diff": readable_diff(want, got)}
    return None


def last_reproduction(runs_dir: str | os.PathLike[str], run_id: str) -> dict[str, Any] | None:
    """The answer of run ``run_id``'s last reproduction, or None."""
    path = Path(runs_dir) / REPRODUCTIONS / f"{run_id}.json"
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _store(runs_dir: Path, run_id: str, answer: Mapping[str, Any]) -> None:
    folder = runs_dir / REPRODUCTIONS
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".{run_id}.json.tmp"
    temporary.write_text(json.dumps(answer, indent=1), encoding="utf-8")
    temporary.replace(folder / f"{run_id}.json")


def _source_cells(nb: NotebookNode) -> list[Any]:
    return [
        cell
        for cell in nb.get("cells", [])
        if INJECTED_TAG not in (cell.get("metadata", {}).get("tags") or [])
    ]


def recorded_notebook_file(record: Mapping[str, Any], runs_dir: Path) -> Path | None:
    """Where the recorded notebook's file is (as the record names it: relative to the
    project of ``runs_dir``, else to the working folder); None for a URL or no name."""
    name = str(record.get("notebook") or "")
    if not name or "://" in name:
        return None
    path = Path(name).expanduser()
    if not path.is_absolute():
        project = project_folder(runs_dir)
        path = (project if project is not None else Path.cwd()) / path
    return path


def _unchanged_file(record: Mapping[str, Any], runs_dir: Path) -> Path | None:
    """The recorded notebook's file, when it still holds the source that ran."""
    source = record.get("source") or {}
    path = recorded_notebook_file(record, runs_dir)
    if path is None:
        return None
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
    return path if digest == source.get("sha256") else None


def _recorded_source(nb: NotebookNode) -> dict[str, Any]:
    """The source a run's notebook holds: its cells without outputs or the injected
    parameters, its metadata without the run's record."""
    cells = []
    for cell in _source_cells(nb):
        kept = {k: v for k, v in dict(cell).items() if k not in ("outputs", "execution_count")}
        kept["metadata"] = {
            k: v for k, v in dict(cell.get("metadata", {})).items() if k != "execution"
        }
        if cell.get("cell_type") == "code":
            kept.update(outputs=[], execution_count=None)
        cells.append(kept)
    metadata = {
        k: v
        for k, v in dict(nb.get("metadata", {})).items()
        if k not in ("notebook_executor", "papermill")
    }
    source = {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
    plain: dict[str, Any] = json.loads(json.dumps(source, default=str))
    return plain


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[Any]]:
    return {
        name: [a.get(name), b.get(name)]
        for name in sorted(set(a) | set(b))
        if a.get(name) != b.get(name)
    }
