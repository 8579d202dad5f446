"""Per-notebook environments trust only what this user made (docs/how-to/environments.md).

Real runs of a notebook that declares dependencies, through the command line and its run
server (the ``shell`` fixture of ``test_run_server``) or an MCP server process: an environment
another user could have planted or changed is never run; a builder killed outright leaves no
uv behind, and the next build removes its folder; over MCP, a requirement naming a local
project outside the root is refused before its build code runs. The tests plant folders as
another user (uid 65534), so they need root.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from integration.mcp_client import stdio_session
from integration.test_run_server import Shell, shell  # noqa: F401 (a fixture)
from notebook_executor import DependencyError
from notebook_executor._kernels.environments import (
    MARKER,
    _interpreter,
    ensure_environment,
    environment_hash,
)
from notebook_executor._sources.dependencies import refuse_local_paths_outside

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.getuid() != 0, reason="plants folders as another user"),
]

NOBODY = 65534

NOTEBOOK = """\
# /// script
# dependencies = []
# ///

# %%
import sys
print("ran on", sys.executable)
"""


def planted(envs: Path, proof: Path) -> Path:
    """The environment ``NOTEBOOK``'s declaration hashes to, planted in ``envs``: its
    ``bin/python`` writes ``proof`` and then runs this interpreter (so a run on it works)."""
    digest = environment_hash([], None, *_interpreter("nb.py", None))
    folder = envs / digest
    (folder / "bin").mkdir(parents=True)
    (folder / MARKER).write_text(
        json.dumps({"hash": digest, "declaration": {}, "python": "", "packages": {}})
    )
    python = folder / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho planted >> {proof}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return folder


def chown_tree(folder: Path, uid: int) -> None:
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, uid, uid)


def refused(user: Shell, env: dict[str, str], folder: Path, proof: Path) -> str:
    """Run the notebook: refused in one line naming ``folder``; the planted python never ran."""
    (user.folder / "nb.py").write_text(NOTEBOOK)
    code, out, err = user.run("run", "nb.py", env=env)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert str(folder) in err, err
    assert not proof.exists(), "the planted bin/python ran"
    return err


def test_an_environment_planted_by_another_user_is_not_run(
    shell: Shell,  # noqa: F811
    tmp_path: Path,
) -> None:
    envs, proof = tmp_path / "envs", tmp_path / "proof"
    envs.mkdir(mode=0o755)
    folder = planted(envs, proof)
    chown_tree(folder, NOBODY)
    err = refused(shell, {"NOTEBOOK_EXECUTOR_ENVS": str(envs)}, folder, proof)
    assert "belongs to another user" in err and f"remove {folder}" in err

    # Ours, but its bin/python writable by others: not run either.
    chown_tree(folder, os.getuid())
    (folder / "bin" / "python").chmod(0o777)
    err = refused(shell, {"NOTEBOOK_EXECUTOR_ENVS": str(envs)}, folder, proof)
    assert "writable by other users (mode 777)" in err


def test_a_shared_folder_of_environments_open_to_others_is_not_used(
    shell: Shell,  # noqa: F811
    tmp_path: Path,
) -> None:
    envs, proof = tmp_path / "shared", tmp_path / "proof"
    envs.mkdir()
    envs.chmod(0o1777)
    planted(envs, proof)
    err = refused(shell, {"NOTEBOOK_EXECUTOR_ENVS": str(envs)}, envs, proof)
    assert "NOTEBOOK_EXECUTOR_ENVS" in err and "chmod go-w" in err


def test_an_environment_planted_in_the_default_cache_is_not_run(
    shell: Shell,  # noqa: F811
    tmp_path: Path,
) -> None:
    home, proof = tmp_path / "home", tmp_path / "proof"
    envs = home / ".cache" / "notebook-executor" / "envs"
    envs.mkdir(parents=True)
    folder = planted(envs, proof)
    chown_tree(folder, NOBODY)
    shell.env.pop("NOTEBOOK_EXECUTOR_ENVS", None)
    shell.env.pop("XDG_CACHE_HOME", None)
    refused(shell, {"HOME": str(home)}, folder, proof)


def _processes_naming(text: str) -> dict[int, str]:
    """The processes whose command line holds ``text``: their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if text in line:
                found[int(entry.name)] = line
    return found


@pytest.fixture
def silent_index() -> Iterator[str]:
    """A package index that accepts connections and never answers: uv waits on it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/simple"


@contextlib.contextmanager
def builder_installing(envs: Path, index: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process making an environment in ``envs``, yielded once its uv installs (waiting on
    ``index``, which never answers); every process of the build is SIGKILLed after."""
    code = (
        "from notebook_executor._kernels.environments import ensure_environment\n"
        "ensure_environment('nb.py', ['nbx-never-answered'], None)\n"
    )
    env = {**os.environ, "NOTEBOOK_EXECUTOR_ENVS": str(envs), "UV_INDEX_URL": index}
    env.pop("UV_OFFLINE", None)
    builder = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not any("install" in line for line in _processes_naming(str(envs)).values()):
            assert builder.poll() is None, "the build ended before it could be killed"
            assert time.monotonic() < deadline, "uv never started installing"
            time.sleep(0.02)
        yield builder
    finally:
        for pid in _processes_naming(str(envs)):
            os.kill(pid, signal.SIGKILL)
        builder.kill()
        builder.wait()


