"""What a Dask worker sends back is scrubbed there, as a run record is (fake engine)."""

from __future__ import annotations

import base64
import types
from pathlib import Path

import nbformat

from notebook_executor._cluster import worker as _worker
from notebook_executor.engine import KernelChoice
from unit.fake_engine import FakeEngine

SECRET = "hunter2secretvalue"

SOURCE = """import os, sys
s = os.environ["TOK"]
sys.stdout.write("before " + s[:4])
sys.stdout.flush()
sys.stdout.write(s[4:] + " after")
"""


def test_the_worker_sends_back_a_scrubbed_notebook(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SOURCE)])
    # A payload that holds the secret only once decoded (as an image or a pickle would).
    payload = base64.b64encode(b"\x89PNG..." + SECRET.encode()).decode()
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "",
            outputs=[nbformat.v4.new_output("display_data", data={"image/png": payload})],
        )
    )
    nb.cells[1].metadata["tags"] = ["skip-execution"]  # keeps its stored output
    job = _worker.WorkerJob(
        run=0,
        topic="t",
        nb_json=nbformat.writes(nb),
        kernel=KernelChoice(name="python3", language="python", native=True),
        cwd=str(tmp_path),
        env={},
        masked={},
        cell_timeout=None,
        timeout=None,
    )
    plugin = types.SimpleNamespace(engine=FakeEngine)
    worker = types.SimpleNamespace(address="tcp://127.0.0.1:1", log_event=lambda *_: None)
    result = _worker._run(plugin, worker, job, tmp_path, {"TOK": SECRET})  # type: ignore[arg-type]
    back = nbformat.reads(result.nb_json, as_version=4)
    streams = [o for o in back.cells[0].outputs if o["output_type"] == "stream"]
    assert [o["text"] for o in streams] == ["before [secret TOK] after"]
    assert payload not in result.nb_json
    assert "withheld" in result.nb_json
    assert SECRET[4:] not in result.nb_json
