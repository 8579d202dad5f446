"""Nothing stalls on a file that is not a regular file: a named pipe (FIFO) where a notebook,
a run record, a parameters file or a ``.env`` is looked for is refused or skipped, never
opened for a read that waits for a writer; a device is never read without end; a YAML
document is bounded by its nodes, not only its characters.

A read that blocks on the old code would block the test forever: each call runs in a thread
(or a child process) given a deadline, and a call still blocked at the deadline is released
(its FIFOs opened for writing, which ends the read) and the test fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError, read_notebook
from notebook_executor._parameters.environment import read_dotenv
from notebook_executor._records.ids import run_day
from notebook_executor._records.store import RunStore
from notebook_executor._sources.bounded import MAX_YAML_NODES, YamlRefused, load_yaml
from notebook_executor._sources.discover import walk_notebooks
from notebook_executor._sources.regular import NotRegularFileError, read_regular
from support import run_cli

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"

#: Seconds a call may take before it is taken as stalled (far above what any takes).
DEADLINE = 60.0

NOTEBOOK = '# %% tags=["parameters"]\nx = 1\n\n# %%\nprint(x)\n'


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _release(fifos: Iterable[Path]) -> None:
    """End any read blocked on ``fifos``: a writer comes, and goes."""
    for fifo in fifos:
        try:
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        except OSError:
            continue
        os.close(fd)


def _within(call: Callable[[], Any], fifos: Iterable[Path]) -> Any:
    """``call()``'s value (or the exception it raised), failing the test if it stalls."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive():
        for _ in range(50):  # a reader may reopen: release until it is done
            _release(fifos)
            thread.join(0.2)
            if not thread.is_alive():
                break
        pytest.fail(f"stalled for {DEADLINE:g} s on a named pipe")
    return outcome[0]


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line in a child process; a child still going at the deadline is killed
    and the test fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    try:
        return subprocess.run(
            [sys.executable, "-m", "notebook_executor", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`notebook-executor {' '.join(argv)}` stalled for {DEADLINE:g} s")


def _one_line_refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


# -- the one reader ---------------------------------------------------------------------------


def test_read_regular_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path / "pipe.ipynb")
    with pytest.raises(NotRegularFileError, match="named pipe"):
        _raise(_within(lambda: read_regular(fifo), [fifo]))
    with pytest.raises(NotRegularFileError, match="character device"):
        read_regular("/dev/zero")  # never read without end
    with pytest.raises(NotRegularFileError, match="folder"):
        read_regular(tmp_path)
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(os.fspath(tmp_path / "s.py"))
        with pytest.raises(NotRegularFileError, match="socket"):
            read_regular(tmp_path / "s.py")
    (tmp_path / "big.py").write_bytes(b"x" * 1001)
    with pytest.raises(NotRegularFileError, match="too large"):
        read_regular(tmp_path / "big.py", 1000)
    assert read_regular(tmp_path / "big.py", 1000, cut=True) == b"x" * 1000
    assert read_regular(tmp_path / "big.py") == b"x" * 1001


def _raise(value: Any) -> Any:
    if isinstance(value, BaseException):
        raise value
    return value


# -- sources -------------------------------------------------------------------------------------


def test_a_fifo_named_like_a_notebook_is_not_listed_and_not_opened(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text(NOTEBOOK, encoding="utf-8")
    fifos = [_fifo(tmp_path / name) for name in ("a.md", "b.py", "c.ipynb", "d.Rmd")]
    (tmp_path / "sub").mkdir()
    fifos.append(_fifo(tmp_path / "sub" / "e.py"))
    found = _within(lambda: list(walk_notebooks(tmp_path)), fifos)
    assert found == [tmp_path / "real.py"]


def test_a_fifo_given_as_a_notebook_is_a_typed_error(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path / "pipe.py")
    outcome = _within(lambda: read_notebook(fifo), [fifo])
    assert isinstance(outcome, NotebookExecutorError), outcome
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        outcome = _within(lambda: ex.validate(fifo), [fifo])
    assert not isinstance(outcome, BaseException) or isinstance(outcome, NotebookExecutorError)


def test_a_fifo_as_a_parameters_file_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    _fifo(tmp_path / "params.yaml")
    line = _one_line_refusal(_cli("run", "nb.py", "-f", "params.yaml", cwd=tmp_path))
    assert "params.yaml" in line
    assert "named pipe" in line
    assert not (tmp_path / "runs").exists()


def test_a_fifo_as_a_dotenv_file_is_skipped(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path / ".env")
    assert _within(lambda: read_dotenv(fifo), [fifo]) == {}


# -- run records ---------------------------------------------------------------------------------


def test_a_fifo_in_place_of_a_run_record_stalls_nothing(
    tmp_path: Path, ex: NotebookExecutor, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    good = ex.execute(tmp_path / "nb.py")["run_id"]
    victim = ex.execute(tmp_path / "nb.py")["run_id"]
    ex.close()
    runs = tmp_path / "runs"
    # A run the catalog lists, whose record became a pipe: the report reads it.
    RunStore(runs).path(victim).unlink()
    _fifo(RunStore(runs).path(victim))
    fifo_id = good[:-8] + "ffffffff"
    fifo = _fifo(runs / run_day(good) / f"{fifo_id}.ipynb")
    _fifo(runs / run_day(good) / "20200101T000000Z-x-00000000.md")

    reindexed = _cli("reindex", "--runs-dir", "runs", cwd=tmp_path)
    assert reindexed.returncode == 0, reindexed.stderr
    assert "Traceback" not in reindexed.stderr
    listed = _cli("runs", "--json", "--runs-dir", "runs", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert good in listed.stdout
    assert fifo_id not in listed.stdout
    report = _cli("report", "--runs-dir", "runs", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in report.stderr
    for run_id in (fifo_id, victim):
        exported = _cli("export", run_id, "--to", "html", "--runs-dir", "runs", cwd=tmp_path)
        assert "named pipe" in _one_line_refusal(exported)
    shown = _cli("show", fifo_id, "--runs-dir", "runs", cwd=tmp_path)
    _one_line_refusal(shown)
    good_export = _cli(
        "export", good, "--to", "markdown", "--out", "-", "--runs-dir", "runs", cwd=tmp_path
    )
    assert good_export.returncode == 0, good_export.stderr
    # In-process too: the catalog's sweep and reindex skip the pipe.
    with NotebookExecutor(runs_dir=runs) as reader:
        rows = _within(reader.runs, [fifo])
        assert good in [row["run_id"] for row in rows]
        assert fifo_id not in [row["run_id"] for row in rows]
        assert _within(reader.reindex, [fifo]) == 1  # the two pipes skipped
        refused = _within(lambda: reader.get_run(fifo_id), [fifo])
        assert isinstance(refused, NotebookExecutorError), refused


# -- YAML ----------------------------------------------------------------------------------------


def test_a_yaml_list_of_too_many_values_is_refused_before_it_is_built() -> None:
    # Within the character limit, no alias: 2,000,000 values in 4 MB.
    text = "[" + ",".join(["0"] * 2_000_000) + "]"
    with pytest.raises(YamlRefused, match="values"):
        load_yaml(text)
    block = "\n".join(f"- {n}" for n in range(MAX_YAML_NODES + 1))
    with pytest.raises(YamlRefused, match=f"{MAX_YAML_NODES:,}"):
        load_yaml(block)
    assert len(load_yaml("[" + ",".join(["0"] * (MAX_YAML_NODES - 1)) + "]")) == (
        MAX_YAML_NODES - 1
    )


def test_a_huge_yaml_list_on_the_command_line_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cli_engine: Any
) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    (tmp_path / "big.yaml").write_text("x: [" + ",".join(["0"] * 2_000_000) + "]\n")
    code, out, err = run_cli(capsys, "run", "nb.py", "-f", "big.yaml")
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1, err
    assert "values" in err
    assert cli_engine.jobs == []
