"""A sweep (``execute_many``) from a new executor: kernels forked from the full template only.

Every test here runs real kernels and templates. They prove that the pool, told of several runs
at once, serves them all from the full template without launching any kernel, still gives every
run a fresh kernel of its own with its own environment, returns to keeping its usual warm
kernels once the sweep is over, and leaves no process or kernel folder behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._kernels.kernel_engine import KernelEngine
from notebook_executor._kernels.launch import kernel_environment
from notebook_executor._kernels.options import NATIVE_KERNEL_NAME
from notebook_executor._kernels.pool import PoolState
from notebook_executor._kernels.workdirs import kernel_root
from notebook_executor._run.cell_loop import run_job
from notebook_executor.engine import KernelChoice, RunJob
from support import alive, descendants

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork server and /proc"),
]

PROBE = """# %% tags=["parameters"]
mark: str = "none"

# %%
import os
import scrapbook as sb

sb.glue("leaked", "leak" in globals())
sb.glue("pid", os.getpid())
sb.glue("env", os.environ.get("NBX_PROBE", ""))
sb.glue("secret", os.environ.get("NBX_SWEEP_SECRET", ""))
sb.glue("mark", mark)
leak = mark
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


@pytest.fixture
def engine() -> Iterator[KernelEngine]:
    engine = KernelEngine(warm_kernels=2)
    yield engine
    engine.close()


def _kernel_folders() -> set[Path]:
    root = kernel_root(create=False)
    return set() if root is None else {p for p in root.iterdir() if p.name.startswith("k-")}


@pytest.mark.usefixtures("own_templates")
def test_a_sweep_from_a_new_executor_forks_every_kernel_and_launches_none(
    workdir: Path, engine: KernelEngine
) -> None:
    """Every run of the sweep gets a fresh kernel of its own, forked from the full template
    (none launched, not even the first ones, and no kernel-only template), with the sweep's
    environment and secret; close() leaves no process and no kernel folder behind. The pool's
    own templates: with the process's adopted ones, its first run could take the kernel-only
    template before the sweep began, as it may (a fork from it costs nothing more)."""
    runs = 6
    before = set(descendants(os.getpid()))
    folders = _kernel_folders()
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        results = ex.execute_many(
            workdir / "probe.py",
            [{"mark": f"m{i}"} for i in range(runs)],
            max_workers=2,
            env={"NBX_PROBE": "sweep"},
            secrets={"NBX_SWEEP_SECRET": "s3cr3t-value"},
        )
        assert [r["status"] for r in results] == ["success"] * runs
        scraps = [ex.collect_outputs(r["run_id"]) for r in results]
        pool = engine.pool
        assert pool is not None
        stats = dict(pool.stats)
        assert pool.state is PoolState.WARM
        assert pool.starts.first is None and pool.starts.full is not None
        # The sweep is over: the pool is back to keeping its usual warm kernels.
        assert pool.sweep is False
        during = set(descendants(os.getpid())) - before
    assert stats["launched"] == 0, stats
    assert stats["forked"] >= runs, stats
    assert stats["taken_warm"] + stats["started_cold"] == runs, stats
    assert [s["mark"] for s in scraps] == [f"m{i}" for i in range(runs)]
    assert len({s["pid"] for s in scraps}) == runs
    assert all(s["leaked"] is False for s in scraps)
    assert {s["env"] for s in scraps} == {"sweep"}
    # The secret reached each kernel; its value is withheld from what was recorded.
    assert all(s["secret"] != "s3cr3t-value" for s in scraps)
    during |= {s["pid"] for s in scraps}  # (gone already, as they should be)
    assert during, "the sweep started no process"
    assert {pid for pid in during if alive(pid)} == set()
    assert _kernel_folders() - folders == set()


@pytest.mark.parametrize(
    ("source", "template"),
    [("import scrapbook as sb\nx = 1", "full"), ("import json\nx = 1", "first")],
    ids=["data-modules", "stdlib-only"],
)
def test_two_runs_announced_together_start_a_sweep(
    workdir: Path, engine: KernelEngine, source: str, template: str
) -> None:
    """The second run announced before the first took its kernel turns the pool WARM with a
    template spawned at once: the full one when the notebook imports a module outside the
    standard library, else the first one (the full one would save its kernels nothing); a run
    announced alone does not. Either way every kernel is forked, none launched."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    choice = KernelChoice(NATIVE_KERNEL_NAME, "python", native=True, interpreter=sys.executable)
    job = RunJob(nb=nb, kernel=choice, cwd=workdir, env=kernel_environment(None))
    engine.prestart(job)
    engine._kernel_loop()[0].submit(_noop()).result(timeout=30)
    pool = engine.pool
    assert pool is not None
    assert (pool.sweep, pool.state) == (False, PoolState.IDLE)
    engine.prestart(job)
    engine._kernel_loop()[0].submit(_noop()).result(timeout=30)
    assert (pool.sweep, pool.state) == (True, PoolState.WARM)
    if template == "full":
        assert pool.starts.full is not None
    # Both announced runs come; then the sweep is over.
    assert run_job(engine, job).failure is None
    assert pool.sweep is True
    assert run_job(engine, job).failure is None
    assert pool.sweep is False
    if template == "first":
        assert pool.starts.full is None and pool.starts.first is not None
    assert pool.stats["launched"] == 0, pool.stats
    assert pool.stats["forked"] >= 2, pool.stats


async def _noop() -> None:
    """Scheduled after the engine's own calls: once it ran, they have too."""


def test_announced_runs_that_never_come_leave_a_working_pool(
    workdir: Path, engine: KernelEngine
) -> None:
    """A sweep cut short (runs announced that never ask for their kernel) leaves the pool
    serving later runs, forked, each on a fresh kernel."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os; x = os.getpid()")])
    choice = KernelChoice(NATIVE_KERNEL_NAME, "python", native=True, interpreter=sys.executable)
    env = kernel_environment(None)
    for _ in range(5):
        engine.prestart(RunJob(nb=nb, kernel=choice, cwd=workdir, env=env))
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        pids = set()
        for i in range(3):
            result = ex.execute(workdir / "probe.py", parameters={"mark": f"late{i}"})
            assert result["status"] == "success"
            pids.add(ex.collect_outputs(result["run_id"])["pid"])
        pool = engine.pool
        assert pool is not None
        assert pool.stats["launched"] == 0, pool.stats
    assert len(pids) == 3
