"""A kernel session recorded in its folder is killed once the folder's owner is gone, and only
processes that are provably that kernel's: never a reused pid, never a process without the
kernel's identifier, never while the owner lives."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_executor._kernels.inside import sessions
from notebook_executor._kernels.workdirs import Workdir, make_workdir, sweep_stale
from support import alive, wait_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, sessions")


@pytest.fixture
def tmp_root(short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``$TMPDIR`` of the test's own, short enough to hold sockets: with a longer one the
    kernel folders would go in the machine's ``/tmp``, where another suite's or a chaos run's
    stale folders would be swept by the test (seen with the CI sessions run side by side)."""
    monkeypatch.setenv("TMPDIR", str(short_tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    return short_tmp_path


@pytest.fixture
def session(tmp_path: Path) -> Iterator[tuple[int, list[int], str]]:
    """A session like a kernel's: a leader and a child of its, carrying an identifier.

    Yields ``(leader, [leader, child], identifier)``; whatever is left is killed afterwards.
    """
    identifier = os.urandom(8).hex()
    pidfile = tmp_path / "child.pid"
    leader = subprocess.Popen(
        ["sh", "-c", f"sleep 60 & echo $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait"],
        start_new_session=True,
        env={**os.environ, sessions.KERNEL_ID: identifier},
    )
    deadline = time.monotonic() + 10
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    pids = [leader.pid, int(pidfile.read_text())]
    yield leader.pid, pids, identifier
    sessions.kill_sessions([leader.pid])
    with contextlib.suppress(ChildProcessError):
        leader.wait(timeout=10)


@pytest.fixture
def swept(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """What each sweep of a recorded session killed, as it returns it: it returns once its
    signals are sent, so an empty list means no process was signalled (nothing to wait for)."""
    killed: list[list[int]] = []
    real = sessions.sweep

    def spy(leader: int, started: int, ids: Any) -> list[int]:
        killed.append(real(leader, started, ids))
        return killed[-1]

    monkeypatch.setattr(sessions, "sweep", spy)
    return killed


def _abandon(workdir: Workdir) -> None:
    """The owner dies without removing its folder: the OS drops the lock."""
    assert workdir._lock_fd is not None
    os.close(workdir._lock_fd)
    workdir._lock_fd = None


def _record(workdir: Workdir, leader: int, ids: list[str], *, started: int | None = None) -> None:
    """Record ``leader``'s session as the host does; ``started`` overrides its start time."""
    workdir.record_session(leader, ids)
    if started is not None:
        record = workdir.path / "session.json"
        record.write_text(json.dumps({**json.loads(record.read_text()), "started": started}))


def test_a_recorded_session_is_killed_once_its_owner_is_gone(
    tmp_root: Path, session: tuple[int, list[int], str]
) -> None:
    leader, pids, identifier = session
    workdir = make_workdir()
    _record(workdir, leader, [identifier])
    # The owner lives: nothing is touched, however the sweep is asked.
    assert sweep_stale() == []
    assert all(alive(pid) for pid in pids)
    _abandon(workdir)
    # Young as it is, a folder holding a record and no lock was left by a dead owner.
    assert sweep_stale() == [workdir.path]
    assert wait_gone(pids) == set()


def test_a_reused_pid_is_never_hit(
    tmp_root: Path, session: tuple[int, list[int], str], swept: list[list[int]]
) -> None:
    leader, pids, identifier = session
    workdir = make_workdir()
    started = sessions.start_time(leader)
    assert started is not None
    # The record names a process that started earlier than the one now holding that pid.
    _record(workdir, leader, [identifier], started=started - 1)
    _abandon(workdir)
    assert sweep_stale() == [workdir.path]
    assert swept == [[]]
    assert all(alive(pid) for pid in pids)


def test_processes_without_the_kernel_identifier_are_spared(
    tmp_root: Path, session: tuple[int, list[int], str], swept: list[list[int]]
) -> None:
    leader, pids, _ = session
    workdir = make_workdir()
    _record(workdir, leader, ["some-other-kernel"])
    _abandon(workdir)
    assert sweep_stale() == [workdir.path]
    assert swept == [[]]
    assert all(alive(pid) for pid in pids)


def test_processes_started_before_the_kernel_are_spared(
    session: tuple[int, list[int], str],
) -> None:
    leader, pids, identifier = session
    child = pids[1]
    # The leader gone (and reaped), its child is what is left of the session.
    os.kill(leader, signal.SIGKILL)
    os.waitpid(leader, 0)
    child_started = sessions.start_time(child)
    assert child_started is not None and sessions.start_time(leader) is None
    # Recorded as started after the child: the child is not the kernel's.
    assert sessions.sweep(leader, child_started + 1, [identifier]) == []
    assert alive(child)
    assert sessions.sweep(leader, child_started, [identifier]) == [child]
    assert wait_gone([child]) == set()


def test_no_record_is_written_without_the_folder_lock(
    tmp_root: Path, session: tuple[int, list[int], str]
) -> None:
    leader, _, identifier = session
    workdir = make_workdir()
    _abandon(workdir)
    workdir.record_session(leader, [identifier])
    assert not (workdir.path / "session.json").exists()
    workdir.remove()
