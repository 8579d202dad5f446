"""Planning a run: every check on the caller's input, and the notebook ready to execute.

A :class:`Plan` is a run that passed every check and has its parameters injected; nothing has
started. Everything that can be wrong with the input is found here, before any kernel starts.
"""

from __future__ import annotations

import logging
import math
import os
import posixpath
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._errors import NotebookExecutorError, NotebookSourceError, ParameterError
from .._kernels.launch import choose_kernel, kernel_environment
from .._parameters.declared import (
    INJECTED_TAG,
    check_parameters_cell,
    declared_parameters,
    inject_parameters,
    unencodable_value,
    validate_parameters,
)
from .._parameters.environment import declared_env_names, resolve_declared_env
from .._parameters.placeholders import substitute_placeholders
from .._records.results import CellMap, redact
from .._sources.bounded import unencodable
from .._sources.files import missing_folder
from .._sources.formats import load_source, write_notebook
from .._sources.literals import is_literal_value
from .._sources.remote import is_url
from ..engine import RunJob
from .edits import CellEdit, apply_edits, forget_edits

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "PathLike",
    "Plan",
    "check_env",
    "check_path",
    "check_seconds",
    "parses_parameters",
    "plan_run",
]

logger = logging.getLogger(__name__)

#: Kernel languages whose parameters cell this package parses (and so checks).
CHECKED_LANGUAGES = frozenset({"python", "python3", "ipython", "ipython3"})

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
    #: Where the executed notebook also goes: a local path or a URL (``s3://...``).
    output_path: str | None
    job: RunJob
    env_names: list[str]
    secrets: dict[str, str]
    #: The values the caller gave (papermill's ``parameters``).
    given: dict[str, Any] = field(default_factory=dict)
    #: The notebook's declared literal defaults (papermill's ``default_parameters``).
    defaults: dict[str, Any] = field(default_factory=dict)
    #: False when the notebook's language cannot be parsed here: the given values were
    #: injected by papermill's translators without being checked.
    parameters_checked: bool = True
    #: The cells replaced for this run (a modified run), checked; none for a plain run.
    edits: list[CellEdit] = field(default_factory=list)


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
    base_env: Mapping[str, str] | None = None,
    dotenv_root: Path | None = None,
    edits: Sequence[CellEdit] = (),
) -> Plan:
    """Check everything about a run and prepare it; start nothing.

    Raises the typed errors of bad input (:mod:`notebook_executor._errors`) before any kernel
    starts. ``kernel_name``, the ``default_*`` limits, ``base_env`` (the environment the
    kernel starts from, default this process's) and ``dotenv_root`` (the folder ``.env``
    files are confined to) are the executor's own settings. ``edits`` (already checked
    against the source: ``_review.run_edits``) replace cells for this run only.
    """
    check_path("input_path", input_path)
    if output_path is not None:
        check_path("output_path", output_path)
    if cwd is not None:
        check_path("cwd", cwd)
    notebook = os.fspath(input_path)
    if parameters is not None and not isinstance(parameters, Mapping):
        raise NotebookExecutorError(
            f"parameters must be a mapping of name to value, got {type(parameters).__name__}"
        )
    if request is not None and not isinstance(request, str):
        raise NotebookExecutorError(f"request must be a string, got {type(request).__name__}")
    _check_unicode(notebook, output_path, request)
    extra_env = check_env("env", env)
    secret_env = check_env("secrets", secrets)
    if output_path is not None:
        _check_output_path(input_path, output_path)
    run_timeout = check_seconds("timeout", timeout if timeout is not None else default_timeout)
    per_cell = check_seconds(
        "cell_timeout", cell_timeout if cell_timeout is not None else default_cell_timeout
    )
    loaded = load_source(input_path)
    given = dict(parameters or {})
    kernel = choose_kernel(notebook, kernel_name, loaded.nb.metadata.get("kernelspec"))
    checked = parses_parameters(kernel.language)
    if checked:
        check_parameters_cell(notebook, loaded.nb)
        declared = declared_parameters(loaded.nb)
        effective = validate_parameters(declared, given)
        defaults = {n: p.default for n, p in declared.items() if p.literal_default}
    else:
        effective, defaults = _unchecked(notebook, kernel.language, given), {}
        declared = {}
    if cwd is not None:
        workdir = Path(cwd)
        if not workdir.is_dir():
            raise NotebookExecutorError(f"cwd {os.fspath(cwd)!r} is not a directory")
    elif is_url(notebook):
        workdir = Path.cwd()  # papermill's default too: the caller's working directory
    else:
        workdir = loaded.path.parent
    nb = loaded.nb
    declared_dicts = {name: parameter.as_dict() for name, parameter in declared.items()}
    resolve_declared_env(
        declared_env_names(notebook, nb),
        env=extra_env,
        secrets=secret_env,
        folders=_dotenv_folders(loaded.path.parent, dotenv_root),
        declared=declared_dicts,
        environ=base_env,
    )
    _start_afresh(nb)
    substitutes = _substitutes(notebook, nb)
    apply_edits(nb, edits, effective if substitutes else None, declared_dicts)
    if substitutes:
        substitute_placeholders(nb, effective, declared_dicts)
    injected_at = inject_parameters(nb, {name: effective[name] for name in given}, kernel.language)
    environment = kernel_environment({**extra_env, **secret_env}, base_env)
    output = None if output_path is None else os.fspath(output_path)
    if output is not None and is_url(output):
        # As papermill does, the prepared notebook is written first: an unreachable store
        # or a missing extra is found here, before any kernel starts.
        write_notebook(redact(nb, secret_env), output)
    return Plan(
        notebook=notebook,
        loaded_path=loaded.path,
        sha256=loaded.sha256,
        source_format=loaded.format.name,
        nb=nb,
        cell_map=CellMap(injected_at),
        parameters=effective,
        request=request,
        output_path=output,
        job=RunJob(
            nb=nb,
            kernel=kernel,
            cwd=workdir.resolve(),
            env=environment,
            cell_timeout=per_cell,
            timeout=run_timeout,
        ),
        env_names=sorted(extra_env),
        secrets=secret_env,
        given={name: effective[name] for name in given},
        defaults=defaults,
        parameters_checked=checked,
        edits=list(edits),
    )


