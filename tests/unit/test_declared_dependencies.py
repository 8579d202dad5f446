"""Declared dependencies (docs/how-to/environments.md) are read from every kind of source, as uv
reads a
PEP 723 block; a malformed declaration is refused before anything is installed; uv's errors are
condensed to one line naming the requirement. No kernel and no uv here (fake engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from notebook_executor import (
    ClusterError,
    InvalidArgumentError,
    NotebookExecutor,
    NotebookSourceError,
)
from notebook_executor._kernels.environments import _named_requirement as named_requirement
from notebook_executor._kernels.environments import (
    condense_uv_message,
    environment_hash,
    environments_dir,
)
from notebook_executor._sources.dependencies import script_metadata
from notebook_executor._sources.formats import load_source
from support import run_cli
from unit.fake_engine import FakeEngine

SCRIPT = """\
# /// script
# requires-python = ">=3.10"
# dependencies = [
#   "six>=1.16",
#   "tomli; python_version < '3.11'",
# ]
# [tool.other]
# anything = true
# ///

# %% tags=["parameters"]
n = 1

# %%
print(n)
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_script_block_is_read_as_pep_723_reads_it(tmp_path: Path) -> None:
    declared = load_source(write(tmp_path / "nb.py", SCRIPT)).dependencies
    assert declared is not None
    assert declared.dependencies == ("six>=1.16", "tomli; python_version < '3.11'")
    assert declared.requires_python == ">=3.10"
    assert declared.declared_in == "script block"


def test_the_reference_regex_reading_matches_the_pep_examples() -> None:
    # The PEP's own example, and a block of another type next to it (ignored).
    text = (
        "# /// pyproject\n# [project]\n# name = 'x'\n# ///\n\n"
        "# /// script\n# requires-python = '>=3.11'\n# dependencies = [\n"
        "#   'requests<3',\n#   'rich',\n# ]\n# ///\n\nimport requests\n"
    )
    assert script_metadata("nb.py", text) == {
        "requires-python": ">=3.11",
        "dependencies": ["requests<3", "rich"],
    }
    # An empty comment line inside the block is "#" alone: allowed by the regex.
    assert script_metadata("nb.py", "# /// script\n# dependencies = []\n#\n# ///\n") == {
        "dependencies": []
    }
    # No closing line: no block at all (as uv reads it).
    assert script_metadata("nb.py", "# /// script\n# dependencies = []\n") is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("# /// script\n# dependencies = [\n# ///\n", "not valid TOML"),
        (
            "# /// script\n# dependencies = []\n# ///\n\n"
            "# /// script\n# dependencies = []\n# ///\n",
            "more than one",
        ),
        ('# /// script\n# dependencies = ["six>>1"]\n# ///\n', "'six>>1' is malformed"),
        ('# /// script\n# dependencies = "six"\n# ///\n', "must be a list"),
        ('# /// script\n# requires-python = "3.x"\n# ///\n', "not a version specifier"),
    ],
)
def test_a_malformed_block_is_refused_naming_what_is_wrong(
    tmp_path: Path, text: str, says: str
) -> None:
    path = write(tmp_path / "nb.py", text + '\n# %% tags=["parameters"]\nn = 1\n')
    with pytest.raises(NotebookSourceError, match=says):
        load_source(path)


def test_a_markdown_front_matter_declares_them_with_or_without_parameters(
    tmp_path: Path,
) -> None:
    with_parameters = write(
        tmp_path / "logbook.md",
        "---\nparameters:\n  name: Ada\ndependencies:\n  - six\nrequires-python: '>=3.10'\n---\n\n"
        "# Hello\n\n```python\nprint(name)\n```\n",
    )
    without = write(
        tmp_path / "plain.md", "---\ndependencies: [six==1.17.0]\n---\n\n```python\n1\n```\n"
    )
    first = load_source(with_parameters).dependencies
    second = load_source(without).dependencies
    assert first is not None and second is not None
    assert (first.dependencies, first.requires_python, first.declared_in) == (
        ("six",),
        ">=3.10",
        "front matter",
    )
    assert second.dependencies == ("six==1.17.0",)
    bad = write(tmp_path / "bad.md", "---\ndependencies: [six\n---\n\n```python\n1\n```\n")
    with pytest.raises(NotebookSourceError, match="not valid YAML"):
        load_source(bad)


def test_an_ipynb_declares_them_in_its_metadata(tmp_path: Path) -> None:
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "notebook_executor": {"dependencies": ["six"], "requires-python": ">=3.10"}
        },
        "cells": [
            {"cell_type": "code", "id": "a", "metadata": {}, "source": "1", "outputs": [],
             "execution_count": None}
        ],
    }  # fmt: skip
    path = write(tmp_path / "nb.ipynb", json.dumps(nb))
    declared = load_source(path).dependencies
    assert declared is not None
    assert declared.as_dict() == {
        "dependencies": ["six"],
        "requires-python": ">=3.10",
        "declared_in": "metadata",
    }


