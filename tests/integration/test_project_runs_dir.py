"""One project, one runs folder (docs/reference/cli.md): with no ``--runs-dir``, the command line
run
from the project's folder and from a subfolder (in its own process, and through the run
server), and the MCP server started from another subfolder, all record their runs in one
catalog, which ``runs`` in the project's folder lists whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from integration.mcp_client import stdio_session, structured
from integration.test_run_server import Shell, shell  # noqa: F401 (a fixture)


def _in_process(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``notebook-executor ARGV`` in ``cwd``, in its own process (no run server)."""
    env = {**os.environ, "NOTEBOOK_EXECUTOR_NO_SERVER": "1"}
    return subprocess.run(
        [sys.executable, "-m", "notebook_executor", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _mcp_execute(root: Path, cwd: Path, path: str) -> dict[str, Any]:
    """Run ``path`` through the execute tool of an MCP server confined to ``root``, started
    in ``cwd``."""

    async def scenario() -> dict[str, Any]:
        async with stdio_session(root, cwd=cwd) as session:
            return structured(await session.call_tool("execute", {"path": path}))

    result: dict[str, Any] = anyio.run(scenario)
    assert result["status"] == "success", result
    return result


def _project(folder: Path, pyproject: str = "") -> tuple[Path, Path]:
    """``folder`` made a project (a ``pyproject.toml``) with two subfolders."""
    (folder / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    sub, sub2 = folder / "sub", folder / "sub2"
    sub.mkdir()
    sub2.mkdir()
    return sub, sub2


def test_runs_from_three_folders_of_a_project_share_one_catalog(shell: Shell) -> None:  # noqa: F811
    project = shell.folder  # holds hello.py
    sub, sub2 = _project(project)
    first = _in_process(project, "run", "hello.py", "--json")
    assert first.returncode == 0, first.stderr
    served = Shell(sub, Path(shell.env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"]))
    code, out, err = served.run("-v", "run", "../hello.py", "--json")
    assert code == 0, err
    assert shell.status()["pid"] is not None  # it went through the run server
    second = json.loads(out)
    third = _mcp_execute(project, sub2, "hello.py")

    assert not (sub / "runs").exists() and not (sub2 / "runs").exists()
    listed = _in_process(project, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    ids = {json.loads(first.stdout)["run_id"], second["run_id"], third["run_id"]}
    assert {row["run_id"] for row in rows} == ids
    assert {row["notebook"] for row in rows} == {"hello.py"}  # one notebook, one name
    assert f"runs folder: {project / 'runs'}" in err  # -v said which
    # From the subfolder, the same history, and the human output says whose.
    human = _in_process(sub, "runs")
    assert human.returncode == 0, human.stderr
    header, *lines = human.stdout.splitlines()
    assert header.startswith(f"runs folder: {project / 'runs'} ")
    # Three runs (and, when some were kept, a last line saying what checkpoints take).
    assert len([line for line in lines if not line.startswith("checkpoints: ")]) == 3
    digest = _in_process(sub, "digest", "--notebook", "../hello.py", "--json")
    assert json.loads(digest.stdout)["runs"] == 3


def test_the_pyprojects_runs_dir_is_every_folders(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    sub, sub2 = _project(project, '[tool.notebook-executor]\nruns-dir = "build/runs"\n')
    (project / "hello.py").write_text(
        (Path(__file__).parents[2] / "notebooks" / "hello.py").read_text()
    )
    ran = _in_process(sub, "run", "../hello.py", "--json")
    assert ran.returncode == 0, ran.stderr
    _mcp_execute(project, sub2, "hello.py")
    assert not [f for f in (project / "runs", sub / "runs", sub2 / "runs") if f.exists()]
    listed = _in_process(project, "runs", "--json")
    rows = json.loads(listed.stdout)
    assert len(rows) == 2 and {row["notebook"] for row in rows} == {"hello.py"}
    assert (project / "build" / "runs" / "catalog.sqlite").is_file()


def test_a_projects_first_run_from_a_subfolder_starts_the_projects_history(
    tmp_path: Path,
) -> None:
    """No ``runs/`` anywhere yet: a first run from a subfolder records into the project
    folder's ``runs/`` (it made ``sub/runs``, a second history, which then hid the project's
    from every later run in ``sub``)."""
    project = tmp_path
    sub, _ = _project(project)
    (project / "nb.py").write_text("# %%\nprint(1)\n", encoding="utf-8")
    done = _in_process(sub, "run", "../nb.py", "--json")
    assert done.returncode == 0, done.stderr
    assert not (sub / "runs").exists()
    listed = _in_process(project, "runs", "--json")
    assert [row["run_id"] for row in json.loads(listed.stdout)] == [
        json.loads(done.stdout)["run_id"]
    ]
