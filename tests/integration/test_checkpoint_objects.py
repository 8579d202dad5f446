"""What a durable checkpoint keeps of the kernel's objects (``_kernels/inside/state_files.py``),
on real kernels: each object either comes back as it was (the cells after the reused ones
show what a fresh run shows) or the checkpoint is refused with the reason in ``state_notes``;
never a wrong output. And no secret is ever written under ``runs/.checkpoints``."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import pytest

from integration.checkpoints_support import (
    checkpoint_files,
    code_outputs,
    expected_reuse,
    manifests,
)
from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

#: ``{setup}`` makes the object (a checkpoint always follows cell 0, the first slow cell);
#: ``{use}`` uses it after a rerun that reuses cells 0 (and 1, as the clock allows).
TEMPLATE = """\
# %%
import time
{setup}
time.sleep(0.6)

# %%
marker = 1
time.sleep(0.6)

# %%
{use}
"""

#: A module of the notebook's folder holding a list, and reading it.
REGISTRY = "VALUES = []\n\n\ndef count():\n    return len(VALUES)\n"

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
HAS_NUMPY = importlib.util.find_spec("numpy") is not None


@dataclass(frozen=True)
class Held:
    setup: str
    use: str
    #: "kept": the checkpoint is read back; "refused": it is not, and ``state_notes`` names
    #: ``name``; "either": one or the other, never a wrong output.
    outcome: str
    name: str


OBJECTS: dict[str, Held] = {
    "an open file": Held('f = open("data.txt")', "print(f.read())", "refused", "f"),
    "a closed file": Held(
        'with open("data.txt") as f:\n    text = f.read()',
        "print(f.closed, f.name, f.mode, text)",
        "kept",
        "f",
    ),
    "a generator": Held("g = (i * i for i in range(5))\nnext(g)", "print(list(g))", "refused", "g"),
    "a lock": Held(
        "import threading\nlock = threading.Lock()",
        "with lock:\n    print('locked', lock.locked())",
        "refused",
        "lock",
    ),
    "a socket": Held(
        "import socket\ns = socket.socket()",
        "print(s.family.name)\ns.close()",
        "refused",
        "s",
    ),
    "a lambda": Held("f = lambda v: v * 3 + len(data)\ndata = [1, 2]", "print(f(2))", "kept", "f"),
    "a function and its closure": Held(
        "def make(k):\n    def inner(v):\n        return v + k + offset\n    return inner\n"
        "offset = 100\nadd = make(5)",
        "offset = 1000\nprint(add(1), make(2)(1))",
        "kept",
        "add",
    ),
    "a thread": Held(
        "import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()",
        "print(t.is_alive())",
        "refused",
        "t",
    ),
    "a sqlite3 connection": Held(
        'import sqlite3\ncon = sqlite3.connect(":memory:")\ncon.execute("create table t(x)")\n'
        'con.execute("insert into t values (7)")',
        'print(con.execute("select x from t").fetchall())',
        "refused",
        "con",
    ),
    "a class of the notebook and its instance": Held(
        "class Point:\n    def __init__(self, x):\n        self.x = x\np = Point(3)",
        "print(type(p).__name__, p.x, isinstance(p, Point))",
        "refused",
        "Point",
    ),
    "two names sharing one list": Held(
        "a = [1, 2, 3]\nb = a",
        "b.append(4)\nprint(a, a is b)",
        "kept",
        "a",
    ),
    "a dict holding another name's list": Held(
        "items = [1]\nindex = {'items': items}",
        "items.append(2)\nprint(index, index['items'] is items)",
        "kept",
        "items",
    ),
    "a list holding itself": Held(
        "loop = [1]\nloop.append(loop)", "print(loop[1] is loop, len(loop))", "kept", "loop"
    ),
    "a list of a local module, imported by name": Held(
        "from registry import VALUES, count\nVALUES.append(1)",
        "VALUES.append(2)\nprint(count(), VALUES)",
        "refused",
        "VALUES",
    ),
    "a module by its alias": Held(
        "import collections as co", "print(co.Counter('aab').most_common(1))", "kept", "co"
    ),
}
if HAS_NUMPY:
    OBJECTS["a numpy view of another name's array"] = Held(
        "import numpy as np\nbase = np.arange(6)\nview = base[2:4]",
        "view[0] = 99\nprint(base.tolist(), view.tolist())",
        "either",
        "view",
    )
    OBJECTS["a numpy array and the generator's state"] = Held(
        "import numpy as np\nnp.random.seed(3)\nfirst = np.random.rand(2)",
        "print(first.round(6).tolist(), np.random.rand(2).round(6).tolist())",
        "kept",
        "first",
    )
if HAS_MATPLOTLIB:
    OBJECTS["matplotlib's rcParams, imported by name"] = Held(
        "from matplotlib import rcParams\nrcParams['lines.linewidth'] = 7",
        "import matplotlib\nprint(matplotlib.rcParams['lines.linewidth'], "
        "rcParams is matplotlib.rcParams)",
        "refused",
        "rcParams",
    )
    OBJECTS["a matplotlib figure"] = Held(
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.set_title('the title')\nax.plot([1, 2], [3, 4])\n"
        "plt.close(fig)",
        "print(fig.axes[0].get_title(), len(fig.axes[0].lines), fig.axes[0] is ax)",
        "refused",  # not pickled: its cells draw it again (state_files.py)
        "fig",
    )


@pytest.mark.parametrize("name", list(OBJECTS))
def test_an_object_comes_back_or_the_checkpoint_is_refused(
    executor: NotebookExecutor, tmp_path: Path, name: str
) -> None:
    held = OBJECTS[name]
    (tmp_path / "data.txt").write_text("the data", encoding="utf-8")
    (tmp_path / "registry.py").write_text(REGISTRY, encoding="utf-8")
    notebook = tmp_path / "nb.py"
    notebook.write_text(TEMPLATE.format(setup=held.setup, use=held.use), encoding="utf-8")
    runs_dir = executor.runs_dir
    first = executor.execute(notebook)
    assert first["status"] == "success", first["failed_cell"]
    written = [int(m["position"]) for m in manifests(runs_dir, first["run_id"])]
    assert 0 in written

    # The last cell changes: the cells before it may be reused.
    notebook.write_text(notebook.read_text() + 'print("again")\n', encoding="utf-8")
    again = executor.execute(notebook, reuse=True)
    fresh = executor.execute(notebook, reuse=False, checkpoints=False)
    assert fresh["status"] == "success", fresh["failed_cell"]
    assert again["status"] == "success", (again["failed_cell"], again["state_notes"])
    assert code_outputs(again) == code_outputs(fresh)

    kept, _ = expected_reuse(fresh, written, lambda p: p < 2)
    refused = any(
        "could not keep " in note and f"{held.name} (" in note for note in again["state_notes"]
    )
    if held.outcome == "kept":
        assert again["reused_cells"] == kept, again["state_notes"]
    elif held.outcome == "refused":
        assert again["reused_cells"] == [], again["state_notes"]
        assert refused, again["state_notes"]
    else:
        assert again["reused_cells"] in ([], kept)
        assert again["reused_cells"] == kept or refused, again["state_notes"]


SECRET = "s3cr3t-value-123"

HOLDS_SECRET = """\
# %%
import os, time
token = os.environ["API_TOKEN"]
encoded = token.encode()
wrapped = {"auth": ["Bearer", token]}
time.sleep(0.6)

