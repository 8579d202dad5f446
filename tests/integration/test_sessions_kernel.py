"""Sessions on real kernels, through the Python API: open, run, fail, edit, rerun_from,
evaluate, close; limits, secrets, and no process left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from leaks import scan_tree
from notebook_executor import NotebookExecutor, NotebookExecutorError
from notebook_executor._kernels.checkpointed import CheckpointedKernel
from notebook_executor._kernels.kernel_engine import KernelEngine
from support import descendants, wait_gone

pytestmark = pytest.mark.kernel

NOTEBOOK = """\
# %% tags=["parameters"]
n = 3

# %% [markdown]
# Load, then compute.

# %%
import random
random.seed(n)
data = [random.random() for _ in range(n)]
print("loaded", len(data))

# %%
scale = 10

# %%
result = sum(data) * scale / zero

# %%
print(round(result, 6))
"""


def record_of(runs: Path, run_id: str) -> dict[str, Any]:
    path = next(runs.rglob(f"{run_id}.ipynb"))
    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["metadata"][
        "notebook_executor"
    ]
    return record


def test_open_run_fail_edit_rerun_evaluate_close(tmp_path: Path) -> None:
    path = tmp_path / "analysis.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs) as ex:
        with ex.open_session(path, parameters={"n": 4}, request="explore") as session:
            step = session.run()
            assert step["status"] == "error" and step["error_kind"] == "cell_error"
            assert step["failed_cell"] is not None and step["failed_cell"]["index"] == 4
            assert step["cells_run"] == [0, 2, 3, 4]
            assert step["outputs"][1] == {"index": 2, "text": "loaded 4\n"}
            assert step["cells_total"] == 5 and step["parameters"] == {"n": 4}
            assert session.evaluate("len(data), scale") == {
                "status": "success",
                "output": "(4, 10)\n",
                "error": None,
            }
            ex.edit_cell(path, 4, "result = sum(data) * scale")
            step = session.rerun_from(4)
            assert step["status"] == "success" and step["failed_cell"] is None
            assert step["restored"] in ("checkpoint", "replay")
            if step["restored"] == "replay":
                assert step["restore_reason"]
            expected = ex.execute(path, parameters={"n": 4})
            text = step["outputs"][-1]["text"]
            assert step["outputs"][-1]["index"] == 5
            fresh = ex.read_notebook(expected["output_path"]).cells
            assert text == "".join(o.get("text", "") for o in fresh[-1].outputs)
            json.dumps(step)
            assert len(json.dumps(step)) < 20_000
            failed = session.evaluate("1/0")
            assert failed["error"] is not None and failed["error"]["ename"] == "ZeroDivisionError"
            assert "\x1b" not in json.dumps(failed)
            run_id = session.run_id
        with pytest.raises(NotebookExecutorError, match="closed"):
            session.run()
        record = record_of(runs, run_id)
        kinds = [entry["kind"] for entry in record["session"]["log"]]
        assert kinds == ["step", "evaluate", "edit", "restore", "step", "evaluate", "close"]
        assert record["status"] == "success" and record["request"] == "explore"
        assert ex.get_run(run_id)["status"] == "success"
        assert run_id in [run["run_id"] for run in ex.runs()]
        md = next(runs.rglob(f"{run_id}.md")).read_text(encoding="utf-8")
        assert "## Session log" in md


def test_a_session_kernel_is_forked_from_the_executors_template(tmp_path: Path) -> None:
    """As ``execute``'s kernels: forked from the template the executor starts, not launched."""
    path = tmp_path / "analysis.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        ex.open_session(path, parameters={"n": 4}) as session,
    ):
        engine = ex._engine
        assert isinstance(engine, KernelEngine) and engine.pool is not None
        pool = engine.pool
        templates = {t.pid for t in (pool.starts.first, pool.starts.full) if t}
        kernel = session._kernel
        assert isinstance(kernel, CheckpointedKernel) and kernel._live is not None
        assert parent_pid(kernel._live.pid) in templates
        step = session.run(until=3)
        assert step["status"] == "success" and step["cells_run"] == [0, 2, 3]
        ex.edit_cell(path, 3, "scale = 20")
        step = session.rerun_from(3, until=3)
        assert step["status"] == "success" and step["restored"] is not None
        assert session.evaluate("scale")["output"] == "20\n"


