"""The fault matrix: every way a run can go wrong, on real kernels, with nothing mocked.

Each case runs a notebook whose fourth cell (source index 3) misbehaves: it raises, outlives
its ``cell_timeout`` or the run's ``timeout``, exits the kernel, crashes it, gets it killed from
outside, floods its output, or sees its host process killed. Every case checks the result dict
(status, error_kind, failed_cell.index), the partial notebook kept in ``runs/`` (what ran is
there, what never ran is not marked as run), and that the same executor then runs a good
notebook as if nothing had happened.

Damaged records come last: a catalog that is garbage, truncated, empty, someone else's SQLite
database or damaged under an open executor, and run records that are truncated, garbage or hold
nonsense. Queries through the API and the command line never raise a raw sqlite3 or json
error: the catalog is rebuilt from the run records, or a one-line package error names the
problem. ``FAULT_CASES`` lists the cases; the module prints its count at the end.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import nbformat
import pytest

from notebook_executor import CatalogError, NotebookExecutor, NotebookExecutorError, read_notebook
from notebook_executor._records.store import RunStore
from notebook_executor._records.streams import MAX_STREAM_CHARS
from support import alive, descendants, failed_cell, report, wait_gone

pytestmark = pytest.mark.kernel

#: Source index of the cell that misbehaves in ``TEMPLATE``.
FAULT = 3

TEMPLATE = """# %% [markdown]
# A notebook whose fourth cell misbehaves.

# %% tags=["parameters"]
pidfile: str = ""
readyfile: str = ""

# %%
import os
import pathlib
import time

if pidfile:
    pathlib.Path(pidfile).write_text(f"{{os.getpid()}} {{os.getppid()}}")
print("first cell ran")

# %%
{fault}

# %%
print("never printed")
"""

GOOD = """# %%
import os
import scrapbook as sb

sb.glue("answer", 6 * 7)
sb.glue("pid", os.getpid())
"""

# Several cells, each well under its cell_timeout, that together outlast the run's timeout.
SLOW_CELLS = (
    '# %% [markdown]\n# Many short cells.\n\n# %% tags=["parameters"]\nx = 1\n\n'
    '# %%\nprint("first cell ran")\n\n'
    + "".join(f"# %%\nimport time\ntime.sleep(1.0)\nprint('slept {n}')\n\n" for n in range(8))
)

FAULTS = {
    "raises": 'raise ValueError("boom: " + "the cell failed")',
    "sleeps": "time.sleep(120)",
    "exits": "os._exit(3)",
    "segfaults": "import ctypes\n\nctypes.string_at(0)",
    "killed": "pathlib.Path(readyfile).write_text('sleeping')\ntime.sleep(120)",
    "floods": (
        "for i in range(200_000):\n    print(f'line {i:06d} ' + 'x' * 88)\nprint('flood done')"
    ),
    "floods-then-raises": (
        "import sys\n\nsys.stdout.write('y' * 20_000_000)\nsys.stdout.flush()\n"
        "raise RuntimeError('z' * 200_000)"
    ),
}

#: Every fault case of this module, filled in as the tests run.
FAULT_CASES: list[str] = []

#: A result dict never holds cell outputs: with a 20 MB output it stays this small.
RESULT_LIMIT = 40_000
#: The marker :mod:`notebook_executor._records.streams` leaves where it cut a stream.
MARKER = "[notebook-executor: output truncated,"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("faults")
    for name, fault in FAULTS.items():
        (folder / f"{name}.py").write_text(TEMPLATE.format(fault=fault))
    (folder / "good.py").write_text(GOOD)
    (folder / "slow_cells.py").write_text(SLOW_CELLS)
    return folder


@pytest.fixture(scope="module")
def ex(workdir: Path) -> Iterator[NotebookExecutor]:
    executor = NotebookExecutor(runs_dir=workdir / "runs")
    yield executor
    executor.close()


@pytest.fixture(scope="module", autouse=True)
def report_fault_cases(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if FAULT_CASES:
        report(request.config, f"\nfault cases: {len(FAULT_CASES)} ({', '.join(FAULT_CASES)})")


def _executed_source_cells(path: str | Path) -> tuple[Any, list[Any]]:
    """The stored run notebook, and its cells minus the injected-parameters one (so they line
    up with ``read_notebook(source).cells``)."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    return nb, cells


