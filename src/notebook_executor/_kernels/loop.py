"""An asyncio event loop in a thread of its own: where an engine's kernels live.

Every kernel of an engine is started, used and stopped on this one loop, so kernels and their
zmq sockets never cross event loops. The calling thread waits for the loop's answers with
:func:`result_of`, never with one untimed wait (see there why).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["WAIT_SLICE", "KernelLoop", "result_of"]

T = TypeVar("T")

#: The longest a thread waiting on a future sleeps before it looks again (seconds).
WAIT_SLICE = 0.05


def result_of(future: concurrent.futures.Future[T], cancel: threading.Event | None = None) -> T:
    """``future.result()``, waited for in slices of :data:`WAIT_SLICE`; cut short by ``cancel``
    (``concurrent.futures.CancelledError`` once it is set).

    Never one untimed wait: Linux may hand the process's SIGINT to any of its threads (this
    loop's, a pool worker's), and Python then runs the handler, raising ``KeyboardInterrupt``,
    only when the main thread next wakes up, which a thread in an untimed lock wait never does.
    A Ctrl-C of ``run`` hung that way until the cell ended (a host with a loop thread and a
    pool worker, SIGINT just after it began to wait: 3 hangs in 800 tries; waiting in slices,
    0 in 700). A finished future's result comes at once.
    """
    while cancel is None or not cancel.is_set():
        try:
            return future.result(timeout=WAIT_SLICE)
        except concurrent.futures.TimeoutError:
            # The future's own TimeoutError (asyncio's is the same class) is its answer.
            if future.done():
                return future.result()
    raise concurrent.futures.CancelledError


class KernelLoop:
    """An asyncio event loop running in a thread of its own, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """True while the loop thread runs."""
        return self._thread is not None

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coroutine`` on the loop; return a future for its result."""
        with self._lock:
            if self._loop is None:
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(
                    target=serve, name="notebook-executor-kernels", daemon=True
                )
                self._thread.start()
                ready.wait()
                self._loop = loop
            return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def stop(self) -> None:
        """Stop the loop and join its thread; the loop must have no work left."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
