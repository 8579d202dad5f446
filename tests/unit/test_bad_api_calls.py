"""Calls of the public API with values of the wrong type raise the package's own errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError, RunNotFoundError
from notebook_executor.engine import ScriptedEngine

CALLS: dict[str, Callable[[NotebookExecutor], Any]] = {
    "runs-notebook-int": lambda ex: ex.runs(notebook=5),  # type: ignore[arg-type]
    "runs-notebook-list": lambda ex: ex.runs(notebook=["nb.py"]),  # type: ignore[arg-type]
    "search-notebook-int": lambda ex: ex.search("x", notebook=5),  # type: ignore[arg-type]
    "scraps-notebook-int": lambda ex: ex.scraps(notebook=5),  # type: ignore[arg-type]
    "scraps-notebook-dict": lambda ex: ex.scraps(notebook={"a": 1}),  # type: ignore[arg-type]
    "get-run-list": lambda ex: ex.get_run([]),  # type: ignore[arg-type]
    "get-run-int": lambda ex: ex.get_run(7),  # type: ignore[arg-type]
    "get-run-none": lambda ex: ex.get_run(None),  # type: ignore[arg-type]
    "diff-runs-none": lambda ex: ex.diff_runs(None, "x"),  # type: ignore[arg-type]
    "collect-outputs-int": lambda ex: ex.collect_outputs(123),  # type: ignore[arg-type]
    "collect-outputs-none": lambda ex: ex.collect_outputs(None),  # type: ignore[arg-type]
    "diff-notebooks-none": lambda ex: ex.diff_notebooks(None, "nb.py"),  # type: ignore[arg-type]
    "diff-notebooks-int": lambda ex: ex.diff_notebooks("nb.py", 3),  # type: ignore[arg-type]
    "validate-int": lambda ex: ex.validate(123),  # type: ignore[arg-type]
    "validate-none": lambda ex: ex.validate(None),  # type: ignore[arg-type]
    # A JSON "\ud800" is a lone surrogate: no environment can hold it (it ended kernel_died).
    "env-lone-surrogate": lambda ex: ex.execute("nb.py", env={"X": "a\ud800"}),
    "env-name-lone-surrogate": lambda ex: ex.execute("nb.py", env={"\ud800": "a"}),
    "session-env-lone-surrogate": lambda ex: ex.open_session("nb.py", env={"X": "\ud800"}),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_wrongly_typed_argument_raises_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.py").write_text("# %%\nx = 1\n", encoding="utf-8")
    engine = ScriptedEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        ex.execute("nb.py")  # a catalog with a run in it
        with pytest.raises(NotebookExecutorError) as caught:
            CALLS[name](ex)
    assert "\n" not in str(caught.value)
    assert "Traceback" not in str(caught.value)
    # A named leaf of the tree, never the bare base class; bad input is also a ValueError.
    assert type(caught.value) is not NotebookExecutorError
    assert isinstance(caught.value, (ValueError, LookupError))
    if name.startswith(("get-run", "diff-runs")):
        assert isinstance(caught.value, RunNotFoundError)
    assert len(engine.jobs) == 1
