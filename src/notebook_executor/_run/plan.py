"""Planning a run: every check on the caller's input, and the notebook ready to execute.

A :class:`Plan` is a run that passed every check and has its parameters injected; nothing has
started. Everything that can be wrong with the input is found here, before any kernel starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgumentError, NotebookSourceError, ParameterError
from .._kernels.environments import NotebookEnvironment, ensure_environment
from .._kernels.launch import choose_kernel, kernel_environment
from .._parameters.declared import INJECTED_TAG, declared_parameters, parameters_cell_error
from .._parameters.environment import declared_env_names, resolve_declared_env
from .._parameters.placeholders import substitute_placeholders
from .._parameters.values import (
    inject_parameters,
    typed_values,
    unencodable_value,
    validate_parameters,
)
from .._records.project import configured_reuse
from .._records.results import CellMap, redact
from .._sources.dependencies import Dependencies, refuse_local_paths_outside
from .._sources.formats import LoadedSource, load_source, write_notebook
from .._sources.literals import is_literal_value
from .._sources.remote import is_url
from .._types import USE_DEFAULT, CellEdit
from ..engine import KernelChoice, RunJob
from .checks import (
    PathLike,
    check_env,
    check_output_path,
    check_path,
    check_seconds,
    check_unicode,
)
from .edits import apply_edits, check_edit_list, forget_edits
from .options import RunOptions

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "ENVIRONMENT_CHOICES",
    "EditCheck",
    "Plan",
    "Planner",
    "check_environment_option",
    "parses_parameters",
    "plan_run",
    "uses_declared_environment",
]

logger = logging.getLogger(__name__)

#: ``check(path, edits, loaded)``: ``edits`` checked against the source as read (``loaded``),
#: each source as the file would hold it (:func:`notebook_executor._review.run_edits.
#: check_edits`, above this layer: the executor hands it in).
EditCheck = Callable[[PathLike, object, LoadedSource], list[CellEdit]]

#: Kernel languages whose parameters cell this package parses (and so checks).
CHECKED_LANGUAGES = frozenset({"python", "python3", "ipython", "ipython3"})


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
    #: The record of the environment made for the notebook's declared dependencies (see
    #: docs/how-to/environments.md: declaration, hash, resolved versions), or None on the
    #: executor's own.
    environment: dict[str, Any] | None = None
    #: The run this one is part of or continues (a sweep's :class:`~notebook_executor.
    #: _records.lineage.ParentRun` record), kept in the record as ``parent_run``.
    parent_run: dict[str, Any] | None = None
    #: Durable checkpoints (docs/how-to/incremental.md): start from a stored state
    #: (``reuse``), write states (``checkpoints``); a resumed run's earlier run and the job
    #: index of its failed cell (only that run's checkpoints, before that cell).
    reuse: bool = False
    checkpoints: bool = True
    resume_of: tuple[str, int] | None = None
    #: What a resume did not undo, said in the result's ``state_notes``.
    resume_note: str | None = None


def plan_run(
    input_path: PathLike,
    options: RunOptions,
    *,
    kernel_name: str | None = None,
    default_timeout: float | None = None,
    default_cell_timeout: float | None = None,
    base_env: Mapping[str, str] | None = None,
    dotenv_root: Path | None = None,
    make_environment: bool = True,
    check_edits: EditCheck | None = None,
    head_start: Callable[[], None] | None = None,
) -> Plan:
    """Check everything about a run and prepare it; start nothing.

    Raises the typed errors of bad input (:mod:`notebook_executor._errors`) before any kernel
    starts. ``options`` are the caller's; ``kernel_name``, the ``default_*`` limits,
    ``base_env`` (the environment the kernel starts from, default this process's) and
    ``dotenv_root`` (the folder ``.env`` files, and the local projects a declaration names, are
    confined to) are the executor's own settings.
    The source is read once, here; every check works on what was read. ``options.edits``,
    checked by ``check_edits`` against it (a run with edits needs it), replace cells for this
    run only. A parameter value given as text (:class:`~notebook_executor._parameters.values.
    TextValue`: the command line's ``-p``, a JSON client's string) is typed against the
    declared parameters. ``head_start`` is called once the source is read when the run is on
    this interpreter's own Python kernel (no other kernelspec, no environment made for
    declared dependencies): a caller that wants the engine to prepare that kernel while the
    rest is checked. A notebook that declares dependencies gets the environment made
    for them (:func:`~notebook_executor._kernels.environments.ensure_environment`, last, once
    every other check passed) unless ``options.environment`` is ``"current"``; not made
    without ``make_environment`` (nothing will run).
    """
    output_path, parameters, request = options.output_path, options.parameters, options.request
    timeout, cell_timeout, cwd = options.timeout, options.cell_timeout, options.cwd
    env, secrets = options.env, options.secrets
    check_environment_option(options.environment)
    for name in ("reuse", "checkpoints"):
        value = getattr(options, name)
        if value is not None and not isinstance(value, bool):
            raise InvalidArgumentError(
                f"{name} must be true or false, got {value!r}", argument=name
            )
    check_path("input_path", input_path)
    if options.edits is not None:
        if check_edits is None:
            raise InvalidArgumentError("edits are not taken here", argument="edits")
        check_edit_list(input_path, options.edits)
    if output_path is not None:
        check_path("output_path", output_path)
    if cwd is not None:
        check_path("cwd", cwd)
    notebook = os.fspath(input_path)
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidArgumentError(
            f"parameters must be a mapping of name to value, got {type(parameters).__name__}",
            argument="parameters",
        )
    if request is not None and not isinstance(request, str):
        raise InvalidArgumentError(
            f"request must be a string, got {type(request).__name__}", argument="request"
        )
    check_unicode(notebook, output_path, request)
    extra_env = check_env("env", env)
    secret_env = check_env("secrets", secrets)
    if output_path is not None:
        check_output_path(input_path, output_path)
    run_timeout = check_seconds("timeout", default_timeout if timeout is USE_DEFAULT else timeout)
    per_cell = check_seconds(
        "cell_timeout", default_cell_timeout if cell_timeout is USE_DEFAULT else cell_timeout
    )
    loaded = load_source(input_path)
    kernel = choose_kernel(notebook, kernel_name, loaded.nb.metadata.get("kernelspec"))
    own = loaded.dependencies
    declared_environment = make_environment and uses_declared_environment(own, options.environment)
    if head_start is not None and kernel.native and not declared_environment:
        head_start()
    edits: Sequence[CellEdit] = ()
    if options.edits is not None and check_edits is not None:
        # Before anything changes ``loaded.nb``: the edits are checked against the source.
        edits = check_edits(input_path, options.edits, loaded)
    given = dict(parameters or {})
    # A parameters cell that is not valid Python is run as papermill runs it: the run fails
    # there, with the kernel's SyntaxError, and is recorded; given values are injected as
    # they are (the cell declares nothing to check them against).
    broken = parameters_cell_error(loaded.nb) if parses_parameters(kernel.language) else None
    checked = parses_parameters(kernel.language) and broken is None
    if checked:
        declared = declared_parameters(loaded.nb)
        given = typed_values(declared, given)
        effective = validate_parameters(declared, given)
        defaults = {n: p.default for n, p in declared.items() if p.literal_default}
    else:
        why = (
            f"its parameters cell (cell {broken[0]}) {broken[1]}"
            if broken is not None
            else f"a {kernel.language} notebook's parameters cannot be checked here"
        )
        given = typed_values({}, given)
        effective, defaults = _unchecked(notebook, why, given), {}
        declared = {}
    if cwd is not None:
        workdir = Path(cwd)
        if not workdir.is_dir():
            raise InvalidArgumentError(f"cwd {os.fspath(cwd)!r} is not a directory", argument="cwd")
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
        root=dotenv_root,
    )
    _start_afresh(nb)
    substitutes = _substitutes(notebook, nb)
    apply_edits(nb, edits, effective if substitutes else None, declared_dicts)
    if substitutes:
        substitute_placeholders(nb, effective, declared_dicts)
    injected_at = inject_parameters(nb, {name: effective[name] for name in given}, kernel.language)
    environment = kernel_environment({**extra_env, **secret_env}, base_env)
    made = None
    if declared_environment and own is not None:
        kernel, made = _in_declared_environment(notebook, kernel, own, dotenv_root)
        environment = made.activated(environment)
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
        environment=None if made is None else made.record,
        reuse=(
            options.reuse
            if options.reuse is not None
            else bool(configured_reuse(loaded.path.parent))
        ),
        checkpoints=options.checkpoints is not False,
    )


@dataclass
class Planner:
    """The executor's settings every run is planned with (:func:`plan_run`'s own), and the
    head start it may give the engine once the next run's source is read."""

    kernel_name: str | None
    timeout: float | None
    cell_timeout: float | None
    #: The environment kernels start from; None: this process's.
    base_env: dict[str, str] | None
    dotenv_root: Path | None
    check_edits: EditCheck
    #: The engine's ``prepare_kernel``, when it has one.
    prepare_kernel: Callable[[], None] | None = None
    #: Set by ``prepare_kernel(once_read=True)``: the next plan gives the head start.
    head_start_pending: bool = False

    def plan(
        self,
        input_path: PathLike,
        options: RunOptions,
        *,
        make_environment: bool = True,
        base_env: Mapping[str, str] | None = None,
    ) -> Plan:
        """:func:`plan_run` with these settings; ``base_env`` given replaces the executor's."""
        head_start, self.head_start_pending = self.head_start_pending, False
        return plan_run(
            input_path,
            options,
            kernel_name=self.kernel_name,
            default_timeout=self.timeout,
            default_cell_timeout=self.cell_timeout,
            base_env=self.base_env if base_env is None else check_env("base_env", base_env),
            dotenv_root=self.dotenv_root,
            make_environment=make_environment,
            check_edits=self.check_edits,
            head_start=self.prepare_kernel if head_start else None,
        )

    def plan_keywords(
        self,
        input_path: PathLike,
        *,
        make_environment: bool = True,
        base_env: Mapping[str, str] | None = None,
        **given: Any,
    ) -> Plan:
        """:meth:`plan` for options given as keywords (``validate``'s, ``check``'s)."""
        return self.plan(
            input_path,
            RunOptions.from_keywords("validate", given),
            make_environment=make_environment,
            base_env=base_env,
        )


