"""What a run means, on real kernels, launched and forked: papermill's exit semantics, no hang
on a prompt, cells tagged ``skip-execution``, which interpreter ran, kernels that are not
installed, and processes a notebook leaves running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import nbformat
import pytest

from notebook_executor import NotebookExecutor, NotebookSourceError
from notebook_executor._kernels.kernel_engine import KernelEngine
from notebook_executor._types import RunResult
from support import alive, failed_cell, wait_gone

pytestmark = pytest.mark.kernel

#: Cells: 0 prints, 1 is the case, 2 must never run.
TEMPLATE = """# %%
print("before")

# %%
{case}

# %%
import pathlib
pathlib.Path("after.marker").write_text("ran")
"""


@pytest.fixture(params=["launched", "forked"])
def ex(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NotebookExecutor]:
    """An executor whose kernels are launched, or forked from the template."""
    forked = request.param == "forked"
    if forked and not sys.platform.startswith("linux"):
        pytest.skip("kernels are forked on Linux only")
    engine = KernelEngine(warm_kernels=0, fork=forked)
    executor = NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine)
    if forked:
        engine.prepare_kernel()  # the first kernel too is forked, from a template started now
    engine._kernel_loop()  # the pool exists from now on: its counts outlive close()
    pool = engine.pool
    assert pool is not None
    try:
        yield executor
        assert pool.stats["forked" if forked else "launched"] >= 1, pool.stats
        assert pool.stats["launched" if forked else "forked"] == 0, pool.stats
    finally:
        executor.close()


def _run(ex: NotebookExecutor, folder: Path, case: str, **options: Any) -> RunResult:
    folder.mkdir(exist_ok=True)
    source = folder / "case.py"
    source.write_text(TEMPLATE.format(case=case))
    return ex.execute(source, **options)


def _statuses(result: Mapping[str, Any]) -> list[str]:
    cells = nbformat.read(result["output_path"], as_version=4).cells
    return [c.metadata["notebook_executor"]["status"] for c in cells if c.cell_type == "code"]


EXITS_CLEANLY = {
    "sys.exit()": "import sys\nsys.exit()",
    "sys.exit(0)": "import sys\nsys.exit(0)",
    "sys.exit(None)": "import sys\nsys.exit(None)",
    "raise SystemExit": "raise SystemExit",
    "raise SystemExit(0)": "raise SystemExit(0)",
}


@pytest.mark.parametrize("case", sorted(EXITS_CLEANLY))
def test_a_clean_exit_ends_the_run_early_and_successfully(
    ex: NotebookExecutor, tmp_path: Path, case: str
) -> None:
    result = _run(ex, tmp_path / "nb", f"print('exiting')\n{EXITS_CLEANLY[case]}\nprint('no')")

    assert result["status"] == "success", result
    assert result["error_kind"] is None
    assert result["failed_cell"] is None
    assert (result["cells_total"], result["cells_executed"]) == (3, 2)
    assert not (tmp_path / "nb" / "after.marker").exists()
    assert _statuses(result) == ["completed", "completed", "not_run"]
    cells = nbformat.read(result["output_path"], as_version=4).cells
    assert cells[1].metadata["notebook_executor"]["exited"] is True
    assert cells[2].execution_count is None
    assert ex.get_run(result["run_id"])["status"] == "success"


@pytest.mark.parametrize(
    ("case", "evalue"), [("sys.exit(1)", "1"), ("sys.exit('no input file')", "no input file")]
)
def test_any_other_exit_is_a_cell_error(
    ex: NotebookExecutor, tmp_path: Path, case: str, evalue: str
) -> None:
    result = _run(ex, tmp_path / "nb", f"import sys\n{case}")

    assert (result["status"], result["error_kind"]) == ("error", "cell_error"), result
    assert failed_cell(result)["index"] == 1
    assert (failed_cell(result)["ename"], failed_cell(result)["evalue"]) == (
        "SystemExit",
        evalue,
    )
    assert result["cells_executed"] == 1
    assert not (tmp_path / "nb" / "after.marker").exists()


@pytest.mark.parametrize(
    "case", ["name = input('your name? ')", "import getpass\npassword = getpass.getpass()"]
)
def test_a_prompt_fails_its_cell_at_once(ex: NotebookExecutor, tmp_path: Path, case: str) -> None:
    # A cell waiting for an answer would end as a timeout instead.
    result = _run(ex, tmp_path / "nb", case, timeout=60)

    assert (result["status"], result["error_kind"]) == ("error", "cell_error"), result
    assert failed_cell(result)["index"] == 1
    assert failed_cell(result)["ename"] == "StdinNotImplementedError"
    assert result["cells_executed"] == 1
    assert not (tmp_path / "nb" / "after.marker").exists()


SKIPPING = """# %%
print("one")

# %% tags=["skip-execution"]
open("skipped.marker", "w").close()