def _dotenv_folders(notebook_folder: Path, root: Path | None) -> list[Path]:
    """The folders whose ``.env`` a run may read: the notebook's and the working directory,
    or, confined to ``root``, the notebook's (when inside it) and the root."""
    if root is None:
        return [notebook_folder, Path.cwd()]
    inside = notebook_folder.resolve().is_relative_to(root)
    return [*([notebook_folder] if inside else []), root]


def parses_parameters(language: str) -> bool:
    """Whether parameters of a notebook in ``language`` are parsed and checked here."""
    return language.lower() in CHECKED_LANGUAGES


def _unchecked(notebook: str, language: str, given: dict[str, Any]) -> dict[str, Any]:
    """Given values for a notebook whose parameters cell cannot be parsed here."""
    for name, value in given.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ParameterError(str(name), [f"{name!r} is not a valid parameter name"])
        if not is_literal_value(value):
            raise ParameterError(
                name, [f"parameter {name!r}: {type(value).__name__} values cannot be injected"]
            )
        problem = unencodable_value(value)
        if problem:
            raise ParameterError(name, [f"parameter {name!r}: {problem}"])
    if given:
        logger.warning(
            "%s: a %s notebook's parameters cannot be checked here; %s injected unchecked "
            "with papermill's translators",
            notebook,
            language,
            ", ".join(sorted(given)),
        )
    return dict(given)


