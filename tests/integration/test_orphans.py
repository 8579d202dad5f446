"""What a notebook starts dies with its kernel, even when the host is killed outright.

A host process runs a notebook that starts a child (``subprocess.Popen``), a
``multiprocessing`` worker and a grandchild (a shell's ``sleep &``, whose parent shell exits at
once), writes their pids to a file, then sleeps. The test SIGKILLs the host: every one of those
processes, and the kernel, must be gone within 10 s, with no new executor started meanwhile.
Kernels are either forked from the template (the template kills its kernels' sessions when the
host dies) or launched (the kernel kills its own session when its parent dies).

When neither could act (the template itself SIGKILLed, a launched kernel stopped), what is left
is killed by the next executor's start, from the record in the kernel's folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor
from support import SESSION_MARKER, alive, descendants, marked_processes, wait_gone

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, sessions"),
]

#: A notebook that starts a child, a multiprocessing worker and a grandchild, writes
#: ``kernel child worker grandchild`` pids to ``pidfile``, then sleeps.
SPAWNER = """# %% tags=["parameters"]
pidfile: str = ""

# %%
import multiprocessing
import os
import pathlib
import subprocess
import time

child = subprocess.Popen(["sleep", "600"])
worker = multiprocessing.Process(target=time.sleep, args=(600,))
worker.start()
shell = subprocess.run(
    ["sh", "-c", "sleep 600 > /dev/null 2>&1 & echo $!"], capture_output=True, text=True
)
grandchild = int(shell.stdout)
pids = f"{os.getpid()} {child.pid} {worker.pid} {grandchild}"
pathlib.Path(pidfile + ".tmp").write_text(pids)
os.replace(pidfile + ".tmp", pidfile)
time.sleep(600)
"""

HOST = r"""
import sys
from notebook_executor import NotebookExecutor
from notebook_executor._kernels.kernel_engine import KernelEngine

runs_dir, notebook, pidfile, mode = sys.argv[1:5]
with NotebookExecutor(runs_dir=runs_dir, engine=KernelEngine(fork=mode == "forked")) as ex:
    if mode == "forked":
        ex.prepare_kernel()
    ex.execute(notebook, parameters={"pidfile": pidfile})
"""


@pytest.fixture
def spawner(tmp_path: Path) -> Path:
    path = tmp_path / "spawner.py"
    path.write_text(SPAWNER)
    return path


def _start_host(tmp_path: Path, spawner: Path, mode: str) -> tuple[subprocess.Popen[bytes], Path]:
    pidfile = tmp_path / f"{mode}.pids"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path / "runs"), str(spawner), str(pidfile), mode],
        cwd=tmp_path,
    )
    return host, pidfile


def _wait_for_pids(host: subprocess.Popen[bytes], pidfile: Path) -> list[int]:
    deadline = time.monotonic() + 120
    while not pidfile.exists():
        assert host.poll() is None, "the host ended before it was killed"
        assert time.monotonic() < deadline, "the notebook never started its children"
        time.sleep(0.05)
    pids = [int(n) for n in pidfile.read_text().split()]
    assert len(pids) == 4 and all(alive(pid) for pid in pids), pids
    return pids


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


@pytest.fixture
def cleanup() -> Iterator[set[int]]:
    """Pids to SIGKILL at the end whatever happens, so a failing test leaves nothing."""
    pids: set[int] = set()
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["launched", "forked"])
def test_what_a_notebook_started_dies_with_its_killed_host(
    tmp_path: Path, spawner: Path, cleanup: set[int], mode: str
) -> None:
    host, pidfile = _start_host(tmp_path, spawner, mode)
    try:
        pids = _wait_for_pids(host, pidfile)
        cleanup.update(pids)
        family = descendants(host.pid)
        cleanup.update(family)
        kernel = pids[0]
        assert (_parent(kernel) == host.pid) == (mode == "launched")
    finally:
        host.kill()
        host.wait(timeout=60)
    assert wait_gone({*pids, *family}) == set()


def _sweep_by_a_new_executor(tmp_path: Path, spawner: Path) -> None:
    """A new executor's start sweeps what killed hosts left; its first run then ends."""
    quick = tmp_path / "quick.py"
    quick.write_text("# %%\nx = 1\n")
    with NotebookExecutor(runs_dir=tmp_path / "runs-after") as after:
        assert after.execute(quick)["status"] == "success"


@pytest.mark.parametrize("mode", ["launched", "forked"])
def test_what_no_one_killed_is_swept_at_the_next_start(
    tmp_path: Path, spawner: Path, cleanup: set[int], mode: str
) -> None:
    host, pidfile = _start_host(tmp_path, spawner, mode)
    try:
        pids = _wait_for_pids(host, pidfile)
        cleanup.update(pids)
        kernel = pids[0]
        # Neither the template nor the kernel may act: the host is frozen, then the template
        # (forked) is SIGKILLed, or the kernel (launched) is frozen before the host goes.
        os.kill(host.pid, signal.SIGSTOP)
        if mode == "forked":
            template = _parent(kernel)
            assert template != host.pid
            os.kill(template, signal.SIGKILL)
        else:
            os.kill(kernel, signal.SIGSTOP)
    finally:
        host.kill()
        host.wait(timeout=60)
    left = {pid for pid in pids[1:] if alive(pid)}
    assert left, "nothing was left to sweep: the scenario did not happen"
    _sweep_by_a_new_executor(tmp_path, spawner)
    assert wait_gone(pids) == set()


#: A notebook whose cell starts shells that leave a ``sleep &`` behind, one after another, as
#: fast as it can, until its kernel dies: the cell still runs while the kernel kills its session.
FORKER = """# %% tags=["parameters"]
pidfile: str = ""

# %%
import os
import pathlib
import subprocess

started = 0
while True:
    subprocess.run(["sh", "-c", "sleep 600 > /dev/null 2>&1 &"])
    started += 1
    if started == 3:
        pathlib.Path(pidfile + ".tmp").write_text(str(os.getpid()))
        os.replace(pidfile + ".tmp", pidfile)
"""


@pytest.mark.parametrize("mode", ["launched", "forked"])
def test_a_cell_that_keeps_starting_processes_leaves_none_when_the_host_is_killed(
    tmp_path: Path, cleanup: set[int], mode: str
) -> None:
    """The kernel's cell runs on while its parent watch kills the session: whatever the cell
    starts between the last pass over /proc and the kernel's exit must die too."""
    token = f"forker-{os.getpid()}-{mode}"
    notebook = tmp_path / "forker.py"
    notebook.write_text(FORKER)
    pidfile = tmp_path / f"{mode}.pid"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path / "runs"), str(notebook), str(pidfile), mode],
        cwd=tmp_path,
        env={**os.environ, SESSION_MARKER: token},
    )
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists():
            assert host.poll() is None, "the host ended before it was killed"
            assert time.monotonic() < deadline, "the notebook never started its shells"
            time.sleep(0.05)
        time.sleep(0.5)
    finally:
        host.kill()
        host.wait(timeout=60)
    deadline = time.monotonic() + 10
    left = marked_processes(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = marked_processes(token)
    cleanup.update(left)
    assert left == {}
