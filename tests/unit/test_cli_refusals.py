"""Bad paths on the command line: one line, exit 2, nothing run, nothing recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_executor._faces.cli import main
from unit.fake_engine import FakeEngine

NOTEBOOK = "# %%\nx = 1\n"


@pytest.fixture(autouse=True)
def notebook(tmp_path: Path, cli_engine: FakeEngine) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.startswith("notebook-executor: error: ")
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("output", ["/proc/out.ipynb", "missing/out.ipynb", "nb.py/out.ipynb"])
def test_run_refuses_an_unwritable_output_path_before_any_run(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine, tmp_path: Path, output: str
) -> None:
    err = _refused(capsys, "run", "nb.py", output)
    assert "output_path" in err
    assert engine.jobs == []
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["runs"],
        ["runs", "--json"],
        ["search", "anything"],
        ["reindex"],
        ["scraps"],
        ["report"],
        ["run", "nb.py"],
    ],
)
def test_a_runs_dir_that_is_a_file_is_refused(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine, tmp_path: Path, argv: list[str]
) -> None:
    err = _refused(capsys, *argv, "--runs-dir", "nb.py")
    assert "not a folder" in err
    assert engine.jobs == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.py"]


def test_report_refuses_a_missing_runs_folder(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine, tmp_path: Path
) -> None:
    err = _refused(capsys, "report", "--runs-dir", "nowhere")
    assert "nowhere" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.py"]
