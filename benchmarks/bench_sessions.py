"""Benchmark sessions: what checkpoints of a live kernel cost, side by side in one run.

Figures (one function each, in :data:`FIGURES`; ``--only NAME`` runs some of them):

``memory``
    A kernel holds a 1 GB numpy array; 20 checkpoints are taken after cells that do not modify
    it. The proportional set size (PSS, ``/proc/<pid>/smaps_rollup``) summed over the kernel
    and every checkpoint process, against the kernel's own before the first checkpoint.
    Target: at most 1.3x.
``checkpoint cost``
    Milliseconds per checkpoint (from the request to its reply: what a session step waits
    for) after each of many trivial cells, beside the time of such a cell and the part the
    kernel spends (its checks and the fork, which grows with its resident memory); and per
    restore (the old kernel ended, a new one made from the checkpoint and answering). The
    machine's load average is reported with them: on a busy machine each round trip waits
    for the scheduler.
``rerun after an edit``
    Cells 0-3 do 10 s of work (sleeps: the figure does not move with the load) and cell 4
    fails. After the fix, ``Session.rerun_from(4)`` against ``execute()`` of the fixed notebook
    and papermill on it. Targets: ``restored: "checkpoint"``, at most 0.2 s beyond cell 4's
    own time, and ratios of at least 50x.
``cells in a session``
    A 100-cell notebook of trivial cells: one ``Session.run()`` against ``execute()`` on a
    warm executor. Target: at most 5 ms more per cell.

Kernels are forked from a template with the data modules, as the executor's pool forks them
(``--launched``: launched instead).

Usage::

    python benchmarks/bench_sessions.py [--only memory --only "checkpoint cost"] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from notebook_executor._kernels.cells import Displays, execute_cell
from notebook_executor._kernels.checkpoints import smaps_rollup
from notebook_executor._kernels.forkserver import ForkServer
from notebook_executor._kernels.launch import choose_kernel, kernel_environment
from notebook_executor._kernels.live import LiveKernel
from notebook_executor._notebook import new_code_cell, new_notebook

TARGET_MEMORY_RATIO = 1.3
ARRAY_BYTES = 2**30
MEMORY_CHECKPOINTS = 20
COST_CHECKPOINTS = 100
COST_RESTORES = 10


class Bench:
    """What every figure shares: a folder, and where kernels come from."""

    def __init__(self, workdir: Path, *, launched: bool) -> None:
        self.workdir = workdir
        self.template: ForkServer | None = None
        if not launched:
            self.template = ForkServer(kernel_environment(None), data_modules=True)
            self.template.start()

    async def live(self) -> LiveKernel:
        return await LiveKernel.start(
            choose_kernel("bench", None, None),
            cwd=self.workdir,
            env=kernel_environment(None),
            ready_timeout=120,
            forkserver=self.template,
        )

    def close(self) -> None:
        if self.template is not None:
            self.template.close()


async def run_cell(live: LiveKernel, code: str) -> None:
    """Run ``code`` as a cell with the engine's cell machinery; fail loudly on an error."""
    nb = new_notebook(cells=[new_code_cell(code)])
    end = await execute_cell(
        live.client, nb, 0, timeout=600, iopub_timeout=600, alive=live.alive, displays=Displays()
    )
    if end.how != "ok":
        raise RuntimeError(f"cell {code!r} ended {end.how}: {nb.cells[0].outputs}")


def _pss(pid: int | None) -> int:
    return 0 if pid is None else smaps_rollup(pid).get("Pss", 0)