def test_a_conversion_to_ipynb_keeps_the_scripts_declaration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The block is no cell, but its declaration is not lost: ``convert`` writes it where an
    ``.ipynb`` declares it, so the converted notebook runs in the same environment."""
    source = write(tmp_path / "nb.py", SCRIPT)
    code, _out, err = run_cli(capsys, "convert", str(source), str(tmp_path / "nb.ipynb"))
    assert code == 0, err
    converted = load_source(tmp_path / "nb.ipynb")
    assert [cell.source for cell in converted.nb.cells] == ["n = 1", "print(n)"]
    declared = converted.dependencies
    assert declared is not None
    assert declared.declared_in == "metadata"
    assert declared.dependencies == ("six>=1.16", "tomli; python_version < '3.11'")
    assert declared.requires_python == ">=3.10"


def test_a_notebook_without_a_declaration_has_none(tmp_path: Path) -> None:
    path = write(tmp_path / "nb.py", '# %% tags=["parameters"]\nn = 1\n')
    assert load_source(path).dependencies is None


def test_inspect_shows_the_declaration_and_keeps_the_parameters_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path / "nb.py", SCRIPT)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        answer = ex.inspect_parameters(path)
        # docs/reference/api.md's shape, unchanged: {name: {...}}.
        assert answer == {
            "n": {"name": "n", "type": "int", "default": 1, "help": "", "required": False}
        }
        assert answer.environment == ex.inspect_environment(path)
        assert answer.environment is not None
        assert answer.environment["dependencies"] == ["six>=1.16", "tomli; python_version < '3.11'"]
        assert json.loads(json.dumps(answer)) == dict(answer)
    code, out, _ = run_cli(capsys, "inspect", "nb.py")
    assert code == 0
    assert "dependencies (script block): six>=1.16, tomli; python_version < '3.11'" in out
    assert "requires-python >=3.10" in out


def test_the_environment_option_is_checked(tmp_path: Path) -> None:
    path = write(tmp_path / "nb.py", SCRIPT)
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex,
        pytest.raises(InvalidArgumentError, match="environment must be"),
    ):
        ex.execute(path, environment="mine")


def test_environment_current_makes_no_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTEBOOK_EXECUTOR_ENVS", str(tmp_path / "envs"))
    path = write(tmp_path / "nb.py", SCRIPT)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        result = ex.execute(path, environment="current")
        # Nothing made, nothing checked with uv: prepare and validate make none either.
        ex.prepare(path)
        assert ex.validate(path)["valid"]
    assert result["status"] == "success"
    assert not (tmp_path / "envs").exists()


def test_a_dask_sweep_of_such_a_notebook_is_refused_before_anything_is_submitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTEBOOK_EXECUTOR_ENVS", str(tmp_path / "envs"))
    path = write(tmp_path / "nb.py", SCRIPT)

    class Untouchable:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the client was used: {name}")

    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex,
        pytest.raises(ClusterError, match="declares dependencies"),
    ):
        ex.execute_many(path, [{"n": 1}], client=Untouchable())
    assert not (tmp_path / "envs").exists()


def test_the_cache_folder_is_documented_and_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTEBOOK_EXECUTOR_ENVS", "/somewhere/envs")
    assert environments_dir() == Path("/somewhere/envs")
    monkeypatch.delenv("NOTEBOOK_EXECUTOR_ENVS")
    monkeypatch.setenv("XDG_CACHE_HOME", "/cache")
    assert environments_dir() == Path("/cache/notebook-executor/envs")


def test_the_hash_changes_with_the_declaration_and_the_python() -> None:
    base = environment_hash(["six"], None, "/usr/bin/python3", "3.11.7")
    assert base == environment_hash(["six"], None, "/usr/bin/python3", "3.11.7")
    assert base != environment_hash(["six==1.17.0"], None, "/usr/bin/python3", "3.11.7")
    assert base != environment_hash(["six"], ">=3.10", "/usr/bin/python3", "3.11.7")
    assert base != environment_hash(["six"], None, "/usr/bin/python3", "3.11.8")


def test_uv_messages_are_condensed_to_one_line_naming_the_requirement() -> None:
    stderr = (
        "Using Python 3.11.7 environment at: x\n"
        "warning: Failed to inspect Python interpreter from search path\n"
        "error: No solution found when resolving dependencies\n"
        "  cause: Because no-such-thing was not found in the package registry and you "
        "require no-such-thing, we can conclude that your requirements are unsatisfiable.\n"
    )
    line = condense_uv_message(stderr)
    assert "\n" not in line
    assert line.startswith("No solution found when resolving dependencies")
    assert "warning" not in line and "Using Python" not in line
    assert named_requirement(line, ["six", "No_Such.Thing>=1"]) == "No_Such.Thing>=1"
    assert named_requirement(line, ["six"]) is None
    assert len(condense_uv_message("error: " + "x" * 1000)) == 400


def test_an_environment_record_never_holds_the_home_folder() -> None:
    from notebook_executor._records.provenance import without_home

    home = str(Path.home())
    record = {
        "declaration": {"dependencies": [f"probe @ file://{home}/wheels/probe.whl"]},
        "packages": {"probe": f"file://{home}/wheels/probe.whl", "six": "1.17.0"},
    }
    assert json.dumps(without_home(record)).count(home) == 0
    assert without_home(record)["packages"] == {
        "probe": "file://~/wheels/probe.whl",
        "six": "1.17.0",
    }
