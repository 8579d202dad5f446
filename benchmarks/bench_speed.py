"""Speed of notebook_executor against papermill and ploomber-engine, side by side in one process.

On the same notebooks (a trivial one, and one that imports scrapbook and glues a value):

0. interleaved (issue 47): what a caller who interleaves runs with other work sees. One
   process, a warm ``NotebookExecutor``, issue 47's notebook (a parameters cell ``x = 1``, ``y =
   x + 1``, a ``scrapbook`` glue); each of ``--rounds`` rounds runs papermill, ploomber-engine
   and ours once in turn with a new ``x`` (papermill is the other work: ``--skip-papermill-
   interleaved`` pauses 0.5 s instead). Target: ours <= 1.0x ploomber-engine, medians. Step 1's
   pairs measured something else: each ploomber-engine run came right after a 0.5 s sleep (its
   process idle, its caches cold) and each of ours right after it, so ours looked 0.69x;
1. per-run latency: papermill (a new kernel per run), ploomber-engine (in-process, no
   isolation), and a warm ``NotebookExecutor`` (a fresh kernel process per run, started ahead),
   each of its runs paired with a ploomber-engine run just before it;
2. a sweep: ``--sweep`` runs with ``execute_many`` from a new executor against papermill
   running them one after another;
3. a cold command: ``notebook-executor run x.py`` against ``papermill x.ipynb out.ipynb``, in
   pairs run back to back (the ratio is the median of the pairs' ratios);
4. ``import notebook_executor`` in a new interpreter;
   (``first``) a new ``NotebookExecutor``'s first three runs of the scrapbook notebook, in a
   new process each ``--repeat`` time: wall time of each run, and the CPU of every process
   (the caller, its templates and kernels);
5. memory: RSS growth of this process over ``--memory-runs`` runs, after the first 50.

Prints every figure, the ratios and the targets of issues 4 and 19, pass or fail. Medians
throughout; the load average is printed because other work on the machine moves every figure.
``--env-label`` names the environment in the output: ``nox -s bench`` runs this in a venv with
our dependencies only, ``nox -s bench_jupyterlab`` in one that also holds JupyterLab (whose
jupyter_server brings ``jsonschema[format-nongpl]``, making ``import nbformat`` slower).

Usage::

    python benchmarks/bench_speed.py [--repeat 5] [--warm-runs 30] [--sweep 40] [--rounds 15]
                                     [--memory-runs 1000] [--skip-papermill-sweep]
                                     [--env-label NAME] [--only STEP] [--before PATH]

``--before PATH`` (every script of this folder has it: ``sides.py``) runs the same
measurement with an older checkout's interpreter too, and prints both side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sides

TRIVIAL = """# %% tags=["parameters"]
x = 1

# %%
y = x + 1
print(y)
"""

#: Issue 47's notebook: a parameters cell, a cell, and a glue.
GLUE = """# %% tags=["parameters"]
x = 1

# %%
y = x + 1

# %%
import scrapbook as sb

sb.glue("y", y)
"""

SCRAPBOOK = """# %% tags=["parameters"]
x = 1

# %%
import scrapbook as sb

sb.glue("y", x + 1)
"""

BIN = Path(sys.executable).parent


def _median_seconds(action: Callable[[int], Any], repeat: int) -> float:
    times = []
    for i in range(repeat):
        began = time.perf_counter()
        action(i)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _mean_seconds(action: Callable[[int], Any], repeat: int) -> float:
    """The time per call of ``repeat`` calls back to back: a loop's throughput. (Their median
    hid the waits: with two kernels kept ready and runs faster than a kernel's start, two
    runs in three found one ready and the third waited, and the median was a ready run's.)"""
    began = time.perf_counter()
    for i in range(repeat):
        action(i)
    return (time.perf_counter() - began) / repeat


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _write_notebooks(workdir: Path) -> dict[str, tuple[Path, Path]]:
    import jupytext
    import nbformat

    notebooks = {}
    for name, text in (("trivial", TRIVIAL), ("scrapbook", SCRAPBOOK), ("glue", GLUE)):
        # Not "scrapbook.py": next to the notebook, it would shadow the scrapbook package.
        source = workdir / f"nb_{name}.py"
        source.write_text(text)
        nb = jupytext.reads(text, fmt="py:percent")
        nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
        ipynb = workdir / f"nb_{name}.ipynb"
        nbformat.write(nb, ipynb)
        notebooks[name] = (source, ipynb)
    return notebooks


