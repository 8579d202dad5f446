"""``output_path`` is checked before anything starts: never the source, always writable."""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError
from notebook_executor.engine import ScriptedEngine

NOTEBOOK = "# %%\nx = 1\n"


@pytest.mark.parametrize(
    ("source", "output"),
    [
        ("s3://bucket/nb.ipynb", "s3://bucket/nb.ipynb"),
        ("s3://bucket/dir/nb.ipynb", "s3://bucket/dir/x/../nb.ipynb"),
        ("s3://bucket/dir/nb.ipynb", "S3://bucket/dir/./nb.ipynb"),
        ("s3://bucket/dir/x/../nb.ipynb", "s3://bucket//dir/nb.ipynb"),
    ],
)
def test_a_url_output_that_is_the_url_source_is_refused(
    tmp_path: Path, source: str, output: str
) -> None:
    engine = ScriptedEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(NotebookExecutorError, match="source notebook itself"),
    ):
        ex.execute(source, output)
    assert engine.jobs == []


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("missing/out.ipynb", "does not exist"),
        ("afile/out.ipynb", "is not a folder"),
        ("/proc/out.ipynb", "not writable"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, output: str, message: str
) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    (tmp_path / "afile").write_text("not a folder", encoding="utf-8")
    before = sorted(tmp_path.rglob("*"))
    engine = ScriptedEngine()
    target = output if output.startswith("/") else tmp_path / output
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(NotebookExecutorError, match=message),
    ):
        ex.execute(tmp_path / "nb.py", target)
    assert engine.jobs == []
    assert sorted(tmp_path.rglob("*")) == before  # no runs folder, no missing folder made


def test_the_writability_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    (tmp_path / "out").mkdir()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine()) as ex:
        assert ex.execute(tmp_path / "nb.py", tmp_path / "out" / "x.ipynb")["status"] == "success"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["x.ipynb"]
