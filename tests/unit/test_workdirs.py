"""Kernel folders: locked while their owner lives, swept once it is gone, never before."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from notebook_executor._kernels import workdirs as _workdirs
from notebook_executor._kernels.workdirs import make_workdir, sweep_stale

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX locks")


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    return tmp_path


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_workdir_is_private_and_removed_with_its_lock(tmp_root: Path) -> None:
    workdir = make_workdir()
    assert workdir.path.parent == tmp_root
    assert workdir.path.name.startswith(_workdirs.PREFIX)
    assert stat.S_IMODE(workdir.path.stat().st_mode) == 0o700
    (workdir.path / "connection.json").write_text("{}")
    workdir.remove()
    workdir.remove()
    assert not workdir.path.exists()


def test_a_locked_workdir_is_never_swept(tmp_root: Path) -> None:
    workdir = make_workdir()
    _age(workdir.path, 3600)
    assert sweep_stale() == []
    assert workdir.path.is_dir()
    workdir.remove()


def test_an_abandoned_workdir_is_swept_once_old_enough(tmp_root: Path) -> None:
    young = make_workdir()
    old = make_workdir()
    for workdir in (young, old):
        (workdir.path / "stderr.log").write_text("log")
        # The owner dies without removing its folder: the OS drops the lock.
        assert workdir._lock_fd is not None
        os.close(workdir._lock_fd)
        workdir._lock_fd = None
    _age(old.path, _workdirs.STALE_AFTER + 5)
    other = tmp_root / "other-folder"
    other.mkdir()
    _age(other, 3600)
    (tmp_root / "nbx-a-file").write_text("not a folder")
    _age(tmp_root / "nbx-a-file", 3600)

    assert sweep_stale() == [old.path]
    assert not old.path.exists()
    assert young.path.is_dir()
    assert other.is_dir()
    assert (tmp_root / "nbx-a-file").is_file()


HOLDER = """
import sys, time
from notebook_executor._kernels.workdirs import make_workdir
workdir = make_workdir()
print(workdir.path, flush=True)
time.sleep(600)
"""


def test_a_workdir_of_a_killed_process_is_swept(tmp_root: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_root)},
    )
    try:
        assert holder.stdout is not None
        path = Path(holder.stdout.readline().strip())
        _age(path, 3600)
        assert sweep_stale() == []
        assert path.is_dir()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert path.is_dir()
    assert sweep_stale() == [path]
    assert not path.exists()