class Report:
    """Rows of figures and targets, printed as a table."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []

    def figure(self, name: str, value: str) -> None:
        self.rows.append((name, value, "", ""))
        print(f"  {name}: {value}", flush=True)

    def target(self, name: str, value: float, op: str, limit: float, unit: str = "") -> None:
        ok = value <= limit if op == "<=" else value >= limit
        self.rows.append(
            (name, f"{value:.3g}{unit}", f"{op} {limit:g}{unit}", "PASS" if ok else "FAIL")
        )
        print(
            f"  {name}: {value:.3g}{unit} (target {op} {limit:g}{unit}) {'PASS' if ok else 'FAIL'}"
        )

    def print(self) -> None:
        width = max(len(row[0]) for row in self.rows)
        print("\n" + "=" * (width + 40))
        for name, value, target, verdict in self.rows:
            print(f"{name:<{width}}  {value:>12}  {target:>12}  {verdict}")


def bench_latency(report: Report, notebooks: dict[str, tuple[Path, Path]], args: Any) -> None:
    import papermill
    from ploomber_engine import execute_notebook

    from notebook_executor import NotebookExecutor

    out = Path(args.workdir)
    for name, (source, ipynb) in notebooks.items():
        if name == "glue":  # issue 47's notebook: measured interleaved (bench_interleaved)
            continue
        print(f"latency, {name} notebook", flush=True)
        pm = _median_seconds(
            lambda i, ipynb=ipynb: papermill.execute_notebook(
                str(ipynb), str(out / "pm.ipynb"), parameters={"x": i}, progress_bar=False
            ),
            args.repeat,
        )
        with NotebookExecutor(runs_dir=out / f"runs-{name}") as ex:
            for i in range(3):
                ex.execute(source, parameters={"x": i})
            ours = _mean_seconds(
                lambda i, source=source: ex.execute(source, parameters={"x": i}), args.warm_runs
            )
            # Latency: a run that finds its warm kernel ready (the pool refills between calls).
            # Each of our runs is paired with a ploomber-engine run just before it, so both see
            # the same moment of a shared machine.
            spaced, in_process, pair_ratios = [], [], []
            execute_notebook(
                str(ipynb), str(out / "pe.ipynb"), progress_bar=False, log_output=False
            )
            for i in range(args.warm_runs):
                time.sleep(0.5)
                began = time.perf_counter()
                execute_notebook(
                    str(ipynb),
                    str(out / "pe.ipynb"),
                    parameters={"x": i},
                    progress_bar=False,
                    log_output=False,
                )
                in_process.append(time.perf_counter() - began)
                began = time.perf_counter()
                ex.execute(source, parameters={"x": i})
                spaced.append(time.perf_counter() - began)
                pair_ratios.append(spaced[-1] / in_process[-1])
            pe_hot = _median_seconds(
                lambda i, ipynb=ipynb: execute_notebook(
                    str(ipynb),
                    str(out / "pe.ipynb"),
                    parameters={"x": i},
                    progress_bar=False,
                    log_output=False,
                ),
                args.warm_runs,
            )
        pe = statistics.median(in_process)
        latency = statistics.median(spaced)
        report.figure(f"{name}: papermill per run", f"{pm * 1000:.0f} ms")
        report.figure(
            f"{name}: ploomber-engine per run (paired, 0.5 s apart)", f"{pe * 1000:.1f} ms"
        )
        report.figure(f"{name}: ploomber-engine back to back", f"{pe_hot * 1000:.1f} ms")
        report.figure(f"{name}: ours, warm kernel ready (0.5 s apart)", f"{latency * 1000:.1f} ms")
        # Back to back, every run also waits for the next kernel to be forked and warmed:
        # that is throughput of one serial loop, shown beside the latency, not instead of it.
        report.figure(f"{name}: ours, back to back (serial throughput)", f"{ours * 1000:.1f} ms")
        report.figure(
            f"{name}: pairs' ratios, best / worst",
            f"{min(pair_ratios):.2f} / {max(pair_ratios):.2f}",
        )
        report.target(
            f"{name}: ours / ploomber-engine (latency, median of pairs)",
            statistics.median(pair_ratios),
            "<=",
            1.5,
            "x",
        )
        report.figure(f"{name}: papermill / ours (latency)", f"{pm / latency:.1f}x")
        report.figure(
            f"{name}: ours ready / ploomber-engine back to back", f"{latency / pe_hot:.2f}x"
        )
        report.figure(
            f"{name}: ours back to back / ploomber-engine back to back", f"{ours / pe_hot:.2f}x"
        )
        report.figure(f"{name}: papermill / ours back to back", f"{pm / ours:.1f}x")


def bench_interleaved(report: Report, notebooks: dict[str, tuple[Path, Path]], args: Any) -> None:
    """What a caller who interleaves runs with other work sees (issue 47): one process, a warm
    ``NotebookExecutor``; each round runs papermill, ploomber-engine and ours once in turn,
    each with a new ``x``, so each of ours finds its kernel ready after other work, as
    ploomber-engine's run finds its process after ours. Medians of ``--rounds``."""
    import papermill
    from ploomber_engine import execute_notebook

    from notebook_executor import NotebookExecutor

    out = Path(args.workdir)
    source, ipynb = notebooks["glue"]
    print(f"interleaved, {args.rounds} rounds: papermill, ploomber-engine, ours", flush=True)
    times: dict[str, list[float]] = {"papermill": [], "ploomber-engine": [], "ours": []}
    with NotebookExecutor(runs_dir=out / "runs-interleaved") as ex:
        for i in range(3):  # warm: the full template, scrapbook's first glue
            ex.execute(source, parameters={"x": i})
        execute_notebook(str(ipynb), str(out / "pe.ipynb"), progress_bar=False, log_output=False)
        for i in range(args.rounds):
            runs = {
                "papermill": lambda i=i: papermill.execute_notebook(
                    str(ipynb), str(out / "pm.ipynb"), parameters={"x": i}, progress_bar=False
                ),
                "ploomber-engine": lambda i=i: execute_notebook(
                    str(ipynb),
                    str(out / "pe.ipynb"),
                    parameters={"x": i},
                    progress_bar=False,
                    log_output=False,
                ),
                "ours": lambda i=i: ex.execute(source, parameters={"x": i}),
            }
            for name, run in runs.items():
                if name == "papermill" and args.skip_papermill_interleaved:
                    time.sleep(0.5)  # the other work: a pause, then the kernel is ready
                    continue
                began = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - began)
    medians = {name: statistics.median(t) for name, t in times.items() if t}
    for name, median in medians.items():
        report.figure(f"interleaved: {name} per run", f"{median * 1000:.1f} ms")
    report.target(
        "interleaved: ours / ploomber-engine (median)",
        medians["ours"] / medians["ploomber-engine"],
        "<=",
        1.0,
        "x",
    )