def _check_fault(
    ex: NotebookExecutor, result: Mapping[str, Any], source: Path, *, kind: str, index: int
) -> list[Any]:
    """Assert the result and the partial run notebook of a run that failed at ``index``."""
    FAULT_CASES.append(source.stem)
    assert (result["status"], result["error_kind"]) == ("error", kind), result
    failed = failed_cell(result)
    assert failed["index"] == index, failed
    source_cells = read_notebook(source).cells
    assert failed["source"] == source_cells[index].source
    assert all("\x1b" not in line for line in failed["traceback"])
    code = [i for i, cell in enumerate(source_cells) if cell.cell_type == "code"]
    assert result["cells_total"] == len(code)
    assert result["cells_executed"] == len([i for i in code if i < index])
    assert len(json.dumps(result)) < RESULT_LIMIT

    nb, cells = _executed_source_cells(result["output_path"])
    assert len(cells) == len(source_cells)
    record = nb.metadata["notebook_executor"]
    assert (record["status"], record["error_kind"]) == ("error", kind)
    assert record["failed_cell"]["index"] == index
    for i in code:
        cell = cells[i]
        status = cell.metadata["notebook_executor"]["status"]
        if i < index:
            assert status == "completed"
            assert cell.execution_count is not None
        elif i == index:
            assert status == "failed"
        else:
            assert status == "not_run"
            assert cell.execution_count is None
            assert cell.outputs == []
    first_outputs = "".join(o.get("text", "") for o in cells[2].outputs)
    assert "first cell ran" in first_outputs
    markdown = Path(result["output_path"]).with_suffix(".md").read_text(encoding="utf-8")
    assert f"Failed in cell {index}:" in markdown
    assert "status: error" in markdown

    stored = ex.get_run(result["run_id"])
    assert (stored["status"], stored["error_kind"]) == ("error", kind)
    assert failed_cell(stored)["index"] == index
    assert stored["cells_executed"] == result["cells_executed"]
    return list(cells)


def _check_healthy(ex: NotebookExecutor, workdir: Path) -> None:
    """The executor that saw the fault runs a good notebook as usual."""
    result = ex.execute(workdir / "good.py")
    assert (result["status"], result["error_kind"], result["failed_cell"]) == (
        "success",
        None,
        None,
    )
    assert result["scraps"]["answer"] == 42
    assert result["cells_executed"] == result["cells_total"] == 1


# -- faults inside one run ------------------------------------------------------------------------


def test_a_cell_that_raises(ex: NotebookExecutor, workdir: Path) -> None:
    source = workdir / "raises.py"
    result = ex.execute(source, parameters={"pidfile": str(workdir / "raises.pid")})
    _check_fault(ex, result, source, kind="cell_error", index=FAULT)
    failed = failed_cell(result)
    assert (failed["ename"], failed["evalue"]) == ("ValueError", "boom: the cell failed")
    assert any("ValueError" in line for line in failed["traceback"])
    _check_healthy(ex, workdir)


def test_a_cell_over_its_cell_timeout(ex: NotebookExecutor, workdir: Path) -> None:
    source = workdir / "sleeps.py"
    began = time.monotonic()
    result = ex.execute(source, cell_timeout=2)
    assert time.monotonic() - began < 60
    _check_fault(ex, result, source, kind="timeout", index=FAULT)
    assert "cell_timeout of 2 s" in failed_cell(result)["evalue"]
    _check_healthy(ex, workdir)


