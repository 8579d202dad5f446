"""A session's step on a real kernel goes through the cell loop of runs: Ctrl-C stops the cell
(it does not run on in the kernel), the interrupted step is in the session's log, a dead
kernel's exit status is reported, and a kernel that cannot start is a
:class:`~notebook_executor.KernelStartError`, as a run reports it ``kernel_died``."""

from __future__ import annotations

import _thread
import json
import sys
import threading
import time
from pathlib import Path

import pytest

from notebook_executor import KernelStartError, NotebookExecutor
from support import failed_cell

pytestmark = pytest.mark.kernel

SLOW = """\
# %%
import pathlib, time
log = pathlib.Path("cells.log")

# %%
with log.open("a") as out:
    out.write("slow started\\n")
time.sleep(4)
finished = True
with log.open("a") as out:
    out.write("slow finished\\n")

# %%
print("after")
"""


def test_ctrl_c_during_a_step_stops_the_cell_and_logs_the_step(tmp_path: Path) -> None:
    path = tmp_path / "slow.py"
    path.write_text(SLOW, encoding="utf-8")
    log = tmp_path / "cells.log"
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        ex.open_session(path, cwd=tmp_path) as session,
    ):
        session.run(until=0)

        def interrupt_when_started() -> None:
            # Once the slow cell has logged its start (it then sleeps for seconds).
            deadline = time.monotonic() + 60
            while (not log.exists() or log.read_text() != "slow started\n") and (
                time.monotonic() < deadline
            ):
                time.sleep(0.02)  # a poll of the event, with a deadline
            _thread.interrupt_main()

        interrupter = threading.Thread(target=interrupt_when_started)
        interrupter.start()
        began = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                session.run()
        finally:
            interrupter.join()
        assert time.monotonic() - began < 4, "the step waited for the cell"
        # The cell does not run on in the kernel: an evaluation runs after whatever the kernel
        # is doing, so a cell running on would have finished (and logged it) before it.
        assert session.evaluate("'finished' in dir()")["output"] == "False\n"
        assert log.read_text() == "slow started\n"
        # The next step runs the interrupted cell again, once, and the one after it.
        step = session.run()
        assert step["status"] == "success", step
        assert step["cells_run"][-2:] == [1, 2]
        assert log.read_text() == "slow started\nslow started\nslow finished\n"
        run_id = session.run_id
    [record] = (tmp_path / "runs").rglob(f"{run_id}.ipynb")
    session_record = json.loads(record.read_text(encoding="utf-8"))["metadata"][
        "notebook_executor"
    ]["session"]
    steps = [entry for entry in session_record["log"] if entry.get("kind") == "step"]
    interrupted = [entry for entry in steps if entry.get("status") == "cancelled"]
    assert len(interrupted) == 1 and interrupted[0]["failed_cell"] == 1, steps


def test_a_session_kernel_that_exits_reports_its_exit_status(tmp_path: Path) -> None:
    path = tmp_path / "exits.py"
    path.write_text("# %%\nx = 1\n\n# %%\nimport os\nos._exit(3)\n", encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        ran = ex.execute(path)
        with ex.open_session(path) as session:
            step = session.run()
            # The session stays usable: the next step rebuilds the state.
            assert session.evaluate("x")["output"] == "1\n"
    for result in (ran, step):
        assert result["error_kind"] == "kernel_died", result
        assert "exit status 3" in failed_cell(result)["evalue"]


def test_a_kernel_that_cannot_start_fails_open_session_with_kernel_start_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "jupyter" / "kernels" / "broken"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-c", "import sys; sys.exit(3)", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Broken", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    path = tmp_path / "nb.py"
    path.write_text("# %%\nx = 1\n", encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs", kernel_name="broken") as ex:
        result = ex.execute(path)
        assert result["status"] == "error" and result["error_kind"] == "kernel_died"
        with pytest.raises(KernelStartError, match="the kernel did not start"):
            ex.open_session(path)
