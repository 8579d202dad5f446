"""Before and after side by side in one run: ``--before PATH`` for every benchmark script.

A script that calls :func:`run_sides` first is run twice per round, alternately: with the
interpreter of ``PATH`` (an older checkout's venv: its ``notebook_executor`` is measured), then
with this one, each given the same arguments (without ``--before``). So the measurement code is
the same on both sides; only the code measured differs. Each side's output is printed, then
both merged: every line of the "after" output that has numbers is printed with the "before"
line's numbers beside it, when both lines say the same thing but for their numbers (with
several rounds, each number is the median of the rounds').

``PATH`` is a Python interpreter, or a checkout whose ``.nox/bench/bin/python`` exists (a git
worktree of the commit to compare with, e.g. ``git worktree add /tmp/before <commit>`` then
``nox -s bench --no-install`` there once, or ``python -m venv`` with ``pip install -e
'/tmp/before[bench]'``).

Usage, in any script: ``python benchmarks/bench_speed.py --before /tmp/before [--sides-rounds
N] [its own options]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def before_python(path: str) -> str:
    """The interpreter ``--before`` names: ``path`` itself, or its checkout's bench venv."""
    given = Path(path)
    if given.is_file() and os.access(given, os.X_OK):
        return str(given)
    venv = given / ".nox" / "bench" / "bin" / "python"
    if venv.exists():
        return str(venv)
    raise SystemExit(f"--before {path}: neither an interpreter nor a checkout with {venv}")


def _without(argv: list[str]) -> tuple[list[str], str | None, int]:
    """``argv`` without ``--before X`` and ``--sides-rounds N``; X and N."""
    rest, before, rounds = [], None, 1
    items = iter(argv)
    for item in items:
        name, eq, value = item.partition("=")
        if name in ("--before", "--sides-rounds"):
            value = value if eq else next(items, "")
            if name == "--before":
                before = value
            else:
                rounds = int(value)
        else:
            rest.append(item)
    return rest, before, rounds


def _skeleton(line: str) -> str:
    return NUMBER.sub("#", line)


def _numbers(line: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(line)]


def _median_lines(outputs: list[list[str]]) -> list[tuple[str, list[float]]]:
    """The first round's lines, each with the median of every round's numbers where the
    rounds' lines match."""
    merged = []
    for index, line in enumerate(outputs[0]):
        same = [
            _numbers(out[index])
            for out in outputs
            if index < len(out) and _skeleton(out[index]) == _skeleton(line)
        ]
        merged.append((line, [statistics.median(column) for column in zip(*same, strict=True)]))
    return merged


def _with_numbers(line: str, numbers: list[float]) -> str:
    """``line`` with its numbers replaced by ``numbers``, in order."""
    figures = iter(numbers)
    return NUMBER.sub(lambda _match: f"{next(figures):g}", line)


def _format(numbers: list[float]) -> str:
    return ", ".join(f"{n:g}" for n in numbers)


def run_sides(script: str, argv: list[str] | None = None) -> bool:
    """If ``argv`` (``sys.argv[1:]``) has ``--before``, measure both sides, print them and
    return True (the caller then exits); else return False and measure nothing."""
    rest, before, rounds = _without(sys.argv[1:] if argv is None else argv)
    if before is None:
        return False
    sides = {"before": before_python(before), "after": sys.executable}
    outputs: dict[str, list[list[str]]] = {side: [] for side in sides}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for number in range(rounds):
        for side, python in sides.items():
            print(f"--- round {number + 1}/{rounds}, {side}: {python}", flush=True)
            done = subprocess.run(
                [python, script, *rest], env=env, capture_output=True, text=True, check=False
            )
            print(done.stdout, end="", flush=True)
            if done.returncode != 0:
                raise SystemExit(f"{side} failed ({done.returncode}): {done.stderr[-2000:]}")
            outputs[side].append(done.stdout.splitlines())
    after = _median_lines(outputs["after"])
    earlier = {_skeleton(line): numbers for line, numbers in _median_lines(outputs["before"])}
    print(f"\n=== before ({sides['before']}) and after ({sides['after']}), medians of {rounds}")
    print("    each line: after's figures, then [before: its figures]")
    for line, numbers in after:
        if not numbers:
            continue
        then = earlier.get(_skeleton(line))
        shown = _with_numbers(line, numbers)
        print(f"{shown}   [{'after only' if then is None else 'before: ' + _format(then)}]")
    return True


def add_options(parser: argparse.ArgumentParser) -> None:
    """List ``--before`` and ``--sides-rounds`` in a script's ``--help`` (:func:`run_sides`
    has handled them before the script parses its arguments)."""
    parser.add_argument(
        "--before",
        metavar="PATH",
        help="also measure an older checkout (its .nox/bench venv) or interpreter, side by side",
    )
    parser.add_argument(
        "--sides-rounds", type=int, default=1, help="with --before: rounds, alternating sides"
    )
