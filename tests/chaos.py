"""Chaos: hosts SIGKILLed at random points, then every record checked and every process counted.

``python tests/chaos.py --runs 300`` (``nox -s chaos -- --runs 40``) starts host processes one
after another, on one shared ``runs/``, each running one to three times a notebook that starts
a child, a ``multiprocessing`` worker and a shell's ``sleep &`` grandchild. A host is one of
four kinds, drawn at random:

- ``forked``, ``launched``: a ``NotebookExecutor`` in the host's process, its kernels forked
  from its template or launched;
- ``served-run``, ``served-session``: ``notebook-executor`` commands run one after another
  (``run --json``; or ``session open``, ``session run``, ``session eval``, ``session close``)
  through the run server of the chaos run's own runtime folder
  (``NOTEBOOK_EXECUTOR_RUNTIME_DIR``). The server is started by a command of its own, so its
  processes carry a marker of their own.

Each host is SIGKILLed at a random moment of its life (some finish first). For a served host,
what is killed is drawn too: the host (its process group: it and the command it runs; the
sessions it left open are then closed, as its user would), the run server itself (and the
host), or the server's kernel template (the host goes on, and must finish within 120 s). After
each kill, within 10 s and before any other host starts, nothing of that host may be left:
the kernel, its children, its grandchildren (found by an environment marker unique to the host,
wherever they were reparented, and by the pids and start times the notebook writes down: a
kernel of the run server does not carry its client's environment). After a kill of the server,
nothing of it may be left either (its children, session holders, kernel template and the
kernels forked from it), and the next command must start a new one. At the end the server is
stopped (``server stop``), and nothing of it may be left.

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
20 hosts, and a summary (hosts, kills by kind, by what was killed and by the phase each landed
in, server starts, served commands' exit statuses, runs, files checked, rows missing before
``reindex``, leftovers, time per host); exits 1 on any failure. A served command that fails
when nothing was killed is a failure; after a kill, its exit status is only counted.
``--minutes M`` (or SIGTERM, or Ctrl-C) stops starting hosts and checks what ran.
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
from collections.abc import Callable, Mapping, Sequence
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
pids = os.open(pathlib.Path(folder, "pids"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def started(pid):
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rpartition(b")")[2].split()[19].decode()


os.write(pids, f"{os.getpid()} {started(os.getpid())}\\n".encode())
child = subprocess.Popen(["sleep", "600"])
worker = multiprocessing.Process(target=time.sleep, args=(600,), daemon=True)
worker.start()
for pid in (child.pid, worker.pid):
    os.write(pids, f"{pid} {started(pid)}\\n".encode())
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

#: A host of the run server's kinds: ``notebook-executor`` commands, one after another, through
#: the server of the chaos run's own runtime folder. ``served-run`` runs the notebook ``count``
#: times (``run --json``); ``served-session`` opens a session on it, runs it, evaluates, closes.
SERVED_HOST = r"""
import json, os, subprocess, sys
folder, runs_dir, notebook, kind, count = sys.argv[1:6]
phases = os.open(os.path.join(folder, "phases"), os.O_WRONLY | os.O_APPEND)


def command(phase, *argv):
    os.write(phases, phase.encode() + b"\n")
    done = subprocess.run([sys.executable, "-m", "notebook_executor", *argv],
                          capture_output=True, text=True)
    with open(os.path.join(folder, "commands"), "a") as log:
        log.write(json.dumps([argv[:2], done.returncode, done.stderr[-300:]]) + "\n")
    return done


name = os.path.basename(folder)
if kind == "served-run":
    for k in range(int(count)):
        tag = f"{name}-{k}"
        done = command("run", "run", notebook, "-p", "tag", tag, "-p", "folder", folder,
                       "--runs-dir", runs_dir, "--json")
        try:
            result = json.loads(done.stdout)
        except ValueError:
            continue
        with open(os.path.join(folder, "results.jsonl"), "a") as out:
            out.write(json.dumps({"tag": tag, "run_id": result["run_id"],
                                  "status": result["status"]}) + "\n")
        os.write(phases, b"between runs\n")
else:
    done = command("open", "session", "open", notebook, "-p", "tag", f"{name}-0", "-p",
                   "folder", folder, "--runs-dir", runs_dir, "--json")
    # An open that failed (its template killed meanwhile: one line, exit 2) is judged from the
    # commands' log, as every command is: nothing to step through.
    if done.returncode == 0:
        session = json.loads(done.stdout)["session_id"]
        command("step", "session", "run", session)
        command("eval", "session", "eval", session, "tag")
        command("close", "session", "close", session)