# %%
print("three")
"""


def test_cells_tagged_skip_execution_neither_run_nor_count(
    ex: NotebookExecutor, tmp_path: Path
) -> None:
    (tmp_path / "skip.py").write_text(SKIPPING)

    result = ex.execute(tmp_path / "skip.py")

    assert result["status"] == "success", result
    assert not (tmp_path / "skipped.marker").exists()
    # cells_total counts every code cell of the source; a skipped one is not executed.
    assert (result["cells_total"], result["cells_executed"]) == (3, 2)
    assert _statuses(result) == ["completed", "skipped", "completed"]
    cells = nbformat.read(result["output_path"], as_version=4).cells
    assert cells[1].execution_count is None
    assert cells[1].outputs == []
    assert "*Skipped (`skip-execution`).*" in Path(result["output_path"]).with_suffix(
        ".md"
    ).read_text(encoding="utf-8")


def test_the_record_names_the_interpreter_that_ran(ex: NotebookExecutor, tmp_path: Path) -> None:
    result = _run(ex, tmp_path / "nb", "import sys\nprint(sys.executable)")

    record = nbformat.read(result["output_path"], as_version=4).metadata["notebook_executor"]
    shown = record["kernel"]["interpreter"]
    printed = nbformat.read(result["output_path"], as_version=4).cells[1].outputs[0]["text"]
    assert printed.strip() == sys.executable
    assert shown and not shown.startswith(str(Path.home()) + os.sep)
    # The path as the caller's interpreter names it (a venv's link is not resolved).
    expected = Path(sys.executable)
    assert Path(shown).expanduser().absolute() == expected or (
        (Path.cwd() / shown).absolute() == expected
    )


def test_a_kernel_that_is_not_installed_is_refused(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3.99-nowhere",
        "language": "python",
        "display_name": "Python 3.99",
    }
    nb.cells.append(nbformat.v4.new_code_cell("print(1)"))
    source = tmp_path / "elsewhere.ipynb"
    nbformat.write(nb, source)

    with (
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        pytest.raises(NotebookSourceError) as raised,
    ):
        ex.execute(source)
    message = str(raised.value)
    assert "'python3.99-nowhere' is not installed" in message
    assert "python3" in message.split("installed:", 1)[1]
    assert not (tmp_path / "runs").exists()


LEAVES_PROCESSES = """# %%
import json, os, subprocess, sys

child = subprocess.Popen(["sleep", "300"])
# A grandchild whose parent exits at once: it is reparented, out of the kernel's tree.
grandparent = subprocess.Popen(
    [sys.executable, "-c",
     "import subprocess; print(subprocess.Popen(['sleep', '301']).pid, flush=True)"],
    stdout=subprocess.PIPE, text=True,
)
orphan = int(grandparent.stdout.readline())
grandparent.wait()
# A process that moved to a process group of its own, in the kernel's session.
grouped = subprocess.Popen(["sleep", "302"], process_group=0) if sys.version_info >= (3, 11) \\
    else subprocess.Popen(["sleep", "302"], preexec_fn=os.setpgrp)
open("pids.json", "w").write(json.dumps([child.pid, orphan, grouped.pid]))
"""


def test_processes_a_notebook_leaves_running_die_with_its_kernel(
    ex: NotebookExecutor, tmp_path: Path
) -> None:
    (tmp_path / "leaves.py").write_text(LEAVES_PROCESSES)

    result = ex.execute(tmp_path / "leaves.py")

    assert result["status"] == "success", result
    pids = json.loads((tmp_path / "pids.json").read_text())
    assert len(pids) == 3
    ex.close()
    assert wait_gone(pids) == set(), [pid for pid in pids if alive(pid)]


MANY_HOST = r"""
import sys
from pathlib import Path
from notebook_executor import NotebookExecutor

folder = Path(sys.argv[1])
with NotebookExecutor(runs_dir=folder / "runs") as ex:
    try:
        ex.execute_many(
            folder / "long.py", [{"mark": str(i)} for i in range(3)], max_workers=3
        )
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
print("finished", flush=True)
"""

LONG = """# %% tags=["parameters"]
mark = ""

# %%
import os, pathlib, time
pathlib.Path(f"ready-{mark}").write_text(str(os.getpid()))
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_ctrl_c_during_execute_many_cancels_the_running_runs(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text(LONG)
    host = subprocess.Popen(
        [sys.executable, "-c", MANY_HOST, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = [tmp_path / f"ready-{i}" for i in range(3)]
        deadline = time.monotonic() + 120
        while not all(path.exists() for path in ready) and host.poll() is None:
            assert time.monotonic() < deadline, "the runs did not start"
            time.sleep(0.1)
        time.sleep(0.2)  # the ready files are written: the cells sleep now
        kernels = [int(path.read_text()) for path in ready]
        host.send_signal(signal.SIGINT)
        # The cells would sleep for 60 s: the host must not wait for them.
        out, err = host.communicate(timeout=30)
    finally:
        if host.poll() is None:
            host.kill()
            host.communicate()
    assert (host.returncode, out) == (130, "interrupted\n"), err
    records = [
        nbformat.read(path, as_version=4).metadata["notebook_executor"]
        for path in (tmp_path / "runs").glob("*/*.ipynb")
    ]
    assert len(records) == 3
    for record in records:
        assert (record["status"], record["error_kind"]) == ("error", "cancelled"), record
        assert record["failed_cell"]["index"] == 1
        assert record["cells_executed"] == 1
    assert wait_gone(kernels) == set()
