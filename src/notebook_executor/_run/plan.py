"""Planning a run: every check on the caller's input, and the notebook ready to execute.

A :class:`Plan` is a run that passed every check and has its parameters injected; nothing has
started. Everything that can be wrong with the input is found here, before any kernel starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import NotebookExecutorError, NotebookSourceError
from .._kernels.launch import choose_kernel, kernel_environment
from ..engine import RunJob
from .declared_env import declared_env_names, resolve_declared_env
from .parameters import INJECTED_TAG, declared_parameters, inject_parameters, validate_parameters
from .placeholders import substitute_placeholders
from .results import CellMap
from .sources import load_source

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["PathLike", "Plan", "check_env", "check_path", "check_seconds", "plan_run"]

PathLike = str | os.PathLike[str]


@dataclass
class Plan:
    """A checked run, ready to start: everything validated, nothing started."""

    #: The source path as the caller gave it (a result's ``notebook``).
    notebook: str
    loaded_path: Path
    sha256: str
    source_format: str
    #: The source, parameters injected; the engine executes it in place.
    nb: NotebookNode
    cell_map: CellMap
    parameters: dict[str, Any]
    request: str | None
    output_path: Path | None
    job: RunJob
    env_names: list[str]
    secrets: dict[str, str]


def plan_run(
    input_path: PathLike,
    *,
    output_path: PathLike | None,
    parameters: Mapping[str, Any] | None,
    timeout: float | None = None,
    cell_timeout: float | None = None,
    request: str | None = None,
    cwd: PathLike | None = None,
    env: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    kernel_name: str | None = None,
    default_timeout: float | None = None,
    default_cell_timeout: float | None = None,
) -> Plan:
    """Check everything about a run and prepare it; start nothing.

    Raises the typed errors of bad input (:mod:`notebook_executor._errors`) before any kernel
    starts. ``kernel_name`` and the ``default_*`` limits are the executor's own settings.
    """
    check_path("input_path", input_path)
    if output_path is not None:
        check_path("output_path", output_path)
    if cwd is not None:
        check_path("cwd", cwd)
    shown = os.fspath(input_path)
    if parameters is not None and not isinstance(parameters, Mapping):
        raise NotebookExecutorError(
            f"parameters must be a mapping of name to value, got {type(parameters).__name__}"
        )
    if request is not None and not isinstance(request, str):
        raise NotebookExecutorError(f"request must be a string, got {type(request).__name__}")
    extra_env = check_env("env", env)
    secret_env = check_env("secrets", secrets)
    if output_path is not None and Path(output_path).suffix.lower() != ".ipynb":
        raise NotebookExecutorError(f"output_path must end in .ipynb, got {output_path!r}")
    run_timeout = check_seconds("timeout", timeout if timeout is not None else default_timeout)
    per_cell = check_seconds(
        "cell_timeout", cell_timeout if cell_timeout is not None else default_cell_timeout
    )
    loaded = load_source(input_path)
    declared = declared_parameters(loaded.notebook)
    given = dict(parameters or {})
    effective = validate_parameters(declared, given)
    kernel = choose_kernel(shown, kernel_name, loaded.notebook.metadata.get("kernelspec"))
    if cwd is not None:
        workdir = Path(cwd)
        if not workdir.is_dir():
            raise NotebookExecutorError(f"cwd {os.fspath(cwd)!r} is not a directory")
    else:
        workdir = loaded.path.parent
    notebook = loaded.notebook
    declared_dicts = {name: parameter.as_dict() for name, parameter in declared.items()}
    resolve_declared_env(
        declared_env_names(shown, notebook),
        env=extra_env,
        secrets=secret_env,
        folders=[loaded.path.parent, Path.cwd()],
        declared=declared_dicts,
    )
    _start_afresh(notebook)
    if _substitutes(shown, notebook):
        substitute_placeholders(notebook, effective, declared_dicts)
    injected_at = inject_parameters(
        notebook, {name: effective[name] for name in given}, kernel.language
    )
    environment = kernel_environment({**extra_env, **secret_env})
    return Plan(
        notebook=shown,
        loaded_path=loaded.path,
        sha256=loaded.sha256,
        source_format=loaded.format.name,
        nb=notebook,
        cell_map=CellMap(injected_at),
        parameters=effective,
        request=request,
        output_path=None if output_path is None else Path(output_path),
        job=RunJob(
            nb=notebook,
            kernel=kernel,
            cwd=workdir.resolve(),
            env=environment,
            cell_timeout=per_cell,
            timeout=run_timeout,
        ),
        env_names=sorted(extra_env),
        secrets=secret_env,
    )


def check_seconds(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise NotebookExecutorError(f"{name} must be a positive number of seconds, got {value!r}")
    if math.isinf(value):
        return None
    return float(value)


def check_path(name: str, value: object) -> None:
    if isinstance(value, (str, os.PathLike)):
        return
    hint = " (parameters go in parameters=...)" if isinstance(value, Mapping) else ""
    raise NotebookExecutorError(f"{name} must be a path, got {type(value).__name__}{hint}")


def check_env(kind: str, values: Mapping[str, str] | None) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise NotebookExecutorError(f"{kind} must be a mapping of names to strings")
    checked: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
            raise NotebookExecutorError(f"{kind}: {name!r} is not a valid environment name")
        if not isinstance(value, str) or "\x00" in value:
            raise NotebookExecutorError(f"{kind}: the value of {name!r} must be a string")
        checked[name] = value
    return checked


def _substitutes(shown: str, notebook: NotebookNode) -> bool:
    """Whether placeholders apply: a logbook (its front matter read) not saying
    ``substitute: false``."""
    front = notebook.metadata.get("front_matter")
    if not isinstance(front, Mapping):
        return False
    wanted = front.get("substitute", True)
    if not isinstance(wanted, bool):
        raise NotebookSourceError(
            shown, f"front matter 'substitute' must be true or false, got {wanted!r}"
        )
    return wanted


def _start_afresh(notebook: NotebookNode) -> None:
    """Drop what an executed ``.ipynb`` source carries over from an earlier run.

    Its outputs and execution counts would pass for this run's in cells that never run (and
    its scraps for this run's scraps); its injected parameters would override this run's.
    Cells are kept, so indices still match ``read_notebook(source).cells``.
    """
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if INJECTED_TAG in tags:
            cell.metadata["tags"] = [tag for tag in tags if tag != INJECTED_TAG]
            cell.source = "# Parameters injected by an earlier run: not applied to this run."
