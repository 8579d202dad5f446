"""The options of a run are listed once (``RunOptions``), and every face takes those it should:
``execute`` (its signature is the public contract), ``execute_many``, ``prepare``, ``validate``,
the command line and the MCP server's ``execute`` tool (fake engine, no kernel)."""

from __future__ import annotations

import inspect
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError, read_notebook
from notebook_executor._parameters.values import TextValue
from notebook_executor._run import plan as planning
from notebook_executor._run.options import RUN_OPTIONS, RunOptions, option_help
from support import cli_on_engine, run_cli
from unit.fake_engine import FakeEngine

NOTEBOOK = """# %% tags=["parameters"]
count: int = 1

# %%
print(count)
"""

#: A value of each option, as a caller gives it (each differs from the default, None).
VALUES: dict[str, Any] = {
    "output_path": "out.ipynb",
    "parameters": {"count": 2},
    "timeout": 30.0,
    "cell_timeout": 5.0,
    "request": "why",
    "cwd": ".",
    "env": {"NBX_OPTION_ENV": "value"},
    "secrets": {"NBX_OPTION_SECRET": "a-secret-value"},
    "edits": [{"index": 1, "source": "print(count * 2)", "note": "twice as much"}],
    "environment": "current",
    "reuse": True,
    "checkpoints": False,
}


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[RunOptions]:
    """The options of every run planned from now on."""
    planned: list[RunOptions] = []
    real = planning.plan_run

    def spy(input_path: Any, options: RunOptions, **settings: Any) -> Any:
        planned.append(options)
        return real(input_path, options, **settings)

    monkeypatch.setattr(planning, "plan_run", spy)  # what the executor's Planner calls
    return planned


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "nb.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    return path


def test_the_values_here_cover_every_option() -> None:
    assert sorted(VALUES) == sorted(RUN_OPTIONS)
    assert all(option_help(name) for name in RUN_OPTIONS)


def test_execute_takes_every_option_as_the_contract_spells_it() -> None:
    signature = inspect.signature(NotebookExecutor.execute).parameters
    assert set(RUN_OPTIONS) <= set(signature)
    # Each defaults to "not given", as RunOptions does (None for a limit means "no limit").
    defaults = {f.name: f.default for f in fields(RunOptions)}
    assert all(signature[name].default is defaults[name] for name in RUN_OPTIONS)
    # docs/reference/api.md: these four by position, the rest by keyword only.
    positional = [
        name
        for name, p in signature.items()
        if p.kind is p.POSITIONAL_OR_KEYWORD and name != "self"
    ]
    assert positional == ["input_path", "output_path", "parameters", "timeout"]
    keyword_only = {name for name, p in signature.items() if p.kind is p.KEYWORD_ONLY}
    assert set(RUN_OPTIONS) - set(positional) <= keyword_only


def test_execute_hands_every_option_to_the_plan(
    notebook: Path, seen: list[RunOptions], tmp_path: Path
) -> None:
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        result = ex.execute(notebook, **VALUES)
    assert result["status"] == "success", result
    assert seen == [RunOptions(**VALUES)]


def test_prepare_and_validate_take_every_option(
    notebook: Path, seen: list[RunOptions], tmp_path: Path
) -> None:
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        ex.prepare(notebook, **VALUES)
        given = {k: v for k, v in VALUES.items() if k != "output_path"}
        assert ex.validate(notebook, execute=True, **given)["valid"]
    assert seen == [RunOptions(**VALUES), RunOptions(**given)]


def test_execute_many_takes_every_option_but_the_per_run_ones(
    notebook: Path, seen: list[RunOptions], tmp_path: Path
) -> None:
    given = {k: v for k, v in VALUES.items() if k not in ("output_path", "parameters")}
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        results = ex.execute_many(notebook, [{"count": 3}, None], max_workers=1, **given)
        assert [r["status"] for r in results] == ["success", "success"]
        for name in ("output_path", "parameters"):
            with pytest.raises(NotebookExecutorError, match=name):
                ex.execute_many(notebook, [{}], **{name: VALUES[name]})
    assert seen == [
        RunOptions(**given, parameters={"count": 3}),
        RunOptions(**given, parameters=None),
    ]


