"""Papermill's metadata on our runs, read back by scrapbook, on real kernels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
import scrapbook as sb
from dateutil.parser import isoparse  # type: ignore[import-untyped]

from notebook_executor import NotebookExecutor
from support import failed_cell

pytestmark = pytest.mark.kernel


def _notebook(path: Path, fail: bool) -> Path:
    v4 = nbformat.v4
    params = v4.new_code_cell("a = 1\nlabel = 'x'")
    params.metadata["tags"] = ["parameters"]
    cells = [
        v4.new_markdown_cell("# Title"),
        params,
        v4.new_code_cell("import scrapbook as sb\nsb.glue('double', a * 2)"),
        v4.new_code_cell("raise ValueError('boom')" if fail else "sb.glue('label', label)"),
        v4.new_markdown_cell("after"),
        v4.new_code_cell("sb.glue('late', 1)"),
    ]
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    nbformat.write(nb, path)
    return path


#: Options of the tier's ``executor`` fixture: a kernel started per run, none kept warm.
EXECUTOR_OPTIONS = {"warm_kernels": 0}


def _papermill(cell: Any) -> dict[str, Any]:
    return dict(cell.metadata["papermill"])


def test_success_run_reads_in_scrapbook(executor: NotebookExecutor, tmp_path: Path) -> None:
    source = _notebook(tmp_path / "ok.ipynb", fail=False)
    result = executor.execute(source, parameters={"a": 5})
    assert result["status"] == "success"
    book = sb.read_notebook(result["output_path"])
    assert book.parameters == {"a": 5}
    assert book.scraps.data_dict == {"double": 10, "label": "x", "late": 1}
    nb = book.node
    # The injected cell sits after the parameters cell, tagged as papermill tags it.
    assert nb.cells[2].metadata["tags"] == ["injected-parameters"]
    timing = book.cell_timing
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    assert [i for i, t in enumerate(timing) if t is not None] == code
    assert all(timing[i] > 0 for i in code)
    meta = nb.metadata["papermill"]
    assert meta["parameters"] == {"a": 5}
    assert meta["default_parameters"] == {"a": 1, "label": "x"}
    record = nb.metadata["notebook_executor"]
    # The paths as the record shows them (never an absolute home path).
    assert meta["input_path"] == record["notebook"] and meta["input_path"].endswith("ok.ipynb")
    assert meta["output_path"] == record["output_path"]
    assert meta["exception"] is None
    assert meta["environment_variables"] == {}
    assert meta["version"] == __import__("papermill").__version__
    start, end = isoparse(meta["start_time"]), isoparse(meta["end_time"])
    assert start.utcoffset() is not None and end >= start
    assert meta["duration"] == pytest.approx((end - start).total_seconds())
    for index in code:
        cell = _papermill(nb.cells[index])
        assert cell["status"] == "completed" and cell["exception"] is False
        began, ended = isoparse(cell["start_time"]), isoparse(cell["end_time"])
        assert start <= began <= ended <= end
        assert cell["duration"] == pytest.approx((ended - began).total_seconds(), abs=1e-5)
    assert {_papermill(c)["status"] for c in nb.cells if c.cell_type == "markdown"} == {"completed"}
    # Our own record stays beside papermill's.
    assert nb.metadata["notebook_executor"]["run_id"] == result["run_id"]


def test_failed_run_marks_failed_and_pending(executor: NotebookExecutor, tmp_path: Path) -> None:
    source = _notebook(tmp_path / "bad.ipynb", fail=True)
    result = executor.execute(source)
    assert result["status"] == "error" and failed_cell(result)["index"] == 3
    book = sb.read_notebook(result["output_path"])
    assert book.parameters == {}
    assert book.scraps.data_dict == {"double": 2}
    nb = book.node
    assert nb.metadata["papermill"]["exception"] is True
    statuses = [_papermill(cell)["status"] for cell in nb.cells]
    assert statuses == ["completed", "completed", "completed", "failed", "pending", "pending"]
    failed = _papermill(nb.cells[3])
    assert failed["exception"] is True and failed["duration"] > 0
    pending = _papermill(nb.cells[5])
    assert pending == {
        "exception": None,
        "start_time": None,
        "end_time": None,
        "duration": None,
        "status": "pending",
    }
    assert book.cell_timing[5] is None
    assert book.cell_timing[3] == failed["duration"]
