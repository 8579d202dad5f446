"""Cancelling a run from another thread (``execute(cancel=...)``) on a real kernel."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor.engine import RunCancelled
from support import failed_cell

pytestmark = pytest.mark.kernel


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_cancel_event_stops_the_kernel_and_records_the_run_cancelled(tmp_path: Path) -> None:
    pid_file = tmp_path / "kernel.pid"
    sleeping = tmp_path / "sleeping"
    (tmp_path / "slow.py").write_text(
        f"# %%\nimport os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n\n"
        f"# %%\nimport time\nopen({str(sleeping)!r}, 'w').close()\ntime.sleep(600)\n\n"
        "# %%\nprint('never')\n",
        encoding="utf-8",
    )
    cancel = threading.Event()
    completed: list[tuple[int, int]] = []
    first_done = threading.Event()

    def on_cell(done: int, total: int) -> None:
        completed.append((done, total))
        first_done.set()

    def cancel_once_started() -> None:
        # Once cell 0 is reported done (its pid file can exist while it still runs, and a
        # cancel then stops cell 0), and cell 1 has begun its sleep.
        first_done.wait(timeout=120)
        deadline = time.monotonic() + 120
        while not sleeping.exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # a poll of the event, with a deadline
        cancel.set()

    watcher = threading.Thread(target=cancel_once_started)
    watcher.start()
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        with pytest.raises(RunCancelled):
            ex.execute(tmp_path / "slow.py", on_cell=on_cell, cancel=cancel)
        watcher.join()
        (run,) = ex.runs()
        assert (run["status"], run["error_kind"]) == ("error", "cancelled")
        assert failed_cell(run)["index"] == 1
        assert run["cells_executed"] == 1
        assert completed == [(1, 3)]
        kernel = int(pid_file.read_text())
        deadline = time.monotonic() + 30
        while _alive(kernel) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(kernel)
        # The executor still runs notebooks after a cancelled run.
        (tmp_path / "quick.py").write_text("# %%\nx = 1\n", encoding="utf-8")
        assert ex.execute(tmp_path / "quick.py")["status"] == "success"


def test_ctrl_c_of_run_json_prints_the_cancelled_runs_result(tmp_path: Path) -> None:
    import json
    import signal
    import subprocess
    import sys

    started = tmp_path / "started"
    (tmp_path / "slow.py").write_text(
        f"# %%\nx = 1\n\n# %%\nimport time\nopen({str(started)!r}, 'w').close()\ntime.sleep(600)\n",
        encoding="utf-8",
    )
    # -X faulthandler: a host that does not end is made to print every thread's stack.
    command = [
        sys.executable, "-X", "faulthandler", "-m", "notebook_executor", "run", "slow.py", "--json"
    ]  # fmt: skip
    with subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as host:
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the slow cell did not start within 120 s"
        host.send_signal(signal.SIGINT)
        try:
            out, err = host.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            host.send_signal(signal.SIGABRT)
            out, err = host.communicate(timeout=30)
            pytest.fail(f"the host did not end within 60 s of SIGINT; its threads:\n{err}")
    assert host.returncode == 130, err
    result = json.loads(out)
    assert (result["status"], result["error_kind"]) == ("error", "cancelled")
    assert result["failed_cell"]["index"] == 1
    assert err.strip().splitlines()[-1] == "notebook-executor: error: interrupted"
