"""The package as a user gets it: a wheel and an sdist that ``twine check`` accepts, a wheel that
installed in a fresh venv runs the README's example, one version everywhere, and the pre-commit
hooks working on a real repository with the real ``pre-commit`` tool.

Run by ``nox -s release`` (not by the default test run: it builds, installs and downloads).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*command: str | os.PathLike[str], **options: object) -> subprocess.CompletedProcess[str]:
    done: subprocess.CompletedProcess[str] = subprocess.run(
        [os.fspath(part) for part in command],
        capture_output=True,
        text=True,
        timeout=900,
        **options,  # type: ignore[call-overload]
    )
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # The build backend's isolated environment made by uv (the session installs it): pip's
    # took most of this step's CPU; the wheel and sdist are the backend's either way.
    built = _run(sys.executable, "-m", "build", "--installer", "uv", "--outdir", out, ROOT)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


def _version() -> str:
    text = (ROOT / "src" / "notebook_executor" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    assert found is not None
    return found.group(1)


def test_build_makes_a_wheel_and_an_sdist_that_twine_accepts(dist: Path) -> None:
    version = _version()
    wheels = list(dist.glob("*.whl"))
    sdists = list(dist.glob("*.tar.gz"))
    assert [w.name for w in wheels] == [f"notebook_executor-{version}-py3-none-any.whl"]
    assert [s.name for s in sdists] == [f"notebook_executor-{version}.tar.gz"]
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", *wheels, *sdists)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2


def test_the_version_is_written_once(dist: Path) -> None:
    version = _version()
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"notebook_executor-{version}.dist-info/METADATA").decode()
        names = archive.namelist()
    assert f"\nVersion: {version}\n" in metadata
    assert "notebook_executor/py.typed" in names
    # The extras docs/getting-started.md names are all declared (pip warns of an unknown one).
    for extra in ("mcp", "dask", "s3", "diff"):
        assert f"\nProvides-Extra: {extra}\n" in metadata, extra
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject
    assert not re.search(r"^version\s*=", pyproject, re.MULTILINE)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## (\S+)", changelog, re.MULTILINE)
    assert first is not None and first.group(1) == version


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, dist: Path) -> Path:
    """A new virtual environment with nothing but the built wheel (and what it requires),
    installed by uv (a dependency of the package; the session installs it). pip installs the
    package twice here already, as the README's line says and for pre-commit's hooks; a third
    time, its resolver would spend a minute of CPU again on the same requirements."""
    home = tmp_path_factory.mktemp("venv") / "env"
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    (wheel,) = dist.glob("*.whl")
    installed = _run(sys.executable, "-m", "uv", "pip", "install", "-q", "-p", python, wheel)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return home


def test_the_wheel_in_a_fresh_venv_runs_the_readme_example(
    fresh_venv: Path, tmp_path: Path
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "notebook-executor run notebooks/hello.py -p name Ada" in readme
    work = tmp_path / "work"
    shutil.copytree(ROOT / "notebooks", work / "notebooks")
    env = {**os.environ, "PATH": f"{fresh_venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    done = _run(
        "notebook-executor", "run", "notebooks/hello.py", "-p", "name", "Ada", cwd=work, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "success: notebooks/hello.py" in done.stdout
    assert (work / "runs" / "catalog.sqlite").is_file()
    version = _run("notebook-executor", "--version", env=env)
    assert version.stdout.strip() == f"notebook-executor {_version()}"
    # The guide is package data: the wheel ships it.
    guide = _run("notebook-executor", "guide", env=env)
    assert guide.returncode == 0, guide.stderr
    assert guide.stdout.startswith("---\nname: notebook-executor\n")


#: The README's first command, run as written (tests/integration/test_readme.py checks that the
#: README still shows exactly this line).
INSTALL_AND_RUN = (
    "python -m venv .venv && . .venv/bin/activate && pip install . && "
    "notebook-executor run notebooks/hello.py -p name Ada"
)


def test_the_readme_install_line_runs_in_a_copy_of_the_checkout(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"\n{INSTALL_AND_RUN}\n" in readme
    checkout = tmp_path / "checkout"
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    for name in filter(None, listed.stdout.split("\0")):
        source = ROOT / name
        if source.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # `python` is the interpreter this session runs on, as a user's shell finds one.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = _run("bash", "-c", INSTALL_AND_RUN, cwd=checkout, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "success: notebooks/hello.py" in done.stdout
    assert (checkout / ".venv" / "bin" / "notebook-executor").is_file()
    assert (checkout / "runs" / "catalog.sqlite").is_file()


# -- pre-commit ----------------------------------------------------------------------------------

GOOD = """\
# %% tags=["parameters"]
n = 2

