"""Suite-wide checks: the suite must end with no process it started still alive.

Two nets: processes still below pytest in the process tree, and processes anywhere carrying
the suite's environment marker (set here, inherited by every process the suite starts), which
catches orphans reparented to init: a notebook's daemon, a kernel whose host was killed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import SESSION_MARKER, descendants, marked_processes

_TOKEN = uuid.uuid4().hex


#: The suite's own folder for run servers: no test ever reaches the user's real server.
_RUNTIME = tempfile.mkdtemp(prefix="nbx-rt-")
#: The suite's own ``$TMPDIR`` (see :func:`_private_tmpdir`), removed at the end.
_TMPDIR: list[str] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    """Mark this process's environment, so every process the suite starts inherits it.

    A command line the suite runs as a process of its own goes through the run server, as a
    user's shell does: one server per test process (pytest-xdist's workers each have theirs),
    in the suite's own runtime folder, stopped at the end. Called in the test process itself
    (``main(argv)``), a command runs in-process (see ``support.commands_in_process``).
    ``NX_TESTS_NO_SERVER=1``: every command in-process, the suite's processes' too.
    """
    os.environ[SESSION_MARKER] = _TOKEN
    os.environ["NOTEBOOK_EXECUTOR_RUNTIME_DIR"] = _RUNTIME
    if os.environ.get("NX_TESTS_NO_SERVER"):
        os.environ["NOTEBOOK_EXECUTOR_NO_SERVER"] = "1"
    else:
        os.environ.pop("NOTEBOOK_EXECUTOR_NO_SERVER", None)
    # A suite started in the background (`cmd &` in a script) inherits SIGINT ignored, and so
    # would every process it starts: the Ctrl-C tests would then test nothing but that. A
    # handled signal is reset to its default in a new program, so the hosts the tests start
    # take Ctrl-C as a terminal's user sends it.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` go first (in their order; the rest keep theirs): each waits about
    a minute on a notebook that sleeps, with little CPU, and on pytest-xdist's workers that
    wait then overlaps the rest of the suite instead of being its tail."""
    items[:] = sorted(items, key=lambda item: item.get_closest_marker("slow") is None)


def _leftover() -> dict[int, str]:
    return {**descendants(os.getpid()), **marked_processes(_TOKEN)}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process started by the suite outlives it."""
    _stop_run_servers()
    if not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + 10
    leftover = _leftover()
    while leftover and time.monotonic() < deadline:
        time.sleep(0.2)
        leftover = _leftover()
    if leftover:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n".join(f"  pid {pid}: {cmd[:200]}" for pid, cmd in sorted(leftover.items()))
        message = f"processes started by the test suite are still alive:\n{lines}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _stop_run_servers() -> None:
    """Stop every run server a test left in the suite's runtime folder, then remove it."""
    import signal

    for pid_file in Path(_RUNTIME).glob("*/*.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
    time.sleep(0.5)
    shutil.rmtree(_RUNTIME, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _private_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Give this process (each pytest-xdist worker, or the one process) its own ``$TMPDIR``
    before any kernel starts: kernel folders (``$TMPDIR/notebook-executor-<uid>``) of two
    workers, or of two suites run at once on the machine, never mix, so a test may count the
    folders its kernels leave. Short, in ``/tmp``: it holds sockets. ``tmp_path`` stays where
    it was (its base is fixed first)."""
    tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "m")
    _TMPDIR.append(tempfile.mkdtemp(prefix=f"ne-{worker}-{os.getpid()}-", dir="/tmp"))
    os.environ["TMPDIR"] = _TMPDIR[-1]
    tempfile.tempdir = None  # gettempdir() reads $TMPDIR again


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove this process's ``$TMPDIR`` (after the check for processes left behind)."""
    for folder in _TMPDIR:
        shutil.rmtree(folder, ignore_errors=True)


#: Folders for sockets (a kernel's, Chromium's) must be short: a socket path holds 107 bytes.
_SHORT_ENOUGH = 40


@pytest.fixture
def short_tmp_path(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``, or, when ``$TMPDIR`` makes it too long to hold sockets below it, a new
    folder in ``/tmp`` removed after the test: the suite runs with any ``$TMPDIR``."""
    if len(os.fsencode(tmp_path)) <= _SHORT_ENOUGH:
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="nx-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
