"""The command line, in-process, with the fake engine standing in for kernels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from notebook_executor import read_notebook
from support import run_cli
from unit.fake_engine import FakeEngine

NOTEBOOK = """# %% tags=["parameters"]
count: int = 1  # how many
ratio: float = 0.5
name: str = "world"
flag: bool = False
tags: list = []
required: str = ...

# %%
import scrapbook as sb
sb.glue("summary", {"count": count, "ratio": ratio, "name": name, "flag": flag, "tags": tags})
if count < 0:
    raise ValueError("negative count")
"""


@pytest.fixture(autouse=True)
def fake_executor(tmp_path: Path, cli_engine: FakeEngine) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)


_run = run_cli


def _usage_error(code: int, out: str, err: str) -> None:
    assert code == 2
    assert out == ""
    assert err.startswith("notebook-executor: error: ")
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_run_json_prints_exactly_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys,
        "run", "nb.py", "-p", "count", "3", "-p", "ratio", "2", "-p", "name", "123",
        "-p", "flag", "true", "-p", "tags", "[a, b]", "-r", "required", "True",
        "--request", "from the cli", "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert out.count("\n") == 1
    assert result["status"] == "success"
    assert result["request"] == "from the cli"
    assert result["parameters"] == {
        "count": 3,
        "ratio": 2.0,
        "name": "123",
        "flag": True,
        "tags": ["a", "b"],
        "required": "True",
    }
    assert result["scraps"]["summary"]["ratio"] == 2.0
    assert Path(result["output_path"]).exists()


def test_run_parameters_from_yaml_file_and_string(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "params.yaml").write_text("count: 4\nrequired: from-file\ntags: [x]\n")
    code, out, _ = _run(
        capsys, "run", "nb.py", "-f", "params.yaml", "-y", "{name: Ada}", "-p", "count", "5",
        "--json",
    )  # fmt: skip
    assert code == 0
    parameters = json.loads(out)["parameters"]
    assert (parameters["count"], parameters["name"], parameters["required"]) == (
        5,
        "Ada",
        "from-file",
    )


def test_a_failing_notebook_exits_1_and_still_prints(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "run", "nb.py", "-p", "count", "-1", "-p", "required", "x", "--json"
    )
    assert code == 1
    result = json.loads(out)
    assert result["status"] == "error"
    assert result["failed_cell"]["index"] == 1


def test_run_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "run", "nb.py", "-p", "count", "-1", "-r", "required", "x")
    assert code == 1
    assert out.startswith("error: nb.py (1/2 code cells")
    assert "failed cell 1 (cell_error): ValueError: negative count" in out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["run"],
        ["run", "nb.py", "-p", "count"],
        ["run", "nb.py", "--timeout", "soon"],
        ["run", "nb.py", "--timeout", "-3"],
        ["run", "nb.py", "--cell-timeout", "0"],
        ["run", "missing.py", "-r", "required", "x"],
        ["run", "nb.txt"],
        ["run", "nb.py", "-p", "count", "three", "-r", "required", "x"],
        ["run", "nb.py", "-p", "nope", "1", "-r", "required", "x"],
        ["run", "nb.py"],
        ["run", "nb.py", "-y", "[1, 2"],
        ["run", "nb.py", "-y", "[1, 2]"],
        ["run", "nb.py", "-f", "missing.yaml"],
        ["run", "nb.py", "-r", "required", "x", "--output", "out.md"],
        ["run", "nb.py", "-r", "required", "x", "--cwd", "no-such-dir"],
        ["runs", "--limit", "0"],
        ["runs", "--status", "weird"],
        ["runs", "--json", "--csv"],
        ["show", "../../etc/passwd"],
        ["show", "20240101T000000Z-nb-00000000"],
        ["inspect", "missing.ipynb"],
        ["convert", "nb.py", "out.txt"],
        ["convert", "nb.py", "nb.py"],
        ["convert", "missing.py", "out.md"],
    ],
)
def test_usage_errors_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine, argv: list[str]
) -> None:
    _usage_error(*_run(capsys, *argv))
    assert engine.jobs == []


def test_run_prepares_the_first_kernel_before_reading_the_source(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine
) -> None:
    """``run`` asks the engine to prepare its first kernel start before the run is checked, for
    a Python kernel only; bad input still runs nothing."""
    assert _run(capsys, "run", "nb.py", "-p", "required", "x")[0] == 0
    assert engine.prepared == [0]
    assert _run(capsys, "run", "nb.py", "--kernel", "python3", "-p", "required", "x")[0] == 0
    assert engine.prepared == [0, 1]
    _usage_error(*_run(capsys, "run", "nb.py", "-p", "count", "many"))
    assert engine.prepared == [0, 1, 2]
    assert len(engine.jobs) == 2
    _run(capsys, "run", "nb.py", "--kernel", "ir", "-p", "required", "x")
    assert engine.prepared == [0, 1, 2]


def test_inspect_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "inspect", "nb.py", "--json")
    assert code == 0
    declared = json.loads(out)
    assert list(declared) == ["count", "ratio", "name", "flag", "tags", "required"]
    assert declared["count"] == {
        "name": "count",
        "type": "int",
        "default": 1,
        "help": "how many",
        "required": False,
    }
    assert declared["required"]["required"] is True
    assert declared["required"]["default"] is None


def test_inspect_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(capsys, "inspect", "nb.py")
    assert code == 0
    assert "count: int = 1  # how many" in out
    assert "required: str (required)" in out
    (tmp_path / "plain.py").write_text("# %%\nx = 1\n")
    assert _run(capsys, "inspect", "plain.py")[1].startswith("no parameters")


@pytest.mark.parametrize("target", ["out.ipynb", "out.md", "sub/out.py"])
def test_convert(capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str) -> None:
    (tmp_path / "sub").mkdir()  # an output's folder must exist, as for run OUT
    code, out, err = _run(capsys, "convert", "nb.py", target)
    assert code == 0
    assert out == ""
    assert target.split("/")[-1] in err
    original, converted = read_notebook("nb.py"), read_notebook(tmp_path / target)
    assert [(c.cell_type, c.source) for c in converted.cells] == [
        (c.cell_type, c.source) for c in original.cells
    ]


def test_show_and_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "run", "nb.py", "-r", "required", "x", "--json")
    run_id = json.loads(out)["run_id"]
    code, out, _ = _run(capsys, "show", run_id, "--json")
    assert code == 0
    assert json.loads(out)["run_id"] == run_id
    code, out, _ = _run(capsys, "runs", "--json")
    assert code == 0
    assert [row["run_id"] for row in json.loads(out)] == [run_id]
    code, out, _ = _run(capsys, "runs", "--csv")
    assert out.splitlines()[0].startswith("run_id,status")
    code, out, _ = _run(capsys, "scraps", "--json")
    assert code == 0
    assert json.loads(out)[0]["run_id"] == run_id


def test_reindex(capsys: pytest.CaptureFixture[str]) -> None:
    _run(capsys, "run", "nb.py", "-r", "required", "x")
    code, out, err = _run(capsys, "reindex")
    assert code == 0
    assert out == ""
    assert "indexed 1 runs" in err