# %%
length = len(token)
time.sleep(0.6)

# %%
print(length)
"""


def _holding(folder: Path, forms: list[bytes]) -> list[str]:
    return [
        f"{path.name}: {form!r}"
        for path in checkpoint_files(folder)
        for form in forms
        if form in path.read_bytes()
    ]


def test_a_secret_is_never_written_and_no_checkpoint_is_used(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    """A run given secrets writes no checkpoint (a state could hold a secret in pieces no
    search finds); a rerun with ``reuse`` then uses none, and says why."""
    runs_dir = executor.runs_dir
    notebook = tmp_path / "secret.py"
    source = HOLDS_SECRET
    if HAS_NUMPY:  # as an array holds text: UTF-32
        source = source.replace(
            "time.sleep(0.6)\n",
            "import numpy as np\narray = np.array([token])\ntime.sleep(0.6)\n",
            1,
        )
    notebook.write_text(source, encoding="utf-8")
    secrets = {"API_TOKEN": SECRET}
    forms = [SECRET.encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le")]
    first = executor.execute(notebook, secrets=secrets)
    assert first["status"] == "success", first["failed_cell"]
    assert manifests(runs_dir, first["run_id"]) == []
    assert any("given secrets" in note for note in first["state_notes"]), first["state_notes"]
    assert _holding(runs_dir, forms) == []

    notebook.write_text(source.replace("print(length)", "print(length * 2)"), encoding="utf-8")
    again = executor.execute(notebook, secrets=secrets, reuse=True)
    assert again["status"] == "success"
    assert again["reused_cells"] == [] and again["reused_from"] is None
    assert any("no checkpoint holds the state" in note for note in again["state_notes"])
    assert all(SECRET not in note for note in again["state_notes"])
    assert code_outputs(again)[-1] == [{"output_type": "stream", "text": f"{len(SECRET) * 2}\n"}]
    assert _holding(runs_dir, forms) == []


def test_a_checkpoint_of_a_value_now_secret_is_not_used(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    """A checkpoint written when the value was a plain environment variable is not read back
    into a run that is given it as a secret: the variable its cells read is not the same."""
    notebook = tmp_path / "secret.py"
    notebook.write_text(HOLDS_SECRET, encoding="utf-8")
    first = executor.execute(notebook, env={"API_TOKEN": SECRET})
    assert first["status"] == "success", first["failed_cell"]
    assert manifests(executor.runs_dir, first["run_id"])
    notebook.write_text(HOLDS_SECRET.replace("print(length)", "print(length * 2)"))
    again = executor.execute(notebook, secrets={"API_TOKEN": SECRET}, reuse=True)
    assert again["status"] == "success"
    assert again["reused_cells"] == [], again["state_notes"]
    assert any("API_TOKEN, which its cells read, changed" in n for n in again["state_notes"])
    assert all(SECRET not in note for note in again["state_notes"])