# %%
print(n * 21)
"""

FAILS_WHEN_RUN = """\
# %%
raise RuntimeError("this notebook is broken")
"""

INVALID = '{"cells": [], "metadata": {}, "nbformat": 4'  # not even JSON

PLAIN_MODULE = "def helper():\n    return 1\n"


@pytest.fixture(scope="module")
def hook_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pre-commit's cache, shared by the tests: the hooks' environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Path]:
    """A git repository using this checkout's hooks, at its current commit, as a user's would."""
    head = _run("git", "rev-parse", "HEAD", cwd=ROOT)
    assert head.returncode == 0, head.stderr
    repo = tmp_path / "repo"
    repo.mkdir()
    for command in (
        ["git", "init", "-q"],
        ["git", "config", "user.email", "ci@example.invalid"],
        ["git", "config", "user.name", "CI"],
    ):
        assert _run(*command, cwd=repo).returncode == 0
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {ROOT}\n    rev: {head.stdout.strip()}\n    hooks:\n"
        "      - id: notebook-executor-check\n"
        "      - id: notebook-executor-check-execute\n        stages: [manual]\n"
    )
    (repo / "good.py").write_text(GOOD)
    (repo / "fails.py").write_text(FAILS_WHEN_RUN)
    (repo / "invalid.ipynb").write_text(INVALID)
    (repo / "helper.py").write_text(PLAIN_MODULE)
    assert _run("git", "add", ".", cwd=repo).returncode == 0
    yield repo


def _hook(repo: Path, home: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    """Run one hook of this checkout's .pre-commit-hooks.yaml with the real pre-commit."""
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    env.pop("PYTHONPATH", None)
    stage = ["--hook-stage", "manual"] if hook.endswith("-execute") else []
    return _run(
        sys.executable,
        "-m",
        "pre_commit",
        "run",
        hook,
        *stage,
        "--files",
        *files,
        cwd=repo,
        env=env,
    )


def test_the_check_hook_passes_a_good_notebook_and_a_plain_module(
    repository: Path, hook_home: Path
) -> None:
    done = _hook(repository, hook_home, "notebook-executor-check", "good.py", "helper.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout


def test_the_check_hook_fails_an_invalid_notebook(repository: Path, hook_home: Path) -> None:
    done = _hook(repository, hook_home, "notebook-executor-check", "good.py", "invalid.ipynb")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Failed" in done.stdout
    assert "invalid.ipynb" in done.stdout


def test_a_commit_is_refused_while_a_notebook_is_invalid(repository: Path, hook_home: Path) -> None:
    env = {**os.environ, "PRE_COMMIT_HOME": str(hook_home)}
    env.pop("PYTHONPATH", None)
    installed = _run(sys.executable, "-m", "pre_commit", "install", cwd=repository, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    refused = _run("git", "commit", "-qm", "all", cwd=repository, env=env)
    assert refused.returncode != 0
    assert "invalid.ipynb" in refused.stdout + refused.stderr
    assert _run("git", "rm", "-q", "--cached", "invalid.ipynb", cwd=repository).returncode == 0
    accepted = _run("git", "commit", "-qm", "valid only", cwd=repository, env=env)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr


def test_the_execute_hook_fails_a_notebook_that_raises(repository: Path, hook_home: Path) -> None:
    passed = _hook(repository, hook_home, "notebook-executor-check-execute", "good.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    failed = _hook(repository, hook_home, "notebook-executor-check-execute", "good.py", "fails.py")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "this notebook is broken" in failed.stdout
    assert not (repository / "runs").exists()
