"""Which threads stop a session's checkpoint: the process's own, counted by the OS.

A checkpoint is a copy of the kernel process made by ``fork()``, which copies only the
calling thread. Native thread pools the copy would lack and wait for (an OpenMP pool: here
scikit-learn's KMeans, on its bundled libgomp) must refuse the checkpoint, so that the step is
replayed instead of hanging; threads the kernel starts itself (pyzmq's garbage collector,
after a large output) and pools that come back after a fork (OpenBLAS) must not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

pytest.importorskip("sklearn", reason="the test extra installs scikit-learn")

KMEANS = """\
# %%
import time
import numpy as np
from sklearn.cluster import KMeans
X = np.random.RandomState(0).rand(4000, 8)
first = KMeans(4, n_init=2, random_state=0).fit(X).inertia_
time.sleep(1.5)

# %%
again = KMeans(4, n_init=2, random_state=0).fit(X).inertia_
print(again == first)
"""

QUIET = """\
# %%
import time
import numpy as np
a = np.random.RandomState(0).rand(300, 300)
b = a @ a
print("x" * 2_000_000)
time.sleep(1.5)

# %%
y = 2

# %%
print(y, round(float(b[0, 0]), 3))
"""


def test_an_openmp_pool_refuses_the_checkpoint_and_the_rerun_does_not_hang(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kmeans.py"
    path.write_text(KMEANS, encoding="utf-8")
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        ex.open_session(path, cell_timeout=30) as session,
    ):
        step = session.run()
        assert step["status"] == "success", step["failed_cell"]
        held = session.checkpoints
        step = session.rerun_from(1)
        # (From a copy taken after KMeans, the next KMeans waited for its cell timeout.)
        assert step["status"] == "success", step["failed_cell"]
        assert 0 not in held
        assert step["outputs"][-1] == {"index": 1, "text": "True\n"}
        assert step["restored"] == "replay"
        reason = step["restore_reason"] or ""
        assert "native threads" in reason and "gomp" in reason, reason


def test_a_large_output_and_blas_keep_checkpoints(tmp_path: Path) -> None:
    """pyzmq's own thread (a large output starts it) and OpenBLAS's pool are no reason."""
    path = tmp_path / "quiet.py"
    path.write_text(QUIET, encoding="utf-8")
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        ex.open_session(path, cell_timeout=60) as session,
    ):
        step = session.run()
        assert step["status"] == "success", step["failed_cell"]
        assert 0 in session.checkpoints, step
        step = session.rerun_from(1)
        assert step["status"] == "success", step["failed_cell"]
        assert step["restored"] == "checkpoint", step["restore_reason"]
        assert step["cells_run"] == [1, 2]
        assert step["outputs"][-1]["text"].startswith("2 ")
