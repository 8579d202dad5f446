"""``resume`` on real kernels (SPEC section 21, docs/how-to/resume.md): a failed or timed-out
run goes on from its failed cell with the state before it read back, from the API, the command
line and MCP; ``gc`` frees the checkpoints' disk."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.checkpoints_support import (
    checkpoint_files,
    code_outputs,
    executed,
    expected_reuse,
    manifests,
)
from integration.mcp_client import stdio_session, structured
from notebook_executor import InvalidArgumentError, NotebookExecutor, RunNotFoundError

pytestmark = pytest.mark.kernel

#: Cell 0 appends to a log (a side effect outside the kernel), cell 2 fails.
FAILS = """\
# %%
import time
with open("log.txt", "a") as log:
    log.write("cell 0 ran\\n")
x = 10
time.sleep(0.6)

# %%
y = x * 2
time.sleep(0.6)

# %%
z = y + undefined_name

# %%
print(x, y, z)
"""

FIXED = FAILS.replace("undefined_name", "1")

#: Cell 2 runs longer than the cell timeout.
HANGS = FIXED.replace("z = y + 1", "time.sleep(120)\nz = y + 1")


def _counts(result: Mapping[str, Any]) -> list[Any]:
    return [c.get("execution_count") for c in executed(result)["cells"] if c["cell_type"] == "code"]


def _before(failed: int) -> Any:
    return lambda position: position < failed


def test_a_failed_run_resumed_after_the_fix_goes_on_from_its_failed_cell(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    notebook = tmp_path / "nb.py"
    notebook.write_text(FAILS, encoding="utf-8")
    first = executor.execute(notebook)
    assert first["status"] == "error" and first["error_kind"] == "cell_error"
    assert first["failed_cell"] is not None and first["failed_cell"]["index"] == 2
    written = [int(m["position"]) for m in manifests(executor.runs_dir, first["run_id"])]
    assert 0 in written

    notebook.write_text(FIXED, encoding="utf-8")
    resumed = executor.resume(first["run_id"])
    assert resumed["status"] == "success", resumed["failed_cell"]
    assert resumed["resumed_from"] == first["run_id"]
    assert resumed["run_id"] != first["run_id"]
    expected, _ = expected_reuse(resumed, written, _before(2))
    assert resumed["reused_cells"] == expected and expected[0] == 0, resumed["state_notes"]
    assert resumed["reused_from"] == first["run_id"]
    # The reused cells' outputs and counts are the failed run's, as they were.
    kept = len(expected)
    assert code_outputs(resumed)[:kept] == code_outputs(first)[:kept]
    assert _counts(resumed)[:kept] == _counts(first)[:kept]
    assert code_outputs(resumed)[-1] == [{"output_type": "stream", "text": "10 20 21\n"}]
    assert resumed["parameters"] == first["parameters"]
    # What the failed run did outside the kernel is not undone, nor done again.
    notes = " ".join(resumed["state_notes"])
    assert f"resumed run {first['run_id']} at cell 2" in notes
    assert "was not undone" in notes and "log.txt" in notes
    assert (tmp_path / "log.txt").read_text() == "cell 0 ran\n"
    # A fresh run gives the same outputs (the log aside, appended to again).
    fresh = executor.execute(notebook, checkpoints=False)
    assert code_outputs(fresh) == code_outputs(resumed)


def test_an_edit_before_the_failed_cell_goes_back_to_the_checkpoint_before_it(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    notebook = tmp_path / "nb.py"
    notebook.write_text(FAILS, encoding="utf-8")
    first = executor.execute(notebook)
    assert first["status"] == "error"
    written = [int(m["position"]) for m in manifests(executor.runs_dir, first["run_id"])]

    notebook.write_text(FIXED, encoding="utf-8")
    edit = {"index": 1, "source": "y = x * 3\ntime.sleep(0.6)"}
    resumed = executor.resume(first["run_id"], edits=[edit])  # type: ignore[list-item]
    assert resumed["status"] == "success", resumed["failed_cell"]
    expected, _ = expected_reuse(resumed, written, _before(1))
    assert resumed["reused_cells"] == expected == [0], resumed["state_notes"]
    assert resumed["edited_cells"] == [1]
    assert code_outputs(resumed)[-1] == [{"output_type": "stream", "text": "10 30 31\n"}]
    fresh = executor.execute(notebook, edits=[edit], checkpoints=False)  # type: ignore[list-item]
    assert code_outputs(fresh) == code_outputs(resumed)


def test_a_run_resumed_twice_goes_on_from_the_state_it_was_given(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    """A resumed run that fails again is resumed from the checkpoints it started from (its
    own, or those of the run it resumed): not from the first cell."""
    notebook = tmp_path / "nb.py"
    notebook.write_text(FAILS, encoding="utf-8")
    first = executor.execute(notebook)
    written = [int(m["position"]) for m in manifests(executor.runs_dir, first["run_id"])]
    notebook.write_text(FIXED.replace("print(x, y, z)", "print(x, y, z, w)"), encoding="utf-8")
    second = executor.resume(first["run_id"])
    assert second["status"] == "error" and second["failed_cell"]["index"] == 3  # type: ignore[index]
    expected, _ = expected_reuse(second, written, _before(2))
    assert second["reused_cells"] == expected

    notebook.write_text(FIXED, encoding="utf-8")
    third = executor.resume(second["run_id"])
    assert third["status"] == "success", third["failed_cell"]
    assert third["resumed_from"] == second["run_id"]
    assert third["reused_cells"][: len(expected)] == expected, third["state_notes"]
    assert (tmp_path / "log.txt").read_text() == "cell 0 ran\n"
    assert code_outputs(third)[-1] == [{"output_type": "stream", "text": "10 20 21\n"}]


def test_a_timed_out_run_resumes(executor: NotebookExecutor, tmp_path: Path) -> None:
    notebook = tmp_path / "nb.py"
    notebook.write_text(HANGS, encoding="utf-8")
    first = executor.execute(notebook, cell_timeout=3)
    assert first["error_kind"] == "timeout", first["failed_cell"]
    assert first["failed_cell"] is not None and first["failed_cell"]["index"] == 2
    written = [int(m["position"]) for m in manifests(executor.runs_dir, first["run_id"])]

    notebook.write_text(FIXED, encoding="utf-8")
    resumed = executor.resume(first["run_id"], cell_timeout=30)
    assert resumed["status"] == "success", resumed["failed_cell"]
    assert resumed["resumed_from"] == first["run_id"]
    expected, _ = expected_reuse(resumed, written, _before(2))
    assert resumed["reused_cells"] == expected and expected, resumed["state_notes"]
    assert code_outputs(resumed)[-1] == [{"output_type": "stream", "text": "10 20 21\n"}]


def test_resume_refuses_a_successful_run_and_an_unknown_one(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    notebook = tmp_path / "nb.py"
    notebook.write_text(FIXED, encoding="utf-8")
    done = executor.execute(notebook)
    assert done["status"] == "success"
    with pytest.raises(InvalidArgumentError, match="succeeded"):
        executor.resume(done["run_id"])
    with pytest.raises(RunNotFoundError):
        executor.resume("20200101T000000Z-nope-00000000")


def _cli(folder: Path, *argv: str) -> tuple[int, str, str]:
    """The command line, in a process of its own (``NOTEBOOK_EXECUTOR_NO_SERVER=1`` and the
    suite's runtime folder come with the suite's environment)."""
    done = subprocess.run(
        [sys.executable, "-m", "notebook_executor", *argv],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_cli_resume_exits_as_run_does_and_gc_frees_the_checkpoints(tmp_path: Path) -> None:
    runs = str(tmp_path / "runs")
    notebook = tmp_path / "nb.py"
    notebook.write_text(FAILS, encoding="utf-8")
    code, out, err = _cli(tmp_path, "run", "nb.py", "--json", "--runs-dir", runs)
    assert code == 1, err
    failed = json.loads(out)["run_id"]

    # Resumed without a fix: it fails again, exit 1, one JSON document.
    code, out, err = _cli(tmp_path, "resume", failed, "--json", "--runs-dir", runs)
    assert code == 1, err
    again = json.loads(out)
    assert again["resumed_from"] == failed and again["status"] == "error"
    assert again["reused_cells"][:1] == [0], again["state_notes"]

    notebook.write_text(FIXED, encoding="utf-8")
    code, out, err = _cli(tmp_path, "resume", failed, "--json", "--runs-dir", runs)
    assert code == 0, err
    resumed = json.loads(out)
    assert resumed["status"] == "success" and resumed["resumed_from"] == failed
    assert resumed["reused_cells"][:1] == [0]

    # A run that succeeded, and an unknown one: refused, exit 2, one line on stderr.
    for run_id in (resumed["run_id"], "20200101T000000Z-nope-00000000"):
        code, out, err = _cli(tmp_path, "resume", run_id, "--json", "--runs-dir", runs)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (code, out, err)

    # run --reuse and --no-checkpoints.
    code, out, err = _cli(tmp_path, "run", "nb.py", "--reuse", "--json", "--runs-dir", runs)
    assert code == 0, err
    assert json.loads(out)["reused_cells"][:1] == [0]
    before = checkpoint_files(tmp_path / "runs")
    code, out, err = _cli(
        tmp_path, "run", "nb.py", "--no-checkpoints", "--json", "--runs-dir", runs
    )
    assert code == 0, err
    assert manifests(tmp_path / "runs", json.loads(out)["run_id"]) == []
    assert checkpoint_files(tmp_path / "runs") == before

    # gc within the default limits frees nothing here; --max-bytes 0 frees every byte.
    code, out, err = _cli(tmp_path, "gc", "--json", "--runs-dir", runs)
    assert code == 0, err
    kept = json.loads(out)
    assert kept["freed_bytes"] == 0 and kept["checkpoints"] > 0 and kept["bytes"] > 0
    code, out, err = _cli(tmp_path, "gc", "--max-bytes", "0", "--json", "--runs-dir", runs)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["freed_bytes"] == kept["bytes"] > 0
    assert answer["checkpoints"] == answer["objects"] == answer["bytes"] == 0
    assert not [p for p in checkpoint_files(tmp_path / "runs") if p.suffix in (".pkl", ".json")]
    code, out, err = _cli(tmp_path, "run", "nb.py", "--reuse", "--json", "--runs-dir", runs)
    assert code == 0, err
    assert json.loads(out)["reused_cells"] == []


def test_mcp_execute_with_reuse_and_resume(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(FAILS, encoding="utf-8")

    async def scenario() -> None:
        async with stdio_session(tmp_path) as session:
            first = structured(await session.call_tool("execute", {"path": "nb.py"}))
            assert first["status"] == "error" and first["failed_cell"]["index"] == 2
            (tmp_path / "nb.py").write_text(FIXED, encoding="utf-8")
            resumed = structured(await session.call_tool("resume", {"run_id": first["run_id"]}))
            assert resumed["status"] == "success", resumed["failed_cell"]
            assert resumed["resumed_from"] == first["run_id"]
            assert resumed["reused_cells"][:1] == [0], resumed["state_notes"]
            assert any("was not undone" in note for note in resumed["state_notes"])
            again = structured(await session.call_tool("execute", {"path": "nb.py", "reuse": True}))
            assert again["status"] == "success"
            assert again["reused_cells"][:1] == [0] and again["reused_from"], again["state_notes"]
            refused = await session.call_tool("resume", {"run_id": again["run_id"]})
            assert refused.is_error
            assert "succeeded" in refused.content[0].text  # type: ignore[union-attr]

    anyio.run(scenario)
    assert (tmp_path / "log.txt").read_text() == "cell 0 ran\n"
