"""Kernel folders: only in this user's own private parent, locked while their owner lives,
swept once it is gone, never before; nothing else in the temporary directory is touched."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from notebook_executor._kernels import socket_paths
from notebook_executor._kernels import workdirs as _workdirs
from notebook_executor._kernels.workdirs import (
    KernelRootError,
    kernel_root,
    make_workdir,
    sweep_stale,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX locks")


@pytest.fixture
def tmp_root(short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(short_tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    return short_tmp_path


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


def _abandon(workdir: _workdirs.Workdir) -> None:
    """The owner dies without removing its folder: the OS drops the lock."""
    assert workdir._lock_fd is not None
    os.close(workdir._lock_fd)
    workdir._lock_fd = None


def test_a_workdir_is_private_in_a_private_parent_and_removed_with_its_lock(
    tmp_root: Path,
) -> None:
    workdir = make_workdir()
    root = tmp_root / f"notebook-executor-{os.getuid()}"
    assert workdir.path.parent == root
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(workdir.path.stat().st_mode) == 0o700
    (workdir.path / "connection.json").write_text("{}")
    workdir.remove()
    workdir.remove()
    assert not workdir.path.exists()
    assert root.is_dir()


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
        _abandon(workdir)
    _age(old.path, _workdirs.STALE_AFTER + 5)

    assert sweep_stale() == [old.path]
    assert not old.path.exists()
    assert young.path.is_dir()


def test_folders_that_are_not_ours_survive_the_sweep(tmp_root: Path) -> None:
    """A user's own ``nbx-...`` folder (the name older versions used) holding data, and
    anything else in the temporary directory or in the kernel parent that this library did
    not name, is left alone however old and unlocked it is."""
    users = tmp_root / "nbx-analysis"
    users.mkdir()
    (users / "results.csv").write_text("a,b\n1,2\n")
    other = tmp_root / "other-folder"
    other.mkdir()
    (tmp_root / "nbx-a-file").write_text("not a folder")
    root = kernel_root()
    assert root is not None
    stranger = root / "keep-me"
    stranger.mkdir()
    (stranger / "data.txt").write_text("mine")
    abandoned = make_workdir()
    _abandon(abandoned)
    for path in (users, other, tmp_root / "nbx-a-file", stranger, abandoned.path):
        _age(path, 3600)

    assert sweep_stale() == [abandoned.path]
    assert (users / "results.csv").read_text() == "a,b\n1,2\n"
    assert other.is_dir()
    assert (tmp_root / "nbx-a-file").is_file()
    assert (stranger / "data.txt").read_text() == "mine"


@pytest.mark.parametrize("kind", ["symlink", "file", "group-writable", "other-writable"])
def test_a_parent_that_is_not_provably_ours_is_refused_and_left_alone(
    tmp_root: Path, kind: str
) -> None:
    root = tmp_root / f"notebook-executor-{os.getuid()}"
    target = tmp_root / "target"
    target.mkdir(mode=0o700)
    (target / "k-abcdefgh").mkdir()
    (target / "k-abcdefgh" / "data.txt").write_text("not a kernel's")
    _age(target / "k-abcdefgh", 3600)
    if kind == "symlink":
        root.symlink_to(target)
    elif kind == "file":
        root.write_text("a file")
    else:
        root.mkdir(mode=0o700)
        root.chmod(0o720 if kind == "group-writable" else 0o702)
        (root / "k-abcdefgh").mkdir()
        _age(root / "k-abcdefgh", 3600)
    before = sorted(str(p) for p in tmp_root.rglob("*"))

    with pytest.raises(KernelRootError, match=r"refusing to keep kernel files in .*TMPDIR"):
        make_workdir()
    assert sweep_stale() == []
    assert sorted(str(p) for p in tmp_root.rglob("*")) == before
    assert (target / "k-abcdefgh" / "data.txt").read_text() == "not a kernel's"


def test_a_parent_of_another_user_is_refused(tmp_root: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("making a folder owned by another user needs root")
    root = tmp_root / f"notebook-executor-{os.getuid()}"
    root.mkdir(mode=0o700)
    os.chown(root, 12345, 12345)
    with pytest.raises(KernelRootError, match="belongs to user id 12345"):
        make_workdir()
    assert sweep_stale() == []


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
        assert path.parent == tmp_root / f"notebook-executor-{os.getuid()}"
        _age(path, 3600)
        assert sweep_stale() == []
        assert path.is_dir()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert path.is_dir()
    assert sweep_stale() == [path]
    assert not path.exists()


def test_a_tmpdir_too_long_for_sockets_gives_way_to_a_short_one(
    tmp_path: Path, short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = tmp_path.joinpath(*(["t" * 50] * 3))
    long.mkdir(parents=True)
    short = short_tmp_path / "s"
    short.mkdir()
    monkeypatch.setenv("TMPDIR", str(long))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(_workdirs, "SHORT_TEMP_DIRS", (str(tmp_path / "missing"), str(short)))
    assert _workdirs.kernel_base() == short
    workdir = make_workdir()
    try:
        assert workdir.path.parent == short / f"notebook-executor-{os.getuid()}"
        socket_path = os.fsencode(workdir.path / "k-65535")
        assert len(socket_path) <= socket_paths.MAX_SOCKET_PATH
    finally:
        workdir.remove()
    assert not list(long.iterdir())


def test_a_tmpdir_that_fits_is_kept(tmp_root: Path) -> None:
    assert _workdirs.kernel_base() == tmp_root


def test_no_temporary_folder_short_enough_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = tmp_path.joinpath(*(["t" * 50] * 3))
    long.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(long))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(_workdirs, "SHORT_TEMP_DIRS", (str(long),))
    with pytest.raises(KernelRootError, match=r"too long to hold kernel sockets.*set TMPDIR"):
        make_workdir()
    assert sweep_stale() == []  # sweeping never raises
