"""Sweeps on a real Dask cluster: ``LocalCluster(processes=True)`` on loopback, two workers.

The cluster is started once for the module and closed after it. Its scheduler allows no
retries (``allowed-failures: 0``) and hands each worker one task at a time, so a killed worker
fails exactly the run it was executing. A test that kills a worker has a cluster of its own,
closed after it (a killed worker's replacement is no later test's concern); the tests of
at-most-once runs also use one whose scheduler reschedules the tasks of dead workers (Dask's
default, ``allowed-failures: 3``).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import dask
import psutil  # type: ignore[import-untyped]
import pytest
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

from notebook_executor import NotebookExecutor, NotebookExecutorError, read_notebook
from notebook_executor._cluster import dask as _cluster_dask
from notebook_executor._cluster.worker import PLUGIN_NAME
from notebook_executor._faces.cli import main
from notebook_executor._types import RunResult
from support import failed_cell

# Several processes (or a browser, or a cluster) and their kernels on a loaded machine.
pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

NOTEBOOK = """# %% tags=["parameters"]
x: int = 1
sleep: float = 0.0
marker: str = ""

# %%
import hashlib
import os
import pathlib
import time

import scrapbook as sb

# %%
if marker:
    pathlib.Path(marker).write_text(str(os.getpid()))
time.sleep(sleep)

# %%
data = pathlib.Path("data.txt").read_text()
pathlib.Path(f"written-{x}.txt").write_text("out")
token = os.environ.get("TOKEN", "")
print("token:", token)
sb.glue("x2", x * 2)
sb.glue("data", data)
sb.glue("token_sha", hashlib.sha256(token.encode()).hexdigest())
sb.glue("pid", os.getpid())
if x < 0:
    raise ValueError("negative x")
"""

SECRET = "tok_live_9f8E7d6C5b4A3x2Y1z0-QwErTy.UiOp+as/df="

#: Index of the sleeping cell, and of the last one, in read_notebook(source).cells.
SLEEP_CELL, LAST_CELL = 2, 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    yield from _local_cluster(allowed_failures=0)


@pytest.fixture
def own_cluster() -> Iterator[LocalCluster]:
    """A cluster for one test that kills one of its workers."""
    yield from _local_cluster(allowed_failures=0)


def _local_cluster(*, allowed_failures: int) -> Iterator[LocalCluster]:
    config = {
        "distributed.scheduler.allowed-failures": allowed_failures,
        "distributed.scheduler.worker-saturation": 1.0,
    }
    tracker = resource_tracker._resource_tracker
    tracker_was_running = getattr(tracker, "_fd", None) is not None
    # Dask's nannies write their workers' variables (PYTHONHASHSEED, OMP_NUM_THREADS...) into
    # this process's environment as they start them: put back, so that later tests' kernels
    # start from the suite's environment (and fork from the templates it shares).
    environ = dict(os.environ)
    with dask.config.set(config):
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address="127.0.0.1:0",  # loopback, any free port
            host="127.0.0.1",
        )
    _restore(environ)
    try:
        yield cluster
    finally:
        cluster.close()
        _restore(environ)
        # The worker processes made multiprocessing start its resource tracker; it would
        # otherwise live as long as this process.
        stop = getattr(tracker, "_stop", None)
        if not tracker_was_running and stop is not None:
            stop()


def _restore(environ: dict[str, str]) -> None:
    for name in [name for name in os.environ if name not in environ]:
        del os.environ[name]
    os.environ.update(environ)


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[Client]:
    with Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=60)
        yield client


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "data.txt").write_text("beside the notebook")
    path = folder / "sweep.py"
    path.write_text(NOTEBOOK)
    assert read_notebook(path).cells[SLEEP_CELL].source.endswith("time.sleep(sleep)")
    return path


def test_cluster_sweep_results_records_catalog_and_warm_kernels(
    client: Client, notebook: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    sets: list[dict[str, Any]] = [{"x": i} for i in range(7)] + [{"x": -1}]
    with NotebookExecutor(runs_dir=runs) as ex:
        results = ex.execute_many(notebook, sets, client=client)
        listed = ex.runs()
        frame = ex.scraps()
    assert [r["parameters"]["x"] for r in results] == [s["x"] for s in sets]
    assert [r["status"] for r in results] == ["success"] * 7 + ["error"]
    assert [r["scraps"]["x2"] for r in results[:7]] == [2 * i for i in range(7)]
    failed = results[-1]
    assert failed["error_kind"] == "cell_error"
    assert failed_cell(failed)["index"] == LAST_CELL
    assert failed_cell(failed)["evalue"] == "negative x"
    # Every run on a fresh kernel process, all in the copy of the notebook's folder.
    assert len({r["scraps"]["pid"] for r in results[:7]}) == 7
    assert {r["scraps"]["data"] for r in results[:7]} == {"beside the notebook"}
    assert sorted(p.name for p in notebook.parent.iterdir()) == ["data.txt", "sweep.py"]
    # The caller wrote the run records and the catalog.
    workers = set(client.scheduler_info()["workers"])
    for result in results:
        path = Path(result["output_path"])
        assert path.is_file() and path.is_relative_to(runs)
        record = json.loads(path.read_text())["metadata"]["notebook_executor"]
        assert record["dask_worker"] in workers
        assert record["status"] == result["status"]
        assert path.with_suffix(".md").is_file()
    assert {r["run_id"] for r in listed} == {r["run_id"] for r in results}
    assert sorted(frame["scraps.x2"].astype(int)) == [-2] + [2 * i for i in range(7)]
    # Runs after the first on a worker took a kernel the worker had started beforehand.
    stats = client.run(_pool_stats)
    assert sum(s["taken_warm"] + s["started_cold"] for s in stats.values()) >= len(sets)
    assert sum(s["taken_warm"] for s in stats.values()) >= 1


def _scheduler(cluster: LocalCluster) -> Any:
    """The cluster's scheduler: a LocalCluster runs it in this process."""
    assert cluster.scheduler is not None
    return cluster.scheduler


