"""Per-notebook environments: made by uv from a notebook's declared dependencies, and cached.

A notebook that declares dependencies (SPEC section 19) runs on a kernel in a virtual
environment made for them: ``uv venv`` then ``uv pip install`` of the declared requirements plus
:data:`KERNEL_REQUIREMENT` (the kernel-side programs of ``inside/``, ``kernel_main.py``
and ``template_server.py``, run by path and import nothing else of this package). Nothing here
resolves or installs anything itself: uv does, the binary the ``uv`` package ships (or the
one on ``PATH``). uv reads its own settings from the environment as usual: ``UV_OFFLINE``,
``UV_FIND_LINKS``, ``UV_INDEX_URL``, ``UV_CACHE_DIR``...

Environments live under :func:`environments_dir`, one folder per :func:`environment_hash` (of
the declaration, the kernel requirement and the interpreter), so the next run of the same
declaration reuses it with one ``stat`` and one small read, and calls no uv at all.

Building is safe to race and to kill:

- an exclusive lock file per hash (``fcntl.flock``): two runs needing the same new environment
  build it once, the second waits and then reuses it;
- the build happens in a temporary folder (``uv venv --relocatable``), which gets its marker
  file (:data:`MARKER`, which also holds what was installed) last, and is then renamed into
  place at once: a folder without its marker is never used, and what a killed build left is
  removed by the next build of that hash (under the lock).
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DependencyError

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
UV_TIMEOUT = 900.0


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
    root = environments_dir()
    final = root / digest
    found = _ready(final, digest)
    if found is not None:
        return found
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DependencyError(
            notebook, None, f"cannot make the environments folder {root}: {exc.strerror or exc}"
        ) from None
    with _locked(root / f"{digest}.lock"):
        found = _ready(final, digest)
        if found is not None:
            return found
        _remove_leftovers(root, digest)
        declaration = {"dependencies": list(dependencies), "requires-python": requires_python}
        record = _build(notebook, root, digest, dependencies, interpreter, version, declaration)
    logger.info("%s: made environment %s", notebook, digest)
    return NotebookEnvironment(final, _python_of(final), digest, record, built=True)


def _python_of(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _ready(folder: Path, digest: str) -> NotebookEnvironment | None:
    """The finished environment in ``folder`` (its marker read), or None."""
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("hash") != digest:
        return None
    python = _python_of(folder)
    if not python.exists():
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


def _remove_leftovers(root: Path, digest: str) -> None:
    """Remove what killed builds of ``digest`` left (called under its lock): temporary
    folders, and a folder in place without its marker."""
    for leftover in root.glob(f".build-{digest}-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    final = root / digest
    if final.exists() and not (final / MARKER).exists():
        shutil.rmtree(final, ignore_errors=True)


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
                # As pip does: every kernel start then reads bytecode, even where Python may
                # not write it (PYTHONDONTWRITEBYTECODE): ipykernel's imports took 0.68 s of
                # CPU without it, 0.24 s with it.
                "--compile-bytecode",
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
