"""``result_of``: a thread waiting on a future sees Ctrl-C even when another thread took it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signals"),
    pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc"),
]

#: The main thread blocks SIGINT, so the kernel of the OS hands it to the other thread; Python
#: runs its handler in the main thread once that wakes up. ``WAIT`` is how the main thread waits.
HOST = """
import concurrent.futures, os, signal, sys, threading
from notebook_executor._kernels.loop import result_of

parked = threading.Event()
threading.Thread(target=parked.wait, daemon=True).start()  # SIGINT not blocked here
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
never: concurrent.futures.Future[None] = concurrent.futures.Future()
print("waiting", flush=True)
try:
    WAIT
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def _host(wait: str) -> subprocess.Popen[str]:
    code = textwrap.dedent(HOST).replace("WAIT", wait)
    host = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert host.stdout is not None
    assert host.stdout.readline() == "waiting\n"
    _wait_blocked(host.pid)
    host.send_signal(signal.SIGINT)
    return host


def _wait_blocked(pid: int) -> None:
    """Return once the host's main thread sleeps in the wait: after "waiting" it does nothing
    else that sleeps, so a Ctrl-C sent now reaches the wait, not the code before it."""
    deadline = time.monotonic() + 30
    stat = Path(f"/proc/{pid}/task/{pid}/stat")
    while time.monotonic() < deadline:
        state = stat.read_text().rpartition(")")[2].split()[0]
        if state == "S":
            return
        time.sleep(0.01)  # a poll, not a wait
    raise AssertionError("the host never blocked in its wait")


def test_ctrl_c_taken_by_another_thread_interrupts_the_wait() -> None:
    host = _host("result_of(never)")
    try:
        out, err = host.communicate(timeout=30)
    finally:
        # A host that never took the Ctrl-C is not left waiting.
        host.kill()
        host.communicate()
    assert out == "interrupted\n", err


def test_an_untimed_wait_would_not_see_it() -> None:
    # The reason for the slices: the same host waiting with future.result() sleeps on.
    host = _host("never.result()")
    with pytest.raises(subprocess.TimeoutExpired):
        host.communicate(timeout=2)
    host.kill()
    host.communicate()


def test_a_cancel_event_ends_the_wait_and_a_result_comes_at_once() -> None:
    import concurrent.futures
    import threading

    from notebook_executor._kernels.loop import result_of

    done: concurrent.futures.Future[int] = concurrent.futures.Future()
    done.set_result(7)
    assert result_of(done) == 7
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(concurrent.futures.CancelledError):
        result_of(concurrent.futures.Future(), cancel)


def test_a_future_that_failed_with_a_timeout_is_its_answer_not_a_wait() -> None:
    import concurrent.futures

    from notebook_executor._kernels.loop import result_of

    timed_out: concurrent.futures.Future[None] = concurrent.futures.Future()
    timed_out.set_exception(TimeoutError("the kernel did not answer"))
    with pytest.raises(TimeoutError, match="did not answer"):
        result_of(timed_out)
