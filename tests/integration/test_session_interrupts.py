"""A session's step interrupted outside any cell: its cells are accounted for in the log.

A step does more than run cells: after a cell it may take a checkpoint (a fork of the kernel,
waited for), tell the catalog which cell it is in, restore a state. A Ctrl-C there (from the
Python API; through the run server, its client killed: the session's holder interrupts itself)
used to escape the step unlogged, the cells it had run already stamped into the record: the
record then showed executions no step explained (the chaos run's "a session that ran no step
has cells run"), and a success its cells never reached.

Here the cell registers a before-fork handler in its kernel: when the session forks the
kernel for the checkpoint after that cell, the handler interrupts the caller (SIGINT) or kills
the ``session run`` client (SIGKILL), then holds the checkpoint's answer up for a few seconds,
so that the interrupt lands while the step waits for the checkpoint, not in a cell.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor

from .test_run_server import Shell
from .test_run_server import shell as shell  # the fixture, reused

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]

#: Cell 1 takes a checkpoint's worth of time, and has its kernel act on the file
#: ``at-checkpoint`` (``<pid> <signal>``) when the checkpoint after it forks the kernel.
NOTEBOOK = """# %% tags=["parameters"]
n: int = 1

# %%
import os, pathlib, signal, time

def _at_checkpoint():
    order = pathlib.Path("at-checkpoint")
    if order.exists():
        pid, name = order.read_text().split()
        order.unlink()
        os.kill(int(pid), getattr(signal, name))
        time.sleep(3)  # the checkpoint's answer, held up: the interrupt lands in the wait

os.register_at_fork(before=_at_checkpoint)
time.sleep(2)  # worth a checkpoint

# %%
y = n + 1

# %%
print("last", y)
"""


def _record(runs: Path, run_id: str) -> dict[str, Any]:
    (path,) = runs.glob(f"*/{run_id}.ipynb")
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _executed(record: dict[str, Any]) -> list[int]:
    """Source indices of the code cells the record shows executed (no injected cell here)."""
    return [
        index
        for index, cell in enumerate(record["cells"])
        if cell["cell_type"] == "code" and cell.get("execution_count")
    ]


def _explained(log: list[dict[str, Any]]) -> set[int]:
    """The cells the log says ran: in a step, or replayed by a restore."""
    ran: set[int] = set()
    for entry in log:
        if entry["kind"] == "step":
            ran |= set(entry["cells_run"])
        elif entry["kind"] == "restore":
            ran |= set(entry["replay"])
    return ran


def test_ctrl_c_while_a_step_takes_a_checkpoint_logs_the_step(tmp_path: Path) -> None:
    path = tmp_path / "steps.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    runs = tmp_path / "runs"
    with (
        NotebookExecutor(runs_dir=runs) as ex,
        ex.open_session(path, cwd=tmp_path) as session,
    ):
        (tmp_path / "at-checkpoint").write_text(f"{os.getpid()} SIGINT")
        with pytest.raises(KeyboardInterrupt):
            session.run()
        assert not (tmp_path / "at-checkpoint").exists(), "no checkpoint was taken"
        # The next step rebuilds the state and runs on from the cell the interrupt cut off.
        step = session.run()
        assert step["status"] == "success", step
        assert step["restored"] is not None and step["cells_run"][-2:] == [2, 3], step
        run_id = session.run_id
    record = _record(runs, run_id)
    log = record["metadata"]["notebook_executor"]["session"]["log"]
    steps = [entry for entry in log if entry["kind"] == "step"]
    assert len(steps) == 2, log
    assert (steps[0]["status"], steps[0]["cells_run"], steps[0]["failed_cell"]) == (
        "cancelled",
        [0, 1],
        2,
    ), steps[0]
    assert set(_executed(record)) == {0, 1, 2, 3}
    assert set(_executed(record)) <= _explained(log), log
    assert record["metadata"]["notebook_executor"]["status"] == "success"


def test_a_client_killed_while_its_step_takes_a_checkpoint_leaves_the_step_logged(
    shell: Shell,
) -> None:
    """The chaos run's case: ``session run``'s client SIGKILLed while the session's holder
    waits for the checkpoint after a cell; the session, then closed, has a record whose
    executed cells a logged step ran, and which claims no success its cells never reached."""
    folder = shell.folder
    (folder / "steps.py").write_text(NOTEBOOK)
    code, out, err = shell.run("session", "open", "steps.py", "--json")
    assert code == 0, err
    opened = json.loads(out)
    sid, run_id = opened["session_id"], opened["run_id"]
    stepping = shell.start("session", "run", sid, "--json")
    (folder / "at-checkpoint").write_text(f"{stepping.pid} SIGKILL")
    stepping.communicate(timeout=120)
    assert stepping.returncode == -9, "the client was not killed by the checkpoint's fork"
    code, _out, err = shell.run("session", "close", sid)
    assert code == 0, err
    record = _record(folder / "runs", run_id)
    meta = record["metadata"]["notebook_executor"]
    log = meta["session"]["log"]
    steps = [entry for entry in log if entry["kind"] == "step"]
    assert [entry["kind"] for entry in log] == ["step", "close"], log
    assert (steps[0]["status"], steps[0]["cells_run"], steps[0]["failed_cell"]) == (
        "cancelled",
        [0, 1],
        2,
    ), steps[0]
    assert _executed(record) == [0, 1]
    assert set(_executed(record)) <= _explained(log), log
    # Its last cells never ran: the record says the step was cancelled there, as the catalog.
    assert (meta["status"], meta["error_kind"]) == ("error", "cancelled"), meta
    code, out, err = shell.run("show", run_id, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["status"], shown["error_kind"], shown["failed_cell"]["index"]) == (
        "error",
        "cancelled",
        2,
    ), shown
