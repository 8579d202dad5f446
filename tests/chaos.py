"""Chaos: hosts SIGKILLed at random points, then every record checked and every process counted.

``python tests/chaos.py --runs 300`` (``nox -s chaos -- --runs 40``) starts host processes one
after another, each a ``NotebookExecutor`` on one shared ``runs/`` running one to three
notebooks that start a child, a ``multiprocessing`` worker and a shell's ``sleep &``
grandchild, on kernels forked from the template or launched (drawn at random). Each host is
SIGKILLed at a random moment of its life (some finish first). After each kill, within 10 s and
before any other executor starts, no process of that host may be left: the kernel, its
children, its grandchildren (found by an environment marker unique to the host, wherever they
were reparented).

At the end:

- every run record is valid: each ``.ipynb`` passes nbformat's validation, each ``.md`` has a
  YAML front matter that parses to a mapping;
- ``runs/catalog.sqlite`` passes ``PRAGMA integrity_check`` and nothing was moved aside as
  corrupt;
- every run record has a row before ``reindex`` (a host killed between writing a run's first
  record and its row leaves a record the first query's sweep must bring in);
- every catalog row is truthful, both as the catalog answers and after ``reindex``: it agrees
  with its run record (a file still saying ``running``, its host dead, is an ``interrupted``
  error), no row is ``running``, a run the host saw finish has the status the host saw, and a
  ``success`` row is a run whose last cell ran.

Prints the seed (``--seed`` replays a draw), each failure the moment it is found, progress every
20 hosts, and a summary (hosts, kills and the phase each landed in, runs, files checked, rows
missing before ``reindex``, leftovers, time); exits 1 on any failure. ``--minutes M`` (or
SIGTERM, or Ctrl-C) stops starting hosts and checks what ran.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

#: The environment marker every process of one host inherits: ``<seed>-<host number>``.
MARKER = "NOTEBOOK_EXECUTOR_CHAOS"

#: Seconds a killed host's processes have to disappear.
GRACE = 10.0

NOTEBOOK = """# %% tags=["parameters"]
tag: str = ""
folder: str = ""

# %%
import multiprocessing
import os
import pathlib
import subprocess
import time

phases = os.open(pathlib.Path(folder, "phases"), os.O_WRONLY | os.O_APPEND)
child = subprocess.Popen(["sleep", "600"])
worker = multiprocessing.Process(target=time.sleep, args=(600,), daemon=True)
worker.start()
subprocess.run(["sh", "-c", "sleep 600 > /dev/null 2>&1 &"])
os.write(phases, b"cell\\n")

# %%
import scrapbook as sb

sb.glue("tag", tag)
time.sleep(0.1)

# %%
pathlib.Path(folder, tag + ".done").write_text("done")
os.write(phases, b"last cell\\n")
"""

HOST = r"""
import json, os, sys
folder, runs_dir, notebook, mode, count = sys.argv[1:6]
phases = os.open(os.path.join(folder, "phases"), os.O_WRONLY | os.O_APPEND)
os.write(phases, b"import\n")
from notebook_executor import NotebookExecutor
from notebook_executor._kernels.kernel_engine import KernelEngine

engine = KernelEngine(fork=mode == "forked")
with NotebookExecutor(runs_dir=runs_dir, engine=engine) as ex:
    if mode == "forked":
        ex.prepare_kernel()
    for k in range(int(count)):
        tag = f"{os.path.basename(folder)}-{k}"
        os.write(phases, b"run\n")
        result = ex.execute(notebook, parameters={"tag": tag, "folder": folder})
        with open(os.path.join(folder, "results.jsonl"), "a") as out:
            out.write(json.dumps({"tag": tag, "run_id": result["run_id"],
                                  "status": result["status"]}) + "\n")
        os.write(phases, b"between runs\n")
    os.write(phases, b"closing\n")
