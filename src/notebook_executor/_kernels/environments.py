"""Per-notebook environments: made by uv from a notebook's declared dependencies, and cached.

A notebook that declares dependencies (docs/how-to/environments.md) runs on a kernel in a virtual
environment made for them: ``uv venv`` then ``uv pip install`` of the declared requirements plus
:data:`KERNEL_REQUIREMENT` (the kernel-side programs of ``inside/``, ``kernel_main.py``
and ``template_server.py``, run by path and import nothing else of this package). Nothing here
resolves or installs anything itself: uv does, the binary the ``uv`` package ships (or the
one on ``PATH``). uv reads its own settings from the environment as usual: ``UV_OFFLINE``,
``UV_FIND_LINKS``, ``UV_INDEX_URL``, ``UV_CACHE_DIR``...

Environments live under :func:`environments_dir`, one folder per :func:`environment_hash` (of
the declaration, the kernel requirement and the interpreter), so the next run of the same
declaration reuses it with a few ``lstat`` calls (the checks below) and one small read, and
calls no uv at all.

Building is safe to race and to kill:

- an exclusive lock file per hash (``fcntl.flock``), held for the whole build: two runs needing
  the same new environment build it once, the second waits and then reuses it;
- the build happens in a temporary folder (``.build-<hash>-<pid>``, ``uv venv --relocatable``),
  which gets its marker file (:data:`MARKER`, which also holds what was installed) last, and is
  then renamed into place at once: a folder without its marker is never used;
- uv dies with the thread that runs it (on Linux, ``PR_SET_PDEATHSIG``): a builder killed
  outright leaves no uv behind, writing on;
- every build first removes the temporary folders of builders that are gone: those of its own
  hash (it holds that lock), and those of any other hash whose lock file nobody holds.

Environments are used only when nobody else could have changed them (another user's
``bin/python`` would otherwise run as this user): the folder of environments, an environment's
folder, its ``bin`` and its ``bin/python`` must belong to this user and be writable by no one
else (:func:`~notebook_executor._kernels.owned.untrusted`, the run server's folder check);
else the run is refused with a :class:`DependencyError` naming the folder and the fix. Folders
made here are so (made with mode 0755 at most; uv runs with ``go-w`` added to its umask).

A server confined to a root folder (the MCP server) also refuses a requirement naming a local
path outside it (``name @ file:///dir``: uv would run that project's build code), before any
environment is made (:func:`.._sources.dependencies.refuse_local_paths_outside`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DependencyError
from .._types import TIMEOUTS
from .owned import WRITABLE_BY_OTHERS, untrusted

__all__ = [
    "ENVIRONMENTS_VARIABLE",
    "KERNEL_REQUIREMENT",
    "MARKER",
    "NotebookEnvironment",
    "ensure_environment",
    "environment_hash",
    "environments_dir",
    "uv_binary",
]

logger = logging.getLogger(__name__)

#: Environment variable naming the folder environments are cached in (overrides the default).
ENVIRONMENTS_VARIABLE = "NOTEBOOK_EXECUTOR_ENVS"

#: What every environment gets besides its declaration: the kernel our kernel-side programs
#: subclass and patch (the same range as the package's own dependency).
KERNEL_REQUIREMENT = "ipykernel>=7,<8"

#: The file a finished environment holds: its record (JSON). Written last, before the rename.
MARKER = "notebook-executor-environment.json"

#: Bumped when the way environments are made changes: old ones are then not reused.
LAYOUT_VERSION = 2

#: Longest a uv command may take (seconds): a resolution and install from the index.
UV_TIMEOUT = TIMEOUTS.environment_build


@dataclass(frozen=True)
class NotebookEnvironment:
    """A ready environment for a declaration.

    Attributes
    ----------
    path : Path
        Its folder.
    python : Path
        Its interpreter (``bin/python``), the program its kernels run.
    hash : str
        :func:`environment_hash` of what it was made for.
    record : dict
        What the run record keeps: the declaration, the hash, the Python version and the
        resolved versions ``{name: version}`` as ``uv pip freeze`` gives them.
    built : bool
        True when this call made it (False: reused from the cache).
    """

    path: Path
    python: Path
    hash: str
    record: dict[str, Any] = field(default_factory=dict)
    built: bool = False

    def activated(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` as a kernel of this environment gets it, as ``uv run`` and ``activate``
        make it: ``VIRTUAL_ENV`` names it and its ``bin`` comes first on ``PATH`` (so that
        ``python`` or ``pip`` started by a notebook is this environment's too)."""
        scripts = str(self.python.parent)
        path = env.get("PATH")
        return {
            **env,
            "VIRTUAL_ENV": str(self.path),
            "PATH": scripts if not path else scripts + os.pathsep + path,
        }