def test_a_run_over_its_timeout_while_each_cell_is_under_its_own(
    ex: NotebookExecutor, workdir: Path
) -> None:
    source = workdir / "slow_cells.py"
    began = time.monotonic()
    result = ex.execute(source, timeout=5, cell_timeout=2.5)
    assert time.monotonic() - began < 60
    index = failed_cell(result)["index"]
    # Which one-second cell the deadline lands in depends on the machine; it is a sleeping
    # one, neither the parameters cell nor a cell that never started.
    assert 3 <= index <= 10, result["failed_cell"]
    cells = _check_fault(ex, result, source, kind="timeout", index=index)
    assert "exceeded its timeout of 5 s" in failed_cell(result)["evalue"]
    for done in range(3, index):
        assert f"slept {done - 3}" in "".join(o.get("text", "") for o in cells[done].outputs)
    _check_healthy(ex, workdir)


def test_a_kernel_that_exits(ex: NotebookExecutor, workdir: Path) -> None:
    source = workdir / "exits.py"
    result = ex.execute(source)
    _check_fault(ex, result, source, kind="kernel_died", index=FAULT)
    assert "exit status 3" in failed_cell(result)["evalue"]
    _check_healthy(ex, workdir)


def test_a_kernel_that_segfaults(ex: NotebookExecutor, workdir: Path) -> None:
    source = workdir / "segfaults.py"
    result = ex.execute(source, parameters={"pidfile": str(workdir / "segfaults.pid")})
    _check_fault(ex, result, source, kind="kernel_died", index=FAULT)
    assert f"exit status -{int(signal.SIGSEGV)}" in failed_cell(result)["evalue"]
    pid = int((workdir / "segfaults.pid").read_text().split()[0])
    assert wait_gone({pid}) == set()
    _check_healthy(ex, workdir)


def test_a_kernel_killed_from_outside(ex: NotebookExecutor, workdir: Path) -> None:
    source = workdir / "killed.py"
    pidfile, ready = workdir / "killed.pid", workdir / "killed.ready"
    killed: list[int] = []

    def kill_when_sleeping() -> None:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if ready.exists():
            pid = int(pidfile.read_text().split()[0])
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_when_sleeping)
    killer.start()
    try:
        result = ex.execute(
            source,
            parameters={"pidfile": str(pidfile), "readyfile": str(ready)},
            cell_timeout=90,
        )
    finally:
        killer.join()
    assert len(killed) == 1, "the cell never reported that it was sleeping"
    _check_fault(ex, result, source, kind="kernel_died", index=FAULT)
    assert f"exit status -{int(signal.SIGKILL)}" in failed_cell(result)["evalue"]
    assert not alive(killed[0])
    _check_healthy(ex, workdir)


def _stream_chars(cell: Any) -> int:
    return sum(len(o.get("text", "")) for o in cell.outputs if o.output_type == "stream")


def test_a_cell_printing_20_mb_in_many_writes(ex: NotebookExecutor, workdir: Path) -> None:
    result = ex.execute(workdir / "floods.py")
    FAULT_CASES.append("floods")
    assert (result["status"], result["error_kind"], result["failed_cell"]) == (
        "success",
        None,
        None,
    )
    assert len(json.dumps(result)) < RESULT_LIMIT
    _, cells = _executed_source_cells(result["output_path"])
    flood = cells[FAULT]
    text = "".join(o.get("text", "") for o in flood.outputs if o.output_type == "stream")
    # Capped as a whole, however many stream messages the kernel sent it in.
    assert _stream_chars(flood) <= MAX_STREAM_CHARS + 200
    assert MARKER in text
    assert text.startswith("line 000000 ")
    assert cells[FAULT + 1].execution_count is not None
    assert Path(result["output_path"]).stat().st_size < 3 * MAX_STREAM_CHARS
    assert Path(result["output_path"]).with_suffix(".md").stat().st_size < 3 * MAX_STREAM_CHARS
    _check_healthy(ex, workdir)


def test_a_cell_printing_20_mb_then_raising_a_huge_error(
    ex: NotebookExecutor, workdir: Path
) -> None:
    source = workdir / "floods-then-raises.py"
    result = ex.execute(source)
    _check_fault(ex, result, source, kind="cell_error", index=FAULT)
    failed = failed_cell(result)
    assert failed["ename"] == "RuntimeError"
    assert len(failed["evalue"]) < 11_000
    assert "more characters in the run records" in failed["evalue"]
    _, cells = _executed_source_cells(result["output_path"])
    text = "".join(o.get("text", "") for o in cells[FAULT].outputs if o.output_type == "stream")
    assert _stream_chars(cells[FAULT]) <= MAX_STREAM_CHARS + 200
    assert MARKER in text
    _check_healthy(ex, workdir)