#: The values of the ``environment`` option: None (the default) and ``"declared"`` run a
#: notebook that declares dependencies in the environment made for them; ``"current"`` on the
#: executor's own interpreter.
ENVIRONMENT_CHOICES = (None, "declared", "current")


def check_environment_option(value: object) -> None:
    """Refuse an ``environment`` option that is not one of :data:`ENVIRONMENT_CHOICES`."""
    if value not in ENVIRONMENT_CHOICES:
        raise InvalidArgumentError(
            f"environment must be 'current' or 'declared' (or None), got {value!r}",
            argument="environment",
        )


def uses_declared_environment(declared: Dependencies | None, environment: str | None) -> bool:
    """Whether a run with option ``environment`` runs in the environment ``declared`` calls
    for (a declaration there is, and the caller did not ask for the current interpreter)."""
    return declared is not None and environment != "current"


def _in_declared_environment(
    notebook: str, kernel: KernelChoice, declared: Dependencies, root: Path | None
) -> tuple[KernelChoice, NotebookEnvironment]:
    """The kernel of the environment made for ``declared`` (made now, or reused); confined to
    ``root`` (a server's), a requirement naming a local project outside it is refused."""
    if not kernel.native:
        raise NotebookSourceError(
            notebook,
            f"it declares dependencies ({declared.declared_in}), which run on a Python kernel "
            f"made for them, but its kernel is {kernel.name!r}; pass environment='current' "
            "(--env current) to run it on that kernel",
        )
    if root is not None:
        refuse_local_paths_outside(notebook, declared.dependencies, root)
    made = ensure_environment(notebook, declared.dependencies, declared.requires_python)
    return replace(kernel, interpreter=str(made.python)), made


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


def _unchecked(notebook: str, why: str, given: dict[str, Any]) -> dict[str, Any]:
    """Given values for a notebook whose parameters cell cannot be parsed here (``why``)."""
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
            "%s: %s; %s injected unchecked with papermill's translators",
            notebook,
            why,
            ", ".join(sorted(given)),
        )
    return dict(given)


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