def _pool_stats(dask_worker: Any) -> dict[str, int]:
    engine = dask_worker.plugins[PLUGIN_NAME].engine()
    return dict(engine.pool.stats) if engine.pool is not None else {}


def test_cwd_is_used_as_is_on_the_workers(client: Client, notebook: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("on the shared path")
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        results = ex.execute_many(notebook, [{"x": 5}, {"x": 6}], client=client, cwd=shared)
    assert [r["scraps"]["data"] for r in results] == ["on the shared path"] * 2
    assert (shared / "written-5.txt").read_text() == "out"
    assert (shared / "written-6.txt").read_text() == "out"


class _TaskCapture(SchedulerPlugin):  # type: ignore[misc]
    """Keeps the pickled arguments of every task the scheduler hands to a worker."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []
        self.scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish == "processing" and self.scheduler is not None:
            task = self.scheduler.tasks.get(key)
            # (Not the task the sweep keeps its runs' attempts under: it carries nothing.)
            if task is not None and not str(key).endswith("-attempts"):
                self.blobs.append(dumps(task.run_spec))


def test_secrets_reach_the_kernels_but_not_the_scheduler(
    cluster: LocalCluster, client: Client, notebook: Path, tmp_path: Path
) -> None:
    scheduler = _scheduler(cluster)
    capture = _TaskCapture()
    capture.scheduler = scheduler
    scheduler.add_plugin(capture, name="test-capture")
    try:
        with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
            results = ex.execute_many(
                notebook, [{"x": 1}, {"x": 2}], client=client, secrets={"TOKEN": SECRET}
            )
    finally:
        scheduler.remove_plugin(name="test-capture")
    expected = hashlib.sha256(SECRET.encode()).hexdigest()
    assert [r["scraps"]["token_sha"] for r in results] == [expected, expected]
    # What the scheduler held of the tasks: the notebook, but not the secret.
    assert len(capture.blobs) >= 2
    assert all(b"token_sha" in blob for blob in capture.blobs)
    forms = [SECRET.encode(), SECRET.encode("utf-16-le"), json.dumps(SECRET).encode()]
    for blob in capture.blobs:
        assert not any(form in blob for form in forms)
    assert SECRET not in _held_by(scheduler)
    # Nor the run records: the printed value is masked there.
    for result in results:
        text = Path(result["output_path"]).read_text()
        assert SECRET not in text
        assert "[secret TOKEN]" in text
        assert SECRET not in json.dumps(result)


def _held_by(scheduler: Any) -> str:
    """The scheduler's events and logs, read from this thread: its own thread may log while
    they are read (``deque mutated during iteration``), then they are read again."""
    for _ in range(50):
        try:
            return repr(scheduler.get_events()) + repr(scheduler.get_logs())
        except RuntimeError:
            time.sleep(0.02)
    raise AssertionError("the scheduler's logs could not be read")


def test_a_worker_killed_mid_run_fails_that_run_only(
    own_cluster: LocalCluster, notebook: Path, tmp_path: Path
) -> None:
    cluster = own_cluster
    marker = tmp_path / "kernel.pid"
    sets: list[dict[str, Any]] = [{"x": 1, "sleep": 120, "marker": str(marker)}, {"x": 2}, {"x": 3}]
    with (
        Client(cluster, set_as_default=False) as client,
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        ThreadPoolExecutor(1) as pool,
    ):
        client.wait_for_workers(2, timeout=60)
        worker_pids = set(client.run(os.getpid).values())
        sweep = pool.submit(ex.execute_many, notebook, sets, client=client)
        kernel_pid = _wait_for_pid(marker, sweep)
        # The worker has reported the cells before the sleep as completed (job index 2: the
        # injected parameters cell comes first), so the caller knows which one runs.
        _wait_for_event(cluster, {"run": 0, "cell": SLEEP_CELL})
        kernel = psutil.Process(kernel_pid)
        (worker_pid,) = {p.pid for p in kernel.parents()} & worker_pids
        os.kill(worker_pid, signal.SIGKILL)
        results = sweep.result(timeout=180)
        stored = ex.get_run(results[0]["run_id"])
    lost = results[0]
    assert lost["status"] == "error"
    assert lost["error_kind"] == "interrupted"
    assert failed_cell(lost)["index"] == SLEEP_CELL
    assert "lost" in failed_cell(lost)["evalue"]
    assert lost["cells_executed"] == 2  # the parameters cell and the one before the sleep
    assert lost["duration_seconds"] > 0
    assert stored["error_kind"] == "interrupted"
    assert [r["status"] for r in results[1:]] == ["success", "success"]
    # The kernel of the dead worker does not outlive it.
    gone, _ = psutil.wait_procs([kernel], timeout=60)
    assert gone == [kernel]


def _wait_for_pid(marker: Path, sweep: Any) -> int:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if sweep.done():
            raise AssertionError(f"the sweep ended before the long cell ran: {sweep.result()}")
        if marker.exists() and marker.read_text():
            return int(marker.read_text())
        time.sleep(0.05)
    raise AssertionError("the long cell never started")


def _wait_for_event(cluster: LocalCluster, message: dict[str, Any]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for topic, events in _scheduler(cluster).get_events().items():
            # (The scheduler adds the sending worker's address to each message.)
            if topic.startswith("notebook-executor-") and any(
                message.items() <= m.items() for _, m in events
            ):
                return
        time.sleep(0.05)
    raise AssertionError(f"no event {message}")


def test_ctrl_c_cancels_the_runs_not_started(
    client: Client, notebook: Path, tmp_path: Path
) -> None:
    markers = [tmp_path / f"started-{i}" for i in range(5)]
    sets = [{"x": i, "sleep": 3, "marker": str(m)} for i, m in enumerate(markers)]

    def interrupt() -> None:
        while not any(m.exists() for m in markers):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs) as ex, pytest.raises(KeyboardInterrupt):
        ex.execute_many(notebook, sets, client=client)
    # Once the workers are idle again, the runs that had not started never did.
    deadline = time.monotonic() + 60
    while any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(client.processing().values())
    started = [m for m in markers if m.exists()]
    assert 1 <= len(started) <= 2
    assert not list(runs.glob("*/*.ipynb"))


def test_an_unreachable_scheduler_fails_before_anything_runs(
    notebook: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_cluster_dask, "CONNECT_TIMEOUT", 1.0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        pytest.raises(NotebookExecutorError, match="cannot reach the Dask scheduler"),
    ):
        ex.execute_many(notebook, [{"x": 1}], client=address)
    assert not (tmp_path / "runs").exists()
    code = main(["sweep", str(notebook), "-g", "x=1,2", "--scheduler", address, "--runs-dir", "r"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith("notebook-executor: error: cannot reach the Dask scheduler at")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_sweep_command_on_the_cluster(
    cluster: LocalCluster,
    notebook: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = tmp_path / "cli-runs"
    argv = ["sweep", str(notebook), "-g", "x=1,-1,3", "--scheduler", cluster.scheduler_address]
    code = main([*argv, "--json", "--runs-dir", str(runs)])
    out, _ = capsys.readouterr()
    assert code == 1
    results = json.loads(out)
    assert [r["parameters"]["x"] for r in results] == [1, -1, 3]
    assert [r["status"] for r in results] == ["success", "error", "success"]
    assert all(Path(r["output_path"]).is_file() for r in results)
    code = main([*argv[:3], "x=4,5", *argv[4:], "--runs-dir", str(runs)])
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.splitlines()[-1] == "2/2 runs succeeded"


#: A notebook that appends a line to ``log`` each time it is run (its side effect), then, in
#: cell HOLD_CELL, waits until the file ``hold`` exists.
ONCE_NOTEBOOK = """# %% tags=["parameters"]
x: int = 1
log: str = ""
hold: str = ""

# %%
import os
import pathlib
import time

import scrapbook as sb

if log:
    with open(log, "a") as out:
        out.write(f"{os.getpid()}\\n")

# %%
while hold and not pathlib.Path(hold).exists():
    time.sleep(0.05)

# %%
sb.glue("x2", x * 2)
"""

HOLD_CELL = 2


@pytest.fixture(params=[3, 0], ids=["dask-reschedules", "allowed-failures-0"])
def any_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """A cluster of the test's own, whose scheduler reschedules the tasks of dead workers
    (3) or not (0)."""
    yield from _local_cluster(allowed_failures=request.param)


def _kill_worker_in_hold_cell(
    ex: NotebookExecutor, cluster: LocalCluster, tmp_path: Path, **options: Any
) -> tuple[list[RunResult], list[str], str]:
    """Run three sets; SIGKILL the worker of the first while it waits in HOLD_CELL.

    The worker is killed once it holds the only copy of the shipped notebook folder (Dask
    keeps one when nothing elsewhere waits on it), so a run that needs the folder afterwards
    needs it sent again. Returns the results, the lines the runs of the first set appended,
    and the killed worker.
    """
    path = tmp_path / "project" / "once.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(ONCE_NOTEBOOK)
    assert "while hold" in read_notebook(path).cells[HOLD_CELL].source
    log, hold = tmp_path / "attempts.log", tmp_path / "hold"
    sets: list[dict[str, Any]] = [
        {"x": 1, "log": str(log), "hold": str(hold)},
        {"x": 2},
        {"x": 3},
    ]
    with Client(cluster, set_as_default=False) as client, ThreadPoolExecutor(1) as pool:
        client.wait_for_workers(2, timeout=60)
        worker_pids = client.run(os.getpid)
        sweep = pool.submit(ex.execute_many, path, sets, client=client, **options)
        kernel_pid = _wait_for_line(log, sweep)
        # Cell 1 is reported done (job index 2: the injected parameters cell comes first).
        _wait_for_event(cluster, {"run": 0, "cell": HOLD_CELL})
        kernel = psutil.Process(kernel_pid)
        (worker_pid,) = {p.pid for p in kernel.parents()} & set(worker_pids.values())
        (killed,) = [address for address, pid in worker_pids.items() if pid == worker_pid]
        _wait_for_single_copy(cluster, killed)
        os.kill(worker_pid, signal.SIGKILL)
        # A run started again would now go through the hold cell to the end.
        hold.write_text("go")
        results = sweep.result(timeout=180)
    return results, log.read_text().splitlines(), killed


def _wait_for_single_copy(cluster: LocalCluster, worker: str) -> None:
    """Wait until the data sent to every worker (the folder) is only on ``worker``."""
    scheduler = _scheduler(cluster)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        holders = [
            {ws.address for ws in ts.who_has or ()}
            for key, ts in list(scheduler.tasks.items())
            if str(key).startswith("bytes-")
        ]
        if holders and all(h == {worker} for h in holders):
            return
        time.sleep(0.1)
    raise AssertionError(f"the shipped folder is not held by {worker} alone")


def _wait_for_line(log: Path, sweep: Any) -> int:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if sweep.done():
            raise AssertionError(f"the sweep ended before the hold cell ran: {sweep.result()}")
        if log.exists() and log.read_text().endswith("\n"):
            return int(log.read_text().splitlines()[0])
        time.sleep(0.05)
    raise AssertionError("the first run never started")


def _record(result: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(Path(result["output_path"]).read_text())["metadata"][
        "notebook_executor"
    ]
    return record


def test_a_run_whose_worker_dies_is_not_run_again_by_default(
    any_cluster: LocalCluster, tmp_path: Path
) -> None:
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        results, lines, killed = _kill_worker_in_hold_cell(ex, any_cluster, tmp_path)
        stored = ex.get_run(results[0]["run_id"])
    assert len(lines) == 1, "the notebook ran again"
    lost = results[0]
    assert lost["status"] == "error"
    assert lost["error_kind"] == "interrupted"
    assert failed_cell(lost)["index"] == HOLD_CELL
    assert "lost" in failed_cell(lost)["evalue"]
    assert stored["error_kind"] == "interrupted"
    assert [r["status"] for r in results[1:]] == ["success", "success"]
    record = _record(lost)
    assert [a["worker"] for a in record["dask_attempts"]] == [killed]
    assert record["dask_attempts"][0]["error_kind"] == "interrupted"
    markdown = Path(lost["output_path"]).with_suffix(".md").read_text()
    assert killed in markdown


def test_retries_run_a_lost_run_again_and_the_record_lists_every_attempt(
    any_cluster: LocalCluster, tmp_path: Path
) -> None:
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        results, lines, killed = _kill_worker_in_hold_cell(ex, any_cluster, tmp_path, retries=1)
    assert len(lines) == 2
    assert [r["status"] for r in results] == ["success"] * 3
    assert results[0]["scraps"]["x2"] == 2
    record = _record(results[0])
    first, second = record["dask_attempts"]
    assert first["worker"] == killed
    assert (first["status"], first["error_kind"]) == ("error", "interrupted")
    assert (second["status"], second["error_kind"]) == ("success", None)
    assert second["worker"] == record["dask_worker"]
    assert first["started"] <= second["started"]
    markdown = Path(results[0]["output_path"]).with_suffix(".md").read_text()
    assert markdown.count("interrupted") == 1
    assert killed in markdown and record["dask_worker"] in markdown
    # A run lost once and run again: the other sets each ran once, with one attempt.
    assert [len(_record(r)["dask_attempts"]) for r in results[1:]] == [1, 1]