def environments_dir() -> Path:
    """The folder environments are cached in: ``$NOTEBOOK_EXECUTOR_ENVS``, else
    ``$XDG_CACHE_HOME/notebook-executor/envs``, else ``~/.cache/notebook-executor/envs``."""
    chosen = os.environ.get(ENVIRONMENTS_VARIABLE)
    if chosen:
        return Path(chosen)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "notebook-executor" / "envs"


def uv_binary(notebook: str = "(environment)") -> str:
    """The uv program: the one the ``uv`` package installed, else ``uv`` on ``PATH``.

    Raises
    ------
    DependencyError
        uv is nowhere to be found (the error names ``notebook``).
    """
    with contextlib.suppress(ImportError, FileNotFoundError):
        from uv import find_uv_bin

        return str(find_uv_bin())
    found = shutil.which("uv")
    if found is None:
        raise DependencyError(
            notebook,
            None,
            "uv is not installed; `pip install notebook-executor` installs it "
            "(or run with environment='current')",
        )
    return found


def environment_hash(
    dependencies: Sequence[str], requires_python: str | None, interpreter: str, version: str
) -> str:
    """The cache key of an environment: the declaration (in its order), the kernel
    requirement, and the interpreter it is made from (path and version)."""
    key = {
        "layout": LAYOUT_VERSION,
        "dependencies": list(dependencies),
        "requires-python": requires_python,
        "kernel": KERNEL_REQUIREMENT,
        "python": [interpreter, version],
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def ensure_environment(
    notebook: str, dependencies: Sequence[str], requires_python: str | None
) -> NotebookEnvironment:
    """The environment for a declaration: reused from the cache, else made with uv.

    Raises
    ------
    DependencyError
        No Python here satisfies ``requires_python``, or uv cannot resolve or install a
        requirement (unknown, conflicting, or not reachable: no network and nothing cached);
        the message names the requirement and condenses uv's.
    """
    interpreter, version = _interpreter(notebook, requires_python)
    digest = environment_hash(dependencies, requires_python, interpreter, version)
    root = _trusted_root(notebook)
    final = root / digest
    found = _ready(notebook, final, digest)
    if found is not None:
        return found
    with _locked(root / f"{digest}.lock"):
        found = _ready(notebook, final, digest)
        if found is not None:
            return found
        _remove_leftovers(root, digest)
        declaration = {"dependencies": list(dependencies), "requires-python": requires_python}
        record = _build(notebook, root, digest, dependencies, interpreter, version, declaration)
    logger.info("%s: made environment %s", notebook, digest)
    return NotebookEnvironment(final, _python_of(final), digest, record, built=True)


def _python_of(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _trusted_root(notebook: str) -> Path:
    """The folder of environments (:func:`environments_dir`), made if missing and resolved.

    Raises
    ------
    DependencyError
        It cannot be made, or another user could change it.
    """
    root = environments_dir()
    try:
        root.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise DependencyError(
            notebook, None, f"cannot make the environments folder {root}: {exc.strerror or exc}"
        ) from None
    resolved = Path(os.path.realpath(root))
    problem = untrusted(resolved, closed=WRITABLE_BY_OTHERS)
    if problem is not None:
        raise DependencyError(
            notebook,
            None,
            f"environments folder {problem}, so its environments are not used; make it yours "
            f"and closed (chmod go-w), or set {ENVIRONMENTS_VARIABLE} to a folder of your own",
        )
    return resolved


def _ready(notebook: str, folder: Path, digest: str) -> NotebookEnvironment | None:
    """The finished environment in ``folder`` (its marker read), or None.

    Raises
    ------
    DependencyError
        It is there, but another user could have changed it (the folder, ``bin`` or
        ``bin/python``: :func:`~notebook_executor._kernels.owned.untrusted`).
    """
    if not os.path.lexists(folder):
        return None
    python = _python_of(folder)
    checks = ((folder, True), (python.parent, True), (python, False))
    for index, (path, is_folder) in enumerate(checks):
        problem = untrusted(path, closed=WRITABLE_BY_OTHERS, folder=is_folder)
        if problem is None:
            continue
        if index > 0 and not (folder / MARKER).exists():
            return None  # what a killed build left: removed under the lock, then made again
        raise DependencyError(
            notebook,
            None,
            f"environment {problem}, so it is not used; remove {folder} to have it made again",
        )
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("hash") != digest:
        return None
    return NotebookEnvironment(folder, python, digest, record, built=False)


@contextlib.contextmanager
def _locked(path: Path) -> Any:
    """Hold an exclusive lock on ``path`` (made if missing) for the block: across processes,
    and across threads (each opens its own file description)."""
    import fcntl

    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


#: The temporary folder of a build: ``.build-<hash>-<pid>``.
_BUILD_FOLDER = re.compile(r"\.build-([0-9a-f]{20})-[0-9]+")


def _remove_leftovers(root: Path, digest: str) -> None:
    """Remove what builders that are gone left (called under the lock of ``digest``): the
    temporary folders of ``digest``, those of any other hash whose lock file no one holds
    (a live builder holds it for the whole build), and a folder in place of ``digest``
    without its marker."""
    for leftover in root.glob(".build-*"):
        named = _BUILD_FOLDER.fullmatch(leftover.name)
        if named is None or leftover.is_symlink():
            continue
        if named.group(1) == digest:
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            _remove_if_unheld(root / f"{named.group(1)}.lock", leftover)
    final = root / digest
    if final.exists() and not (final / MARKER).exists():
        shutil.rmtree(final, ignore_errors=True)


def _remove_if_unheld(lock: Path, leftover: Path) -> None:
    """Remove ``leftover`` if no one holds ``lock`` (its hash's lock file, never made here:
    without one, the folder is not known to be a builder's), holding it meanwhile."""
    import fcntl

    try:
        handle = lock.open("rb")
    except OSError:
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # a build of that hash runs
        shutil.rmtree(leftover, ignore_errors=True)


def _build(
    notebook: str,
    root: Path,
    digest: str,
    dependencies: Sequence[str],
    interpreter: str,
    version: str,
    declaration: dict[str, Any],
) -> dict[str, Any]:
    """Make the environment in a temporary folder, write its marker, rename it into place."""
    temporary = root / f".build-{digest}-{os.getpid()}"
    python = _python_of(temporary)
    try:
        _uv(
            notebook,
            dependencies,
            ["venv", "--relocatable", "--python", interpreter, "--quiet", str(temporary)],
        )
        _uv(
            notebook,
            dependencies,
            [
                "pip",
                "install",
                "--python",
                str(python),
                "--quiet",
                *_compile_ahead(),
                "--",
                *dependencies,
                KERNEL_REQUIREMENT,
            ],
        )
        frozen = _uv(notebook, dependencies, ["pip", "freeze", "--python", str(python)])
        record = {
            "declaration": declaration,
            "hash": digest,
            "python": version,
            "packages": _versions(frozen),
        }
        (temporary / MARKER).write_text(json.dumps(record, indent=1), encoding="utf-8")
        temporary.rename(root / digest)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return record


def _compile_ahead() -> list[str]:
    """uv's option to compile the environment's bytecode at install, where Python writes none
    (``PYTHONDONTWRITEBYTECODE``, which the kernels inherit): ipykernel's imports then took
    0.68 s of CPU at every kernel start without it, 0.24 s with it. Elsewhere nothing is
    compiled ahead: the first kernel writes the bytecode of what it imports, where compiling
    every file of the environment took uv 2-6 s of CPU per build (66 s in one run of the test
    suite, whose environments are small), most of it for modules no kernel imports."""
    if sys.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return ["--compile-bytecode"]
    return []


def _versions(frozen: str) -> dict[str, str]:
    """``{name: version}`` of ``uv pip freeze``'s lines (``name==version``; any other form,
    a direct URL, is kept whole as the version)."""
    found: dict[str, str] = {}
    for line in frozen.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, pinned = line.partition("==")
        if not sep:
            name, _, pinned = line.partition(" @ ")
        found[name.strip()] = pinned.strip()
    return found


def _uv(notebook: str, dependencies: Sequence[str], arguments: list[str]) -> str:
    """Run uv with ``arguments``; its standard output, or a DependencyError from its message."""
    import subprocess

    command = [uv_binary(notebook), *arguments]
    environment = {**os.environ, "NO_COLOR": "1", "UV_NO_PROGRESS": "1"}
    # The interpreter is always named: no Python is ever downloaded behind the caller's back.
    environment["UV_PYTHON_DOWNLOADS"] = "never"
    environment.pop("VIRTUAL_ENV", None)
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=environment,
            timeout=UV_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
            preexec_fn=_uv_preexec(),
        )
    except subprocess.TimeoutExpired:
        raise DependencyError(
            notebook, None, f"uv took longer than {UV_TIMEOUT:g} s and was stopped"
        ) from None
    except OSError as exc:
        raise DependencyError(notebook, None, f"cannot run uv: {exc.strerror or exc}") from None
    if done.returncode != 0:
        message = condense_uv_message(done.stderr)
        raise DependencyError(notebook, _named_requirement(message, dependencies), message)
    return done.stdout


#: ``prctl``'s option: the signal this process gets when the thread that started it exits.
_PR_SET_PDEATHSIG = 1


def _uv_preexec() -> Callable[[], None]:
    """What the child runs before uv: ``go-w`` added to its umask (what it makes is closed to
    others' writes), and, on Linux, SIGKILL when this thread exits (a builder killed outright
    leaves no uv writing on); it exits at once if this process is already gone."""
    import signal

    parent = os.getpid()
    prctl: Any = None
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            prctl = ctypes.CDLL(None, use_errno=True).prctl

    def before_uv() -> None:
        os.umask(os.umask(0o022) | 0o022)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)

    return before_uv