def _check_output_path(input_path: PathLike, output_path: PathLike) -> None:
    """Refuse an ``output_path`` that cannot take the copy, or that is the source itself.

    A local path's folder must exist (it is not created) and be writable: a uniquely named
    probe file is created there (``O_EXCL``: never an existing file) and removed at once, so
    a bad path is found before any kernel starts.
    """
    target = Path(output_path)
    if target.suffix.lower() != ".ipynb":
        raise NotebookExecutorError(f"output_path must end in .ipynb, got {output_path!r}")
    if is_url(output_path):
        # A store's object, written by papermill's I/O; it must not be the source's URL.
        if is_url(input_path) and _url_key(os.fspath(input_path)) == _url_key(
            os.fspath(output_path)
        ):
            raise NotebookExecutorError(
                f"output_path {os.fspath(output_path)!r} is the source notebook itself; "
                "give another path (the source is never overwritten)"
            )
        return
    shown = os.fspath(output_path)
    if target.is_dir():
        raise NotebookExecutorError(f"output_path {shown!r} is a directory")
    same = target.resolve() == Path(input_path).resolve()
    if not same and target.exists():
        try:
            same = target.samefile(input_path)
        except OSError:
            same = False
    if same:
        raise NotebookExecutorError(
            f"output_path {shown!r} is the source notebook itself; "
            "give another path (the source is never overwritten)"
        )
    _check_writable_folder(shown, target.parent)


def _url_key(url: str) -> tuple[str, str, str, str]:
    """What names a store's object: scheme, host and normalised path (``/x/../`` folded)."""
    parts = urlsplit(url)
    path = posixpath.normpath(parts.path or "/")
    return parts.scheme.lower(), parts.netloc, path.lstrip("/"), parts.query


def _check_writable_folder(shown: str, folder: Path) -> None:
    """Refuse ``output_path`` (shown as ``shown``) unless ``folder`` exists and takes a file."""
    problem = missing_folder(folder / "probe")
    if problem:
        raise NotebookExecutorError(f"output_path {shown!r}: {problem}")
    probe = folder / f".notebook-executor-probe-{uuid.uuid4().hex}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise NotebookExecutorError(
            f"output_path {shown!r}: the folder {os.fspath(folder)!r} is not writable "
            f"({exc.strerror or type(exc).__name__})"
        ) from None
    os.close(fd)
    probe.unlink()


def check_seconds(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise NotebookExecutorError(f"{name} must be a positive number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond any float: no limit, as infinity
        return None
    if math.isinf(seconds):
        return None
    return seconds


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
        if kind == "secrets" and unencodable(value):
            # Searched for in outputs as UTF-8 text (an env value may hold any bytes).
            raise NotebookExecutorError(f"{kind}: the value of {name!r} is not valid Unicode")
        checked[name] = value
    return checked


def _check_unicode(notebook: str, output_path: PathLike | None, request: str | None) -> None:
    """Refuse text that the run records (UTF-8 files, the catalog) could not hold.

    A file name with bytes that are not UTF-8 reaches Python as lone surrogates
    (``surrogateescape``); it is refused rather than recorded under another name.
    """
    problem = unencodable(notebook)
    if problem:
        raise NotebookSourceError(notebook, f"the file name is not UTF-8 ({problem}); rename it")
    if output_path is not None and unencodable(os.fspath(output_path)):
        raise NotebookExecutorError(
            f"output_path {os.fspath(output_path)!r}: the file name is not UTF-8; rename it"
        )
    problem = unencodable(request) if request is not None else None
    if problem:
        raise NotebookExecutorError(f"request: {problem}")


def _substitutes(notebook: str, nb: NotebookNode) -> bool:
    """Whether placeholders apply: a logbook (its front matter read) not saying
    ``substitute: false``."""
    front = nb.metadata.get("front_matter")
    if not isinstance(front, Mapping):
        return False
    wanted = front.get("substitute", True)
    if not isinstance(wanted, bool):
        raise NotebookSourceError(
            notebook, f"front matter 'substitute' must be true or false, got {wanted!r}"
        )
    return wanted


def _start_afresh(nb: NotebookNode) -> None:
    """Drop what an executed ``.ipynb`` source carries over from an earlier run.

    Its outputs and execution counts would pass for this run's in cells that never run (and
    its scraps for this run's scraps); its injected parameters would override this run's.
    Cells are kept, so indices still match ``read_notebook(source).cells``.
    """
    forget_edits(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if INJECTED_TAG in tags:
            cell.metadata["tags"] = [tag for tag in tags if tag != INJECTED_TAG]
            cell.source = "# Parameters injected by an earlier run: not applied to this run."
