"""``execute(..., reuse=True)`` on real kernels (SPEC section 21, docs/how-to/incremental.md):
a rerun starts after the last checkpoint that is still true, and its outputs are those of a
fresh run.

Each case runs a notebook once (checkpoints are written after its slow cells), changes one
thing, then runs it again with ``reuse=True`` and once more afresh (``reuse=False``,
``checkpoints=False``). Which checkpoints the first run wrote depends on the policy's clock (the
one after the first slow cell always is): the cells expected reused are those up to the last
written checkpoint that the change leaves true, computed from the manifests on disk; the
outputs of every code cell must equal the fresh run's.
"""

from __future__ import annotations

import json
import py_compile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from integration.checkpoints_support import (
    checkpoint_files,
    code_outputs,
    executed,
    expected_reuse,
    manifests,
    source_code_cells,
)
from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

#: Two slow cells, then a quick one: checkpoints after cell 0 (always) and, as the policy's
#: clock allows, after cells 1 and 2.
BASE = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
y = x * 2
time.sleep(0.6)

# %%
print(x, y)
"""

#: As BASE, its last cell slow too: the run is long enough for a checkpoint after its last cell
#: (the policy takes one when the whole run took 20 times the last checkpoint's cost).
LONG = BASE.replace("print(x, y)", "time.sleep(1.2)\nprint(x, y)")

#: Cell 1 reads a file, cell 2 shows it.
READS = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
data = open("data.txt").read()
time.sleep(0.6)

# %%
print(x, data)
"""

#: Cell 1 writes a file, cell 2 reads it back.
WRITES = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
with open("out.txt", "w") as sink:
    sink.write(f"x is {x}")
time.sleep(0.6)

# %%
print(open("out.txt").read())
"""

#: Cell 1 imports a module of the notebook's folder.
IMPORTS = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
import helper
time.sleep(0.6)

# %%
print(x, helper.VALUE)
"""

#: A parameters cell after a slow cell (the injected cell follows it).
PARAMETERS = """\
# %%
import time
x = 10
time.sleep(0.6)

# %% tags=["parameters"]
n = 1

# %%
total = x * n
time.sleep(0.6)

# %%
print(total)
"""

#: Cell 1 reads an environment variable.
READS_ENV = """\
# %%
import os, time
x = 10
time.sleep(0.6)

# %%
mode = os.environ.get("NBX_REUSE_MODE", "unset")
time.sleep(0.6)

# %%
print(x, mode)
"""

#: Cell 1 loads an extension: a stored state does not hold it.
MAGIC = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
%load_ext autoreload
y = x * 2
time.sleep(0.6)

# %%
print(x, y)
"""

#: Cell 2 reads IPython's output history (``_``: cell 1's value), which no state holds; no
#: checkpoint after cells 1 and 2 (quick) but as the clock allows.
HISTORY = """\
# %%
import time
x = 21
time.sleep(0.6)

# %%
x * 2

# %%
print("last value", _)

# %%
print("end")
"""

#: Cell 1 reads a file through a shell command (the kernel's audit does not see it).
SHELL = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
!cat data.txt
time.sleep(0.6)

# %%
print(x)
"""

#: Cell 1 reads a file in a bash cell.
BASH = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
%%bash
cat data.txt
sleep 0.6

# %%
print(x)
"""

#: Cell 0 sets the display's precision, which no checkpoint holds.
PRECISION = """\
# %%
%precision 2
import time
time.sleep(0.6)

# %%
x = 1 / 3
time.sleep(0.6)

# %%
x
"""

#: Cell 1 sets an attribute of a module it imported, which a state keeps by name only.
MODULE_STATE = """\
# %%
import time
x = 10
time.sleep(0.6)

# %%
import helper
helper.VALUE = 5
time.sleep(0.6)

# %%
print(x, helper.VALUE)
"""

#: Cell 0 sets numpy's print options (numpy's state, not the notebook's).
PRINT_OPTIONS = """\
# %%
import time
import numpy as np
np.set_printoptions(precision=2)
time.sleep(0.6)

# %%
third = np.array([1 / 3])
time.sleep(0.6)

# %%
print(third)
"""

#: Cell 1 raises, and is tagged to.
RAISES = """\
# %%
import time
x = 10
time.sleep(0.6)

# %% tags=["raises-exception"]
y = x * 2
time.sleep(0.6)
raise ValueError("expected")