async def memory(bench: Bench) -> dict[str, Any]:
    """PSS of the kernel and 20 checkpoints over the kernel's alone, with a 1 GB array."""
    live = await bench.live()
    try:
        await run_cell(live, f"import numpy as np\nbig = np.ones({ARRAY_BYTES // 8})")
        alone = _pss(live.pid)
        taken = []
        for index in range(MEMORY_CHECKPOINTS):
            await run_cell(live, f"step = {index}\ntotal = float(big[:{index + 1}].sum())")
            began = time.perf_counter()
            why = await live.checkpoint(index)
            taken.append((time.perf_counter() - began) * 1000)
            if why is not None:
                raise RuntimeError(f"checkpoint {index} refused: {why}")
        deadline = time.monotonic() + 60
        while len(live.checkpoint_pids()) < MEMORY_CHECKPOINTS and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        pids = live.checkpoint_pids()
        kernel = _pss(live.pid)
        checkpoints = sum(_pss(pid) for pid in pids)
        held = await live.account_memory()
    finally:
        await live.shutdown()
    ratio = (kernel + checkpoints) / alone
    return {
        "array_bytes": ARRAY_BYTES,
        "checkpoints": len(pids),
        "kernel_alone_pss": alone,
        "kernel_pss": kernel,
        "checkpoints_pss": checkpoints,
        "ratio": round(ratio, 3),
        "held_by_checkpoints": held,
        "checkpoint_ms_median": round(statistics.median(taken), 2),
        "target_ratio": TARGET_MEMORY_RATIO,
        "ok": ratio <= TARGET_MEMORY_RATIO and len(pids) == MEMORY_CHECKPOINTS,
    }


async def checkpoint_cost(bench: Bench) -> dict[str, Any]:
    """Milliseconds per checkpoint after trivial cells, and per restore."""
    live = await bench.live()
    rss = 0
    cells: list[float] = []
    taken: list[float] = []
    forks: list[float] = []
    restored: list[float] = []
    try:
        await run_cell(live, "import random\nrandom.seed(0)\nvalue = 0")
        for index in range(COST_CHECKPOINTS):
            began = time.perf_counter()
            await run_cell(live, f"value += {index}")
            cells.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            why = await live.checkpoint(index)
            taken.append((time.perf_counter() - began) * 1000)
            forks.append((live.last_checkpoint_seconds or 0.0) * 1000)
            if why is not None:
                raise RuntimeError(f"checkpoint {index} refused: {why}")
        rss = smaps_rollup(live.pid).get("Rss", 0) if live.pid is not None else 0
        for index in range(COST_RESTORES):
            key = COST_CHECKPOINTS // 2 + index
            began = time.perf_counter()
            await live.restore(key)
            restored.append((time.perf_counter() - began) * 1000)
            await run_cell(live, f"assert value == sum(range({key + 1})), value")
    finally:
        await live.shutdown()
    return {
        "load_average": round(os.getloadavg()[0], 2),
        "cell_ms_median": round(statistics.median(cells), 2),
        "checkpoints": len(taken),
        "checkpoint_ms_median": round(statistics.median(taken), 2),
        "checkpoint_ms_p90": round(sorted(taken)[int(len(taken) * 0.9)], 2),
        "kernel_side_ms_median": round(statistics.median(forks), 2),
        "kernel_rss": rss,
        "restores": len(restored),
        "restore_ms_median": round(statistics.median(restored), 1),
        "restore_ms_max": round(max(restored), 1),
    }


# -- the session layer's figures: a whole session against whole runs ------------------------------

SLOW_CELL = "import time\ntime.sleep(2.5)\nv{i} = {i}"
BROKEN = "result = v0 + v1 + v2 + v3 + missing"
FIXED = "result = v0 + v1 + v2 + v3"
RERUN_REPEATS = 3
TRIVIAL_CELLS = 100


def _percent(cells: list[str]) -> str:
    return "".join(f"# %%\n{cell}\n\n" for cell in cells)


