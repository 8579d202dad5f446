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
    (
        'sys.stdout.write("a")\nsys.stdout.flush()\n'
        'display({"text/plain": "shown"}, raw=True)\nprint("b", end="")',
        [],
    ),
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
    assert [o["output_type"] for o in ours.cells[9].outputs] == [
        "stream",
        "display_data",
        "stream",
    ]


#: A cell that counts what ``sys.stdout.flush()`` hands the IOPub thread, with nothing
#: written, then with something written.
_FLUSH_HOPS = """import sys
hops = []
thread = sys.stdout.pub_thread
schedule = thread.schedule
thread.schedule = lambda f: (hops.append(f), schedule(f))[1]
try:
    sys.stdout.flush()
    sys.stderr.flush()
    idle = len(hops)
    sys.stdout.write("written ")
    sys.stdout.flush()
    busy = len(hops) - idle
finally:
    thread.schedule = schedule
print(idle, busy > 0)
"""


def test_a_flush_with_nothing_written_waits_for_no_other_thread(tmp_path: Path) -> None:
    """ipykernel flushes both output streams twice per cell, written or not, each time
    waiting for its IOPub thread; the kernel skips that wait when nothing was written
    (``kernel_main._flush_only_what_was_written``), and flushes what was."""
    source = tmp_path / "flush.py"
    source.write_text("# %%\n" + _FLUSH_HOPS)
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        result = ex.execute(source)
    assert result["status"] == "success", result
    ours = nbformat.read(tmp_path / "runs" / result["output_path"], as_version=4)
    assert _outputs(ours.cells[0]) == [_stdout("written 0 True\n")]