os.write(phases, b"closed\n")
"""


def _marked(token: str, *, prefix: bool = False) -> dict[int, str]:
    """Live processes whose environment holds ``MARKER=token`` (or, with ``prefix``, a value
    starting with ``token``), with their command lines."""
    wanted = f"{MARKER}={token}".encode()
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            proc = Path("/proc", entry.name)
            state = (proc / "stat").read_bytes().rpartition(b")")[2].split()[0]
            environ = (proc / "environ").read_bytes()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        variables = environ.split(b"\0")
        if state != b"Z" and (
            wanted in variables or (prefix and any(v.startswith(wanted) for v in variables))
        ):
            found[int(entry.name)] = command.strip()[:120]
    return found


def _leftovers(token: str, *, prefix: bool = False) -> dict[int, str]:
    """What is still alive of host ``token`` after :data:`GRACE` seconds (then killed)."""
    deadline = time.monotonic() + GRACE
    left = _marked(token, prefix=prefix)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _marked(token, prefix=prefix)
    for pid in left:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


class Failures(list[str]):
    """The failures found so far, each printed the moment it is found (a run cut short
    still reports what it found)."""

    def append(self, failure: str) -> None:
        print(f"  ! {failure}", flush=True)
        super().append(failure)


def _phase(folder: Path) -> str:
    lines = (folder / "phases").read_text().split()
    return lines[-1] if lines else "start"


def _front_matter(path: Path) -> Any:
    import yaml

    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError("no front matter")
    end = text.index("\n---\n", 4)
    return yaml.safe_load(text[4:end])


def _check_files(runs_dir: Path, failures: list[str]) -> collections.Counter[str]:
    import nbformat

    counts: collections.Counter[str] = collections.Counter()
    for path in sorted(runs_dir.glob("*/*.ipynb")):
        counts["ipynb"] += 1
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as exc:
            failures.append(f"invalid run notebook {path.name}: {exc!r:.200}")
    for path in sorted(runs_dir.glob("*/*.md")):
        counts["md"] += 1
        try:
            if not isinstance(_front_matter(path), dict):
                raise ValueError("front matter is not a mapping")
        except Exception as exc:
            failures.append(f"invalid run markdown {path.name}: {exc!r:.200}")
    return counts


def _check_catalog(runs_dir: Path, failures: list[str]) -> str:
    catalog = runs_dir / "catalog.sqlite"
    with closing(sqlite3.connect(catalog)) as conn:
        [(verdict,)] = conn.execute("PRAGMA integrity_check").fetchall()
    if verdict != "ok":
        failures.append(f"catalog integrity_check: {verdict}")
    moved = sorted(p.name for p in runs_dir.glob("catalog.sqlite.corrupt*"))
    if moved:
        failures.append(f"catalog moved aside as corrupt: {moved}")
    return str(verdict)


def _check_rows(
    rows: Sequence[Mapping[str, Any]],
    runs_dir: Path,
    seen: dict[str, str],
    done: set[str],
    failures: list[str],
    when: str,
) -> None:
    """Rows against their run records, what hosts saw, and which runs reached their last cell."""
    from notebook_executor._records.store import RunStore

    for row in rows:
        run_id, status = row["run_id"], row["status"]
        try:
            record = json.loads(RunStore(runs_dir).path(run_id).read_text(encoding="utf-8"))
            in_file = record["metadata"]["notebook_executor"]
        except (OSError, ValueError, KeyError) as exc:
            failures.append(f"{when}: row {run_id} has no readable run record: {exc!r:.120}")
            continue
        expected = (in_file["status"], in_file.get("error_kind"))
        if in_file["status"] == "running":
            expected = ("error", "interrupted")
        if (status, row["error_kind"]) != expected:
            failures.append(
                f"{when}: row {run_id} says {status}/{row['error_kind']}, file {expected}"
            )
        tag = (row.get("parameters") or {}).get("tag")
        if run_id in seen and seen[run_id] != status:
            failures.append(f"{when}: row {run_id} says {status}, its host saw {seen[run_id]}")
        if status == "success" and tag not in done:
            failures.append(f"{when}: row {run_id} claims success, its last cell never ran")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="hosts to start (default 300)")
    parser.add_argument("--seed", type=int, default=None, help="replay a draw")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="start no host after this many minutes; check and report what ran",
    )
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("chaos: Linux only (/proc)", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**9)
    rng = random.Random(seed)
    # A killed host's runs are reported once each as interrupted: expected here, not news.
    logging.getLogger("notebook_executor").setLevel(logging.ERROR)
    print(f"chaos: seed {seed}, {args.runs} hosts", flush=True)

    scratch = Path(tempfile.mkdtemp(prefix="notebook-executor-chaos-"))
    runs_dir = scratch / "runs"
    notebook = scratch / "spawner.py"
    notebook.write_text(NOTEBOOK)
    src = Path(__file__).resolve().parents[1] / "src"
    paths = [str(src), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}

    failures = Failures()
    phases: collections.Counter[str] = collections.Counter()
    modes: collections.Counter[str] = collections.Counter()
    seen: dict[str, str] = {}
    done: set[str] = set()
    # Seconds per run within which a host is killed: grows a little after each kill and
    # shrinks after each host that finished first, so about one host in five finishes and the
    # kills spread over every phase of a host's life, however slow the machine.
    span = {"forked": 2.0, "launched": 2.0}
    kills = finished = leftover_count = 0
    began = time.monotonic()
    # SIGTERM (a capped job) or Ctrl-C stops the hosts; what ran is still checked and reported.
    stop: list[str] = []

    def _stop(signum: int, _frame: object) -> None:
        stop.append(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    started_hosts = 0
    for number in range(args.runs):
        if args.minutes is not None and time.monotonic() - began > args.minutes * 60:
            stop.append(f"{args.minutes:g} minutes")
        if stop:
            print(f"chaos: stopped after {number} hosts ({stop[0]}); checking", flush=True)
            break
        started_hosts += 1
        mode = rng.choice(["forked", "launched"])
        count = rng.randint(1, 3)
        token = f"{seed}-{number}"
        folder = scratch / f"h{number}"
        folder.mkdir()
        (folder / "phases").write_text("")
        delay = rng.uniform(0.0, span[mode] * count)
        host = subprocess.Popen(
            [
                sys.executable,
                "-c",
                HOST,
                str(folder),
                str(runs_dir),
                str(notebook),
                mode,
                str(count),
            ],
            env={**env, MARKER: token},
            cwd=scratch,
            stdout=subprocess.DEVNULL,
            stderr=(folder / "stderr").open("wb"),
        )
        try:
            host.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            host.kill()
            host.wait()
        if host.returncode == -signal.SIGKILL:
            span[mode] *= 1.05
            kills += 1
            phase = _phase(folder)
            phases[phase] += 1
            modes[mode] += 1
        else:
            finished += 1
            span[mode] *= 0.8
            if host.returncode != 0:
                stderr = (folder / "stderr").read_text(errors="replace")
                failures.append(f"host {token} exited {host.returncode}: {stderr[-300:]}")
        left = _leftovers(token)
        if left:
            leftover_count += len(left)
            failures.append(
                f"host {token} ({mode}, killed in phase {_phase(folder)!r}) left "
                + "; ".join(f"{pid}: {cmd}" for pid, cmd in sorted(left.items()))
            )
        results = folder / "results.jsonl"
        if results.exists():
            for line in results.read_text().splitlines():
                entry = json.loads(line)
                seen[entry["run_id"]] = entry["status"]
        done |= {path.name[: -len(".done")] for path in folder.glob("*.done")}
        if (number + 1) % 20 == 0:
            print(
                f"  {number + 1} hosts, {kills} killed, {leftover_count} leftovers,"
                f" {len(failures)} failures, {time.monotonic() - began:.0f} s",
                flush=True,
            )

    from notebook_executor import NotebookExecutor

    counts = _check_files(runs_dir, failures)
    verdict = _check_catalog(runs_dir, failures)
    files = {path.stem for path in runs_dir.glob("*/*.ipynb")}
    with closing(sqlite3.connect(runs_dir / "catalog.sqlite")) as conn:
        unswept = files - {run_id for (run_id,) in conn.execute("SELECT run_id FROM runs")}
    print(f"  {len(unswept)} records without a catalog row before any query", flush=True)
    with NotebookExecutor(runs_dir=runs_dir, warm_kernels=0) as reader:
        live_rows = reader.runs()
        missing_before = files - {row["run_id"] for row in live_rows}
        if missing_before:
            failures.append(
                f"{len(missing_before)} runs have a record but no row before reindex:"
                f" {sorted(missing_before)[:5]}"
            )
        _check_rows(live_rows, runs_dir, seen, done, failures, "catalog")
        indexed = reader.reindex()
        rows = reader.runs()
        _check_rows(rows, runs_dir, seen, done, failures, "after reindex")
    if indexed != counts["ipynb"] or len(rows) != counts["ipynb"]:
        failures.append(
            f"reindex indexed {indexed} runs, {len(rows)} rows, {counts['ipynb']} files"
        )
    missing = set(seen) - {row["run_id"] for row in rows}
    if missing:
        failures.append(f"runs their hosts saw finish are missing: {sorted(missing)[:5]}")
    verdict_after = _check_catalog(runs_dir, failures)
    # Whatever any host left (each was checked after its kill; this is the whole run's count).
    left_at_end = _leftovers(f"{seed}-", prefix=True)
    if left_at_end:
        leftover_count += len(left_at_end)
        failures.append(f"{len(left_at_end)} processes left at the end: {left_at_end}")
    elapsed = time.monotonic() - began

    statuses = collections.Counter(
        f"{row['status']}/{row['error_kind']}" if row["error_kind"] else row["status"]
        for row in rows
    )
    print(f"chaos: seed {seed}")
    print(f"  hosts {started_hosts}: killed {kills}, finished before the kill {finished}")
    print(f"  kills by mode: {dict(sorted(modes.items()))}")
    print(f"  kills by phase: {dict(phases.most_common())}")
    print(f"  runs recorded {len(rows)}: {dict(statuses.most_common())}")
    print(f"  run records checked: {counts['ipynb']} .ipynb, {counts['md']} .md")
    print(
        f"  catalog integrity_check: {verdict} (after reindex: {verdict_after}),"
        f" {len(live_rows)} rows before and {len(rows)} after reindex"
    )
    print(
        f"  rows missing before reindex: {len(missing_before)}"
        f" ({len(unswept)} records had no row until the first query's sweep)"
    )
    print(f"  processes left after {GRACE:g} s: {leftover_count}")
    print(f"  corrupt files: {sum(1 for f in failures if f.startswith('invalid run'))}")
    per_kill = elapsed / kills if kills else float("nan")
    print(f"  time {elapsed:.0f} s ({per_kill:.1f} s per kill)")
    if failures:
        print(f"chaos: {len(failures)} failures (seed {seed}):")
        for failure in failures[:50]:
            print(f"  - {failure}")
        print(f"  scratch folder kept: {scratch}")
        return 1
    print("chaos: no failures")
    if not args.keep:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"  scratch folder kept: {scratch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
