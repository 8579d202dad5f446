"""Notebooks that declare dependencies run in environments made by the real uv
(docs/how-to/environments.md).

The environments are made with the network off (``UV_OFFLINE=1``) from a package this test
builds into a local folder (``UV_FIND_LINKS``) and the kernel's packages in uv's cache (put
there once, by the module's first fixture); one test installs a real package from the index.
The executor's own environment is checked to be unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from notebook_executor import DependencyError, NotebookExecutor
from notebook_executor._kernels.environments import (
    KERNEL_REQUIREMENT,
    MARKER,
    ensure_environment,
    uv_binary,
)
from notebook_executor._kernels.kernel_engine import KernelEngine
from support import run_cli

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

#: The notebook: what its kernel runs on, and what it can import.
PROBE = """\
# /// script
# dependencies = [{dependencies}]
# ///

# %% tags=["parameters"]
label = "probe"

# %%
import importlib.util, json, os, sys
found = {{}}
for name in ("nbx_probe", "six", "pandas", "notebook_executor"):
    spec = importlib.util.find_spec(name)
    found[name] = spec is not None
version = None
if found["nbx_probe"]:
    import nbx_probe
    version = nbx_probe.__version__
print("PROBE " + json.dumps({{
    "label": label, "executable": sys.executable, "found": found, "version": version,
    "ppid": os.getppid(), "virtual_env": os.environ.get("VIRTUAL_ENV"),
    "first_on_path": os.environ["PATH"].split(os.pathsep)[0],
    "parent_program": open(f"/proc/{{os.getppid()}}/cmdline").read().split("\\0")[0],
}}))
"""


def probe_source(*requirements: str) -> str:
    return PROBE.format(dependencies=", ".join(json.dumps(r) for r in requirements))


def build_wheel(folder: Path, version: str) -> Path:
    """A small pure-Python wheel of ``nbx-probe`` (module ``nbx_probe``), made here."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"nbx_probe-{version}.dist-info"
    files = {
        "nbx_probe/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: nbx-probe\nVersion: {version}\n",
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    lines = []
    for name, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        lines.append(f"{name},sha256={encoded},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*lines, f"{dist}/RECORD,,"]) + "\n"
    wheel = folder / f"nbx_probe-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def probe_of(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the probe cell printed in the run's executed notebook."""
    nb = json.loads(Path(result["output_path"]).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", ""))
            for line in text.splitlines():
                if line.startswith("PROBE "):
                    found: dict[str, Any] = json.loads(line[len("PROBE ") :])
                    return found
    raise AssertionError(f"no probe output in {result['output_path']}")


def record_of(result: Mapping[str, Any]) -> dict[str, Any]:
    nb = json.loads(Path(result["output_path"]).read_text(encoding="utf-8"))
    record: dict[str, Any] = nb["metadata"]["notebook_executor"]
    return record


def own_freeze() -> str:
    """The executor's own environment, as uv lists it."""
    return subprocess.run(
        [uv_binary(), "pip", "freeze", "--python", sys.executable],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


@pytest.fixture(scope="module")
def kernel_in_uv_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The kernel's packages in uv's cache (from the index, once), so that environments can
    then be made with the network off."""
    target = tmp_path_factory.mktemp("warm") / "venv"
    uv = uv_binary()
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(target)], check=True)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(target / "bin" / "python"),
         KERNEL_REQUIREMENT],
        check=True,
        timeout=600,
    )  # fmt: skip


@pytest.fixture
def offline(kernel_in_uv_cache: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No network for uv, a local folder of wheels holding nbx-probe 1.0, a fresh cache of
    environments; the folder of wheels is returned."""
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "1.0")
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_FIND_LINKS", str(wheels))
    monkeypatch.setenv("NOTEBOOK_EXECUTOR_ENVS", str(tmp_path / "envs"))
    return wheels


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotebookExecutor]:
    with NotebookExecutor(runs_dir=tmp_path_factory.mktemp("runs")) as ex:
        yield ex


def test_a_local_package_runs_isolated_with_no_network_and_is_recorded(
    executor: NotebookExecutor, offline: Path, tmp_path: Path
) -> None:
    before = own_freeze()
    notebook = tmp_path / "probe.py"
    notebook.write_text(probe_source("nbx-probe==1.0"), encoding="utf-8")
    first = executor.execute(notebook)
    assert first["status"] == "success", first
    probe = probe_of(first)
    envs = (tmp_path / "envs").resolve()
    assert Path(probe["executable"]).is_relative_to(envs)
    assert probe["version"] == "1.0"
    # Isolated: neither the executor's packages nor the executor itself are importable.
    assert probe["found"] == {
        "nbx_probe": True,
        "six": False,
        "pandas": False,
        "notebook_executor": False,
    }
    record = record_of(first)["notebook_environment"]
    assert record["declaration"] == {"dependencies": ["nbx-probe==1.0"], "requires-python": None}
    assert record["packages"]["nbx-probe"] == "1.0"
    assert record["packages"]["ipykernel"].startswith("7.")
    env_folder = envs / record["hash"]
    # Activated, as uv run does: a `python` the notebook starts is the environment's too.
    assert probe["virtual_env"] == str(env_folder)
    assert probe["first_on_path"] == str(env_folder / "bin")
    marker = (env_folder / MARKER).stat()

    # The next run reuses it (not made again), on a kernel forked from that environment's
    # template (its parent runs the environment's Python, and is not this process).
    second = executor.execute(notebook, parameters={"label": "again"})
    assert second["status"] == "success", second
    again = probe_of(second)
    assert record_of(second)["notebook_environment"]["hash"] == record["hash"]
    assert (env_folder / MARKER).stat().st_mtime_ns == marker.st_mtime_ns
    assert again["ppid"] != os.getpid()
    assert again["parent_program"] == str(env_folder / "bin" / "python")

    # A new version: a new environment, and diff of the two runs shows the change.
    build_wheel(offline, "2.0")
    notebook.write_text(probe_source("nbx-probe==2.0"), encoding="utf-8")
    third = executor.execute(notebook)
    assert probe_of(third)["version"] == "2.0"
    changed = executor.diff_runs(first["run_id"], third["run_id"])
    assert changed["packages"] == {"nbx-probe": ["1.0", "2.0"]}
    assert executor.diff_runs(first["run_id"], second["run_id"])["packages"] == {}

    # The executor's own environment did not change.
    assert own_freeze() == before
    import importlib.util

    assert importlib.util.find_spec("nbx_probe") is None


def test_the_command_line_diff_shows_a_version_change(
    offline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_wheel(offline, "2.0")
    notebook = tmp_path / "probe.py"
    runs = str(tmp_path / "runs")
    ids = []
    for version in ("1.0", "2.0"):
        notebook.write_text(probe_source(f"nbx-probe=={version}"), encoding="utf-8")
        code, out, err = run_cli(capsys, "run", str(notebook), "--runs-dir", runs, "--json")
        assert code == 0, err
        ids.append(json.loads(out)["run_id"])
    code, out, err = run_cli(capsys, "diff", *ids, "--runs-dir", runs)
    assert "packages:" in out
    assert "nbx-probe: '1.0' -> '2.0'" in out


def test_a_real_package_from_the_index(
    executor: NotebookExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTEBOOK_EXECUTOR_ENVS", str(tmp_path / "envs"))
    notebook = tmp_path / "from_the_index.py"
    notebook.write_text(
        probe_source("six==1.17.0") + "\n# %%\nimport six\nassert six.__version__ == '1.17.0'\n",
        encoding="utf-8",
    )
    result = executor.execute(notebook)
    assert result["status"] == "success", result
    assert probe_of(result)["found"]["six"] is True
    assert record_of(result)["notebook_environment"]["packages"]["six"] == "1.17.0"


def test_a_declaration_that_cannot_be_satisfied_is_refused_before_any_cell_runs(
    executor: NotebookExecutor,
    offline: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    notebook = tmp_path / "bad.py"
    runs_before = len(executor.runs())
    # A requirement no source offers.
    notebook.write_text(probe_source("nbx-missing>=1"), encoding="utf-8")
    with pytest.raises(DependencyError) as missing:
        executor.execute(notebook)
    assert missing.value.requirement == "nbx-missing>=1"
    assert "nbx-missing" in str(missing.value) and "\n" not in str(missing.value)
    # The command line: one line on stderr, exit status 2, naming the requirement.
    code, out, err = run_cli(capsys, "run", str(notebook), "--runs-dir", str(tmp_path / "r"))
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "nbx-missing>=1" in err
    # A Python no interpreter here has.
    notebook.write_text(
        "# /// script\n# requires-python = '>=3.99'\n# dependencies = []\n# ///\n\n# %%\n1\n",
        encoding="utf-8",
    )
    with pytest.raises(DependencyError, match="no Python here satisfies it") as python:
        executor.execute(notebook)
    assert python.value.requirement == "requires-python >=3.99"
    # No network and nothing cached.
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-uv-cache"))
    monkeypatch.delenv("UV_FIND_LINKS")
    notebook.write_text(probe_source("six"), encoding="utf-8")
    with pytest.raises(DependencyError, match="network was disabled") as offline_error:
        executor.execute(notebook)
    assert offline_error.value.requirement == "six"
    # Nothing ran, nothing was recorded, and no environment was left half-made.
    assert len(executor.runs()) == runs_before
    leftovers = [p.name for p in (tmp_path / "envs").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []


def test_two_runs_needing_the_same_new_environment_make_it_once(
    offline: Path, tmp_path: Path
) -> None:
    made: list[Any] = []
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def make() -> None:
        start.wait()
        try:
            made.append(ensure_environment("nb.py", ["nbx-probe==1.0"], None))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=make) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not failures
    assert sorted(env.built for env in made) == [False, True]
    assert made[0].path == made[1].path


def test_a_killed_build_is_never_used(offline: Path, tmp_path: Path) -> None:
    code = (
        "from notebook_executor._kernels.environments import ensure_environment\n"
        "ensure_environment('nb.py', ['nbx-probe==1.0'], None)\n"
    )
    builder = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    envs = tmp_path / "envs"
    deadline = time.monotonic() + 60
    # Killed while uv works in the temporary folder (the whole session: uv too).
    while time.monotonic() < deadline and not list(envs.glob(".build-*/bin/python")):
        time.sleep(0.01)
    os.killpg(builder.pid, signal.SIGKILL)
    builder.wait()
    for folder in envs.iterdir():
        if not folder.name.startswith(".") and folder.is_dir():
            # A folder in place is a whole environment, marker and all.
            assert (folder / MARKER).exists()
    made = ensure_environment("nb.py", ["nbx-probe==1.0"], None)
    assert (made.path / MARKER).exists()
    assert not list(envs.glob(".build-*"))
    done = subprocess.run(
        [str(made.python), "-c", "import nbx_probe; print(nbx_probe.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "1.0"


def test_sessions_sweeps_and_check_run_in_the_environment(
    executor: NotebookExecutor, offline: Path, tmp_path: Path
) -> None:
    notebook = tmp_path / "probe.py"
    notebook.write_text(probe_source("nbx-probe==1.0"), encoding="utf-8")
    envs = (tmp_path / "envs").resolve()
    slow = tmp_path / "slow.py"
    slow.write_text(
        probe_source("nbx-probe==1.0") + "\n# %%\nimport time\ntime.sleep(0.5)\n\n# %%\nx = 1\n",
        encoding="utf-8",
    )
    with executor.open_session(slow) as session:
        first = session.run()
        assert first["status"] == "success", first
        # Checkpoints work there too: the kernel-side code runs on the environment's Python.
        again = session.rerun_from(3)  # the PEP 723 block is no cell: the last cell is 3
        assert again["status"] == "success", again
        assert again["restored"] == "checkpoint", again
        answer = session.evaluate("import sys, nbx_probe; print(sys.executable)")
        assert answer["error"] is None, answer
        assert Path(answer["output"].strip()).is_relative_to(envs)
    results = executor.execute_many(notebook, [{"label": "a"}, {"label": "b"}])
    assert [r["status"] for r in results] == ["success", "success"]
    for result in results:
        assert Path(probe_of(result)["executable"]).is_relative_to(envs)
    assert executor.validate(notebook, execute=True)["valid"]
    # Every kernel so far came from the environment's template: the default environment's
    # full template (pandas and the rest) was never spawned for them.
    engine = executor._engine
    assert isinstance(engine, KernelEngine) and engine.pool is not None
    assert engine.pool.starts.full is None
    # environment="current": the executor's own interpreter (where nbx_probe is not).
    current = executor.execute(notebook, environment="current")
    assert probe_of(current)["executable"] == sys.executable
    assert probe_of(current)["found"]["nbx_probe"] is False
    assert "notebook_environment" not in record_of(current)


def test_the_mcp_server_shows_the_declaration_and_runs_in_the_environment(
    offline: Path, tmp_path: Path
) -> None:
    from integration.mcp_client import stdio_session, structured

    root = tmp_path / "root"
    root.mkdir()
    (root / "probe.py").write_text(probe_source("nbx-probe==1.0"), encoding="utf-8")
    env = {
        name: os.environ[name]
        for name in ("UV_OFFLINE", "UV_FIND_LINKS", "NOTEBOOK_EXECUTOR_ENVS", "HOME", "PATH")
    }

    async def scenario() -> None:
        async with stdio_session(root, env=env) as session:
            answer = structured(await session.call_tool("inspect_parameters", {"path": "probe.py"}))
            assert answer["parameters"]["label"]["default"] == "probe"
            assert answer["environment"]["dependencies"] == ["nbx-probe==1.0"]
            result = structured(await session.call_tool("execute", {"path": "probe.py"}))
            assert result["status"] == "success", result

    anyio.run(scenario)