os.write(phases, b"closed\n")
"""

#: The run server's kernel template: ``template_server.py <fd> <server pid> ...``.
TEMPLATE = "template_server.py"


def _processes() -> dict[int, tuple[list[bytes], list[str], int]]:
    """Every live process (no zombie): its environment, its arguments and its parent."""
    found: dict[int, tuple[list[bytes], list[str], int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            proc = Path("/proc", entry.name)
            fields = (proc / "stat").read_bytes().rpartition(b")")[2].split()
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            try:
                environ = (proc / "environ").read_bytes().split(b"\0")
            except OSError:  # not dumpable (the run server's processes), for a non-root user
                environ = []
        except OSError:
            continue
        if fields[0] != b"Z":
            found[int(entry.name)] = (environ, argv, int(fields[1]))
    return found


def _shown(argv: list[str]) -> str:
    return " ".join(argv).strip()[:120]


def _marked(token: str, *, prefix: bool = False) -> dict[int, str]:
    """Live processes whose environment holds ``MARKER=token`` (or, with ``prefix``, a value
    starting with ``token``), with their command lines."""
    wanted = f"{MARKER}={token}".encode()
    return {
        pid: _shown(argv)
        for pid, (environ, argv, _parent) in _processes().items()
        if wanted in environ or (prefix and any(v.startswith(wanted) for v in environ))
    }


def _recorded(folder: Path) -> dict[int, str]:
    """The kernels and children the host's runs wrote down (``<pid> <start time>`` lines in
    ``pids``) that still live: found whatever their environment, as the run server's are."""
    alive: dict[int, str] = {}
    if not (folder / "pids").exists():
        return alive
    for line in (folder / "pids").read_text().splitlines():
        pid, start = line.split()
        with suppress(OSError):
            proc = Path("/proc", pid)
            fields = (proc / "stat").read_bytes().rpartition(b")")[2].split()
            if fields[0] != b"Z" and fields[19].decode() == start:
                argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
                alive[int(pid)] = _shown(argv)
    return alive


def _family(server: int, token: str) -> dict[int, str]:
    """The processes of the run server ``server`` (started with marker ``token``): itself, its
    children (commands served, session holders), its kernel template and the kernels forked
    from it (their arguments name the server)."""
    wanted = f"{MARKER}={token}".encode()
    return {
        pid: _shown(argv)
        for pid, (environ, argv, parent) in _processes().items()
        if pid == server
        or parent == server
        or wanted in environ
        or (any(a.endswith(TEMPLATE) for a in argv) and str(server) in argv)
    }


def _template(server: int) -> int | None:
    """The pid of the kernel template of run server ``server``, when it has one."""
    for pid, (_environ, argv, parent) in _processes().items():
        if parent == server and any(a.endswith(TEMPLATE) for a in argv):
            return pid
    return None


def _leftovers(find: Callable[[], dict[int, str]]) -> dict[int, str]:
    """What ``find`` still finds after :data:`GRACE` seconds (then killed)."""
    deadline = time.monotonic() + GRACE
    left = find()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = find()
    for pid in left:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


#: The kinds of hosts: an executor in the host's process, its kernels forked from its own
#: template or launched; commands through the run server, runs or a session.
KINDS = ["forked", "launched", "served-run", "served-session"]

#: Seconds a served host may take to finish after its server's kernel template was killed.
HOST_SECONDS = 120.0


