"""The typed public contract: the TypedDicts describe the real answers, one ``read_notebook``
returns nbformat's type, ``write_notebook`` takes plain dicts, and each argument error is a
named leaf of the error tree (and a ``ValueError``)."""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_type_hints

import nbformat
import pytest

import notebook_executor
from notebook_executor import (
    CellChange,
    EditConflictError,
    ExecutorClosedError,
    FailedCell,
    InvalidArgumentError,
    NotebookDiff,
    NotebookExecutor,
    NotebookExecutorError,
    NotebookSourceError,
    OutputCut,
    OutputPathError,
    ParameterInfo,
    RunDiff,
    RunResult,
    SearchHit,
    SearchQueryError,
    ValidateAnswer,
    ValidateProblem,
    read_notebook,
    write_notebook,
)
from notebook_executor._records.results import RESULT_KEYS
from unit.fake_engine import FakeEngine

NOTEBOOK = """\
# %% tags=["parameters"]
x = 1  # a number

# %%
import scrapbook as sb

sb.glue("doubled", x * 2)
print("found", x)

# %%
if x < 0:
    raise ValueError("negative")
"""


def _keys(kind: type) -> list[str]:
    return list(get_type_hints(kind))


@pytest.fixture
def ex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NotebookExecutor:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    return NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine())


def test_result_keys_are_the_typeddicts(ex: NotebookExecutor) -> None:
    good = ex.execute("nb.py")
    bad = ex.execute("nb.py", parameters={"x": -1})
    assert list(RESULT_KEYS) == _keys(RunResult)
    for result in (good, bad, ex.get_run(bad["run_id"]), *ex.runs()):
        assert list(result) == _keys(RunResult)
        json.dumps(result)
    assert good["failed_cell"] is None
    assert bad["failed_cell"] is not None
    assert list(bad["failed_cell"]) == _keys(FailedCell)
    assert [list(part) for part in good["output_cut"]] == []
    assert _keys(OutputCut) == ["index", "reason"]


def test_other_answers_have_their_typeddicts_keys(ex: NotebookExecutor) -> None:
    first = ex.execute("nb.py")
    second = ex.execute("nb.py", parameters={"x": 2})
    [info] = ex.inspect_parameters("nb.py").values()
    assert list(info) == _keys(ParameterInfo)
    [hit] = ex.search("found", limit=1)
    assert list(hit) == _keys(SearchHit)
    changed = ex.diff_notebooks(first["run_id"], second["run_id"], outputs=True)
    assert list(changed) == _keys(NotebookDiff)
    assert changed["cells"] and all(list(c) == _keys(CellChange) for c in changed["cells"])
    runs = ex.diff_runs(first["run_id"], second["run_id"])
    assert list(runs) == _keys(RunDiff)
    (Path("two.py")).write_text('# %% tags=["parameters"]\na = 1\n\n# %% tags=["parameters"]\n')
    verdict = ex.validate("two.py")
    assert list(verdict) == _keys(ValidateAnswer)
    assert verdict["problems"] and all(
        list(p) == _keys(ValidateProblem) for p in verdict["problems"]
    )


def test_the_types_are_exported() -> None:
    for kind in (RunResult, FailedCell, SearchHit, NotebookDiff, RunDiff, ValidateAnswer):
        assert kind.__name__ in notebook_executor.__all__


# -- one read_notebook, and a write_notebook that takes plain dicts ------------------------------


def test_one_read_notebook_returning_nbformats_node(ex: NotebookExecutor) -> None:
    top = read_notebook("nb.py")
    method = ex.read_notebook("nb.py")
    assert type(top) is nbformat.NotebookNode
    assert type(method) is nbformat.NotebookNode
    assert type(top.cells[0]) is nbformat.NotebookNode
    assert top == method
    nbformat.validate(top)


@pytest.mark.parametrize("target", ["x.ipynb", "x.py", "x.md"])
def test_write_notebook_takes_a_plain_dict(
    ex: NotebookExecutor, tmp_path: Path, target: str
) -> None:
    plain = json.loads(json.dumps(read_notebook("nb.py")))
    assert type(plain) is dict
    written = write_notebook(plain, tmp_path / target)
    assert written == tmp_path / target
    back = read_notebook(written)
    assert [c.source for c in back.cells] == [c["source"] for c in plain["cells"]]
    assert ex.write_notebook(plain, tmp_path / f"again-{target}") == tmp_path / f"again-{target}"