def bench_sweep(report: Report, notebooks: dict[str, tuple[Path, Path]], args: Any) -> None:
    import papermill

    from notebook_executor import NotebookExecutor

    source, ipynb = notebooks["scrapbook"]
    out = Path(args.workdir)
    sets = [{"x": i} for i in range(args.sweep)]
    print(f"sweep of {args.sweep} runs (scrapbook notebook)", flush=True)
    began = time.perf_counter()
    with NotebookExecutor(runs_dir=out / "runs-sweep") as ex:
        results = ex.execute_many(source, sets)
    ours = time.perf_counter() - began
    failed = [r for r in results if r["status"] != "success"]
    if failed:
        report.figure("sweep: FAILED runs", f"{len(failed)}: {failed[0]['failed_cell']}")
    if args.skip_papermill_sweep:
        pm = args.sweep * _median_seconds(
            lambda i: papermill.execute_notebook(
                str(ipynb), str(out / "pm.ipynb"), parameters={"x": i}, progress_bar=False
            ),
            args.repeat,
        )
        label = "papermill sweep (estimated from per-run median)"
    else:
        began = time.perf_counter()
        for values in sets:
            papermill.execute_notebook(
                str(ipynb), str(out / "pm.ipynb"), parameters=values, progress_bar=False
            )
        pm = time.perf_counter() - began
        label = "papermill sweep, one after another"
    report.figure(label, f"{pm:.2f} s")
    report.figure("ours: execute_many from a new executor (incl. close)", f"{ours:.2f} s")
    report.target("sweep: papermill / ours", pm / ours, ">=", 20.0, "x")