class Server:
    """The run server of the chaos run's own runtime folder. It is started by a command of
    its own (so that its processes carry a marker of their own, ``<seed>-server<n>``), killed
    at random points, and stopped at the end; after a kill, nothing of it may be left, and the
    next command must start a new one."""

    def __init__(
        self, scratch: Path, env: Mapping[str, str], seed: int, failures: list[str]
    ) -> None:
        self.scratch = scratch
        self.env = {k: v for k, v in env.items() if k != "NOTEBOOK_EXECUTOR_NO_SERVER"}
        self.env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"] = str(scratch / "rt")
        self.env["NOTEBOOK_EXECUTOR_SERVER_IDLE"] = "3600"
        self.seed = seed
        self.failures = failures
        self.pid: int | None = None
        self.token = ""
        self.generation = 0
        #: Seconds each start took (the command that started it, a run of a one-cell notebook).
        self.starts: list[float] = []
        #: Processes found left after a kill or the stop.
        self.left = 0
        (scratch / "warm.py").write_text("# %%\nx = 1\n")

    def command(self, *argv: str, token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "notebook_executor", *argv],
            cwd=self.scratch,
            env={**self.env, MARKER: token},
            capture_output=True,
            text=True,
            timeout=HOST_SECONDS,
            check=False,
        )

    def running(self) -> int | None:
        """The pid ``server status`` gives (None: no server runs)."""
        done = self.command("server", "status", "--json", token=f"{self.seed}-status")
        try:
            pid = json.loads(done.stdout)["pid"]
        except (ValueError, KeyError, TypeError):
            self.failures.append(f"server status exited {done.returncode}: {done.stderr[-300:]}")
            return None
        return pid if isinstance(pid, int) else None

    def ensure(self) -> None:
        """A server runs: after a kill (or at first), the next command starts one."""
        if self.pid is not None:
            return
        self.generation += 1
        self.token = f"{self.seed}-server{self.generation}"
        began = time.monotonic()
        done = self.command("run", "warm.py", "--runs-dir", "warm-runs", token=self.token)
        self.starts.append(time.monotonic() - began)
        self.pid = self.running()
        if done.returncode != 0 or self.pid is None:
            self.failures.append(
                f"server {self.generation}: the next command (exit {done.returncode}) started"
                f" no server: {done.stderr[-300:]}"
            )

    def kill_template(self) -> int | None:
        """SIGKILL the server's kernel template; its pid (None: none was found)."""
        template = _template(self.pid) if self.pid is not None else None
        if template is not None:
            with suppress(OSError):
                os.kill(template, signal.SIGKILL)
        return template

    def kill(self, when: str) -> None:
        """SIGKILL the server; then nothing of it may be left (children, session holders,
        template, kernels)."""
        if self.pid is None:
            return
        with suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        self._check_gone(f"server {self.generation} killed ({when})")

    def close_sessions(self, token: str) -> None:
        """Close the sessions a killed host left open, as its user would."""
        if self.pid is None:
            return
        done = self.command("session", "list", "--json", token=token)
        try:
            sessions = [entry["session_id"] for entry in json.loads(done.stdout)]
        except (ValueError, KeyError, TypeError):
            self.failures.append(f"session list exited {done.returncode}: {done.stderr[-300:]}")
            return
        for session in sessions:
            closed = self.command("session", "close", session, token=token)
            if closed.returncode != 0:
                self.failures.append(
                    f"host {token}: session close {session} exited {closed.returncode}:"
                    f" {closed.stderr[-300:]}"
                )

    def stop(self) -> None:
        """``server stop``; then nothing of it may be left."""
        if self.pid is None:
            return
        done = self.command("server", "stop", token=f"{self.seed}-status")
        if done.returncode != 0:
            self.failures.append(f"server stop exited {done.returncode}: {done.stderr[-300:]}")
        self._check_gone(f"server {self.generation} stopped")

    def _check_gone(self, what: str) -> None:
        server, token = self.pid, self.token
        assert server is not None
        self.pid = None
        left = _leftovers(lambda: _family(server, token))
        if left:
            self.left += len(left)
            self.failures.append(
                f"{what} left " + "; ".join(f"{pid}: {cmd}" for pid, cmd in sorted(left.items()))
            )


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
        accepted = {expected}
        if (in_file.get("session") or {}).get("open") is True:
            # A session's record says how its steps went while it is open; once its process is
            # gone (killed while open, even while closing), the catalog calls it interrupted.
            accepted.add(("error", "interrupted"))
        if (status, row["error_kind"]) not in accepted:
            failures.append(
                f"{when}: row {run_id} says {status}/{row['error_kind']}, file {expected}"
            )
        tag = (row.get("parameters") or {}).get("tag")
        if run_id in seen and seen[run_id] != status:
            failures.append(f"{when}: row {run_id} says {status}, its host saw {seen[run_id]}")
        # A session closed before any step (its `session run` killed before the host read it)
        # ran nothing and claims nothing of its cells: no cell of its record was executed.
        log = (in_file.get("session") or {}).get("log", [])
        unstepped = bool(in_file.get("session")) and not any(e.get("kind") == "step" for e in log)
        if unstepped and any(
            cell.get("execution_count") for cell in record["cells"] if cell["cell_type"] == "code"
        ):
            failures.append(f"{when}: row {run_id}: a session that ran no step has cells run")
        if status == "success" and tag not in done and not unstepped:
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
    span = dict.fromkeys(KINDS, 2.0)
    kills = finished = leftover_count = 0
    targets: collections.Counter[str] = collections.Counter()
    commands: collections.Counter[str] = collections.Counter()
    server = Server(scratch, env, seed, failures)
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
        mode = rng.choice(KINDS)
        count = rng.randint(1, 3) if mode != "served-session" else 1
        token = f"{seed}-{number}"
        folder = scratch / f"h{number}"
        folder.mkdir()
        (folder / "phases").write_text("")
        delay = rng.uniform(0.0, span[mode] * count)
        served = mode.startswith("served")
        # What the kill hits: the host; for a served host, sometimes the run server itself
        # (and the host), or the server's kernel template (the host goes on).
        target = rng.choices(["host", "server", "template"], [5, 3, 2])[0] if served else "host"
        if served:
            server.ensure()
        host = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SERVED_HOST if served else HOST,
                str(folder),
                str(runs_dir),
                str(notebook),
                mode,
                str(count),
            ],
            env={**(server.env if served else env), MARKER: token},
            cwd=scratch,
            stdout=subprocess.DEVNULL,
            stderr=(folder / "stderr").open("wb"),
            start_new_session=True,  # the host and the commands it runs: one group to kill
        )
        hit = ""
        try:
            host.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            hit = _phase(folder)
            if target == "template" and server.kill_template() is None:
                target = "template (none running: the host instead)"
            if target == "template":
                try:
                    host.wait(timeout=HOST_SECONDS)
                except subprocess.TimeoutExpired:
                    failures.append(
                        f"host {token} ({mode}) hung {HOST_SECONDS:g} s after the server's"
                        f" kernel template was killed in phase {hit!r}"
                    )
            with suppress(OSError):
                if served:
                    os.killpg(host.pid, signal.SIGKILL)
                else:  # the host alone: its executor's kernels are its own to end
                    host.kill()
            host.wait()
            if target == "server":
                server.kill(f"host {token} ({mode}), phase {hit!r}")
        if hit:
            targets[target] += 1
            phases[hit] += 1
            modes[mode] += 1
        if host.returncode == -signal.SIGKILL:
            span[mode] *= 1.05
            kills += 1
        else:
            finished += 1
            span[mode] *= 0.8
            if host.returncode != 0:
                stderr = (folder / "stderr").read_text(errors="replace")
                failures.append(f"host {token} exited {host.returncode}: {stderr[-300:]}")
        if served:
            log = folder / "commands"
            for line in log.read_text().splitlines() if log.exists() else []:
                (name, code, stderr) = json.loads(line)
                commands[f"{' '.join(name)}: {code}"] += 1
                if code != 0 and not hit:
                    failures.append(f"host {token}: {' '.join(name)} exited {code}: {stderr}")
            if mode == "served-session" and hit and target != "server":
                server.close_sessions(token)
        left = _leftovers(lambda: {**_marked(token), **_recorded(folder)})  # noqa: B023
        if left:
            leftover_count += len(left)
            failures.append(
                f"host {token} ({mode}, {target} killed in phase {hit or _phase(folder)!r})"
                " left " + "; ".join(f"{pid}: {cmd}" for pid, cmd in sorted(left.items()))
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
    # Its open sessions are closed, their records finished; nothing of it may be left.
    server.stop()
    leftover_count += server.left

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
    left_at_end = _leftovers(lambda: _marked(f"{seed}-", prefix=True))
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
    print(f"  kills by kind of host: {dict(sorted(modes.items()))}")
    print(f"  kills by what was killed: {dict(targets.most_common())}")
    print(f"  kills by phase: {dict(phases.most_common())}")
    starts = ", ".join(f"{t:.1f}" for t in server.starts)
    print(f"  run servers started {len(server.starts)} (seconds to the first answer: {starts})")
    print(f"  served commands (exit status): {dict(sorted(commands.items()))}")
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
    per_host = elapsed / started_hosts if started_hosts else float("nan")
    print(f"  time {elapsed:.0f} s ({per_host:.1f} s per host, {per_kill:.1f} s per kill)")
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