@pytest.mark.parametrize("method", ["execute_many", "prepare", "validate"])
def test_an_unknown_option_is_refused_by_name(method: str, notebook: Path, tmp_path: Path) -> None:
    engine = FakeEngine()
    refused = pytest.raises(NotebookExecutorError, match="unknown option 'timout'")
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex, refused:
        if method == "execute_many":
            ex.execute_many(notebook, [{}], timout=3)
        elif method == "prepare":
            ex.prepare(notebook, timout=3)
        else:
            ex.validate(notebook, execute=True, timout=3)
    assert engine.jobs == []


def test_the_command_line_gives_every_option_its_flags_name(
    notebook: Path,
    seen: list[RunOptions],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli_on_engine(monkeypatch, FakeEngine())
    monkeypatch.setenv("NBX_OPTION_SECRET", "a-secret-value")
    flags = [
        "--timeout", "30", "--cell-timeout", "5", "--request", "why", "--cwd", ".",
        "--secret", "NBX_OPTION_SECRET", "--env", "current", "--reuse", "--no-checkpoints",
    ]  # fmt: skip
    # Every option but env (no flag: the kernel gets the shell's environment) and edits
    # (run --edit INDEX FILE, which tests/unit/test_modified_runs.py covers; --prepare-only
    # and sweep take none).
    expected = {k: v for k, v in VALUES.items() if k not in ("env", "edits")}
    # -p and -g give text, typed by the planner once it has read the source.
    expected["parameters"] = {"count": TextValue("2")}
    code, _, err = run_cli(capsys, "run", "nb.py", "out.ipynb", "-p", "count", "2", *flags)
    assert code == 0, err
    code, _, err = run_cli(
        capsys, "run", "nb.py", "p.ipynb", "--prepare-only", "-p", "count", "2", *flags
    )
    assert code == 0, err
    code, _, err = run_cli(capsys, "sweep", "nb.py", "-g", "count=2", "--json", *flags)
    assert code == 0, err
    assert seen == [
        RunOptions(**expected),
        RunOptions(**{**expected, "output_path": "p.ipynb"}),
        RunOptions(**{**expected, "output_path": None}),
    ]


def test_prepare_returns_what_it_writes(notebook: Path, tmp_path: Path) -> None:
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        prepared = ex.prepare(notebook, "prepared.ipynb", parameters={"count": 2})
        alone = ex.prepare(notebook, parameters={"count": 2})
    written = json.loads((tmp_path / "prepared.ipynb").read_text(encoding="utf-8"))
    on_disk = read_notebook(tmp_path / "prepared.ipynb")
    assert [c.source for c in on_disk.cells] == [c.source for c in prepared.cells]
    assert on_disk.metadata["papermill"] == prepared.metadata["papermill"]
    assert [c.source for c in alone.cells] == [c.source for c in prepared.cells]
    assert written["metadata"]["papermill"]["parameters"] == {"count": 2}
    assert written["metadata"]["papermill"]["output_path"] == "prepared.ipynb"
    assert alone.metadata["papermill"]["output_path"] is None
    assert engine.jobs == [] and not (tmp_path / "runs").exists()


def test_the_mcp_execute_tool_offers_the_options_it_names(tmp_path: Path) -> None:
    # mcp is in the test extra: a missing one fails here, it is not skipped.
    from notebook_executor._faces.mcp.paths import Root
    from notebook_executor._faces.mcp.tools import EXECUTE_OPTIONS, server_tools
    from notebook_executor._faces.mcp.workspace import Workspace

    assert set(EXECUTE_OPTIONS) <= set(RUN_OPTIONS)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        tools = {tool.name: tool for tool in server_tools(Workspace(Root(tmp_path), ex, {}))}
    properties = tools["execute"].parameters["properties"]
    assert sorted(properties) == sorted(["path", "wait", *EXECUTE_OPTIONS])  # the tool's own
    for name in EXECUTE_OPTIONS:
        if name != "secrets":  # names of the server's variables, not values
            assert properties[name]["description"] == option_help(name)
