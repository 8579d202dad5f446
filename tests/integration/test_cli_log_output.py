"""``notebook-executor run --log-output`` on a real kernel: outputs reach stderr as they arrive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel

NOTEBOOK = """# %%
import os, pathlib, time
print("first line", flush=True)
print("token is", os.environ["NBX_TEST_TOKEN"], flush=True)

# %%
deadline = time.monotonic() + 60
while not pathlib.Path("go").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
assert pathlib.Path("go").exists(), "the test never said go"
6 * 7
"""


def test_log_output_streams_while_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "live.py").write_text(NOTEBOOK)
    env = {**os.environ, "NBX_TEST_TOKEN": "s3cr3t-value"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "notebook_executor",
            "run",
            "live.py",
            "--log-output",
            "--secret",
            "NBX_TEST_TOKEN",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen: list[str] = []
        # The second cell waits for "go": the first cell's output must show before that.
        while True:
            line = process.stderr.readline()
            assert line, f"stderr ended before the first output: {seen}"
            seen.append(line)
            if "token is" in line:
                break
        (tmp_path / "go").touch()
        stdout, rest = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, rest
    shown = "".join(seen) + rest
    assert "first line\n" in shown
    assert "token is [secret NBX_TEST_TOKEN]\n" in shown
    assert "s3cr3t-value" not in shown
    assert "42\n" in rest
    assert json.loads(stdout)["status"] == "success"


def test_no_output_on_stderr_without_log_output(tmp_path: Path) -> None:
    (tmp_path / "quiet.py").write_text('# %%\nprint("hidden line")\n')
    done = subprocess.run(
        [sys.executable, "-m", "notebook_executor", "run", "quiet.py", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "hidden line" not in done.stderr + done.stdout


SPLIT = """# %%
import os, sys
s = os.environ["NBX_TEST_TOKEN"]
sys.stdout.write("before " + s[:4])
sys.stdout.flush()
sys.stdout.write(s[4:])
sys.stdout.flush()
sys.stdout.write(" after")

# %%
print("second cell")
"""


def test_log_output_masks_a_secret_written_in_pieces(tmp_path: Path) -> None:
    (tmp_path / "split.py").write_text(SPLIT)
    secret = "hunter2secretvalue"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "notebook_executor",
            "run",
            "split.py",
            "--log-output",
            "--secret",
            "NBX_TEST_TOKEN",
            "--json",
        ],
        cwd=tmp_path,
        env={**os.environ, "NBX_TEST_TOKEN": secret},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert secret not in done.stderr
    assert secret[4:] not in done.stderr
    # The tail held back for the next piece is shown when the cell ends, before the next cell.
    assert "before [secret NBX_TEST_TOKEN] after" in done.stderr
    assert done.stderr.index(" after") < done.stderr.index("second cell\n")
    assert json.loads(done.stdout)["status"] == "success"
