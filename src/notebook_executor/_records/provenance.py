"""What a record says of where a run came from: paths as shown, interpreter and versions."""

from __future__ import annotations

import functools
import os
import platform
import sys
from pathlib import Path
from typing import Any

from .._sources.remote import is_url

__all__ = [
    "RECORD_VERSION",
    "display_path",
    "environment_record",
    "package_versions",
    "program_path",
    "without_home",
]

#: The version of the record's layout, written in each record.
RECORD_VERSION = 1


def display_path(path: str | os.PathLike[str]) -> str:
    """A path fit for a record: relative to the working directory when under it, ``~``-based
    when under the home folder, never an absolute home path. A URL is kept as given."""
    if is_url(path):
        return os.fspath(path)
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix()
    cwd, home = Path.cwd(), Path.home()
    try:
        resolved = candidate.resolve()
    except OSError:
        return candidate.as_posix()
    with_cwd = _relative_to(resolved, _resolved_folder(os.fspath(cwd)))
    if with_cwd is not None:
        return with_cwd
    under_home = _relative_to(resolved, _resolved_folder(os.fspath(home)))
    if under_home is not None:
        return "~" if under_home == "." else "~/" + under_home
    return resolved.as_posix()


def program_path(program: str | None) -> str | None:
    """The program a kernel runs, fit for a record as :func:`display_path` makes paths, but
    not resolved: a venv's ``bin/python`` is a link, and which venv ran is the point."""
    if program is None:
        return None
    candidate = Path(program)
    if not candidate.is_absolute():
        return candidate.as_posix()
    for base, shown in ((Path.cwd(), ""), (Path.home(), "~/")):
        relative = os.path.relpath(candidate, base)
        if not relative.startswith(".."):
            return shown + Path(relative).as_posix()
    return candidate.as_posix()


def without_home(value: Any) -> Any:
    """``value`` (JSON: a notebook environment's record) with the home folder's absolute path
    shown as ``~`` in every string (a requirement or a frozen version may be a ``file://`` URL
    of a local folder): a record never holds an absolute home path."""
    home = os.fspath(Path.home())
    if isinstance(value, str):
        return value.replace(home, "~") if len(home) > 1 else value
    if isinstance(value, dict):
        return {key: without_home(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_home(item) for item in value]
    return value


def _relative_to(path: Path, base: Path | None) -> str | None:
    if base is None:
        return None
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


@functools.lru_cache(maxsize=16)
def _resolved_folder(folder: str) -> Path | None:
    """``folder`` (the working directory or home) resolved, once per process and folder: every
    record shows paths relative to them, and resolving costs a system call per component."""
    try:
        return Path(folder).resolve()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Versions of the packages a run depends on (computed once per process)."""
    from importlib.metadata import PackageNotFoundError, version

    names = (
        "notebook-executor",
        "nbclient",
        "nbformat",
        "jupyter_client",
        "ipykernel",
        "jupytext",
        "papermill",
        "scrapbook",
        "pandas",
    )
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def environment_record() -> dict[str, Any]:
    """Interpreter and package versions for the provenance record."""
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": sys.platform,
        "packages": package_versions(),
    }


@functools.lru_cache(maxsize=1)
def installed_lock() -> tuple[str, ...]:
    """``name==version`` of every distribution this interpreter sees, sorted, read from the
    ``.dist-info`` folders' names on ``sys.path`` (a millisecond; ``importlib.metadata``
    takes a fifth of a second), once per process."""
    found: set[str] = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")  # noqa: PTH208
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info"):
                project, _, version = name[: -len(".dist-info")].partition("-")
                found.add(f"{project.lower().replace('_', '-')}=={version}")
    return tuple(sorted(found))


def lock_sha256(packages: dict[str, str] | None = None) -> str:
    """sha256 of an environment's lock: ``packages`` (``{name: version}``, a notebook's own
    environment's resolved versions), else every distribution this interpreter sees."""
    import hashlib

    lines = (
        installed_lock()
        if packages is None
        else tuple(sorted(f"{name.lower()}=={version}" for name, version in packages.items()))
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def machine_record() -> dict[str, Any]:
    """The machine a run ran on: CPU model and count, memory, GPUs and driver when present
    (read once per process)."""
    cpu = platform.machine()
    memory: int | None = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:  # noqa: PTH123
            for line in info:
                if line.startswith("model name"):
                    cpu = line.partition(":")[2].strip()
                    break
    except OSError:
        pass
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory,
        "system": f"{platform.system()} {platform.release()}",
        "gpus": _gpus(),
    }