def test_uv_dies_with_a_killed_builder(tmp_path: Path, silent_index: str) -> None:
    envs = tmp_path / "envs"
    with builder_installing(envs, silent_index) as builder:
        builder.kill()  # the builder alone, outright
        builder.wait()
        deadline = time.monotonic() + 10
        while _processes_naming(str(envs)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_naming(str(envs)) == {}, "uv outlived the builder"


def test_the_next_build_removes_what_a_killed_builder_left(
    tmp_path: Path, silent_index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    envs = tmp_path / "envs"
    with builder_installing(envs, silent_index) as builder:
        os.killpg(builder.pid, signal.SIGKILL)  # the builder and its uv
        builder.wait()
    left = list(envs.glob(".build-*"))
    assert left, "the killed build left no folder"
    # A build in progress (its lock held) keeps its folder.
    busy = envs / ".build-0123456789abcdef0123-1"
    busy.mkdir()
    with (envs / "0123456789abcdef0123.lock").open("a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        # The next build, of another declaration, removes the dead builder's folder.
        monkeypatch.setenv("NOTEBOOK_EXECUTOR_ENVS", str(envs))
        monkeypatch.delenv("UV_OFFLINE", raising=False)
        made = ensure_environment("nb.py", [], None)
    assert (made.path / MARKER).exists()
    assert list(envs.glob(".build-*")) == [busy]


LOCAL_PROJECT = {
    "pyproject.toml": (
        '[project]\nname = "local-project"\nversion = "1.0"\n\n'
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    ),
    # The build code: leaves a proof that it ran, then fails (nothing needs installing).
    "backend.py": (
        "import pathlib\n"
        "def _ran(*args, **kwargs):\n"
        "    pathlib.Path(__file__).with_name('built').write_text('ran')\n"
        "    raise SystemExit('the build ran')\n"
        "get_requires_for_build_wheel = prepare_metadata_for_build_wheel = build_wheel = _ran\n"
        "get_requires_for_build_editable = build_editable = build_sdist = _ran\n"
    ),
}


def local_project(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, text in LOCAL_PROJECT.items():
        (folder / name).write_text(text)
    return folder


def test_over_mcp_a_local_project_outside_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = local_project(tmp_path / "elsewhere" / "project")
    inside = local_project(root / "project")
    # The SDK hands the server few variables: uv's settings, proxies and certificates too.
    passed = {k: v for k, v in os.environ.items() if k.startswith(("UV_", "SSL_CERT_"))}
    passed.update({k: v for k, v in os.environ.items() if k.lower().endswith("_proxy")})
    env = {**passed, "NOTEBOOK_EXECUTOR_ENVS": str(tmp_path / "envs"), "HOME": str(tmp_path)}
    forms = [
        f"local-project @ {outside.as_uri()}",
        f"local-project @ git+{outside.as_uri()}@main",
        f"local-project @ {outside}",
        "local-project @ file:../elsewhere/project",
    ]

    def notebook(name: str, requirement: str) -> str:
        (root / name).write_text(NOTEBOOK.replace("[]", json.dumps([requirement])))
        return name

    async def scenario() -> None:
        async with stdio_session(root, env=env) as session:
            for index, requirement in enumerate(forms):
                answer = await session.call_tool(
                    "execute", {"path": notebook(f"nb{index}.py", requirement)}
                )
                assert answer.is_error, answer
                text = answer.model_dump_json()
                assert "outside the server's root folder" in text, text
                assert not (outside / "built").exists(), requirement
            # Inside the root it is made as anywhere else: its build code runs.
            answer = await session.call_tool(
                "execute", {"path": notebook("inside.py", f"local-project @ {inside.as_uri()}")}
            )
            assert "outside the server's root folder" not in answer.model_dump_json()
            assert (inside / "built").exists()

    root.mkdir(exist_ok=True)
    anyio.run(scenario)
    shutil.rmtree(tmp_path / "envs", ignore_errors=True)


def test_the_root_check_passes_remote_requirements_and_local_ones_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    inside = [
        "six",
        "six @ https://example.org/six-1.17.0-py2.py3-none-any.whl",
        "six @ git+https://github.com/benjaminp/six@1.17.0",
        "six @ git+ssh://git@github.com/benjaminp/six",
        f"local @ {(tmp_path / 'project').as_uri()}",
        f"local @ git+{(tmp_path / 'project').as_uri()}@main",
        "local @ ./project",
    ]
    refuse_local_paths_outside("nb.py", inside, tmp_path)
    for outside in ("local @ file:///${HOME}/project", "local @ ~/../..", "local @ file:/etc"):
        with pytest.raises(DependencyError, match="outside the server's root folder"):
            refuse_local_paths_outside("nb.py", [outside], tmp_path)