# -- the host process killed mid-run --------------------------------------------------------------

HOST = r"""
import sys
from notebook_executor import NotebookExecutor

from notebook_executor._kernels.kernel_engine import KernelEngine

runs_dir, workdir, pidfile, ready, mode = sys.argv[1:6]
with NotebookExecutor(runs_dir=runs_dir, engine=KernelEngine(fork=mode == "forked")) as ex:
    if mode == "forked":
        # After a few runs kernels come forked from the template, not launched.
        for _ in range(3):
            ex.execute(f"{workdir}/good.py")
        import time
        time.sleep(1.0)
    ex.execute(f"{workdir}/killed.py", parameters={"pidfile": pidfile, "readyfile": ready})
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
@pytest.mark.parametrize("mode", ["launched", "forked"])
def test_the_host_killed_mid_run(ex: NotebookExecutor, workdir: Path, mode: str) -> None:
    runs_dir = workdir / f"host-{mode}-runs"
    pidfile, ready = workdir / f"host-{mode}.pid", workdir / f"host-{mode}.ready"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(runs_dir), str(workdir), str(pidfile), str(ready), mode],
        cwd=workdir,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert host.poll() is None, "the host ended before it was killed"
            assert time.monotonic() < deadline, "the slow cell never started"
            time.sleep(0.05)
        kernel_pid, kernel_parent = (int(n) for n in pidfile.read_text().split())
        family = descendants(host.pid)
        assert kernel_pid in family
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=60)
    assert host.returncode == -signal.SIGKILL
    FAULT_CASES.append(f"host-killed-{mode}")
    if mode == "launched":
        assert kernel_parent == host.pid
    else:
        assert kernel_parent != host.pid  # forked from the template process

    # (b) the kernel, and every other process of the host, dies with it.
    assert wait_gone(family) == set()

    # (a) the run shows as interrupted, through the API and the command line.
    with NotebookExecutor(runs_dir=runs_dir) as after:
        [row] = after.runs(notebook="killed.py")
        assert (row["status"], row["error_kind"], row["failed_cell"]) == (
            "error",
            "interrupted",
            None,
        )
        assert row["parameters"] == {"pidfile": str(pidfile), "readyfile": str(ready)}
        assert after.get_run(row["run_id"])["error_kind"] == "interrupted"
        assert after.scraps().loc[row["run_id"], "status"] == "error"
        # The run notebook is the one saved when the run began: valid, and nothing marked run.
        nb, cells = _executed_source_cells(RunStore(runs_dir).path(row["run_id"]))
        assert nb.metadata["notebook_executor"]["status"] == "running"
        assert all(c.get("execution_count") is None for c in cells if c.cell_type == "code")
        listed = _cli("runs", "--notebook", "killed.py", runs_dir=runs_dir)
        assert [(r["run_id"], r["error_kind"]) for r in listed] == [(row["run_id"], "interrupted")]
        # A new executor on the same runs/ works as usual.
        _check_healthy(after, workdir)
        assert len(after.runs(status="success")) == (1 if mode == "launched" else 4)
    _check_healthy(ex, workdir)


STOPPING = """# %% tags=["parameters"]
pidfile: str = ""

# %%
import pathlib
import subprocess

child = subprocess.Popen(["sleep", "600"])
shell = subprocess.run(
    ["sh", "-c", "sleep 600 > /dev/null 2>&1 & echo $!"], capture_output=True, text=True
)
pathlib.Path(pidfile).write_text(f"{child.pid} {shell.stdout.strip()}")
"""

# The host killed as its kernel has just exited, before it kills the kernel's session (the
# chaos test caught one killed there): what the notebook started must go all the same.
HOST_STOPPING = r"""
import os
import signal
import sys

