"""Papermill's command-line habits on ``notebook-executor run``, with the fake engine."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from support import run_cli
from unit.fake_engine import FakeEngine

NOTEBOOK = """# %% tags=["parameters"]
count: int = 1
name: str = "world"

# %%
print(name * count)
"""


@pytest.fixture(autouse=True)
def fake_executor(tmp_path: Path, cli_engine: FakeEngine) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)


_run = run_cli


def test_positional_output_is_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(capsys, "run", "nb.py", "out.ipynb", "-p", "count", "2", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["output_path"] == "out.ipynb"
    written = json.loads((tmp_path / "out.ipynb").read_text())
    assert written["metadata"]["papermill"]["parameters"] == {"count": 2}
    assert written["metadata"]["papermill"]["output_path"] == "out.ipynb"


def test_output_given_twice_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "run", "nb.py", "a.ipynb", "--output", "b.ipynb")
    assert (code, out) == (2, "")
    assert "OUT or --output" in err


def test_prepare_only_writes_parameters_and_runs_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, engine: FakeEngine
) -> None:
    code, _, err = _run(
        capsys, "run", "nb.py", "prepared.ipynb", "--prepare-only", "-p", "name", "Ada"
    )
    assert code == 0, err
    assert engine.jobs == [] and engine.prepared == []
    nb = json.loads((tmp_path / "prepared.ipynb").read_text())
    injected = nb["cells"][1]
    assert injected["metadata"]["tags"] == ["injected-parameters"]
    assert "".join(injected["source"]).endswith("name = 'Ada'")
    assert nb["metadata"]["papermill"]["parameters"] == {"name": "Ada"}
    assert nb["metadata"]["papermill"]["default_parameters"] == {"count": 1, "name": "world"}
    statuses = {cell["metadata"]["papermill"]["status"] for cell in nb["cells"]}
    assert statuses == {"pending"}
    assert all(cell["outputs"] == [] for cell in nb["cells"] if cell["cell_type"] == "code")
    assert not (tmp_path / "runs").exists()


def test_prepare_only_needs_out(capsys: pytest.CaptureFixture[str], engine: FakeEngine) -> None:
    code, out, err = _run(capsys, "run", "nb.py", "--prepare-only")
    assert (code, out) == (2, "")
    assert "--prepare-only needs OUT" in err
    assert engine.jobs == []


def test_prepare_only_refuses_bad_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "run", "nb.py", "p.ipynb", "--prepare-only", "-p", "nope", "1")
    assert code == 2 and "nope" in err
    assert not Path("p.ipynb").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--parameters_yaml", "count: 3"],
        ["--parameters-yaml", "count: 3"],
        ["-b", base64.b64encode(b"count: 3").decode()],
        ["--parameters_base64", base64.b64encode(b"count: 3").decode()],
        ["--parameters_raw", "name", "3", "-p", "count", "3"],
    ],
    ids=["yaml_", "yaml-", "b", "base64_", "raw_"],
)
def test_papermill_parameter_spellings(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = _run(capsys, "run", "nb.py", "--json", *argv)
    assert code == 0, err
    assert json.loads(out)["parameters"]["count"] == 3


def test_parameters_file_underscore(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("name: Bo\n")
    code, out, _ = _run(capsys, "run", "nb.py", "--parameters_file", "p.yaml", "--json")
    assert code == 0
    assert json.loads(out)["parameters"]["name"] == "Bo"


@pytest.mark.parametrize("flag", ["--execution-timeout", "--cell-timeout"])
def test_execution_timeout_is_cell_timeout(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine, flag: str
) -> None:
    code, _, _ = _run(capsys, "run", "nb.py", flag, "7", "-k", "python3")
    assert code == 0
    assert engine.jobs[0].cell_timeout == 7.0
    assert engine.jobs[0].kernel.name == "python3"


def test_bad_base64_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "run", "nb.py", "-b", "%%%")
    assert (code, out) == (2, "")
    assert "base64" in err