# %%
print(x, y)
"""

#: Cell 1 raises, untagged: the first run fails there.
RAISES_UNTAGGED = RAISES.replace('# %% tags=["raises-exception"]', "# %%")

Change = Callable[[Path, Path, str], None]


def edit(old: str, new: str) -> Change:
    """A change of the notebook's text."""

    def change(folder: Path, runs_dir: Path, run_id: str) -> None:
        path = folder / "nb.py"
        text = path.read_text(encoding="utf-8")
        assert old in text
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    return change


def write(name: str, text: str | None) -> Change:
    """A file of the notebook's folder written (None: deleted)."""

    def change(folder: Path, runs_dir: Path, run_id: str) -> None:
        if text is None:
            (folder / name).unlink()
        else:
            (folder / name).write_text(text, encoding="utf-8")

    return change


def other_environment(folder: Path, runs_dir: Path, run_id: str) -> None:
    """The checkpoints say they were written with other packages installed.

    Simulated: installing or removing a package in the test environment would change it
    under the other tests running beside this one, and a second interpreter is not at hand.
    The manifest's ``environment`` (the interpreter, and the digest of the distributions on
    the kernel's ``sys.path``) is what the kernel's own answer is compared with, so a
    manifest saying another package set is what a package upgrade makes.
    """
    for path in (runs_dir / ".checkpoints" / "notebooks").glob(f"*/{run_id}.*.json"):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["environment"]["packages"] = "0" * 64
        path.write_text(json.dumps(manifest), encoding="utf-8")


def no_change(folder: Path, runs_dir: Path, run_id: str) -> None:
    pass


def compiled_helper(folder: Path) -> None:
    """``helper.py`` with an up-to-date ``__pycache__`` (as after any import of it outside a
    kernel that does not write bytecode): an import then reads the ``.pyc``, not the source."""
    py_compile.compile(str(folder / "helper.py"), doraise=True)


@dataclass(frozen=True)
class Case:
    notebook: str
    change: Change
    #: Whether the first run's checkpoint at this code cell position is still true.
    usable: Callable[[int], bool]
    #: Said in ``state_notes`` when a checkpoint at a position ``noted`` accepts (by
    #: default, one not usable) was refused before the one used.
    note: str | None = None
    noted: Callable[[int], bool] | None = None
    files: dict[str, str] = field(default_factory=dict)
    prepare: Callable[[Path], None] | None = None
    first: dict[str, Any] = field(default_factory=dict)
    second: dict[str, Any] = field(default_factory=dict)
    #: Every cell is reused (the checkpoint after the last cell is still true).
    everything: bool = False
    first_status: str = "success"


def before(position: int) -> Callable[[int], bool]:
    return lambda p: p < position


