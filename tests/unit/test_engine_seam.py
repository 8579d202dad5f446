"""The public engine seam: a custom engine built from ``notebook_executor.engine`` alone."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._run.cell_loop import run_job
from notebook_executor._sources.formats import load_source
from notebook_executor.engine import (
    CellEnd,
    CellHooks,
    CellRan,
    EngineKernel,
    KernelChoice,
    NotebookNode,
    RunJob,
    SupportsPrepare,
    SupportsPrestart,
)

NOTEBOOK = "# %%\nx = 1\n\n# %% [markdown]\n# note\n\n# %%\ny = 2\n"


class PlainKernel:
    """The smallest kernel: every cell completes with no output."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.count = 0
        self.info: dict[str, Any] = {}

    def run_cell(self, nb: NotebookNode, index: int, limit: float | None) -> CellEnd:
        self.calls.append(f"cell {index}")
        self.count += 1
        nb.cells[index].outputs = []
        nb.cells[index].execution_count = self.count
        return CellEnd("ok", idle=True)

    def save_widgets(self, nb: NotebookNode) -> None:
        pass

    def stop(self) -> None:
        self.calls.append("stop")

    def close(self, *, clean: bool) -> None:
        self.calls.append("close kernel")


class PlainEngine:
    """The smallest engine: ``open`` and ``close``, no optional hook."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def open(self, job: RunJob) -> EngineKernel:
        self.calls.append("open")
        return PlainKernel(self.calls)

    def close(self) -> None:
        self.calls.append("close")


class HookedEngine(PlainEngine):
    """An engine with both optional hooks."""

    def __init__(self) -> None:
        super().__init__()
        self.prestarted: list[RunJob] = []
        self.ran: list[RunJob] = []

    def prepare_kernel(self) -> None:
        self.calls.append("prepare_kernel")

    def prestart(self, job: RunJob) -> None:
        self.calls.append("prestart")
        self.prestarted.append(job)

    def open(self, job: RunJob) -> EngineKernel:
        self.ran.append(job)
        return super().open(job)


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    path = tmp_path / "nb.py"
    path.write_text(NOTEBOOK)
    return path


def test_an_engine_without_hooks_runs_and_prepare_kernel_does_nothing(
    notebook: Path, tmp_path: Path
) -> None:
    engine = PlainEngine()
    assert not isinstance(engine, SupportsPrepare)
    assert not isinstance(engine, SupportsPrestart)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        ex.prepare_kernel()
        result = ex.execute(notebook)
    assert result["status"] == "success"
    assert result["cells_executed"] == 2
    assert engine.calls == ["open", "cell 0", "cell 2", "close kernel", "close"]


def test_the_optional_hooks_are_called_in_order_with_the_job_that_runs(
    notebook: Path, tmp_path: Path
) -> None:
    engine = HookedEngine()
    assert isinstance(engine, SupportsPrepare)
    assert isinstance(engine, SupportsPrestart)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        ex.prepare_kernel()
        assert engine.calls == ["prepare_kernel"]
        ex.execute(notebook)
    assert engine.calls == [
        "prepare_kernel",
        "prestart",
        "open",
        "cell 0",
        "cell 2",
        "close kernel",
        "close",
    ]
    assert len(engine.prestarted) == 1
    assert engine.prestarted[0] is engine.ran[0]


def test_bad_input_reaches_no_hook_but_prepare(tmp_path: Path) -> None:
    from notebook_executor import NotebookSourceError

    engine = HookedEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        ex.prepare_kernel()
        with pytest.raises(NotebookSourceError):
            ex.execute(tmp_path / "missing.py")
    assert engine.calls == ["prepare_kernel", "close"]


def test_the_hooks_hear_each_cell_and_survive_a_failing_observer(
    notebook: Path, tmp_path: Path
) -> None:
    engine = PlainEngine()
    seen: list[tuple[str, int]] = []
    hooks = CellHooks(
        on_cell_start=[lambda event: seen.append(("start", event.index))],
        on_cell_executed=[lambda ran: seen.append(("ran", ran.index))],
    )
    job = RunJob(load_source(notebook).nb, _kernel(), tmp_path, {}, hooks=hooks)
    run_job(engine, job)
    assert seen == [("start", 0), ("ran", 0), ("start", 2), ("ran", 2)]

    def broken(event: CellRan) -> None:
        raise RuntimeError(f"display failed at {event.index}")

    job = RunJob(
        load_source(notebook).nb,
        _kernel(),
        tmp_path,
        {},
        hooks=CellHooks(on_cell_executed=[broken]),
    )
    assert run_job(engine, job).completed == [0, 2]


def test_the_fake_engine_uses_public_names_only() -> None:
    """A custom engine needs no private module: the unit tier's fake engine proves it."""
    source = (Path(__file__).with_name("fake_engine.py")).read_text(encoding="utf-8")
    imported = [
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    ]
    ours = [name for name in imported if name.split(".")[0] == "notebook_executor"]
    assert ours == ["notebook_executor.engine"]


def _kernel() -> KernelChoice:
    return KernelChoice(name="python3", language="python", native=True)
