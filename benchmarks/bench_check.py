"""The CI gate against ``pytest --nbmake``, and the diff of two large notebooks.

1. ``notebook-executor check --execute`` on 20 small ``.ipynb`` notebooks against
   ``pytest --nbmake`` on the same files, each as a fresh command (what a CI step runs): serial
   (``-j 1`` against nbmake alone), and parallel (``-j N`` against ``pytest -n N`` when
   pytest-xdist is installed). Rounds alternate the two tools; medians are printed with ratios.
2. ``diff_notebooks`` of two 500-cell notebooks (a few cells changed, removed, added; no cell
   ids shared, so cells are aligned by source), in milliseconds, with and without outputs.

Usage::

    python benchmarks/bench_check.py [--notebooks 20] [--rounds 3] [--jobs 2]
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

CELLS = [
    "import math\nimport json",
    "values = [math.sqrt(i) for i in range(1000)]",
    "total = sum(values)\nprint(f'total {total:.3f}')",
    "summary = json.dumps({'n': len(values), 'total': round(total, 3)})\nsummary",
]


def make_notebooks(folder: Path, count: int) -> None:
    for number in range(count):
        cells = [nbformat.v4.new_markdown_cell(f"# Notebook {number}")]
        cells += [nbformat.v4.new_code_cell(source) for source in CELLS]
        nb = nbformat.v4.new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nbformat.write(nb, folder / f"nb_{number:02d}.ipynb")


def timed(command: list[str], cwd: Path) -> float:
    began = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


def bench_check(count: int, rounds: int, jobs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "notebooks"
        folder.mkdir()
        make_notebooks(folder, count)
        ours = [sys.executable, "-m", "notebook_executor", "check", "notebooks", "--execute"]
        theirs = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbmake"]
        pairs = [("serial", [*ours, "-j", "1"], [*theirs, "notebooks"])]
        if importlib.util.find_spec("xdist") is not None:
            pairs.append(
                (f"{jobs} jobs", [*ours, "-j", str(jobs)], [*theirs, "-n", str(jobs), "notebooks"])
            )
        else:
            print("(pytest-xdist not installed: the parallel nbmake run is skipped)")
        print(f"{count} notebooks of {len(CELLS)} code cells; {rounds} rounds; medians")
        for label, our_command, their_command in pairs:
            mine, other = [], []
            for _ in range(rounds):
                mine.append(timed(our_command, root))
                other.append(timed(their_command, root))
            ours_s, theirs_s = statistics.median(mine), statistics.median(other)
            print(
                f"  {label:>8}: check --execute {ours_s:6.2f} s   pytest --nbmake {theirs_s:6.2f} s"
                f"   ratio {ours_s / theirs_s:.2f}x"
            )


def bench_diff(repeat: int = 5) -> None:
    from notebook_executor._review.diff import diff_cells

    cells = []
    for i in range(500):
        cell = nbformat.v4.new_code_cell(
            f"value_{i} = compute({i}, scale={i % 7})\nprint(value_{i})", execution_count=i + 1
        )
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text=f"{i * 3.5}\n"),
            nbformat.v4.new_output(
                "execute_result",
                data={"text/plain": f"<Result {i} at 0x7f{i:010x}>"},
                execution_count=i + 1,
            ),
        ]
        cells.append(cell)
    a = nbformat.v4.new_notebook(cells=cells)
    b = copy.deepcopy(a)
    for cell in [*a.cells, *b.cells]:
        cell.pop("id")
    for index in (10, 120, 250, 377):
        b.cells[index].source += "\n# reviewed"
    b.cells[60].outputs[0]["text"] = "changed\n"
    del b.cells[300:303]
    b.cells.insert(450, nbformat.v4.new_markdown_cell("A new note"))
    for outputs in (False, True):
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            difference = diff_cells(a, b, outputs=outputs)
            times.append((time.perf_counter() - began) * 1000)
        print(
            f"  diff of two 500-cell notebooks (outputs={outputs}): "
            f"{statistics.median(times):.1f} ms, {len(difference['cells'])} cell changes"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--skip-check", action="store_true")
    args = parser.parse_args()
    if os.name == "posix":
        print(f"load average: {os.getloadavg()[0]:.2f}")
    if not args.skip_check:
        bench_check(args.notebooks, args.rounds, args.jobs)
    bench_diff()


if __name__ == "__main__":
    main()