def _rerun(workdir: Path) -> dict[str, Any]:
    import jupytext
    import nbformat
    import papermill

    from notebook_executor import NotebookExecutor

    source = workdir / "slow.py"
    source.write_text(_percent([*(SLOW_CELL.format(i=i) for i in range(4)), BROKEN]))
    runs = workdir / "runs-rerun"
    with NotebookExecutor(runs_dir=runs) as ex:
        with ex.open_session(source) as session:
            assert session.run()["status"] == "error"
            ex.edit_cell(source, 4, FIXED)
            timed = []
            for _ in range(RERUN_REPEATS):
                began = time.perf_counter()
                step = session.rerun_from(4)
                timed.append((time.perf_counter() - began, step))
            rerun, step = min(timed, key=lambda pair: pair[0])
            record = next(runs.rglob(f"{session.run_id}.ipynb"))
            cells = json.loads(record.read_text(encoding="utf-8"))["cells"]
            own = float(cells[4]["metadata"]["notebook_executor"]["duration_seconds"])
        began = time.perf_counter()
        assert ex.execute(source)["status"] == "success"
        ours = time.perf_counter() - began
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    ipynb = source.with_suffix(".ipynb")
    nbformat.write(nb, ipynb)
    began = time.perf_counter()
    papermill.execute_notebook(str(ipynb), str(workdir / "pm-out.ipynb"), progress_bar=False)
    pm = time.perf_counter() - began
    return {
        "restored": step["restored"],
        "restore_reason": step["restore_reason"],
        "rerun_from_ms": round(rerun * 1000, 1),
        "cell_4_ms": round(own * 1000, 1),
        "execute_s": round(ours, 2),
        "papermill_s": round(pm, 2),
        "execute_ratio": round(ours / rerun, 1),
        "papermill_ratio": round(pm / rerun, 1),
        "load_average": os.getloadavg()[0],
        "ok": step["restored"] == "checkpoint"
        and rerun - own <= 0.2
        and min(ours, pm) / rerun >= 50,
    }


async def rerun_after_edit(bench: Bench) -> dict[str, Any]:
    """Cells 0-3 sleep 10 s in all, cell 4 fails; after the fix, ``rerun_from(4)`` against
    ``execute()`` of the fixed notebook and papermill on it. Targets: restored from a
    checkpoint, <= 0.2 s beyond cell 4's own time, ratios >= 50x."""
    return await asyncio.to_thread(_rerun, bench.workdir)


def _trivial_cells(workdir: Path) -> dict[str, Any]:
    from notebook_executor import NotebookExecutor

    source = workdir / "hundred.py"
    source.write_text(_percent([f"x{i} = {i}" for i in range(TRIVIAL_CELLS)]))
    in_session, whole = [], []
    with NotebookExecutor(runs_dir=workdir / "runs-cells") as ex:
        ex.execute(source)  # the executor's kernels are warm from here on
        for _ in range(RERUN_REPEATS):
            began = time.perf_counter()
            assert ex.execute(source)["status"] == "success"
            whole.append(time.perf_counter() - began)
            with ex.open_session(source) as session:
                began = time.perf_counter()
                assert len(session.run()["cells_run"]) == TRIVIAL_CELLS
                in_session.append(time.perf_counter() - began)
    more = (statistics.median(in_session) - statistics.median(whole)) / TRIVIAL_CELLS
    return {
        "execute_ms": round(statistics.median(whole) * 1000, 1),
        "session_run_ms": round(statistics.median(in_session) * 1000, 1),
        "more_per_cell_ms": round(more * 1000, 2),
        "load_average": os.getloadavg()[0],
        "ok": more <= 0.005,
    }


async def cells_in_a_session(bench: Bench) -> dict[str, Any]:
    """A 100-cell notebook of trivial cells: one ``run()`` of a session against ``execute()``
    on a warm executor. Target: <= 5 ms more per cell."""
    return await asyncio.to_thread(_trivial_cells, bench.workdir)


#: The figures, by name, in the order they run.
FIGURES: dict[str, Callable[[Bench], Awaitable[dict[str, Any]]]] = {
    "memory": memory,
    "checkpoint cost": checkpoint_cost,
    "rerun after an edit": rerun_after_edit,
    "cells in a session": cells_in_a_session,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", action="append", choices=sorted(FIGURES), default=None)
    parser.add_argument("--launched", action="store_true", help="launch kernels, not fork")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("checkpoints need Linux", file=sys.stderr)
        return 2
    names = args.only or list(FIGURES)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nbx-bench-", dir="/tmp") as folder:
        bench = Bench(Path(folder), launched=args.launched)
        try:
            for name in names:
                results[name] = asyncio.run(FIGURES[name](bench))
                print(f"{name}: {json.dumps(results[name])}", flush=True)
        finally:
            bench.close()
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(result.get("ok", True) for result in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
