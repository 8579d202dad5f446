"""The engine's own cell loop keeps what nbclient keeps, on the same notebook and a real kernel.

The engine speaks the kernel protocol itself (``_kernels/cells.py``) instead of through nbclient.
Run one notebook both ways and compare cell by cell: execution counts, outputs (streams, results,
rich displays, display updates reaching back, both kinds of ``clear_output``, a tagged error
that does not stop the run), blank cells left alone, and the four execution timestamps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat import v4

from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

SOURCES: list[tuple[str, list[str]]] = [
    ('import sys\nprint("out")\nprint("err", file=sys.stderr)\n1 + 1', []),
    (
        "from IPython.display import HTML, clear_output, display\n"
        'handle = display(HTML("<b>one</b>"), display_id=True)',
        [],
    ),
    ('handle.update(HTML("<b>two</b>"))', []),
    ('print("gone")\nclear_output()\nprint("kept")', []),
    ('print("old")\nclear_output(wait=True)\nprint("new")', []),
    ('display({"text/plain": "raw", "application/json": {"a": [1]}}, raw=True)', []),
    ("", []),
    ('raise ValueError("tagged")', ["raises-exception"]),
    ('print("after")\n"last"', []),
]

TIMESTAMPS = {
    "iopub.status.busy",
    "iopub.execute_input",
    "shell.execute_reply",
    "iopub.status.idle",
}


def _notebook() -> nbformat.NotebookNode:
    nb: nbformat.NotebookNode = v4.new_notebook(
        cells=[
            v4.new_code_cell(source, metadata={"tags": tags} if tags else {})
            for source, tags in SOURCES
        ],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
    )
    return nb


def _stdout(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _outputs(cell: Any) -> list[dict[str, Any]]:
    """A cell's outputs as plain data, consecutive streams of one name joined (the run records
    keep streams joined; nbclient keeps each message)."""
    joined: list[dict[str, Any]] = []
    for output in json.loads(json.dumps(cell.get("outputs", []))):
        last = joined[-1] if joined else None
        if (
            output["output_type"] == "stream"
            and last is not None
            and last["output_type"] == "stream"
            and last["name"] == output["name"]
        ):
            last["text"] += output["text"]
        else:
            joined.append(output)
    return joined


def test_the_cell_loop_keeps_what_nbclient_keeps(tmp_path: Path) -> None:
    source = tmp_path / "protocol.ipynb"
    nbformat.write(_notebook(), source)

    theirs = _notebook()
    NotebookClient(theirs, kernel_name="python3", record_timing=True).execute()

    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        result = ex.execute(source)
    assert result["status"] == "success", result
    ours = nbformat.read(tmp_path / "runs" / result["output_path"], as_version=4)

    assert len(ours.cells) == len(theirs.cells) == len(SOURCES)
    for index, (mine, nbclients) in enumerate(zip(ours.cells, theirs.cells, strict=True)):
        assert mine.get("execution_count") == nbclients.get("execution_count"), index
        assert _outputs(mine) == _outputs(nbclients), index
        timing = set(mine.metadata.get("execution", {}))
        assert timing == set(nbclients.metadata.get("execution", {})), index
    # What the comparison covers is really there.
    assert [o["data"]["text/html"] for o in ours.cells[1].outputs] == ["<b>two</b>"]
    assert ours.cells[2].outputs == []
    assert _outputs(ours.cells[3]) == [
        {"output_type": "stream", "name": "stdout", "text": "kept\n"}
    ]
    assert _outputs(ours.cells[4]) == [{"output_type": "stream", "name": "stdout", "text": "new\n"}]
    assert ours.cells[6].get("execution_count") is None and ours.cells[6].outputs == []
    assert ours.cells[7].outputs[0]["ename"] == "ValueError"
    assert set(ours.cells[8].metadata["execution"]) == TIMESTAMPS