@pytest.mark.parametrize(
    "nb",
    [{"cells": [{"source": "x = 1"}]}, {"cells": ["x = 1"]}, {"cells": None}, ["x"]],
    ids=["no-cell-type", "cell-not-a-dict", "cells-not-a-list", "not-a-mapping"],
)
def test_write_notebook_refuses_what_is_not_a_notebook(tmp_path: Path, nb: Any) -> None:
    with pytest.raises(NotebookSourceError):
        write_notebook(nb, tmp_path / "x.py")
    assert not (tmp_path / "x.py").exists()


# -- the error tree: argument errors are leaves, and ValueErrors ---------------------------------


def _edit_conflict(ex: NotebookExecutor) -> Any:
    return ex.edit_cell("nb.py", 1, "y = 2", expect="not what is there")


def _closed(ex: NotebookExecutor) -> Any:
    ex.close()
    return ex.execute("nb.py")


LEAVES: dict[str, tuple[Callable[[NotebookExecutor], Any], type[NotebookExecutorError]]] = {
    "timeout": (lambda ex: ex.execute("nb.py", timeout=-1), InvalidArgumentError),
    "request": (lambda ex: ex.execute("nb.py", request=3), InvalidArgumentError),  # type: ignore[arg-type]
    "env": (lambda ex: ex.execute("nb.py", env="A=1"), InvalidArgumentError),  # type: ignore[arg-type]
    "cancel": (lambda ex: ex.execute("nb.py", cancel=True), InvalidArgumentError),  # type: ignore[arg-type]
    "output-suffix": (lambda ex: ex.execute("nb.py", output_path="x.txt"), OutputPathError),
    "output-is-source": (lambda ex: ex.execute("nb.py", output_path="nb.py"), OutputPathError),
    "max-workers": (lambda ex: ex.execute_many("nb.py", [{}], max_workers=0), InvalidArgumentError),
    "runs-status": (lambda ex: ex.runs(status="maybe"), InvalidArgumentError),
    "runs-limit": (lambda ex: ex.runs(limit=-1), InvalidArgumentError),
    "runs-since": (lambda ex: ex.runs(since="yesterday"), InvalidArgumentError),
    "search-empty": (lambda ex: ex.search("   "), SearchQueryError),
    "search-malformed": (lambda ex: ex.search("a OR"), SearchQueryError),
    "edit-index": (lambda ex: ex.edit_cell("nb.py", 99, "x = 1"), InvalidArgumentError),
    "edit-cell-type": (lambda ex: ex.insert_cell("nb.py", 0, "x", "nope"), InvalidArgumentError),
    "edit-conflict": (_edit_conflict, EditConflictError),
    "closed": (_closed, ExecutorClosedError),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LEAVES))
def test_each_argument_error_is_a_named_leaf(ex: NotebookExecutor, name: str) -> None:
    call, leaf = LEAVES[name]
    with ex, pytest.raises(NotebookExecutorError) as caught:
        call(ex)
    assert type(caught.value) is leaf
    if issubclass(leaf, InvalidArgumentError):
        assert isinstance(caught.value, ValueError)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is leaf and str(copy) == str(caught.value)


def test_invalid_argument_names_the_argument() -> None:
    with NotebookExecutor(engine=FakeEngine()) as ex, pytest.raises(InvalidArgumentError) as caught:
        ex.execute("nb.py", cell_timeout=0)
    assert caught.value.argument == "cell_timeout"
    assert pickle.loads(pickle.dumps(caught.value)).argument == "cell_timeout"


def test_input_errors_are_value_errors() -> None:
    for kind in (NotebookSourceError, notebook_executor.ParameterError, InvalidArgumentError):
        assert issubclass(kind, ValueError)
    assert not issubclass(notebook_executor.RunCancelled, Exception)
    assert issubclass(ExecutorClosedError, RuntimeError)


def test_no_bare_base_error_is_raised_in_the_package() -> None:
    # Every raise names a leaf: the base class is for catching, not for raising.
    root = Path(notebook_executor.__file__).parent
    raised = [
        f"{path.relative_to(root)}:{number}"
        for path in root.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "NotebookExecutorError(" in line and not line.lstrip().startswith("class ")
    ]
    assert raised == []


def test_event_is_still_accepted_as_cancel(ex: NotebookExecutor) -> None:
    assert ex.execute("nb.py", cancel=threading.Event())["status"] == "success"
