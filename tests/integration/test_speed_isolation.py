"""Warm and forked kernels stay fresh, bounded and accounted for.

Every test here runs real kernels. They prove that speed costs nothing in isolation: a warm or
forked kernel carries nothing over from an earlier run, timeouts and kernel deaths are reported
as with a launched kernel, and no kernel or template process outlives ``close()`` or a host
killed outright.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._kernels.kernel_engine import KernelEngine
from support import alive, descendants, failed_cell

# Forked kernels from the templates this file's pools spawn themselves, in the environment
# each test sets (not the templates the suite's processes share: tests/conftest.py).
pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("own_templates")]

PROBE = """# %% tags=["parameters"]
mark: str = "none"

# %%
import os
import random
import scrapbook as sb

sb.glue("leaked", "leak" in globals())
sb.glue("pid", os.getpid())
sb.glue("cwd", os.getcwd())
sb.glue("env", os.environ.get("NBX_PROBE", ""))
sb.glue("random", random.random())
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


def _warm_up(ex: NotebookExecutor, workdir: Path, runs: int = 3) -> list[dict[str, object]]:
    return [ex.collect_outputs(ex.execute(workdir / "probe.py")["run_id"]) for _ in range(runs)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_warm_kernels_are_fresh_processes(workdir: Path, engine: KernelEngine) -> None:
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        scraps = [
            ex.collect_outputs(
                ex.execute(workdir / "probe.py", parameters={"mark": f"run{i}"})["run_id"]
            )
            for i in range(5)
        ]
        pool = engine.pool
        assert pool is not None
        stats = dict(pool.stats)
    assert [s["leaked"] for s in scraps] == [False] * 5
    assert len({s["pid"] for s in scraps}) == 5
    assert len({s["random"] for s in scraps}) == 5
    assert {s["cwd"] for s in scraps} == {str(workdir.resolve())}
    assert stats["taken_warm"] >= 1, stats


def test_warm_kernels_count_from_one_and_keep_no_history(
    workdir: Path, engine: KernelEngine
) -> None:
    """A kernel warmed up ahead of its run shows no trace of the warm-up, and writes no history."""
    (workdir / "hist.py").write_text(
        "# %%\nfirst = 1\n\n# %%\nimport scrapbook as sb\n"
        "hm = get_ipython().history_manager\n"
        "sb.glue('history', [hm.enabled, len(In)])\n"
    )
    ipython_dir = workdir / "ipython"
    env = {"IPYTHONDIR": str(ipython_dir)}
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        for _ in range(3):
            result = ex.execute(workdir / "hist.py", env=env)
        time.sleep(1.0)  # the pool refills and warms up its next kernels
        result = ex.execute(workdir / "hist.py", env=env)
        pool = engine.pool
        assert pool is not None
        assert pool.stats["taken_warm"] >= 1, pool.stats
    notebook = nbformat.read(result["output_path"], as_version=4)
    counts = [cell.execution_count for cell in notebook.cells if cell.cell_type == "code"]
    assert counts == [1, 2]
    # In holds "" then one entry per executed cell: the warm-up left none.
    assert result["scraps"]["history"] == [False, 3]
    assert not list(ipython_dir.rglob("history.sqlite*"))


def test_kernels_match_the_run_environment(workdir: Path, engine: KernelEngine) -> None:
    other = workdir / "other"
    other.mkdir()
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        seen = []
        for value, cwd in [("a", workdir), ("a", workdir), ("b", workdir), ("b", other)]:
            result = ex.execute(workdir / "probe.py", env={"NBX_PROBE": value}, cwd=cwd)
            scraps = ex.collect_outputs(result["run_id"])
            seen.append((scraps["env"], scraps["cwd"]))
    assert seen == [
        ("a", str(workdir.resolve())),
        ("a", str(workdir.resolve())),
        ("b", str(workdir.resolve())),
        ("b", str(other.resolve())),
    ]


def test_forked_kernels_time_out_and_die_as_launched_ones_do(
    workdir: Path, engine: KernelEngine
) -> None:
    (workdir / "slow.py").write_text("# %%\nx = 1\n\n# %%\nimport time\ntime.sleep(60)\n")
    (workdir / "die.py").write_text("# %%\nx = 1\n\n# %%\nimport os\nos._exit(7)\n")
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        _warm_up(ex, workdir)
        began = time.monotonic()
        slow = ex.execute(workdir / "slow.py", cell_timeout=1)
        assert time.monotonic() - began < 20
        whole = ex.execute(workdir / "slow.py", timeout=2)
        died = ex.execute(workdir / "die.py")
        pool = engine.pool
        assert pool is not None
        assert pool.stats["forked"] >= 1 or not sys.platform.startswith("linux")
    assert (slow["error_kind"], failed_cell(slow)["index"]) == ("timeout", 1)
    assert "cell_timeout" in failed_cell(slow)["evalue"]
    assert (whole["error_kind"], failed_cell(whole)["index"]) == ("timeout", 1)
    assert (died["error_kind"], failed_cell(died)["index"]) == ("kernel_died", 1)
    assert "exit status 7" in failed_cell(died)["evalue"]
    assert died["cells_executed"] == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_no_process_outlives_close(workdir: Path) -> None:
    before = set(descendants(os.getpid()))
    with NotebookExecutor(runs_dir=workdir / "runs", warm_kernels=2) as ex:
        ex.execute_many(workdir / "probe.py", [{"mark": str(i)} for i in range(4)])
        during = set(descendants(os.getpid())) - before
        assert during, "warm kernels should be running"
    leftover = {pid for pid in during if alive(pid)}
    assert leftover == set()


HOST = r"""
import json, os, sys, time
from pathlib import Path
from notebook_executor import NotebookExecutor

workdir = Path(sys.argv[1])
ex = NotebookExecutor(runs_dir=workdir / "runs", warm_kernels=2)
for _ in range(3):
    ex.execute(workdir / "probe.py")
time.sleep(1.0)
print(json.dumps(os.getpid()), flush=True)
time.sleep(600)
"""


NEXT_HOST = r"""
import sys
from pathlib import Path
from notebook_executor import NotebookExecutor

workdir = Path(sys.argv[1])
with NotebookExecutor(runs_dir=workdir / "runs") as ex:
    assert ex.execute(workdir / "probe.py")["status"] == "success"
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG")
def test_kernels_die_with_a_killed_host_and_a_later_host_sweeps_their_folders(
    workdir: Path, short_tmp_path: Path
) -> None:
    tmp = short_tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    # A folder of the user's own, named as older versions named kernel folders, holding data.
    users = tmp / "nbx-analysis"
    users.mkdir()
    (users / "results.csv").write_text("a,b\n1,2\n")
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(workdir)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert host.stdout is not None
        line = host.stdout.readline()
        assert json.loads(line) == host.pid
        kernels = descendants(host.pid)
        programs = ("ipykernel", "kernel_main.py", "template_server.py")
        assert any(name in cmd for cmd in kernels.values() for name in programs)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in kernels):
        time.sleep(0.1)
    assert [pid for pid in kernels if alive(pid)] == []

    # The killed host could not remove its kernels' folders; the next host to close does,
    # and touches nothing else.
    kernels_root = tmp / f"notebook-executor-{os.getuid()}"
    left = sorted(kernels_root.iterdir())
    assert left, "the killed host's warm kernels had folders"
    for folder in [*left, users]:
        os.utime(folder, (time.time() - 3600, time.time() - 3600))
    subprocess.run(
        [sys.executable, "-c", NEXT_HOST, str(workdir)], env=env, check=True, timeout=120
    )
    assert sorted(kernels_root.iterdir()) == []
    assert sorted(tmp.iterdir()) == sorted([kernels_root, users])
    assert (users / "results.csv").read_text() == "a,b\n1,2\n"


def test_execute_many_keeps_order_and_isolation(workdir: Path) -> None:
    with NotebookExecutor(runs_dir=workdir / "runs") as ex:
        results = ex.execute_many(
            workdir / "probe.py", [{"mark": str(i)} for i in range(6)], max_workers=2
        )
        scraps = [ex.collect_outputs(r["run_id"]) for r in results]
    assert [r["parameters"]["mark"] for r in results] == [str(i) for i in range(6)]
    assert [r["status"] for r in results] == ["success"] * 6
    assert [s["leaked"] for s in scraps] == [False] * 6
    assert len({s["pid"] for s in scraps}) == 6


def test_a_local_module_shadows_a_preloaded_one_as_on_a_launched_kernel(
    workdir: Path, engine: KernelEngine
) -> None:
    local = workdir / "local"
    local.mkdir()
    (local / "probe.py").write_text(PROBE)
    (local / "scrapbook.py").write_text("raise ImportError('the local scrapbook.py')\n")
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        _warm_up(ex, workdir)
        results = [ex.execute(local / "probe.py") for _ in range(3)]
    assert [failed_cell(r)["evalue"] for r in results] == ["the local scrapbook.py"] * 3


FILES = """# %% tags=["parameters"]
tag = "x"

# %%
import scrapbook as sb

plain = open(f"plain-{tag}.txt", "w")
plain.write("plain " + tag)


class Node:
    pass


node = Node()
node.self = node
node.file = open(f"cycle-{tag}.txt", "w")
node.file.write("cycle " + tag)
sb.glue("tag", tag)
"""


@pytest.mark.parametrize("fork", [False, True], ids=["launched", "forked"])
def test_used_kernels_exit_when_asked_and_flush_the_files_left_open(
    workdir: Path, fork: bool
) -> None:
    """A finished run's kernel exits on its own when asked (it is not killed after the grace
    period), and what its notebook wrote to files it never closed, even files held in
    reference cycles, reaches the disk: on launched and forked kernels alike."""
    if fork and not sys.platform.startswith("linux"):
        pytest.skip("kernels are forked on Linux only")
    (workdir / "files.py").write_text(FILES)
    runs = 4
    engine = KernelEngine(warm_kernels=2, fork=fork)
    try:
        with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
            for i in range(runs):
                result = ex.execute(workdir / "files.py", parameters={"tag": str(i)})
                assert result["status"] == "success"
                time.sleep(0.3)  # the pool refills
            pool = engine.pool
            assert pool is not None
    finally:
        engine.close()
    stats = dict(pool.stats)
    assert stats["forked" if fork else "launched"] >= runs, stats
    assert stats["launched" if fork else "forked"] == 0, stats
    assert (stats["exited"], stats["killed"]) == (runs, 0), stats
    for i in range(runs):
        assert (workdir / f"plain-{i}.txt").read_text() == f"plain {i}"
        assert (workdir / f"cycle-{i}.txt").read_text() == f"cycle {i}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and fork")
def test_a_prepared_first_kernel_is_forked_from_a_kernel_only_template(
    workdir: Path, engine: KernelEngine
) -> None:
    """What the command line does: a template importing ipykernel starts before the source is
    read; the first kernel is forked from it, fresh, in the run's cwd and environment; the
    warm kernels after it come from the full template; close() leaves nothing behind."""
    before = set(descendants(os.getpid()))
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        ex.prepare_kernel()
        pool = engine.pool
        assert pool is not None
        first = ex.execute(workdir / "probe.py", parameters={"mark": "1"}, env={"NBX_PROBE": "e"})
        assert (pool.stats["forked"], pool.stats["launched"]) == (1, 0)
        scraps = ex.collect_outputs(first["run_id"])
        assert (scraps["leaked"], scraps["env"]) == (False, "e")
        assert scraps["cwd"] == str(workdir.resolve())
        assert pool.starts.first is not None and scraps["pid"] != pool.starts.first.pid
        # The forked kernel of the first run exits like any other; so does a later one.
        second = ex.collect_outputs(ex.execute(workdir / "probe.py")["run_id"])
        assert second["leaked"] is False and second["pid"] != scraps["pid"]
        during = set(descendants(os.getpid())) - before
    assert {pid for pid in during if alive(pid)} == set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and fork")
def test_runs_right_after_a_prepared_first_one_are_forked_while_the_full_template_starts(
    workdir: Path, engine: KernelEngine
) -> None:
    """What ``pytest --notebooks`` does: a prepared executor runs notebooks one after the
    other, at once. While the full template (ipykernel and the data modules) is starting, the
    kernel-only template forks the kernels that would otherwise be launched: none is, and
    every run still gets a fresh kernel."""
    runs = 4
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        ex.prepare_kernel()
        pids = []
        for i in range(runs):
            result = ex.execute(workdir / "probe.py", parameters={"mark": str(i)})
            assert result["status"] == "success"
            scraps = ex.collect_outputs(result["run_id"])
            assert scraps["leaked"] is False
            pids.append(scraps["pid"])
        pool = engine.pool
        assert pool is not None
        stats = dict(pool.stats)
    assert stats["launched"] == 0, stats
    assert stats["forked"] >= runs, stats
    assert len(set(pids)) == runs


#: A notebook of the standard library alone: its kernels fork from the kernel-only template.
PLAIN = """# %%
import os
print(os.getpid())
"""


@pytest.mark.parametrize("imports", ["scrapbook", "stdlib"])
def test_the_pool_states_follow_the_runs(workdir: Path, engine: KernelEngine, imports: str) -> None:
    """No pool until something runs; WARM once the first run has ended (its kernel forked from
    the template spawned for it as it was asked for: the full one, with the data modules, for
    a notebook that imports scrapbook, and then no kernel-only one at all; the kernel-only one
    for a notebook of the standard library alone, and never the full one); CLOSED after
    close(), with nothing left to take."""
    from notebook_executor._kernels.pool import PoolState

    notebook = workdir / "probe.py"
    if imports == "stdlib":
        notebook = workdir / "plain.py"
        notebook.write_text(PLAIN)
    linux = sys.platform.startswith("linux")
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        assert engine.pool is None
        assert ex.execute(notebook)["status"] == "success"
        pool = engine.pool
        assert pool is not None
        assert pool.state is PoolState.WARM
        assert (pool.stats["started_cold"], pool.stats["taken_warm"]) == (0, 1)
        if linux:
            assert pool.stats["forked"] >= 1 and pool.stats["launched"] == 0, pool.stats
            if imports == "scrapbook":
                assert pool.starts.full is not None and pool.starts.first is None
            else:
                assert pool.starts.first is not None and pool.starts.full is None
        time.sleep(1.0)  # the pool fills after the first run
        assert ex.execute(notebook)["status"] == "success"
        assert pool.state is PoolState.WARM
        assert (pool.stats["started_cold"], pool.stats["taken_warm"]) == (0, 2)
        if linux:
            assert pool.stats["launched"] == 0, pool.stats
            if imports == "scrapbook":
                assert pool.starts.first is None
            else:
                assert pool.starts.full is None
    assert pool.state is PoolState.CLOSED
    assert pool._idle == {}


def test_one_kernel_is_kept_ready_until_runs_come_faster_than_it_is_replaced(
    workdir: Path, engine: KernelEngine
) -> None:
    """Runs that come apart (an agent's, a served command's) find the one kernel kept ready
    and leave no second one started for nothing; runs back to back, once one finds no kernel
    ready, make the pool keep ``warm_kernels`` (2 here)."""
    notebook = workdir / "plain.py"
    notebook.write_text(PLAIN)

    def ready() -> int:
        pool = engine.pool
        assert pool is not None
        return sum(len(entries) for entries in pool._idle.values())

    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        for _ in range(3):
            assert ex.execute(notebook)["status"] == "success"
            time.sleep(1.0)  # the pool fills after a run
            assert engine.pool is not None and engine.pool.ahead == 1
            assert ready() == 1
        for _ in range(4):
            assert ex.execute(notebook)["status"] == "success"
        time.sleep(1.0)
        pool = engine.pool
        assert pool is not None and pool.ahead == 2
        assert ready() == 2
        assert pool.stats["launched"] == 0 or not sys.platform.startswith("linux")


def test_runs_back_to_back_never_leave_the_next_one_without_a_kernel_on_its_way(
    workdir: Path, engine: KernelEngine
) -> None:
    """Once runs come back to back (the pool keeps ``warm_kernels``), a run that takes the
    last kernel starts the next ones at once, so one is ready or on its way as it returns.
    (They were started after each run ended and a pause: every third run of a ``pytest
    --notebooks`` session waited 45-280 ms for a kernel started too late.)"""
    notebook = workdir / "plain.py"
    notebook.write_text(PLAIN)
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        for _ in range(3):
            assert ex.execute(notebook)["status"] == "success"
        pool = engine.pool
        assert pool is not None and pool.ahead == 2
        under_way = []
        for _ in range(6):
            assert ex.execute(notebook)["status"] == "success"
            # As the run returns, the next run's kernel is ready or on its way.
            under_way.append(sum(len(entries) for entries in pool._idle.values()))
        assert min(under_way) >= 1, (under_way, pool.stats)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
@pytest.mark.parametrize("imports", ["scrapbook", "stdlib"])
def test_a_first_session_forks_from_the_template_its_notebook_needs(
    workdir: Path, engine: KernelEngine, imports: str
) -> None:
    """A session opened before any run forks its kernel from the template spawned for it, as
    a first run's kernel does: the full one for a notebook that imports scrapbook (and no
    kernel-only one), the kernel-only one for the standard library alone."""
    notebook = workdir / "probe.py"
    if imports == "stdlib":
        notebook = workdir / "plain.py"
        notebook.write_text(PLAIN)
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        with ex.open_session(notebook) as session:
            step = session.run()
            assert step["status"] == "success", step["failed_cell"]
        pool = engine.pool
        assert pool is not None
        if imports == "scrapbook":
            assert pool.starts.full is not None and pool.starts.first is None
        else:
            assert pool.starts.first is not None and pool.starts.full is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and fork")
def test_bad_input_after_preparing_starts_no_kernel_and_leaves_no_process(
    workdir: Path, engine: KernelEngine
) -> None:
    from notebook_executor import ParameterError

    before = set(descendants(os.getpid()))
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        ex.prepare_kernel()
        with pytest.raises(ParameterError, match="unknown parameter 'nope'"):
            ex.execute(workdir / "probe.py", parameters={"nope": 1})
        pool = engine.pool
        assert pool is not None
        assert (pool.stats["forked"], pool.stats["launched"]) == (0, 0)
        # The prepared template starts (it is asked for at once) and is the only new process.
        deadline = time.monotonic() + 60
        while True:
            now = descendants(os.getpid())
            during = set(now) - before
            if any("template_server.py" in now[pid] for pid in during):
                break
            assert time.monotonic() < deadline, "the prepared template never started"
            time.sleep(0.05)
        assert [now[pid] for pid in during if "template_server.py" not in now[pid]] == []
    assert {pid for pid in during if alive(pid)} == set()
    assert not (workdir / "runs").exists() or not any((workdir / "runs").rglob("*.ipynb"))
