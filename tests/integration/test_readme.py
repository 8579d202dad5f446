"""Every command of the README runs: its shell lines, its Python example and its MCP
configuration, on real kernels in a temporary copy of ``notebooks/``. The install line is run
verbatim by ``tests/release`` (``nox -s release``), and ``nox`` by CI (``.ci/run``)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from integration.mcp_client import structured
from notebook_executor import NotebookExecutor
from support import cli_on_path, shell_blocks

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: The README's two commands: run by tests/release/test_release.py and by .ci/run.
INSTALL_AND_RUN = (
    "python -m venv .venv && . .venv/bin/activate && pip install . && "
    "notebook-executor run notebooks/hello.py -p name Ada"
)
TESTS = "pip install nox && nox"


def fenced(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.MULTILINE | re.DOTALL)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    return tmp_path


def test_the_readme_is_short_and_each_command_is_accounted_for() -> None:
    assert len(README.encode()) <= 10_240
    commands = shell_blocks(README)
    assert commands[:2] == [INSTALL_AND_RUN, TESTS]
    assert all(line.startswith("notebook-executor ") for line in commands[2:])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install --quiet "nox' in ci and "\npython -m nox\n" in ci
    release = (ROOT / "tests" / "release" / "test_release.py").read_text(encoding="utf-8")
    assert "INSTALL_AND_RUN" in release


def test_the_readme_links_point_at_files_that_exist() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 20
    assert [link for link in local if not (ROOT / link).is_file()] == []


def test_the_shell_examples_run(work: Path) -> None:
    env = cli_on_path(work / "bin")
    for line in shell_blocks(README)[2:]:
        done = subprocess.run(
            ["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        if "--json" in line.split():
            json.loads(done.stdout)
    assert (work / "site" / "index.html").is_file()
    with NotebookExecutor(runs_dir=work / "runs", warm_kernels=0) as ex:
        assert len(ex.runs(notebook="notebooks/hello.py")) == 1 + 4  # run, then a 2 x 2 sweep


def test_the_python_example_runs(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = fenced("python")
    monkeypatch.chdir(work)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert "{'greeting': 'Hello, Ada!', 'length': 11}" in printed.getvalue()
    # The README's (abridged) result has only keys a real result has, with the same shapes.
    (shown,) = (json.loads(block) for block in fenced("json") if '"run_id"' in block)
    with NotebookExecutor(runs_dir=work / "runs", warm_kernels=0) as ex:
        (real,) = ex.runs()
    assert set(shown) <= set(real)
    found = dict(real)
    assert {key: type(found[key]) for key in shown} == {key: type(shown[key]) for key in shown}
    assert (shown["parameters"], shown["scraps"]) == (
        {"name": "Ada", "times": 1},
        real["scraps"],
    )


def test_the_mcp_configuration_starts_a_server(work: Path) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    (config,) = (json.loads(block) for block in fenced("json") if "mcpServers" in block)
    (entry,) = config["mcpServers"].values()
    env = cli_on_path(work / "bin")
    command = shutil.which(entry["command"], path=env["PATH"])
    assert command == str(work / "bin" / "notebook-executor")
    params = StdioServerParameters(
        command=command,
        args=entry["args"],
        cwd=str(work),
        env={"PATH": env["PATH"], "PYTHONPATH": env["PYTHONPATH"]},
    )

    async def scenario() -> tuple[set[str], dict[str, object]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            listed = await session.call_tool("list_notebooks", {})
            return tools, structured(listed)

    tools, listed = anyio.run(scenario)
    assert {"execute", "edit_cell", "diff", "search_runs"} <= tools
    assert "notebooks/hello.py" in json.dumps(listed)