from notebook_executor import NotebookExecutor
from notebook_executor._kernels import launch

runs_dir, workdir, pidfile, mode = sys.argv[1:5]


kill_sessions = launch.kill_sessions


def die(leaders, **kwargs):
    # Only once the kernel has exited: before, it would see its host die and kill its session.
    for leader in leaders:
        try:
            with open(f"/proc/{leader}/stat", "rb") as stat:
                exited = stat.read().rpartition(b")")[2].split()[0] == b"Z"
        except OSError:
            exited = True
        if exited:
            with open(pidfile + ".exited", "w") as out:
                out.write(str(leader))
            os.kill(os.getpid(), signal.SIGKILL)
    kill_sessions(leaders, **kwargs)


from notebook_executor._kernels.kernel_engine import KernelEngine

with NotebookExecutor(runs_dir=runs_dir, engine=KernelEngine(fork=mode == "forked")) as ex:
    if mode == "forked":
        for _ in range(3):
            ex.execute(f"{workdir}/good.py")
        import time
        time.sleep(1.0)
    launch.kill_sessions = die
    ex.execute(f"{workdir}/stopping.py", parameters={"pidfile": pidfile})
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
@pytest.mark.parametrize("mode", ["launched", "forked"])
def test_the_host_killed_between_its_kernels_exit_and_the_sessions_kill(
    workdir: Path, mode: str
) -> None:
    (workdir / "stopping.py").write_text(STOPPING)
    pidfile = workdir / f"stopping-{mode}.pid"
    host = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOST_STOPPING,
            str(workdir / f"stopping-{mode}-runs"),
            str(workdir),
            str(pidfile),
            mode,
        ],
        cwd=workdir,
    )
    try:
        host.wait(timeout=120)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    started = [int(pid) for pid in pidfile.read_text().split()]
    try:
        # It died where it would kill the session, its kernel gone.
        assert host.returncode == -signal.SIGKILL
        assert Path(f"{pidfile}.exited").exists()
        assert len(started) == 2
        assert wait_gone(started) == set()
    finally:
        for pid in started:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    FAULT_CASES.append(f"host-killed-after-its-kernel-{mode}")


# -- damaged run records: the catalog and the run records ------------------------------------


@pytest.fixture(scope="module")
def sample_runs(workdir: Path) -> tuple[Path, list[str]]:
    """A runs directory holding three real runs (one failed), its writer closed."""
    runs_dir = workdir / "sample-runs"
    with NotebookExecutor(runs_dir=runs_dir) as writer:
        ids = [writer.execute(workdir / name)["run_id"] for name in ("good.py", "raises.py")]
        ids.append(writer.execute(workdir / "good.py")["run_id"])
    return runs_dir, ids


def _garbage(path: Path, size: int) -> None:
    path.write_bytes(bytes((n * 7919 + 13) % 251 for n in range(size)))


def _foreign_database(path: Path, version: int) -> None:
    """Another program's SQLite database, its ``user_version`` one of ours (or unset)."""
    path.unlink()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('not a run')")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()


def _garbage_beside(path: Path) -> None:
    """Garbage write-ahead log and shared-memory files beside a sound catalog."""
    _garbage(path.with_name(path.name + "-wal"), 5000)
    _garbage(path.with_name(path.name + "-shm"), 32768)


CATALOG_DAMAGE: dict[str, Callable[[Path], object]] = {
    "garbage": lambda path: _garbage(path, path.stat().st_size),
    "empty": lambda path: path.write_bytes(b""),
    "header-only": lambda path: path.write_bytes(path.read_bytes()[:100]),
    "half": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "garbage-after-the-header": lambda path: path.write_bytes(
        path.read_bytes()[:100] + b"\xa5" * (path.stat().st_size - 100)
    ),
    "garbage-wal-and-shm": _garbage_beside,
}


def _one_line(message: str) -> None:
    assert message and "\n" not in message, repr(message)
    assert "Traceback" not in message


