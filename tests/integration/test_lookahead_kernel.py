"""A run's next cell is sent to a real kernel as the one before completes, and only then.

The kernel side of ``tests/unit/test_lookahead.py``: on a forked kernel, every cell but the
last of a run sends the next one ahead (``CellRan.next_sent``), and the outputs, execution
counts and timestamps are each cell's own; a cell that fails sends nothing, so a cell after it
never runs, however fast the failure; a cell tagged ``raises-exception`` fails and the next
runs; a cancel while a cell sent ahead runs kills it before it does anything more.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import nbformat
import pytest

from notebook_executor._kernels.kernel_engine import KernelEngine
from notebook_executor._kernels.launch import kernel_environment
from notebook_executor._kernels.options import NATIVE_KERNEL_NAME
from notebook_executor._run.cell_loop import run_job
from notebook_executor.engine import (
    CellHooks,
    CellRan,
    EngineOutcome,
    KernelChoice,
    RunCancelled,
    RunJob,
)

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork server"),
]


@pytest.fixture(scope="module")
def engine() -> Iterator[KernelEngine]:
    engine = KernelEngine(warm_kernels=1)
    yield engine
    engine.close()


def _run(
    engine: KernelEngine,
    cwd: Path,
    *sources: str | tuple[str, list[str]],
    cancel: threading.Event | None = None,
    observers: Sequence[Callable[[CellRan], None]] = (),
) -> tuple[nbformat.NotebookNode, list[CellRan], EngineOutcome]:
    cells = []
    for source in sources:
        text, tags = source if isinstance(source, tuple) else (source, [])
        cell = nbformat.v4.new_code_cell(text)
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    told: list[CellRan] = []
    hooks = CellHooks(on_cell_executed=[told.append, *observers])
    choice = KernelChoice(NATIVE_KERNEL_NAME, "python", native=True, interpreter=sys.executable)
    job = RunJob(nb, choice, cwd, kernel_environment(None), hooks=hooks, cancel=cancel)
    return nb, told, run_job(engine, job)


def test_every_cell_but_the_last_sends_the_next_and_keeps_its_own_outputs(
    engine: KernelEngine, tmp_path: Path
) -> None:
    sources = [f"print('cell {n}')\n{n} * 10" for n in range(6)]
    nb, told, outcome = _run(engine, tmp_path, *sources)
    assert outcome.failure is None
    assert [ran.next_sent for ran in told] == [True] * 5 + [False]
    stamps = []
    for n, cell in enumerate(nb.cells):
        assert cell.execution_count == n + 1
        assert cell.outputs[0]["text"] == f"cell {n}\n"
        assert cell.outputs[1]["data"]["text/plain"] == str(n * 10)
        timing = cell.metadata.execution
        stamps += [timing["iopub.status.busy"], timing["iopub.status.idle"]]
    # Each cell's timestamps are its own, in the order the kernel ran them.
    assert stamps == sorted(stamps)


def test_a_cell_after_a_failed_one_never_runs(engine: KernelEngine, tmp_path: Path) -> None:
    written = tmp_path / "after"
    nb, told, outcome = _run(
        engine, tmp_path, "x = 1", "raise ValueError('stop')", f"open({str(written)!r}, 'w')"
    )
    assert outcome.failure is not None and outcome.failure.index == 1
    assert [ran.next_sent for ran in told] == [True, False]
    assert not written.exists()
    assert nb.cells[2].get("execution_count") is None


def test_a_cell_allowed_to_fail_sends_the_next(engine: KernelEngine, tmp_path: Path) -> None:
    nb, told, outcome = _run(
        engine, tmp_path, ("raise ValueError('allowed')", ["raises-exception"]), "'next'"
    )
    assert outcome.failure is None
    assert told[0].next_sent
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "'next'"


def test_a_cancel_kills_the_cell_sent_ahead(engine: KernelEngine, tmp_path: Path) -> None:
    written = tmp_path / "late"
    cancel = threading.Event()
    with pytest.raises(RunCancelled):
        _run(
            engine,
            tmp_path,
            "x = 1",
            f"import time\ntime.sleep(1.5)\nopen({str(written)!r}, 'w')",
            cancel=cancel,
            observers=[lambda ran: cancel.set()],
        )
    import time

    time.sleep(2.0)
    assert not written.exists()