def bench_cold(report: Report, notebooks: dict[str, tuple[Path, Path]], args: Any) -> None:
    source, ipynb = notebooks["trivial"]
    out = Path(args.workdir)
    print("cold command line", flush=True)

    # A run server of this measurement's own (its own runtime folder), stopped at the end: with
    # the user's, ``--before``'s two sides shared one, started by the first side's code, and
    # the second side's commands were served by it, or refused by it and run in-process.
    env = {**os.environ, "NOTEBOOK_EXECUTOR_RUNTIME_DIR": tempfile.mkdtemp(prefix="nbxrt")}

    def run(command: list[str]) -> None:
        subprocess.run(
            command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )

    ours_cmd = [
        str(BIN / "notebook-executor"),
        "run",
        str(source),
        "--runs-dir",
        str(out / "runs-cold"),
        "--json",
    ]
    pm_cmd = [str(BIN / "papermill"), str(ipynb), str(out / "pm-cold.ipynb")]
    run(ours_cmd)
    run(pm_cmd)
    # Pairs, one command right after the other, so that both see the same load on a shared
    # machine; the ratio is the median of the pairs' ratios.
    ours_times, pm_times, ratios = [], [], []
    for _ in range(max(args.repeat, 7)):
        ours = _median_seconds(lambda i: run(ours_cmd), 1)
        pm = _median_seconds(lambda i: run(pm_cmd), 1)
        ours_times.append(ours)
        pm_times.append(pm)
        ratios.append(ours / pm)
    report.figure("cold: notebook-executor run x.py", f"{statistics.median(ours_times):.2f} s")
    report.figure("cold: papermill x.ipynb", f"{statistics.median(pm_times):.2f} s")
    report.figure("cold: pairs' ratios, best / worst", f"{min(ratios):.3f} / {max(ratios):.3f}")
    report.target(
        "cold: ours / papermill (median of pairs)", statistics.median(ratios), "<=", 0.5, "x"
    )
    stop = [str(BIN / "notebook-executor"), "server", "stop"]
    subprocess.run(stop, env=env, capture_output=True, check=False)
    shutil.rmtree(env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"], ignore_errors=True)

    code = (
        "import time; t = time.perf_counter(); import notebook_executor; "
        "print(time.perf_counter() - t)"
    )
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(max(args.repeat, 5))
    ]
    report.target("import notebook_executor", statistics.median(times), "<=", 0.15, " s")


#: ``bench_first``'s process: a new executor, three runs; prints their wall times and the CPU
#: seconds of the process and of every process it waited for.
FIRST_RUNS = """
import json, resource, sys, time
from notebook_executor import NotebookExecutor
walls = []
with NotebookExecutor(runs_dir=sys.argv[2]) as ex:
    for i in range(3):
        began = time.perf_counter()
        assert ex.execute(sys.argv[1], parameters={"x": i})["status"] == "success"
        walls.append(time.perf_counter() - began)
usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
cpu = sum(u.ru_utime + u.ru_stime for u in usages)
print(json.dumps({"walls": walls, "cpu": cpu}))
"""


