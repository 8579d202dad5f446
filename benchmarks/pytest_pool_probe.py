"""A pytest plugin for ``bench_pytest.py --waits``: how long each run of ``pytest --notebooks``
waited for its kernel, and how long each pytest process took to close its executor.

Loaded with ``-p pytest_pool_probe`` (this folder on ``PYTHONPATH``), in the command and in
every pytest-xdist worker; each process writes one JSON file into ``$NBX_POOL_PROBE``:
``{"waits": [ms, ...], "closes": [ms, ...]}``. It wraps the kernel pool's ``acquire`` and the
executor's ``close``, which every version of the package measured has.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from pathlib import Path
from typing import Any

_WAITS: list[float] = []
_CLOSES: list[float] = []


def _wrap() -> None:
    from notebook_executor import _executor
    from notebook_executor._kernels import pool

    acquire = pool.KernelPool.acquire
    close = _executor.NotebookExecutor.close

    async def timed_acquire(self: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return await acquire(self, *args, **kwargs)
        finally:
            _WAITS.append((time.perf_counter() - began) * 1000)

    def timed_close(self: Any) -> None:
        began = time.perf_counter()
        try:
            close(self)
        finally:
            _CLOSES.append((time.perf_counter() - began) * 1000)

    pool.KernelPool.acquire = timed_acquire  # type: ignore[method-assign]
    _executor.NotebookExecutor.close = timed_close  # type: ignore[method-assign]


def pytest_configure(config: Any) -> None:
    _wrap()
    # Written at exit: the executor closes as the session ends, or as pytest unconfigures.
    atexit.register(_write)


def _write() -> None:
    folder = os.environ.get("NBX_POOL_PROBE")
    if folder and (_WAITS or _CLOSES):
        path = Path(folder) / f"{os.getpid()}.json"
        path.write_text(json.dumps({"waits": _WAITS, "closes": _CLOSES}))