def condense_uv_message(stderr: str) -> str:
    """uv's error as one line: its ``error:`` line and the causes after it, warnings and
    hints left out, at most 400 characters."""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", stderr).splitlines()]
    start = next((i for i, line in enumerate(lines) if line.startswith(("error:", "×"))), 0)
    kept = []
    for line in lines[start:]:
        if not line or line.startswith(("help:", "warning:")):
            continue
        kept.append(line.lstrip("×╰─▶│ ").removeprefix("error:").removeprefix("cause:").strip())
    text = " ".join(part for part in kept if part) or "uv failed"
    return text if len(text) <= 400 else text[:399] + "…"


def _named_requirement(message: str, dependencies: Sequence[str]) -> str | None:
    """The declared requirement uv's message names (by its project name), or None."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    words = {canonicalize_name(word) for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", message)}
    for requirement in dependencies:
        try:
            name = canonicalize_name(Requirement(requirement).name)
        except InvalidRequirement:
            continue
        if name in words:
            return requirement
    return None


def _interpreter(notebook: str, requires_python: str | None) -> tuple[str, str]:
    """The interpreter for ``requires_python`` (see :func:`_find_interpreter`), looked up once
    per process and specifier: a sweep plans every run with the same declaration."""
    found = _INTERPRETERS.get(requires_python)
    if found is None:
        found = _INTERPRETERS[requires_python] = _find_interpreter(notebook, requires_python)
    return found


#: Interpreters found, by ``requires-python``.
_INTERPRETERS: dict[str | None, tuple[str, str]] = {}


def _find_interpreter(notebook: str, requires_python: str | None) -> tuple[str, str]:
    """The interpreter an environment is made from, and its version: the executor's own when
    it satisfies ``requires_python``, else the one uv finds (never downloaded).

    Raises
    ------
    DependencyError
        No interpreter here satisfies ``requires_python``.
    """
    own = platform.python_version()
    base = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    if requires_python is None:
        return base, own
    from packaging.specifiers import SpecifierSet

    if SpecifierSet(requires_python).contains(own, prereleases=True):
        return base, own
    try:
        found = _uv(notebook, (), ["python", "find", requires_python]).strip()
    except DependencyError as exc:
        raise DependencyError(
            notebook,
            f"requires-python {requires_python}",
            f"no Python here satisfies it ({exc.reason})",
        ) from None
    import subprocess

    try:
        version = subprocess.run(
            [found, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise DependencyError(
            notebook, f"requires-python {requires_python}", f"cannot run {found}: {exc}"
        ) from None
    return os.path.realpath(found), version