def bench_first(report: Report, notebooks: dict[str, tuple[Path, Path]], args: Any) -> None:
    source, _ = notebooks["scrapbook"]
    out = Path(args.workdir)
    print("a new executor's first runs (scrapbook notebook)", flush=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    walls: list[list[float]] = []
    cpus = []
    for i in range(args.repeat):
        done = subprocess.run(
            [sys.executable, "-c", FIRST_RUNS, str(source), str(out / f"runs-first-{i}")],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        answer = json.loads(done.stdout.splitlines()[-1])
        walls.append(answer["walls"])
        cpus.append(answer["cpu"])
    for n, which in enumerate(("first", "second", "third")):
        median = statistics.median(w[n] for w in walls)
        report.figure(f"first: a new executor's {which} run", f"{median:.2f} s")
    report.figure("first: the three runs", f"{statistics.median(sum(w) for w in walls):.2f} s")
    report.figure("first: CPU of every process", f"{statistics.median(cpus):.2f} s")


def bench_memory(report: Report, notebooks: dict[str, tuple[Path, Path]], args: Any) -> None:
    from notebook_executor import NotebookExecutor

    source, _ = notebooks["scrapbook"]
    runs_dir = Path(args.workdir) / "runs-memory"
    print(f"memory over {args.memory_runs} runs", flush=True)
    with NotebookExecutor(runs_dir=runs_dir) as ex:
        baseline = None
        for i in range(args.memory_runs):
            ex.execute(source, parameters={"x": i})
            if i == 49:
                baseline = _rss_mb()
            if args.memory_runs > 200 and i % 200 == 199:
                print(f"    {i + 1} runs, RSS {_rss_mb():.1f} MB", flush=True)
        final = _rss_mb()
    assert baseline is not None
    report.figure("memory: RSS after 50 runs", f"{baseline:.1f} MB")
    report.figure(f"memory: RSS after {args.memory_runs} runs", f"{final:.1f} MB")
    report.target("memory: growth after the first 50 runs", final - baseline, "<=", 10.0, " MB")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print the table; return 0."""
    if sides.run_sides(__file__, argv):  # --before PATH: both trees, side by side
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="repeats of slow measurements")
    parser.add_argument("--warm-runs", type=int, default=30, help="warm runs to time")
    parser.add_argument("--sweep", type=int, default=40, help="runs in the sweep")
    parser.add_argument("--memory-runs", type=int, default=1000, help="runs for the memory check")
    parser.add_argument(
        "--skip-papermill-sweep",
        action="store_true",
        help="estimate papermill's sweep from its per-run median",
    )
    parser.add_argument("--rounds", type=int, default=15, help="rounds of the interleaved runs")
    parser.add_argument(
        "--skip-papermill-interleaved",
        action="store_true",
        help="between interleaved rounds, pause 0.5 s instead of running papermill",
    )
    parser.add_argument(
        "--only",
        choices=["interleaved", "latency", "sweep", "cold", "first", "memory"],
        action="append",
    )
    parser.add_argument("--workdir", default=None)
    parser.add_argument(
        "--env-label", default="dependencies only", help="names the environment in the output"
    )
    sides.add_options(parser)
    args = parser.parse_args(argv)
    keep = args.workdir is not None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="nbx-bench-")
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"environment: {args.env_label} (Python {sys.version.split()[0]}, {sys.prefix})")
    print(f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    notebooks = _write_notebooks(Path(args.workdir))
    report = Report()
    steps = {
        "interleaved": bench_interleaved,
        "latency": bench_latency,
        "sweep": bench_sweep,
        "cold": bench_cold,
        "first": bench_first,
        "memory": bench_memory,
    }
    try:
        for name, step in steps.items():
            if args.only is None or name in args.only:
                step(report, notebooks, args)
    finally:
        if not keep:
            shutil.rmtree(args.workdir, ignore_errors=True)
    print(f"\nenvironment: {args.env_label}")
    report.print()
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
