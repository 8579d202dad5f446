"""Where a warm ``NotebookExecutor.execute`` spends its time on the host, stage by stage.

Runs a notebook ``--runs`` times on a warm executor (a fresh kernel per run, started ahead,
``--gap`` seconds between runs so each finds its kernel ready) and times the stages of each run
with ``time.perf_counter`` spans wrapped around the functions that do them: planning, the run
files begun and finished, the catalog's begin and finish, the engine's run (the kernel's part),
and the host-side work between. Prints the median of each stage in milliseconds. With
``--cprofile FILE`` it also writes a cProfile of the measured runs.

Usage::

    python benchmarks/profile_run.py [--notebook trivial|scrapbook] [--runs 30] [--gap 0.5]
                                     [--cprofile out.prof]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_speed import SCRAPBOOK, TRIVIAL

#: Stages: (label, module, attribute). Nested stages are timed inside their parents.
STAGES = (
    ("plan", "notebook_executor._run.plan", "Planner.plan"),
    ("  load_source", "notebook_executor._run.plan", "load_source"),
    ("  choose_kernel", "notebook_executor._run.plan", "choose_kernel"),
    ("  declared_parameters", "notebook_executor._run.plan", "declared_parameters"),
    ("  resolve_declared_env", "notebook_executor._run.plan", "resolve_declared_env"),
    ("  inject_parameters", "notebook_executor._run.plan", "inject_parameters"),
    ("  kernel_environment", "notebook_executor._run.plan", "kernel_environment"),
    ("prepare runs dir", "notebook_executor._records.store", "RunStore.prepare"),
    ("prestart", "notebook_executor._kernels.kernel_engine", "KernelEngine.prestart"),
    ("begin_run", "notebook_executor._run.runner", "begin_run"),
    ("  environment_record", "notebook_executor._run.runner", "environment_record"),
    ("  redact nb", "notebook_executor._run.runner", "redact"),
    ("write run files", "notebook_executor._records.store", "RunStore.write"),
    ("  atomic_write_text", "notebook_executor._records.store", "atomic_write_text"),
    ("  render_markdown", "notebook_executor._records.store", "render_markdown"),
    ("  split_lines", "notebook_executor._records.store", "split_lines"),
    ("  run_json", "notebook_executor._records.store", "run_json"),
    ("catalog begin", "notebook_executor._catalog.store", "Catalog.begin"),
    ("engine.open", "notebook_executor._kernels.kernel_engine", "KernelEngine.open"),
    ("engine.run", "notebook_executor._run.cell_loop", "run_cells"),
    ("finish_run", "notebook_executor._run.runner", "finish_run"),
    ("  annotate_cells", "notebook_executor._run.runner", "annotate_cells"),
    ("  annotate_papermill", "notebook_executor._run.runner", "annotate_papermill"),
    ("  scrub_notebook", "notebook_executor._run.runner", "scrub_notebook"),
    ("  cap_streams", "notebook_executor._run.runner", "cap_streams"),
    ("  build_result", "notebook_executor._run.runner", "build_result"),
    ("catalog finish", "notebook_executor._catalog.store", "Catalog.finish"),
    ("  read run file", "notebook_executor._catalog.store", "Catalog._run_cells"),
    ("  run_texts", "notebook_executor._catalog.store", "run_texts"),
    ("  store (sql)", "notebook_executor._catalog.store", "_store"),
    ("execute (total)", "notebook_executor._executor", "NotebookExecutor.execute"),
)


def _replay(job: Any, index: int) -> Any:
    """The outputs a kernel gives the benchmark notebooks' cell ``index``."""
    source = job.nb.cells[index].source
    if "print(" in source:
        return [{"output_type": "stream", "name": "stdout", "text": "2\n"}]
    if "sb.glue" in source:
        return [
            {
                "output_type": "display_data",
                "metadata": {"scrapbook": {"name": "y", "data": True, "display": False}},
                "data": {
                    "application/scrapbook.scrap.json+json": {
                        "name": "y",
                        "data": 2,
                        "encoder": "json",
                        "version": 1,
                    }
                },
            }
        ]
    return []


def replay_engine() -> Any:
    """An engine that gives each code cell the outputs a kernel gives the benchmark notebooks
    (a printed line, or a scrapbook scrap), instantly: what is left is the host's work."""
    from notebook_executor.engine import ScriptedEngine

    return ScriptedEngine(_replay)


def _wrap(spans: dict[str, list[float]], label: str, module: str, attribute: str) -> None:
    import importlib

    owner: Any = importlib.import_module(module)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spans[label].append(time.perf_counter() - began)

    setattr(owner, name, timed)


def main(argv: list[str] | None = None) -> int:
    """Profile warm runs and print the median milliseconds of each stage; return 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", choices=["trivial", "scrapbook"], default="trivial")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between runs")
    parser.add_argument("--cprofile", default=None, help="write a cProfile of the runs here")
    parser.add_argument(
        "--host-only",
        action="store_true",
        help="no kernel: an engine that writes a kernel's outputs in place times the host alone",
    )
    args = parser.parse_args(argv)

    from notebook_executor import NotebookExecutor

    workdir = Path(tempfile.mkdtemp(prefix="nbx-profile-"))
    source = workdir / f"nb_{args.notebook}.py"
    source.write_text(TRIVIAL if args.notebook == "trivial" else SCRAPBOOK)
    spans: dict[str, list[float]] = defaultdict(list)
    for label, module, attribute in STAGES:
        if args.host_only and attribute.startswith("KernelEngine."):
            continue
        _wrap(spans, label, module, attribute)
    load = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    profiler = None
    replay = replay_engine() if args.host_only else None
    with NotebookExecutor(runs_dir=workdir / "runs", engine=replay) as ex:
        for i in range(5):
            ex.execute(source, parameters={"x": i})
            time.sleep(args.gap)
        spans.clear()
        if args.cprofile:
            import cProfile

            profiler = cProfile.Profile()
        for i in range(args.runs):
            time.sleep(args.gap)
            if profiler is not None:
                profiler.enable()
            ex.execute(source, parameters={"x": i})
            if profiler is not None:
                profiler.disable()
    if profiler is not None:
        profiler.dump_stats(args.cprofile)
    total = statistics.median(spans["execute (total)"])
    engine = statistics.median(spans["engine.run"]) if spans.get("engine.run") else 0.0
    print(f"{args.notebook} notebook, {args.runs} warm runs, median ms per stage:")
    for label, _, _ in STAGES:
        if spans.get(label):
            values = spans[label]
            per_run = sum(values) / args.runs
            print(
                f"  {label:<26} {statistics.median(values) * 1000:7.2f}"
                f"  x{len(values) / args.runs:.0f}  (mean per run {per_run * 1000:.2f})"
            )
    print(f"  host side (total - engine.run): {(total - engine) * 1000:.2f} ms")
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
