"""A template process that dies is replaced: runs and sessions go on, on fresh kernels.

The template (the process kernels are forked from) is killed here for real; the executor's
next run, ``execute_many`` and ``open_session`` must work as before, from a new template. The
pools here spawn their own templates (``own_templates``): the ones this test process shares
with its other tests are not the ones killed.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor, RunResult
from notebook_executor._kernels.kernel_engine import KernelEngine
from notebook_executor._kernels.pool import KernelPool
from support import wait_gone

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("own_templates")]

NOTEBOOK = "# %%\nimport os\nx = 6 * 7\nprint(x)\n"


def _pool(ex: NotebookExecutor) -> KernelPool:
    engine = ex._engine
    assert isinstance(engine, KernelEngine) and engine.pool is not None
    return engine.pool


def _kill_templates(pool: KernelPool) -> set[int]:
    """SIGKILL every template process of ``pool``; return their pids, once gone."""
    pids = {
        t.server.pid
        for t in (pool.starts.first, pool.starts.full)
        if t is not None and t.server.pid is not None
    }
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    assert wait_gone(pids) == set()
    return pids


def _printed(result: RunResult) -> str:
    import nbformat

    nb = nbformat.read(str(result["output_path"]), as_version=4)
    return "".join(o.get("text", "") for o in nb.cells[0].outputs)


def test_a_killed_template_is_replaced_for_runs_and_sessions(tmp_path: Path) -> None:
    path = tmp_path / "nb.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        assert ex.execute(path)["status"] == "success"
        # A sweep waits for the full template: it is then ready, and serves every kernel.
        assert [r["status"] for r in ex.execute_many(path, [None, None])] == ["success"] * 2
        pool = _pool(ex)
        killed = _kill_templates(pool)
        for attempt in range(2):
            result = ex.execute(path)
            assert result["status"] == "success", (attempt, result["failed_cell"])
            assert _printed(result) == "42\n"
        for result in ex.execute_many(path, [None, None]):
            assert result["status"] == "success", result["failed_cell"]
        assert pool.stats["templates_renewed"] >= 1
        live = {t.server.pid for t in (pool.starts.first, pool.starts.full) if t}
        assert not live & killed

        killed = _kill_templates(pool)
        with ex.open_session(path) as session:
            step = session.run()
        assert step["status"] == "success", step["failed_cell"]
        assert step["outputs"] == [{"index": 0, "text": "42\n"}]
        assert ex.execute(path)["status"] == "success"
        live = {t.server.pid for t in (pool.starts.first, pool.starts.full) if t}
        assert live and not live & killed


def test_a_kernel_killed_during_its_warm_up_is_given_up_at_once(tmp_path: Path) -> None:
    # A kernel started ahead runs a silent ``pass`` before any run takes it. Killed meanwhile
    # (its template killed, its parent-death signal), it used to be waited for until the run's
    # ready timeout (60 s), and the run then failed with a KernelStartError (CI, 2026-11-27).
    import asyncio
    import time

    from notebook_executor._kernels.launch import _warm_up, choose_kernel, start_kernel

    async def scenario() -> float:
        choice = choose_kernel("nb.py", None, None)
        kernel = await start_kernel(choice, cwd=tmp_path, env=dict(os.environ), ready_timeout=60)
        try:
            pid = getattr(kernel.manager.provisioner, "pid", None)
            assert isinstance(pid, int)
            os.kill(pid, signal.SIGKILL)
            began = time.monotonic()
            with pytest.raises(RuntimeError, match="died during its warm-up"):
                await _warm_up(kernel.client, kernel.manager, timeout=60)
            return time.monotonic() - began
        finally:
            await kernel.stop(now=True)

    assert asyncio.run(scenario()) < 5