def parent_pid(pid: int | None) -> int:
    """The parent of process ``pid``, from ``/proc``."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_a_timeout_ends_the_step_and_the_next_step_rebuilds_the_state(tmp_path: Path) -> None:
    path = tmp_path / "slow.py"
    path.write_text(
        "# %%\nx = 41\n\n# %%\nimport time\ntime.sleep(60)\n\n# %%\nprint(x + 1)\n",
        encoding="utf-8",
    )
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        session = ex.open_session(path, cell_timeout=2)
        step = session.run()
        assert step["status"] == "error" and step["error_kind"] == "timeout"
        assert step["failed_cell"] is not None and step["failed_cell"]["index"] == 1
        ex.edit_cell(path, 1, "pass")
        step = session.rerun_from(1)
        assert step["status"] == "success"
        assert step["outputs"][-1] == {"index": 2, "text": "42\n"}
        session.close()


def test_a_notebook_with_threads_of_its_own_is_replayed_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "threads.py"
    path.write_text(
        "# %%\nimport threading, time\nstop = threading.Event()\n"
        "threading.Thread(target=stop.wait, daemon=True).start()\ntime.sleep(0.5)\n\n"
        "# %%\ntime.sleep(0.5)\nx = 1\n\n# %%\nprint(x)\n",
        encoding="utf-8",
    )
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex, ex.open_session(path) as session:
        assert session.run()["status"] == "success"
        assert session.checkpoints == []
        step = session.rerun_from(2)
        assert step["restored"] == "replay" and step["cells_run"] == [0, 1, 2]
        assert step["restore_reason"] is not None
        assert step["restore_reason"].startswith("no checkpoint after cell 1: ")
        assert "thread" in step["restore_reason"]
        assert step["outputs"][-1] == {"index": 2, "text": "1\n"}


def test_secrets_reach_the_kernel_and_no_file_or_answer(tmp_path: Path) -> None:
    secret = "session-secret-value-4711"
    path = tmp_path / "secret.py"
    path.write_text(
        "# %%\nimport os\ntoken = os.environ['API_TOKEN']\nprint(token)\n", encoding="utf-8"
    )
    runs = tmp_path / "runs"
    with (
        NotebookExecutor(runs_dir=runs) as ex,
        ex.open_session(path, secrets={"API_TOKEN": secret}) as session,
    ):
        step = session.run()
        answer = session.evaluate("print(token[:3] + token[3:]); token")
        assert step["status"] == "success"
        assert secret not in json.dumps(step) and secret not in json.dumps(answer)
    assert scan_tree(runs, {"API_TOKEN": secret}) == {}


def test_close_and_executor_shutdown_leave_no_process(tmp_path: Path) -> None:
    path = tmp_path / "nb.py"
    path.write_text("# %%\nimport subprocess\nx = 1\n", encoding="utf-8")
    before = set(descendants(os.getpid()))
    ex = NotebookExecutor(runs_dir=tmp_path / "runs")
    first = ex.open_session(path)
    first.run()
    second = ex.open_session(path, idle_timeout=None)
    second.run()
    started = set(descendants(os.getpid())) - before
    assert started
    first.close()
    ex.close()
    assert second.closed
    assert wait_gone(started) == set()
    log = record_of(tmp_path / "runs", second.run_id)["session"]["log"]
    assert log[-1] == {**log[-1], "kind": "close", "why": "its executor was closed"}


def test_rerun_from_past_the_cells_run_runs_on_without_a_restore(tmp_path: Path) -> None:
    # Issue 33, item 6: the state after run(until=1) is the start of the one rerun_from(3)
    # needs; the cells missing run on in it, in the same process, with no restore.
    path = tmp_path / "nb.py"
    path.write_text(
        "# %%\nimport os\na = 1\n\n# %%\nprint(os.getpid())\n\n# %%\nc = a + 2\n\n"
        "# %%\nprint(c, os.getpid())\n",
        encoding="utf-8",
    )
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex, ex.open_session(path) as session:
        pid = session.run(until=1)["outputs"][-1]["text"].strip()
        step = session.rerun_from(3)
        assert step["restored"] is None and step["cells_run"] == [2, 3]
        assert step["outputs"][-1] == {"index": 3, "text": f"3 {pid}\n"}
