"""The project's runs folder (docs/reference/cli.md): the search rules of
:func:`~notebook_executor._records.project.find_runs_dir`, and the faces that ask it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from notebook_executor import InvalidArgumentError, NotebookExecutor
from notebook_executor._faces.cli import main
from notebook_executor._records.identity import notebook_identity
from notebook_executor._records.project import find_runs_dir
from unit.fake_engine import FakeEngine


def _project(tmp_path: Path, marker: str = "pyproject.toml", setting: str | None = None) -> Path:
    """``tmp_path/proj`` holding ``marker`` (a ``pyproject.toml`` with ``setting`` in its
    ``[tool.notebook-executor]``), with the folders ``a/b`` below it."""
    project = tmp_path / "proj"
    (project / "a" / "b").mkdir(parents=True)
    if marker == ".git":
        (project / ".git").mkdir()
    else:
        body = "" if setting is None else f"[tool.notebook-executor]\n{setting}\n"
        (project / marker).write_text(body, encoding="utf-8")
    return project


def _history(folder: Path) -> Path:
    """``folder/runs`` holding a catalog."""
    runs = folder / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / "catalog.sqlite").write_bytes(b"")
    return runs


@pytest.mark.parametrize("marker", ["pyproject.toml", ".git"])
def test_the_nearest_runs_folder_with_a_catalog_up_to_the_project(
    tmp_path: Path, marker: str
) -> None:
    project = _project(tmp_path, marker)
    deep = project / "a" / "b"
    # None yet: the project's runs/, from any of its folders (a first run from a subfolder
    # starts no history of its own).
    assert find_runs_dir(deep).path == project / "runs"
    (deep / "runs").mkdir()  # a runs/ without a catalog is no history
    assert find_runs_dir(deep).path == project / "runs"
    _history(project)
    found = find_runs_dir(deep)
    assert found.path == project / "runs"
    assert "catalog" in found.why
    _history(project / "a")  # the nearest wins
    assert find_runs_dir(deep).path == project / "a" / "runs"
    assert find_runs_dir(project).path == project / "runs"


def test_the_search_stops_at_the_project_folder(tmp_path: Path) -> None:
    _history(tmp_path)  # a history above the project is another project's
    project = _project(tmp_path, ".git")
    assert find_runs_dir(project / "a").path == project / "runs"


def test_with_no_project_only_the_working_folders_runs_counts(tmp_path: Path) -> None:
    _history(tmp_path)  # a stray runs/ above (no .git, no pyproject.toml anywhere up)
    (tmp_path / "a").mkdir()
    assert find_runs_dir(tmp_path / "a").path == tmp_path / "a" / "runs"
    assert find_runs_dir(tmp_path).path == tmp_path / "runs"


def test_the_pyproject_setting_relative_to_its_folder(tmp_path: Path) -> None:
    project = _project(tmp_path, setting='runs-dir = "build/records"')
    for start in (project, project / "a" / "b"):
        found = find_runs_dir(start)
        assert found.path == project / "build" / "records"
        assert str(project / "pyproject.toml") in found.why
    _history(project / "a")  # a runs/ holding a catalog comes first
    assert find_runs_dir(project / "a" / "b").path == project / "a" / "runs"
    absolute = tmp_path / "elsewhere"
    (project / "pyproject.toml").write_text(f'[tool.notebook-executor]\nruns-dir = "{absolute}"\n')
    assert find_runs_dir(project).path == absolute


def test_a_folder_under_the_working_folder_is_given_relative_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path, setting='runs-dir = "build/runs"')
    monkeypatch.chdir(project)
    assert find_runs_dir().path == Path("build/runs")
    monkeypatch.chdir(project / "a")
    assert find_runs_dir().path == project / "build" / "runs"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("runs-dir = 3", "must be a folder's path as a string"),
        ('runs-dir = ""', "must be a folder's path as a string"),
        ("runs-dir = [1, 2", "not valid TOML"),
        ('runs-dir = "pyproject.toml"', "not a folder"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_file(
    tmp_path: Path, content: str | bytes, words: str
) -> None:
    project = _project(tmp_path)
    pyproject = project / "pyproject.toml"
    if isinstance(content, bytes):
        pyproject.write_bytes(content)
    else:
        pyproject.write_text(f"[tool.notebook-executor]\n{content}\n", encoding="utf-8")
    with pytest.raises(InvalidArgumentError) as caught:
        find_runs_dir(project / "a")
    assert words in str(caught.value)
    assert str(pyproject) in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


def test_an_unreadable_pyproject_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "pyproject.toml").mkdir(parents=True)  # root reads any file: a folder cannot
    with pytest.raises(InvalidArgumentError, match=r"cannot read .*pyproject\.toml"):
        find_runs_dir(project)


def test_a_bad_setting_stops_the_command_line_before_any_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    cli_engine: FakeEngine,
) -> None:
    project = _project(tmp_path, setting="runs-dir = 3")
    (project / "a" / "n.py").write_text("x = 1\n")
    monkeypatch.chdir(project / "a")
    for argv in (["run", "n.py"], ["runs"], ["digest", "--json"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "runs-dir" in err, err
    assert cli_engine.jobs == []
    assert main(["runs", "--runs-dir", "given", "--json"]) == 0  # --runs-dir wins
    assert json.loads(capsys.readouterr().out) == []


def test_the_api_default_and_runs_dir_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path)
    runs = _history(project)
    monkeypatch.chdir(project / "a" / "b")
    with NotebookExecutor(engine=FakeEngine()) as ex:
        assert ex.runs_dir == runs
    with NotebookExecutor(runs_dir="mine", engine=FakeEngine()) as ex:
        assert ex.runs_dir == Path("mine")


def test_the_command_line_says_which_runs_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    cli_engine: FakeEngine,
) -> None:
    project = _project(tmp_path)
    runs = _history(project)
    monkeypatch.chdir(project / "a")
    with caplog.at_level(logging.INFO):
        assert main(["-v", "runs"]) == 0
    assert f"runs folder: {runs}" in caplog.text
    assert capsys.readouterr().out.splitlines() == [
        f"runs folder: {runs} (the nearest runs/ with a catalog)"
    ]
    assert main(["digest"]) == 0
    assert capsys.readouterr().out.startswith(f"runs folder: {runs} ")
    for argv in (["runs", "--json"], ["digest", "--json"]):  # JSON keeps its shape
        assert main(argv) == 0
        json.loads(capsys.readouterr().out)
    assert main(["runs", "--runs-dir", str(runs)]) == 0  # given: no header
    assert capsys.readouterr().out == ""


def test_a_configured_runs_folder_names_notebooks_from_the_project(tmp_path: Path) -> None:
    project = _project(tmp_path, setting='runs-dir = "build/runs"')
    notebook = project / "analysis.py"
    notebook.write_text("x = 1\n")
    runs = find_runs_dir(project / "a").path
    assert notebook_identity(notebook, runs) == "analysis.py"
    # A runs folder the project does not name keeps the rule of its parent.
    assert notebook_identity(project / "a" / "n.py", project / "a" / "runs") == "n.py"


def test_the_mcp_server_keeps_its_runs_under_its_root(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from notebook_executor._faces.mcp.server import root_runs_dir

    project = _project(tmp_path)
    runs = _history(project)
    assert root_runs_dir(project) == runs
    assert not caplog.text
    with caplog.at_level(logging.WARNING):
        # The project's is outside the root: the server writes only under its root.
        assert root_runs_dir(project / "a") == project / "a" / "runs"
    assert "outside --root" in caplog.text
