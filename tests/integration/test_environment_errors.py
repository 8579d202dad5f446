"""A bad environment gets one line and exit status 2 before any kernel starts, never a
traceback or the status of a failed notebook: a runs folder that cannot be written, a long
``$TMPDIR``. A read-only runs folder can still be browsed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor, RunJob, RunsDirError
from notebook_executor._kernels.kernel_engine import KernelEngine
from notebook_executor.engine import EngineKernel

pytestmark = pytest.mark.kernel

NOTEBOOK = """\
# %% tags=["parameters"]
name = "World"

# %%
print(f"Hello, {name}!")
"""


def _cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notebook_executor", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=cwd,
    )


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    path = tmp_path / "hello.py"
    path.write_text(NOTEBOOK)
    return path


# -- a long $TMPDIR ------------------------------------------------------------------------------


@pytest.fixture
def long_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A $TMPDIR of over 200 characters: a kernel's sockets cannot live in it."""
    folder = tmp_path.joinpath(*(["t" * 60] * 4))
    folder.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr("tempfile.tempdir", None)
    return folder


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "launched"])
def test_kernels_run_with_a_long_tmpdir(
    long_tmpdir: Path, notebook: Path, tmp_path: Path, fork: bool
) -> None:
    engine = KernelEngine(warm_kernels=0, fork=fork)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine, progress=False) as ex:
        result = ex.execute(notebook, parameters={"name": "Ada"})
    assert result["status"] == "success", result["failed_cell"]
    assert result["cells_executed"] == 2


def test_the_command_line_runs_with_a_long_tmpdir(long_tmpdir: Path, notebook: Path) -> None:
    env = {**os.environ, "TMPDIR": str(long_tmpdir)}
    done = _cli("run", str(notebook), "--json", "--runs-dir", str(notebook.parent / "r"), env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "success"


# -- a runs folder that cannot be written --------------------------------------------------------


@pytest.fixture
def locked_runs(tmp_path: Path, notebook: Path) -> Iterator[Path]:
    """A runs folder holding one finished run, then made impossible to write to.

    As root, permissions do not stop writes: the folder is then bind-mounted read-only in a
    mount namespace of its own, entered by the commands through :func:`_in_locked`.
    """
    runs = tmp_path / "runs"
    # In-process: a served run answers before its child lets go of the catalog (its WAL files
    # then go), which the tests' listings of the folder would see.
    done = _cli("run", str(notebook), "-p", "name", "Ada", "--runs-dir", str(runs), "--no-server")
    assert done.returncode == 0, done.stderr
    if os.geteuid() != 0:
        runs.chmod(0o555)  # the test's own folder
        yield runs
        runs.chmod(0o755)
        return
    if shutil.which("unshare") is None:  # pragma: no cover - util-linux is on every CI machine
        pytest.skip("running as root needs unshare(1) to make a read-only folder")
    yield runs


def _in_locked(
    runs: Path, *args: str, python: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command line (or the Python code ``python``) with ``runs`` read-only (as
    root: in a mount namespace of its own)."""
    if python is None:
        command = [sys.executable, "-m", "notebook_executor", *args]
    else:
        command = [sys.executable, "-c", python, *args]
    if os.geteuid() != 0:
        return subprocess.run(command, capture_output=True, text=True, timeout=180)
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
    return subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            str(runs),
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_run_into_a_folder_that_cannot_be_written_is_one_line_exit_2(
    locked_runs: Path, notebook: Path
) -> None:
    before = sorted(p.relative_to(locked_runs) for p in locked_runs.rglob("*"))
    done = _in_locked(locked_runs, "run", str(notebook), "--runs-dir", str(locked_runs))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(locked_runs) in lines[0]
    assert "cannot hold run records" in lines[0]
    assert "Traceback" not in done.stderr
    assert sorted(p.relative_to(locked_runs) for p in locked_runs.rglob("*")) == before


def test_a_folder_that_cannot_be_written_can_still_be_browsed(locked_runs: Path) -> None:
    listed = _in_locked(locked_runs, "runs", "--runs-dir", str(locked_runs), "--json")
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert run["parameters"] == {"name": "Ada"}
    shown = _in_locked(locked_runs, "show", run["run_id"], "--runs-dir", str(locked_runs))
    assert shown.returncode == 0, shown.stderr
    found = _in_locked(locked_runs, "search", "Ada", "--runs-dir", str(locked_runs), "--json")
    assert found.returncode == 0, found.stderr
    assert [hit["run_id"] for hit in json.loads(found.stdout)] == [run["run_id"]]


def test_a_folder_without_a_catalog_is_browsed_from_its_run_files(locked_runs: Path) -> None:
    # Remove the catalog before the folder is locked: only the run records are left.
    for path in locked_runs.glob("catalog.sqlite*"):
        if os.geteuid() != 0:
            locked_runs.chmod(0o755)
        path.unlink()
    if os.geteuid() != 0:
        locked_runs.chmod(0o555)
    listed = _in_locked(locked_runs, "runs", "--runs-dir", str(locked_runs), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [run["status"] for run in json.loads(listed.stdout)] == ["success"]
    assert not list(locked_runs.glob("catalog.sqlite*"))


def test_reindex_of_a_folder_that_cannot_be_written_says_why_not_reindex(
    locked_runs: Path,
) -> None:
    done = _in_locked(locked_runs, "reindex", "--runs-dir", str(locked_runs))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "read-only" in lines[0] or "no permission" in lines[0]
    assert "run `notebook-executor reindex`" not in lines[0]


def test_the_api_raises_runs_dir_error_before_any_kernel(tmp_path: Path, notebook: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")

    class NoKernel:
        def open(self, job: RunJob) -> EngineKernel:
            raise AssertionError("a kernel was asked for")

        def close(self) -> None:
            pass

    with (
        NotebookExecutor(runs_dir=blocked / "runs", engine=NoKernel(), progress=False) as ex,
        pytest.raises(RunsDirError) as raised,
    ):
        ex.execute(notebook)
    assert isinstance(raised.value, OSError)
    assert str(blocked / "runs") in str(raised.value)


def test_the_api_raises_runs_dir_error_for_a_read_only_folder(
    locked_runs: Path, notebook: Path
) -> None:
    code = """if True:
        import sys
        from notebook_executor import EngineOutcome, NotebookExecutor, RunJob, RunsDirError
        with NotebookExecutor(runs_dir=sys.argv[1], progress=False) as ex:
            try:
                ex.execute(sys.argv[2])
            except RunsDirError as exc:
                print("RunsDirError", isinstance(exc, OSError), exc.path, flush=True)
            assert ex.runs(), "the folder's runs are still listed"
    """
    done = _in_locked(locked_runs, str(locked_runs), str(notebook), python=code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["RunsDirError", "True", str(locked_runs)]