def _no_raw_error(call: Callable[[], Any]) -> Any:
    """``call()``, or the package error it raised (checked to be one line); anything else, a
    raw sqlite3 or json error above all, fails the test."""
    try:
        return call()
    except NotebookExecutorError as exc:
        _one_line(str(exc))
        if isinstance(exc, CatalogError):
            assert "reindex" in str(exc)
        return exc


def _cli(*args: str, runs_dir: Path) -> Any:
    """Run a catalog command; the parsed JSON on success, else the one-line error."""
    done = subprocess.run(
        [sys.executable, "-m", "notebook_executor", *args, "--json", "--runs-dir", str(runs_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 0:
        return json.loads(done.stdout)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    return line


@pytest.mark.parametrize("damage", sorted(CATALOG_DAMAGE))
def test_a_damaged_catalog_is_rebuilt_from_the_run_files(
    sample_runs: tuple[Path, list[str]], tmp_path: Path, damage: str
) -> None:
    sample, ids = sample_runs
    runs_dir = tmp_path / "runs"
    shutil.copytree(sample, runs_dir)
    with NotebookExecutor(runs_dir=runs_dir) as before:
        expected = {row["run_id"]: row for row in before.runs()}
    assert sorted(expected) == sorted(ids)
    CATALOG_DAMAGE[damage](runs_dir / "catalog.sqlite")

    FAULT_CASES.append(f"catalog-{damage}")
    # The command line first: a fresh process meets the damage.
    rows = _cli("runs", runs_dir=runs_dir)
    assert sorted(row["run_id"] for row in rows) == sorted(ids), rows
    assert {row["run_id"]: row for row in rows} == expected
    assert len(_cli("scraps", runs_dir=runs_dir)) == len(ids)
    assert _cli("show", ids[1], runs_dir=runs_dir) == expected[ids[1]]
    with NotebookExecutor(runs_dir=runs_dir) as after:
        assert {row["run_id"]: row for row in after.runs()} == expected
        assert sorted(after.scraps().index) == sorted(ids)
        assert all(after.get_run(run_id) == expected[run_id] for run_id in ids)
        assert after.reindex() == len(ids)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_foreign_database_in_the_catalog_place_is_refused_and_left_alone(
    sample_runs: tuple[Path, list[str]], tmp_path: Path, version: int
) -> None:
    # Not ours: it is never dropped, changed or moved aside; the one-line error names it.
    sample, ids = sample_runs
    runs_dir = tmp_path / "runs"
    shutil.copytree(sample, runs_dir)
    catalog = runs_dir / "catalog.sqlite"
    _foreign_database(catalog, version)
    before = catalog.read_bytes()
    FAULT_CASES.append(f"catalog-foreign-database-v{version}")
    line = _cli("runs", runs_dir=runs_dir)
    assert isinstance(line, str) and "not created by notebook-executor" in line, line
    assert str(catalog) in line
    with NotebookExecutor(runs_dir=runs_dir) as after:
        with pytest.raises(CatalogError, match="not created by notebook-executor"):
            after.runs()
        assert after.get_run(ids[0])["run_id"] == ids[0]  # the files still answer
    assert catalog.read_bytes() == before
    assert sorted(p.name for p in runs_dir.glob("catalog.sqlite*")) == ["catalog.sqlite"]


def test_a_catalog_damaged_under_an_open_executor(
    sample_runs: tuple[Path, list[str]], tmp_path: Path, ex: NotebookExecutor, workdir: Path
) -> None:
    sample, ids = sample_runs
    runs_dir = tmp_path / "runs"
    shutil.copytree(sample, runs_dir)
    FAULT_CASES.append("catalog-damaged-while-open")
    with NotebookExecutor(runs_dir=runs_dir) as reader:
        assert len(reader.runs()) == len(ids)
        catalog = runs_dir / "catalog.sqlite"
        with catalog.open("r+b") as handle:  # in place: the open connection keeps its inode
            handle.write(b"\x00garbage" * (catalog.stat().st_size // 8))
        # Each query answers from the damaged catalog's rebuild, or says what is wrong.
        rows = _no_raw_error(reader.runs)
        assert isinstance(rows, CatalogError) or sorted(r["run_id"] for r in rows) == sorted(ids)
        frame = _no_raw_error(reader.scraps)
        assert isinstance(frame, CatalogError) or sorted(frame.index) == sorted(ids)
        shown = _no_raw_error(lambda: reader.get_run(ids[0]))
        assert isinstance(shown, CatalogError) or shown["run_id"] == ids[0]
        with NotebookExecutor(runs_dir=runs_dir) as fresh:
            assert sorted(row["run_id"] for row in fresh.runs()) == sorted(ids)
        assert sorted(row["run_id"] for row in reader.runs()) == sorted(ids)


def _odd_record(path: Path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    document["metadata"]["notebook_executor"].update(
        pid=10**30,
        cells_total=float("nan"),
        cells_executed=10**400,
        duration_seconds="slow",
        started_at=5,
        parameters=[1, 2],
        scraps="none",
        failed_cell=7,
        status="weird",
        host=["a"],
    )
    path.write_text(json.dumps(document), encoding="utf-8")


RUN_FILE_DAMAGE: dict[str, Callable[[Path], object]] = {
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "garbage": lambda path: _garbage(path, 3000),
    "empty": lambda path: path.write_bytes(b""),
    "not-utf8": lambda path: path.write_bytes(b"\xff\xfe" + path.read_bytes()),
    "not-a-run-record": lambda path: path.write_text(json.dumps({"cells": [], "metadata": {}})),
    "json-but-not-an-object": lambda path: path.write_text("[1, 2, 3]"),
    "odd-record-values": _odd_record,
}


@pytest.mark.parametrize("damage", sorted(RUN_FILE_DAMAGE))
def test_a_damaged_run_file_never_raises_a_raw_error(
    sample_runs: tuple[Path, list[str]], tmp_path: Path, damage: str
) -> None:
    sample, ids = sample_runs
    runs_dir = tmp_path / "runs"
    shutil.copytree(sample, runs_dir)
    broken = ids[1]
    RUN_FILE_DAMAGE[damage](RunStore(runs_dir).path(broken))
    FAULT_CASES.append(f"run-file-{damage}")

    def queries(reader: NotebookExecutor) -> list[Any]:
        answers = [
            _no_raw_error(reader.runs),
            _no_raw_error(reader.scraps),
            _no_raw_error(lambda: reader.collect_outputs(broken)),
        ]
        answers += [_no_raw_error(functools.partial(reader.get_run, run_id)) for run_id in ids]
        return answers

    # With the catalog intact, every run is still listed and shown from it.
    with NotebookExecutor(runs_dir=runs_dir) as reader:
        rows, frame, scraps, *shown = queries(reader)
        assert isinstance(scraps, (dict, NotebookExecutorError))
        assert sorted(row["run_id"] for row in rows) == sorted(ids)
        assert sorted(frame.index) == sorted(ids)
        assert all(isinstance(result, dict) for result in shown)
    assert isinstance(_cli("show", broken, runs_dir=runs_dir), dict)

    # Rebuilt from the files alone, the damaged run is skipped or read as well as it can be.
    # (A served command's child may still be closing its connection: its WAL file goes then.)
    for path in runs_dir.glob("catalog.sqlite*"):
        path.unlink(missing_ok=True)
    with NotebookExecutor(runs_dir=runs_dir) as reader:
        indexed = _no_raw_error(reader.reindex)
        assert indexed in (len(ids) - 1, len(ids))
        rows, frame, scraps, *shown = queries(reader)
        assert isinstance(scraps, (dict, NotebookExecutorError))
        healthy = [run_id for run_id in ids if run_id != broken]
        assert set(healthy) <= {row["run_id"] for row in rows}
        assert set(healthy) <= set(frame.index)
        for run_id, result in zip(ids, shown, strict=True):
            assert isinstance(result, dict) or run_id == broken
    assert isinstance(_cli("scraps", runs_dir=runs_dir), list)
    answer = _cli("show", broken, runs_dir=runs_dir)
    assert isinstance(answer, dict) or "Traceback" not in answer