CASES: dict[str, Case] = {
    "edit of an upstream cell": Case(BASE, edit("y = x * 2", "y = x * 3"), before(1)),
    "edit of the last cell": Case(BASE, edit("print(x, y)", "print(x + y)"), before(2)),
    "a data file read changes": Case(
        READS,
        write("data.txt", "beta, longer"),
        before(1),
        note="data.txt, which its cells read, changed",
        files={"data.txt": "alpha"},
    ),
    "a file written is deleted": Case(
        WRITES, write("out.txt", None), before(1), note="out.txt, which its cells wrote, is gone"
    ),
    "a file written is changed": Case(
        WRITES, write("out.txt", "tampered"), before(1), note="which its cells wrote, changed"
    ),
    "a local module changes": Case(
        IMPORTS,
        write("helper.py", "VALUE = 222\n"),
        before(1),
        note="helper.py, which its cells read, changed",
        files={"helper.py": "VALUE = 1\n"},
    ),
    "a local module read from its .pyc changes": Case(
        IMPORTS,
        write("helper.py", "VALUE = 222\n"),
        before(1),
        note="helper.py, which its cells read, changed",
        files={"helper.py": "VALUE = 1\n"},
        prepare=compiled_helper,
    ),
    # Job cells: 0, the parameters cell (1), the injected cell (2), then 3 and 4.
    "a parameter changes": Case(
        PARAMETERS,
        no_change,
        before(2),
        first={"parameters": {"n": 2}},
        second={"parameters": {"n": 3}},
    ),
    "an environment variable read changes": Case(
        READS_ENV,
        no_change,
        before(1),
        note="the environment variable NBX_REUSE_MODE, which its cells read, changed",
        first={"env": {"NBX_REUSE_MODE": "one"}},
        second={"env": {"NBX_REUSE_MODE": "two"}},
    ),
    "the packages differ (simulated)": Case(
        BASE,
        other_environment,
        lambda p: False,
        note="it was written with another interpreter or other packages",
    ),
    "a magic in the prefix": Case(
        MAGIC,
        edit("print(x, y)", "print(x - y)"),
        before(1),
        note="uses %load_ext, whose effect a stored state does not hold",
        noted=lambda p: p == 1,  # the one after cell 2 has another source
    ),
    "a shell command reads a file that changes": Case(
        SHELL,
        write("data.txt", "beta, longer"),
        before(1),
        note="cell 1 runs a shell command",
        files={"data.txt": "alpha"},
    ),
    "a bash cell reads a file that changes": Case(
        BASH,
        write("data.txt", "beta, longer"),
        before(1),
        note="cell 1 uses %bash",
        files={"data.txt": "alpha"},
    ),
    "%precision in the prefix": Case(
        PRECISION,
        edit("\nx\n", "\nx * 2\n"),
        lambda p: False,
        note="cell 0 uses %precision",
        noted=lambda p: p < 2,
    ),
    "a module's attribute set in the prefix": Case(
        MODULE_STATE,
        edit("print(x, helper.VALUE)", "print(x + 1, helper.VALUE)"),
        before(1),
        note="cell 1 changes helper.VALUE",
        noted=lambda p: p == 1,
        files={"helper.py": "VALUE = 1\n"},
    ),
    "numpy's print options set in the prefix": Case(
        PRINT_OPTIONS,
        edit("print(third)", "print(third * 2)"),
        lambda p: False,
        note="cell 0 calls np.set_printoptions",
        noted=lambda p: p < 2,
    ),
    "a later cell reads _": Case(
        HISTORY,
        edit('print("end")', 'print("the end")'),
        lambda p: p == 2,
        note="reads IPython's output history",
        noted=lambda p: p < 2,
    ),
    "raises-exception removed": Case(
        RAISES, edit('# %% tags=["raises-exception"]', "# %%"), before(1)
    ),
    "raises-exception added": Case(
        RAISES_UNTAGGED,
        edit("# %%\ny = x * 2", '# %% tags=["raises-exception"]\ny = x * 2'),
        before(1),
        first_status="error",
    ),
    "nothing changes": Case(LONG, no_change, lambda p: True, everything=True),
    "only a cell's metadata changes": Case(
        LONG,
        edit("# %%\ny = x * 2", '# %% tags=["keep"]\ny = x * 2'),
        lambda p: True,
        everything=True,
    ),
    "nothing changes; a package folder put on sys.path": Case(
        LONG.replace("import time\n", "import sys, time\nsys.path.insert(0, 'vendor')\n", 1),
        no_change,
        lambda p: True,
        everything=True,
        files={"vendor/demo-1.0.dist-info/METADATA": "Name: demo\nVersion: 1.0\n"},
    ),
    "a markdown cell is inserted": Case(
        LONG,
        edit("# %%\ny = x * 2", "# %% [markdown]\n# Twice x.\n\n# %%\ny = x * 2"),
        lambda p: True,
        everything=True,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_rerun_with_reuse_starts_after_the_last_checkpoint_still_true(
    executor: NotebookExecutor, tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    for file_name, text in case.files.items():
        (tmp_path / file_name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file_name).write_text(text, encoding="utf-8")
    if case.prepare is not None:
        case.prepare(tmp_path)
    notebook = tmp_path / "nb.py"
    notebook.write_text(case.notebook, encoding="utf-8")
    runs_dir = executor.runs_dir
    first = executor.execute(notebook, **case.first)
    assert first["status"] == case.first_status, first["failed_cell"]
    written = [int(m["position"]) for m in manifests(runs_dir, first["run_id"])]
    assert 0 in written, "the first slow cell is always followed by a checkpoint"

    case.change(tmp_path, runs_dir, first["run_id"])
    again = executor.execute(notebook, reuse=True, **case.second)
    fresh = executor.execute(notebook, reuse=False, checkpoints=False, **case.second)

    expected, chosen = expected_reuse(fresh, written, case.usable)
    print("DEBUG", name, written, chosen, again["reused_cells"], again["state_notes"])
    assert again["reused_cells"] == expected, (written, again["state_notes"])
    assert again["reused_from"] == (first["run_id"] if expected else None)
    assert fresh["reused_cells"] == [] and fresh["reused_from"] is None
    assert (again["status"], again["error_kind"]) == (fresh["status"], fresh["error_kind"])
    assert code_outputs(again) == code_outputs(fresh)
    # Reading the checkpoint back is not the notebook reading files.
    files = executed(again)["metadata"]["notebook_executor"].get("files")
    assert not [f["path"] for f in (files or {}).get("files", []) if ".checkpoints" in f["path"]]
    if case.everything:
        last = len(source_code_cells(fresh)) - 1
        assert last in written, f"no checkpoint after the last cell: only {written}"
        assert again["reused_cells"] == [i for i in source_code_cells(fresh) if i is not None]
        assert again["cells_executed"] == again["cells_total"]
    noted = case.noted or (lambda p: not case.usable(p))
    refused = [p for p in written if noted(p) and p > (-1 if chosen is None else chosen)]
    if case.note is not None and refused:
        assert any(case.note in note for note in again["state_notes"]), again["state_notes"]


def test_checkpoints_false_writes_none(executor: NotebookExecutor, tmp_path: Path) -> None:
    runs_dir = executor.runs_dir
    notebook = tmp_path / "nb.py"
    notebook.write_text(BASE, encoding="utf-8")
    before_run = set(checkpoint_files(runs_dir))
    first = executor.execute(notebook, checkpoints=False)
    assert first["status"] == "success"
    assert manifests(runs_dir, first["run_id"]) == []
    assert set(checkpoint_files(runs_dir)) == before_run
    again = executor.execute(notebook, reuse=True, checkpoints=False)
    assert again["reused_cells"] == [] and again["reused_from"] is None
    assert any("no checkpoint holds the state" in note for note in again["state_notes"])
    assert code_outputs(again) == code_outputs(first)


def test_reuse_false_ignores_checkpoints(executor: NotebookExecutor, tmp_path: Path) -> None:
    runs_dir = executor.runs_dir
    notebook = tmp_path / "nb.py"
    notebook.write_text(BASE, encoding="utf-8")
    first = executor.execute(notebook)
    assert manifests(runs_dir, first["run_id"]), "the first run wrote checkpoints"
    again = executor.execute(notebook, reuse=False)
    assert again["reused_cells"] == [] and again["reused_from"] is None
    assert again["state_notes"] == []
    assert again["cells_executed"] == again["cells_total"] == 3
    assert code_outputs(again) == code_outputs(first)
    # The default is not to reuse.
    default = executor.execute(notebook)
    assert default["reused_cells"] == []


BASH_NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "id": f"c{index}",
            "metadata": {},
            "source": source,
            "outputs": [],
            "execution_count": None,
        }
        for index, source in enumerate(["sleep 0.6; echo one", "sleep 0.6; echo two", "echo end"])
    ],
    "metadata": {"kernelspec": {"name": "bash", "display_name": "Bash", "language": "bash"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_a_kernel_of_another_language_is_not_asked_for_its_state(
    executor: NotebookExecutor, tmp_path: Path, bash_kernel: str
) -> None:
    """Only the Python kernel this tool starts answers state requests: another kernel's run
    writes no checkpoint (it is not asked, and left to time out, after each slow cell), and a
    rerun with reuse says why every cell ran."""
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(json.dumps(BASH_NOTEBOOK), encoding="utf-8")
    first = executor.execute(notebook)
    assert first["status"] == "success", first["failed_cell"]
    assert first["state_notes"] == []
    assert manifests(executor.runs_dir, first["run_id"]) == []
    again = executor.execute(notebook, reuse=True)
    assert again["status"] == "success" and again["reused_cells"] == []
    assert any("keeps no stored state" in note for note in again["state_notes"])
    assert code_outputs(again) == code_outputs(first)


WHERE = """\
# %%
import os, time
x = 10
time.sleep(0.6)

# %%
print(os.path.basename(os.getcwd()), open("data.txt").read())
"""


def test_another_working_folder_reuses_nothing(executor: NotebookExecutor, tmp_path: Path) -> None:
    """A state goes on in the folder it was written in: a rerun in another (``cwd=``) reads
    none, though its cells' sources and the files they read are the same."""
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data.txt").write_text(f"data of {name}", encoding="utf-8")
    notebook = tmp_path / "nb.py"
    notebook.write_text(WHERE, encoding="utf-8")
    first = executor.execute(notebook, cwd=tmp_path / "first")
    assert manifests(executor.runs_dir, first["run_id"])
    notebook.write_text(WHERE.replace(".read())", ".read(), x)"), encoding="utf-8")
    again = executor.execute(notebook, cwd=tmp_path / "second", reuse=True)
    assert again["reused_cells"] == [], again["state_notes"]
    assert any("another working folder" in note for note in again["state_notes"])
    assert code_outputs(again)[-1] == [
        {"output_type": "stream", "text": "second data of second 10\n"}
    ]
    same = executor.execute(notebook, cwd=tmp_path / "first", reuse=True)
    assert same["reused_cells"] == [0], same["state_notes"]
    assert code_outputs(same)[-1] == [{"output_type": "stream", "text": "first data of first 10\n"}]
