"""Nothing lost: a full disk, a session's host killed, on real kernels and a real file system.

The full disk is a real one: a small ``tmpfs`` mounted for the test (which needs the right to
mount, as root has; elsewhere the test is skipped), holding the runs folder. A run whose
outputs do not fit ends with a typed error holding its result, a record that says how it
ended (not ``interrupted``), and on the command line one line on stderr and exit status 2.

A session's host process SIGKILLed while the session is open: the session's run becomes
``interrupted``, as a killed run does, and no longer shows as the ``success`` of its last step.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_executor import (
    NotebookExecutor,
    RecordWriteError,
    RunsDirError,
)
from notebook_executor._records.store import RunStore, read_run_file
from support import wait_gone

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs, /proc"),
]

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"

#: Three cells printing 900,000 characters each: 2.7 MB of record, on a 1 MB disk.
LOUD = """# %%
print("a" * 900_000)

# %%
print("b" * 900_000)

# %%
import scrapbook as sb
sb.glue("answer", 42)
print("c" * 900_000)
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs mounted at ``tmp_path / "disk"``, unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_at_the_end_of_a_run(small_disk: Path, tmp_path: Path) -> None:
    notebook = tmp_path / "loud.py"
    notebook.write_text(LOUD, encoding="utf-8")
    runs = small_disk / "runs"
    with NotebookExecutor(runs_dir=runs) as ex:
        with pytest.raises(RecordWriteError) as caught:
            ex.execute(notebook)
        error = caught.value
        assert isinstance(error, RunsDirError)
        assert isinstance(error, OSError)
        assert "No space left on device" in str(error)
        assert "\n" not in str(error)
        result = error.result
        assert (result["status"], result["error_kind"]) == ("success", None)
        assert result["cells_executed"] == 3
        assert result["scraps"] == {"answer": 42}
        # The record says how the run ended, and why its outputs are not there.
        record = read_run_file(RunStore(runs).path(result["run_id"])).record
        assert record["status"] == "success"
        assert record["duration_seconds"] == result["duration_seconds"] > 0
        assert "No space left on device" in record["record_error"]
        [row] = ex.runs()
        assert (row["status"], row["error_kind"]) == ("success", None)
        assert row["duration_seconds"] > 0
    # Another process, after a reindex too: not an interrupted run of 0.00 s.
    with NotebookExecutor(runs_dir=runs) as after:
        assert after.reindex() == 1
        [row] = after.runs()
        assert (row["status"], row["error_kind"], row["cells_executed"]) == ("success", None, 3)


def test_a_full_disk_on_the_command_line(small_disk: Path, tmp_path: Path) -> None:
    (tmp_path / "loud.py").write_text(LOUD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    argv = [sys.executable, "-m", "notebook_executor", "run", "loud.py"]
    argv += ["--runs-dir", str(small_disk / "runs")]
    for json_flag in ([], ["--json"]):
        done = subprocess.run(
            argv + json_flag, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "No space left on device" in line
        if json_flag:
            shown = json.loads(done.stdout)
            assert (shown["status"], shown["cells_executed"]) == ("success", 3)
        else:
            assert done.stdout == ""


def test_a_disk_full_before_a_run_begins(small_disk: Path, tmp_path: Path) -> None:
    notebook = tmp_path / "loud.py"
    notebook.write_text(LOUD, encoding="utf-8")
    runs = small_disk / "runs"
    runs.mkdir()
    with (small_disk / "filler").open("wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError:
            pass
    with NotebookExecutor(runs_dir=runs) as ex:
        with pytest.raises(RunsDirError, match="No space left on device") as caught:
            ex.execute(notebook)
        assert not isinstance(caught.value, RecordWriteError)  # nothing ran
    assert not list(runs.rglob("*.ipynb"))  # nothing half-written


# -- a session's host killed ------------------------------------------------------------------

SESSION_HOST = r"""
import sys, time
from notebook_executor import NotebookExecutor

runs_dir, notebook, ready = sys.argv[1:4]
with NotebookExecutor(runs_dir=runs_dir) as ex:
    session = ex.open_session(notebook)
    session.run(until=0)
    with open(ready, "w") as out:
        out.write(session.run_id)
    time.sleep(600)
"""


def test_a_session_whose_host_is_killed_is_interrupted(tmp_path: Path) -> None:
    notebook = tmp_path / "steps.py"
    notebook.write_text("# %%\nx = 1\n\n# %%\ny = x + 1\n", encoding="utf-8")
    runs, ready = tmp_path / "runs", tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    host = subprocess.Popen(
        [sys.executable, "-c", SESSION_HOST, str(runs), str(notebook), str(ready)],
        cwd=tmp_path,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() or not ready.read_text():
            assert host.poll() is None, "the host ended before it was killed"
            assert time.monotonic() < deadline, "the session's first step never ended"
            time.sleep(0.05)
        run_id = ready.read_text()
        with NotebookExecutor(runs_dir=runs) as reader:
            # Open, its host alive: how its last step ended.
            assert reader.get_run(run_id)["status"] == "success"
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=60)
    assert wait_gone({host.pid}) == set()
    with NotebookExecutor(runs_dir=runs) as reader:
        [row] = reader.runs()
        assert (row["run_id"], row["status"], row["error_kind"]) == (
            run_id,
            "error",
            "interrupted",
        )
        assert reader.get_run(run_id)["error_kind"] == "interrupted"
        assert reader.reindex() == 1
        assert reader.runs()[0]["error_kind"] == "interrupted"
