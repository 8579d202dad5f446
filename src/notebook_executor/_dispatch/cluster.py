"""Runs on a Dask cluster, as the facade's ``execute_many(client=...)`` hands them over.

What the caller's side decides before :mod:`.._cluster.dask` submits anything: which folder
travels to the workers as the kernels' working directory, and the bar of runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._errors import ClusterError, InvalidArgumentError
from .._run.checks import PathLike
from .._run.plan import Plan, uses_declared_environment
from .._sources.remote import is_url
from .._types import RunResult
from .progress import run_progress

__all__ = ["refuse_declared_environment_on_dask", "run_on_dask"]


def refuse_declared_environment_on_dask(input_path: PathLike, environment: str | None) -> None:
    """Refuse, before anything is submitted or made, a sweep on a cluster of a notebook that
    declares dependencies (docs/how-to/environments.md): the environment made for them here does not
    exist on the workers, whose own interpreters run it only with ``environment="current"``.

    Raises
    ------
    ClusterError
        The notebook declares dependencies and ``environment`` is not ``"current"``.
    """
    from .._sources.formats import load_source

    declared = load_source(input_path).dependencies
    if uses_declared_environment(declared, environment):
        assert declared is not None
        raise ClusterError(
            f"{input_path}: it declares dependencies ({declared.declared_in}), and a Dask "
            "sweep does not make environments on the workers: run it without a cluster, or "
            "pass environment='current' (--env current) to run it on the workers' own "
            "interpreters"
        )


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
