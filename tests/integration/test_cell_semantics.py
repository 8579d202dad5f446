"""What a run does with tagged cells, display updates and outputs, on either kind of kernel.

The interpreter's own kernel and an installed kernelspec must give the same notebook: each
output in its own cell, tagged cells skipped or allowed to fail, display updates reaching back to
earlier cells, and nothing after a failing cell ever running, not even as a side effect.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from notebook_executor import NotebookExecutor
from support import failed_cell

pytestmark = pytest.mark.kernel

CELLS = """# %%
print("cell one")

# %% tags=["raises-exception"]
raise ValueError("allowed to fail")

# %% tags=["skip-execution"]
open("skipped.marker", "w").close()

# %%
handle = display("first", display_id=True)

# %%
handle.update("second")

# %%
from IPython.display import clear_output

print("gone")
clear_output(wait=True)

# %%
print("kept")

# %%
for i in range(3):
    print(i)

# %%
raise RuntimeError("stop here")

# %%
open("after.marker", "w").close()

# %%
print("never")
"""

FAILING_CELL = 8


@pytest.fixture(params=["native", "kernelspec"])
def kernel_name(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str | None:
    """None for this interpreter's kernel, or an installed kernelspec of the same Python."""
    if request.param == "native":
        return None
    spec = tmp_path / "jupyter" / "kernels" / "other-python"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Other Python", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "other-python"


@pytest.fixture
def ex(tmp_path: Path, kernel_name: str | None) -> Iterator[NotebookExecutor]:
    executor = NotebookExecutor(runs_dir=tmp_path / "runs", kernel_name=kernel_name)
    try:
        yield executor
    finally:
        executor.close()


def texts(cell: dict[str, Any]) -> str:
    return "".join(o["text"] for o in cell["outputs"] if o["output_type"] == "stream")


def test_tagged_cells_displays_and_a_failure(
    ex: NotebookExecutor, tmp_path: Path, kernel_name: str | None
) -> None:
    folder = tmp_path / "nb"
    folder.mkdir()
    source = folder / "cells.py"
    source.write_text(CELLS)

    result = ex.execute(source)

    assert result["status"] == "error", result
    assert result["error_kind"] == "cell_error"
    assert failed_cell(result)["index"] == FAILING_CELL
    assert failed_cell(result)["ename"] == "RuntimeError"
    assert failed_cell(result)["evalue"] == "stop here"
    # Neither the skipped cell nor anything after the failing one ran.
    assert not (folder / "skipped.marker").exists()
    assert not (folder / "after.marker").exists()

    saved = nbformat.read(result["output_path"], as_version=4)
    assert saved.metadata["notebook_executor"]["kernel"]["name"] == (kernel_name or "python3")
    cells = saved.cells
    assert texts(cells[0]) == "cell one\n"
    allowed = cells[1]["outputs"]
    assert [o["output_type"] for o in allowed] == ["error"]
    assert allowed[0]["evalue"] == "allowed to fail"
    assert cells[2]["outputs"] == []
    assert cells[2]["execution_count"] is None
    # The update of the next cell reaches back into the display of this one.
    assert [o["data"]["text/plain"] for o in cells[3]["outputs"]] == ["'second'"]
    assert cells[4]["outputs"] == []
    # A clear_output(wait=True) waits for an output of its own cell, never the next one's.
    assert texts(cells[5]) == "gone\n"
    assert texts(cells[6]) == "kept\n"
    assert texts(cells[7]) == "0\n1\n2\n"
    assert [o["ename"] for o in cells[8]["outputs"]] == ["RuntimeError"]
    for never in cells[9:]:
        assert never["outputs"] == []
        assert never["execution_count"] is None
        assert never["metadata"]["notebook_executor"]["status"] == "not_run"

    counts = [c["execution_count"] for c in cells[:9] if c["execution_count"] is not None]
    assert counts == sorted(counts)
    assert len(counts) == len(set(counts)) == 8
    for index in (0, 1, 3, 4, 5, 6, 7):
        assert cells[index]["metadata"]["notebook_executor"]["status"] == "completed"
        timing = cells[index]["metadata"]["execution"]
        assert timing["iopub.status.busy"] <= timing["shell.execute_reply"]
        assert timing["iopub.status.busy"] <= timing["iopub.status.idle"]


def test_many_quick_cells_keep_their_own_outputs(ex: NotebookExecutor, tmp_path: Path) -> None:
    source = tmp_path / "quick.py"
    source.write_text(
        '# %% tags=["parameters"]\nn = 0\n'
        + "".join(f"\n# %%\nprint({i} + n)\nn\n" for i in range(30))
    )

    result = ex.execute(source, parameters={"n": 100})

    assert result["status"] == "success", result
    cells = nbformat.read(result["output_path"], as_version=4).cells
    code = [c for c in cells if "print(" in "".join(c["source"])]
    assert len(code) == 30
    for i, cell in enumerate(code):
        assert texts(cell) == f"{i + 100}\n"
        results = [o for o in cell["outputs"] if o["output_type"] == "execute_result"]
        assert [o["data"]["text/plain"] for o in results] == ["100"]
        assert results[0]["execution_count"] == cell["execution_count"]