def _gpus() -> list[dict[str, str]]:
    """NVIDIA GPUs (name, driver) from ``nvidia-smi`` when it is installed (2 s at most)."""
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run(
            [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=2,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in listed.splitlines():
        name, _, driver = line.rpartition(",")
        if name.strip():
            gpus.append({"name": name.strip(), "driver": driver.strip()})
    return gpus


@functools.lru_cache(maxsize=64)
def _git_folder(folder: str) -> tuple[str, str] | None:
    """(work tree, git folder) of the repository holding ``folder``, once per process."""
    here = Path(folder)
    for candidate in (here, *here.parents):
        dot = candidate / ".git"
        if dot.is_dir():
            return os.fspath(candidate), os.fspath(dot)
        if dot.is_file():
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                return os.fspath(candidate), os.fspath(candidate / text[7:].strip())
    return None


def _read_ref(git_dir: Path, ref: str) -> str | None:
    common = git_dir
    if (git_dir / "commondir").is_file():
        common = git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
    for base in (git_dir, common):
        loose = base / ref
        if loose.is_file():
            return loose.read_text(encoding="utf-8").strip() or None
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha
    return None


class GitState:
    """The git commit, branch and dirty flag of the repository holding a notebook.

    The commit and branch are read from the ``.git`` folder (no process: microseconds); the
    dirty flag (and, when dirty, the sha256 of ``git diff HEAD`` of the notebook's own file)
    comes from ``git status``, started in the background as the run begins and awaited
    (2 s at most) when it ends, so it costs the run nothing it would wait for."""

    def __init__(self, notebook: str | os.PathLike[str]) -> None:
        self.record: dict[str, Any] | None = None
        self._dirty: dict[str, Any] = {}
        self._thread: Any = None
        if is_url(notebook):
            return
        path = Path(notebook).absolute()
        found = _git_folder(os.fspath(path.parent))
        if found is None:
            return
        tree, git_dir = found
        try:
            head = (Path(git_dir) / "HEAD").read_text(encoding="utf-8").strip()
            branch: str | None = None
            if head.startswith("ref:"):
                ref = head[4:].strip()
                branch = ref.removeprefix("refs/heads/")
                commit = _read_ref(Path(git_dir), ref)
            else:
                commit = head
        except OSError:
            return
        self.record = {"commit": commit, "branch": branch, "dirty": None}
        import threading

        self._thread = threading.Thread(
            target=self._status, args=(tree, os.fspath(path)), name="git-status", daemon=True
        )
        self._thread.start()

    def _status(self, tree: str, notebook: str) -> None:
        import hashlib
        import subprocess

        def git(*args: str) -> str:
            return subprocess.run(
                ["git", "-C", tree, *args],
                capture_output=True,
                text=True,
                timeout=2,
                check=True,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            ).stdout

        try:
            changed = git("status", "--porcelain", "--untracked-files=no")
            self._dirty["dirty"] = bool(changed.strip())
            if changed.strip():
                diff = git("diff", "HEAD", "--", notebook)
                if diff:
                    self._dirty["notebook_diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
        except (OSError, subprocess.SubprocessError):
            return

    def finished(self) -> dict[str, Any] | None:
        """The record, once ``git status`` answered (or 2 s passed)."""
        if self.record is None:
            return None
        if self._thread is not None:
            self._thread.join(2.5)
        return {**self.record, **self._dirty}
