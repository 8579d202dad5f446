"""Runs on a Dask cluster, as the facade's ``execute_many(client=...)`` hands them over.

What the caller's side decides before :mod:`.._cluster.dask` submits anything: which folder
travels to the workers as the kernels' working directory, and the bar of runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._errors import InvalidArgumentError
from .._run.checks import PathLike
from .._run.plan import Plan
from .._sources.remote import is_url
from .._types import RunResult
from .progress import run_progress

__all__ = ["run_on_dask"]


def run_on_dask(
    input_path: PathLike,
    plans: list[Plan],
    client: Any,
    *,
    cwd_given: bool,
    runs_dir: Path,
    on_record: Callable[[str, Mapping[str, Any]], None],
    wanted: bool | None,
    retries: int,
) -> list[RunResult]:
    """Run ``plans`` (all of the notebook ``input_path``) on the cluster of ``client``.

    Without ``cwd_given``, the notebook's folder travels to the workers as the kernels'
    working directory; a notebook at a URL has none, and is refused. ``wanted``: whether a
    bar of runs shows (None: on a terminal).

    Raises
    ------
    NotebookExecutorError
        A notebook at a URL with no ``cwd``, or a scheduler that cannot be reached.
    """
    from .._cluster.dask import run_on_cluster

    if not cwd_given and is_url(input_path):
        raise InvalidArgumentError(
            "a notebook at a URL has no folder to ship to the workers: "
            "pass cwd= a path that exists on every worker"
        )
    folder = None if cwd_given else Path(input_path).resolve().parent
    progress = run_progress(len(plans), wanted)
    try:
        return run_on_cluster(
            plans,
            client,
            runs_dir=runs_dir,
            on_record=on_record,
            folder=folder,
            progress=progress,
            retries=retries,
        )
    finally:
        if progress is not None:
            progress.close()
