"""The guide to the agent loop is true: ``notebook-executor guide`` prints a skill document, every
command it shows runs (real kernels, a temporary runs folder), and the MCP server sends the
same guide as its ``instructions``, as the official SDK's client receives them."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
import yaml

from notebook_executor import NotebookExecutor
from notebook_executor._faces.cli import main
from notebook_executor._faces.guide import guide_body, guide_text
from support import cli_on_path, shell_blocks

pytestmark = pytest.mark.kernel

#: The notebook the guide's commands name: its cell 2 fails until it is fixed.
ANALYSIS = """\
# %% tags=["parameters"]
rows: int = 2  # how many rows

# %%
import scrapbook as sb

values = list(range(rows))

# %%
mean = sum(values) / (len(values) - rows)
sb.glue("mean", mean)
"""

FIX = 'mean = sum(values) / len(values)\nsb.glue("mean", mean)'


def test_guide_prints_a_skill_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["guide"]) == 0
    out = capsys.readouterr().out
    assert out == guide_text()
    front, body = re.fullmatch(r"---\n(.*?)\n---\n(.*)", out, re.DOTALL).groups()  # type: ignore[union-attr]
    meta = yaml.safe_load(front)
    assert meta["name"] == "notebook-executor"
    assert len(meta["description"]) > 40
    assert body.strip() == guide_body().strip()
    assert body.lstrip().startswith("# ")


def test_every_command_of_the_guide_runs(tmp_path: Path) -> None:
    commands = shell_blocks(guide_text())
    assert len(commands) >= 12
    assert any(line.startswith("notebook-executor digest ") for line in commands)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "analysis.py").write_text(ANALYSIS)
    (tmp_path / "fix.py").write_text(FIX)
    env = cli_on_path(tmp_path / "bin")
    # The session commands need the run server: one of this test's own, stopped at the end.
    env.pop("NOTEBOOK_EXECUTOR_NO_SERVER", None)
    runtime = tempfile.mkdtemp(prefix="nbxg", dir="/tmp")
    env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"] = runtime
    try:
        _run_the_guide(commands, tmp_path, env)
    finally:
        subprocess.run(
            [sys.executable, "-m", "notebook_executor", "server", "stop"],
            env=env, capture_output=True, timeout=120,
        )  # fmt: skip
        shutil.rmtree(runtime, ignore_errors=True)
    with NotebookExecutor(runs_dir=tmp_path / "runs", warm_kernels=0) as ex:
        latest = ex.runs(notebook="notebooks/analysis.py")
        # The session (a run record too, newest), then the three runs of the loop.
        assert [run["status"] for run in latest] == ["success", "success", "success", "error"]
        assert [run["scraps"] for run in latest[1:3]] == [{"mean": 1.5}, {"mean": 1.0}]
        assert latest[0]["request"] == "explore the mean"


def _run_the_guide(commands: list[str], tmp_path: Path, env: dict[str, str]) -> None:
    runs_seen = 0
    session_id = ""
    for command in commands:
        ids = _run_ids(tmp_path / "runs")
        line = command.replace("<run_id>", ids[0] if ids else "")
        line = line.replace("<earlier_run_id>", ids[1] if len(ids) > 1 else "")
        line = line.replace("<session_id>", session_id)
        done = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        words = shlex.split(line)
        if words[1] == "run":
            runs_seen += 1
        # The first run meets the broken cell; diff says "different" with 1; nothing else fails.
        expected = {1} if words[1] == "run" and runs_seen == 1 else {0}
        if words[1] == "diff":
            expected = {0, 1}
        assert done.returncode in expected, (line, done.returncode, done.stdout, done.stderr)
        if "--json" in words:
            json.loads(done.stdout)
        if words[1] == "run" and runs_seen == 1:
            failed = json.loads(done.stdout)["failed_cell"]
            assert failed["index"] == 2 and failed["ename"] == "ZeroDivisionError"
        if words[1] == "search":
            assert [hit["where"] for hit in json.loads(done.stdout)] == ["error"]
        if "--edit" in words:
            modified = json.loads(done.stdout)
            assert modified["edited_cells"] == [2] and modified["scraps"] == {"mean": 1.5}
        if words[1] == "digest":
            # The page names what the runs found: the error met, and the note of the edit.
            assert "ZeroDivisionError" in done.stdout and "mean over every row" in done.stdout
        if words[1:3] == ["session", "open"]:
            session_id = json.loads(done.stdout)["session_id"]
        if words[1:3] == ["session", "rerun"]:
            step = json.loads(done.stdout)
            assert step["cells_run"][-1] == 2 and step["scraps"] == {"mean": 1.0}
    assert runs_seen == 3
    assert session_id


def _run_ids(runs: Path) -> list[str]:
    """Run ids in the folder, newest first."""
    if not runs.exists():
        return []
    with NotebookExecutor(runs_dir=runs, warm_kernels=0) as ex:
        return [run["run_id"] for run in ex.runs()]


def test_the_mcp_server_sends_the_guide_as_its_instructions(tmp_path: Path) -> None:
    # mcp is in the test extra: a missing one fails here, it is not skipped.
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "notebook_executor", "mcp", "--root", str(tmp_path)],
        cwd=str(tmp_path),
        env={"PYTHONPATH": cli_on_path(tmp_path / "bin")["PYTHONPATH"]},
    )

    async def scenario() -> tuple[str | None, set[str]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            initialized = await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            return initialized.instructions, tools

    instructions, tools = anyio.run(scenario)
    assert instructions == guide_body()
    assert not instructions.startswith("---")
    for tool in ("list_notebooks", "inspect_parameters", "execute", "edit_cell", "diff"):
        assert f"`{tool}" in instructions
    # Every tool the guide names, the session tools and digest among them, is served.
    section = instructions.split("## Over MCP", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_]+)[`(]", section))
    assert {"digest", "open_session", "session_rerun_from", "close_session"} <= named
    arguments = {"edits", "restored", "restore_reason", "index", "start", "limit", "output_start"}
    assert named - arguments <= tools
