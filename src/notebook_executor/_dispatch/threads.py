"""Runs on the threads of this process: a pool of threads, a bar of runs, and Ctrl-C.

On Ctrl-C, the runs not started yet never start, and those running are cancelled (each
recorded as cancelled) before the interrupt goes on.
"""

from __future__ import annotations

from collections.abc import Callable

from .._run.plan import Plan
from .._types import RunResult
from .progress import run_progress

__all__ = ["run_all"]


def run_all(
    run: Callable[[Plan], RunResult],
    plans: list[Plan],
    workers: int,
    wanted: bool | None,
    cancel: Callable[[], None] | None = None,
) -> list[RunResult]:
    """``[run(plan) for plan in plans]`` on up to ``workers`` threads, with a progress bar.

    On Ctrl-C, runs not started yet never start, and ``cancel`` (the engine's, if it has one)
    stops those running at once: each is recorded as cancelled, then the interrupt goes on.
    """
    progress = run_progress(len(plans), wanted)
    try:
        if workers <= 1:
            results = []
            for plan in plans:
                results.append(run(plan))
                if progress is not None:
                    progress.update()
            return results
        from concurrent.futures import ThreadPoolExecutor, wait

        from .._kernels.loop import result_of  # Ctrl-C reaches this thread while it waits

        pool = ThreadPoolExecutor(workers, thread_name_prefix="notebook-executor-run")
        futures = []
        try:
            futures = [pool.submit(run, plan) for plan in plans]
            if progress is not None:
                for future in futures:
                    future.add_done_callback(lambda _: progress.update())
            return [result_of(future) for future in futures]
        except KeyboardInterrupt:
            for future in futures:
                future.cancel()
            # A run may reach its engine after the first call: cancel until all have ended.
            while not all(future.done() for future in futures):
                if cancel is not None:
                    cancel()
                wait(futures, timeout=0.1)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        if progress is not None:
            progress.close()
