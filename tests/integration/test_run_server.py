"""The per-user run server (docs/how-to/server.md), proven against the real server process.

Every test starts its own server (in a private runtime folder of its own, through the command
line, as a user's shell would) and stops it; the suite's process check then finds nothing
left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HELLO = Path(__file__).parents[2] / "notebooks" / "hello.py"

ENV_NOTEBOOK = """# %% tags=["parameters"]
name: str = "x"

# %%
import os
import scrapbook as sb
sb.glue("seen", os.environ.get("NBX_CLIENT_ONLY", "unset"))
sb.glue("cwd", os.getcwd())
with open("/proc/self/environ", "rb") as environ:
    sb.glue("initial", b"NBX_CLIENT_ONLY=" in environ.read())
"""

SLOW_NOTEBOOK = """# %% tags=["parameters"]
n: int = 3

# %%
import pathlib, time
x = n * 2

# %%
pathlib.Path("started").write_text("yes")
time.sleep(60)
pathlib.Path("finished").write_text("yes")

# %%
y = x + 1
"""


class Shell:
    """A user's shell in ``folder``: ``notebook-executor`` runs as a whole process."""

    def __init__(self, folder: Path, runtime: Path) -> None:
        self.folder = folder
        self.runtime = runtime
        env = {k: v for k, v in os.environ.items() if k != "NOTEBOOK_EXECUTOR_NO_SERVER"}
        env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"] = str(runtime)
        env["NOTEBOOK_EXECUTOR_SERVER_IDLE"] = "120"
        self.env = env

    def start(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "notebook_executor", *argv],
            cwd=self.folder,
            env={**self.env, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        process = self.start(*argv, env=env)
        out, err = process.communicate(timeout=240)
        return process.returncode, out, err

    def status(self) -> dict[str, Any]:
        code, out, err = self.run("server", "status", "--json")
        assert code == 0, err
        status: dict[str, Any] = json.loads(out)
        return status


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    runtime = Path(tempfile.mkdtemp(prefix="nbx", dir="/tmp"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.py").write_text(HELLO.read_text())
    user = Shell(work, runtime)
    try:
        yield user
    finally:
        user.run("server", "stop")
        for pid_file in runtime.glob("*/*.pid"):  # a server a failed test could not stop
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
        shutil.rmtree(runtime, ignore_errors=True)


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    varying = {"run_id", "started_at", "finished_at", "duration_seconds", "output_path"}
    return {k: v for k, v in result.items() if k not in varying}


def test_a_run_through_the_server_is_the_in_process_run(shell: Shell) -> None:
    assert shell.status()["pid"] is None
    code, out, err = shell.run("run", "hello.py", "-p", "name", "Ada", "--json")
    assert code == 0, err
    served = json.loads(out)
    status = shell.status()
    assert isinstance(status["pid"], int)
    code, out, err = shell.run("run", "hello.py", "-p", "name", "Ada", "--json", "--no-server")
    assert code == 0, err
    local = json.loads(out)
    assert _comparable(served) == _comparable(local)
    assert served["scraps"] == {"greeting": "Hello, Ada!", "length": 11}
    # The same records and catalog rows: both runs are found, alike.
    code, out, err = shell.run("runs", "--json")
    rows = {row["run_id"]: row for row in json.loads(out)}
    assert {served["run_id"], local["run_id"]} <= set(rows)
    assert (shell.folder / served["output_path"]).is_file()
    assert (shell.folder / served["output_path"]).with_suffix(".md").is_file()
    # The same server serves the next command.
    assert shell.run("run", "hello.py")[0] == 0
    assert shell.status()["pid"] == status["pid"]


def test_each_client_brings_its_own_folder_and_environment(shell: Shell) -> None:
    (shell.folder / "env.py").write_text(ENV_NOTEBOOK)
    code, out, err = shell.run("run", "env.py", "--json", env={"NBX_CLIENT_ONLY": "first"})
    assert code == 0, err
    assert json.loads(out)["scraps"]["seen"] == "first"
    other = shell.folder / "other"
    other.mkdir()
    (other / "env.py").write_text(ENV_NOTEBOOK)
    second = Shell(other, Path(shell.env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"]))
    code, out, err = second.run("run", "env.py", "--json")
    assert code == 0, out
    result = json.loads(out)
    assert result["scraps"]["seen"] == "unset"  # nothing of the first client's environment
    assert result["scraps"]["initial"] is False  # not even the one the kernel started with
    assert result["scraps"]["cwd"] == str(other)
    assert (other / "runs").is_dir()


def test_server_status_and_stop(shell: Shell) -> None:
    assert shell.run("run", "hello.py")[0] == 0
    pid = shell.status()["pid"]
    code, _out, err = shell.run("server", "stop")
    assert code == 0, err
    assert shell.status()["pid"] is None
    assert not _alive(pid)


def test_a_command_while_the_last_server_exits_waits_for_it_and_is_served(shell: Shell) -> None:
    """A server past its stop, still exiting (it holds the lock until its process ends), is
    waited for: the command right after a ``server stop`` gets a new server, not an in-process
    run (found in CI: a ``run`` straight after a stop ran in-process)."""
    assert shell.run("run", "hello.py")[0] == 0
    old = shell.status()["pid"]
    assert shell.run("server", "stop")[0] == 0
    (lock_path,) = shell.runtime.glob("*/*.lock")
    with lock_path.open("rb") as lock:  # the old server, exiting: its lock is still held
        fcntl.flock(lock, fcntl.LOCK_EX)
        command = shell.start("-v", "run", "hello.py")
        time.sleep(1.5)
    _out, err = command.communicate(timeout=240)
    assert command.returncode == 0, err
    assert "running in-process" not in err, err
    assert shell.status()["pid"] not in (None, old)


SEEN_NOTEBOOK = """# %%
import pathlib
import scrapbook as sb
sb.glue("seen", pathlib.Path("seen.txt").read_text())
"""


def _in_own_mounts(over: Path, by: Path) -> list[str]:
    """A command line prefix: a mount namespace of its own, ``by`` mounted over ``over`` in it
    (as a sandbox shows its process another view of the files)."""
    namespace = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        namespace = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    return [*namespace, "sh", "-c", script, "sh", str(by), str(over)]


def test_a_client_in_another_mount_namespace_runs_its_command_itself(shell: Shell) -> None:
    """A client whose view of the files is not the server's (a sandbox, a container: another
    mount namespace) is not served: the server's child would run its command outside it."""
    if shutil.which("unshare") is None:  # pragma: no cover - util-linux is on every CI machine
        pytest.skip("needs unshare(1)")
    (shell.folder / "seen.py").write_text(SEEN_NOTEBOOK)
    (shell.folder / "seen.txt").write_text("outside")
    (shell.folder / "inside.txt").write_text("inside")
    assert shell.run("run", "hello.py")[0] == 0  # a server runs
    pid = shell.status()["pid"]
    prefix = _in_own_mounts(shell.folder / "seen.txt", shell.folder / "inside.txt")
    if subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no mount namespace can be made here")
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "notebook_executor", "-v", "run", "seen.py", "--json"],
        cwd=shell.folder,
        env=shell.env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scraps"]["seen"] == "inside"
    assert "another mount namespace" in done.stderr and "running in-process" in done.stderr
    # The server still serves its own namespace.
    code, out, err = shell.run("run", "seen.py", "--json")
    assert code == 0, err
    assert json.loads(out)["scraps"]["seen"] == "outside"
    assert shell.status()["pid"] == pid


def test_sessions_from_the_shell(shell: Shell) -> None:
    notebook = shell.folder / "steps.py"
    notebook.write_text(SLOW_NOTEBOOK.replace("time.sleep(60)", "time.sleep(0)"))
    code, out, err = shell.run("session", "open", "steps.py", "-p", "n", "5", "--json")
    assert code == 0, err
    opened = json.loads(out)
    sid = opened["session_id"]
    code, out, err = shell.run("session", "run", sid, "--json")
    assert code == 0, err
    step = json.loads(out)
    assert step["status"] == "success" and step["cells_run"] == [0, 1, 2, 3]
    code, out, _ = shell.run("session", "eval", sid, "print(y)")
    assert (code, out.strip()) == (0, "11")
    notebook.write_text(notebook.read_text().replace("y = x + 1", "y = x + 100"))
    code, out, err = shell.run("session", "rerun", sid, "--from", "3", "--json")
    assert code == 0, err
    step = json.loads(out)
    assert step["cells_run"][-1] == 3 and step["status"] == "success"
    process = shell.start("session", "eval", sid, "-")
    out, _ = process.communicate("print(y)\n", timeout=60)
    assert out.strip() == "110"
    code, out, _ = shell.run("session", "eval", sid, "1/0", "--json")
    assert code == 1 and json.loads(out)["error"]["ename"] == "ZeroDivisionError"
    code, out, _ = shell.run("session", "list", "--json")
    assert [s["session_id"] for s in json.loads(out)] == [sid]
    code, out, err = shell.run("session", "close", sid)
    assert code == 0, err
    code, _out, err = shell.run("session", "run", sid)
    assert code == 2 and len(err.strip().splitlines()) == 1
    record = json.loads(shell.run("show", opened["run_id"], "--json")[1])
    assert record["status"] == "success"


def test_a_bad_request_gets_a_one_line_error(shell: Shell) -> None:
    assert shell.run("run", "hello.py")[0] == 0
    path = shell.status()["socket"]
    for payload in (struct.pack(">I", 5) + b"nope!", struct.pack(">I", 1 << 30)):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            sock.sendall(payload)
            head = sock.recv(4)
            (size,) = struct.unpack(">I", head)
            answer = json.loads(sock.recv(size))
        assert "\n" not in answer["error"]
    assert shell.run("run", "hello.py")[0] == 0  # still serving


def test_sigkill_of_the_server_mid_run(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW_NOTEBOOK)
    assert shell.run("run", "hello.py")[0] == 0
    status = shell.status()
    process = shell.start("run", "slow.py")
    deadline = time.monotonic() + 120
    while not (shell.folder / "started").exists():
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    os.kill(status["pid"], signal.SIGKILL)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    _code, out, _ = shell.run("runs", "--json", "--notebook", "slow.py")
    (row,) = json.loads(out)
    result = json.loads(shell.run("show", row["run_id"], "--json")[1])
    assert result["error_kind"] == "interrupted"
    assert result["failed_cell"]["index"] == 2
    deadline = time.monotonic() + 10
    while _alive(status["template_pid"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(status["template_pid"])
    # The next client cleans up after the killed server and starts a new one.
    assert shell.run("run", "hello.py")[0] == 0
    assert shell.status()["pid"] not in (None, status["pid"])


def test_twenty_clients_at_once(shell: Shell) -> None:
    processes = [shell.start("run", "hello.py", "-p", "name", f"n{i}", "--json") for i in range(20)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["scraps"]["greeting"] for r in results) == sorted(
        f"Hello, n{i}!" for i in range(20)
    )
    assert len({r["run_id"] for r in results}) == 20


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        with Path(f"/proc/{pid}/stat").open() as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


_FOREIGN_CLIENT = """
import json, socket, struct, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
data = json.dumps({"op": "status"}).encode()
try:
    sock.sendall(struct.pack(">I", len(data)) + data)
except OSError:
    pass  # the server answered and closed before reading
head = sock.recv(4)
print(sock.recv(struct.unpack(">I", head)[0]).decode() if len(head) == 4 else "closed")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to be another user")
def test_another_user_is_refused_whatever_the_socket_mode(shell: Shell, tmp_path: Path) -> None:
    assert shell.run("run", "hello.py")[0] == 0
    status = shell.status()
    # A second name for the server's socket, where anyone may reach it, open to all.
    open_folder = Path(tempfile.mkdtemp(prefix="nbxopen", dir="/tmp"))
    try:
        open_folder.chmod(0o777)
        link = open_folder / "s"
        os.link(status["socket"], link)
        link.chmod(0o777)
        done = subprocess.run(
            ["/usr/bin/python3", "-I", "-S", "-c", _FOREIGN_CLIENT, str(link)],
            user=65534,
            group=65534,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "refused a process of user 65534" in done.stdout
        assert '"pid"' not in done.stdout
    finally:
        shutil.rmtree(open_folder, ignore_errors=True)
    assert shell.status()["pid"] == status["pid"]


def test_ctrl_c_in_the_client_cancels_the_run_in_the_server(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW_NOTEBOOK)
    process = shell.start("run", "slow.py", "--json")
    deadline = time.monotonic() + 120
    while not (shell.folder / "started").exists():
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    result = json.loads(out)
    assert result["error_kind"] == "cancelled"
    assert result["failed_cell"]["index"] == 2
    # Its child ends once its kernel is stopped, after the client has its answer.
    deadline = time.monotonic() + 30
    while shell.status()["commands"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert shell.status()["commands"] == 0


def test_a_session_is_finished_when_the_server_stops(shell: Shell) -> None:
    code, out, err = shell.run("session", "open", "hello.py", "--json")
    assert code == 0, err
    opened = json.loads(out)
    assert shell.run("session", "run", opened["session_id"])[0] == 0
    assert [s["session_id"] for s in shell.status()["sessions"]] == [opened["session_id"]]
    assert shell.run("server", "stop")[0] == 0
    record = json.loads(shell.run("show", opened["run_id"], "--json")[1])
    assert record["status"] == "success" and record["cells_executed"] == 3
    assert shell.run("session", "run", opened["session_id"])[0] == 2


def test_the_server_exits_when_idle(shell: Shell) -> None:
    shell.env["NOTEBOOK_EXECUTOR_SERVER_IDLE"] = "1"
    assert shell.run("run", "hello.py")[0] == 0
    pid = shell.status()["pid"]
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid)
    assert shell.status()["pid"] is None


def test_a_server_idle_sooner_than_it_starts_serves_the_command_that_started_it(
    shell: Shell,
) -> None:
    # Its idle time counts from when it is ready, and it exits with no client waiting.
    shell.env["NOTEBOOK_EXECUTOR_SERVER_IDLE"] = "0.01"
    code, out, err = shell.run("-v", "run", "hello.py", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "success"
    assert "no run server" not in err


def test_no_server_reachable_runs_in_process_and_says_so_once(shell: Shell) -> None:
    runtime = Path(shell.env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"])
    (runtime / f"notebook-executor-{os.getuid()}").mkdir(mode=0o755)
    (runtime / f"notebook-executor-{os.getuid()}").chmod(0o755)  # open to others: not used
    code, out, err = shell.run("-v", "run", "hello.py", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "success"
    assert err.count("no run server") == 1
    assert "open to other users" in err


def test_sweep_and_check_execute_go_through_the_server(shell: Shell) -> None:
    assert shell.run("run", "hello.py")[0] == 0
    pid = shell.status()["pid"]
    (shell.folder / "sets.yaml").write_text("- {name: a}\n- {name: b}\n")
    code, out, err = shell.run("sweep", "hello.py", "-f", "sets.yaml", "--json")
    assert code == 0, err
    assert [r["scraps"]["greeting"] for r in json.loads(out)] == ["Hello, a!", "Hello, b!"]
    code, out, err = shell.run("check", "--execute", "hello.py", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"path": "hello.py", "valid": True, "problems": []}]
    assert shell.status()["pid"] == pid


def test_a_session_idle_past_its_timeout_closes(shell: Shell) -> None:
    code, out, err = shell.run("session", "open", "hello.py", "--idle-timeout", "1", "--json")
    assert code == 0, err
    opened = json.loads(out)
    deadline = time.monotonic() + 60
    while shell.status()["sessions"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert shell.status()["sessions"] == []
    code, _out, err = shell.run("session", "run", opened["session_id"])
    assert code == 2 and "no open session" in err
    record = json.loads(shell.run("show", opened["run_id"], "--json")[1])
    assert record["status"] != "running"


def test_ctrl_c_in_the_client_interrupts_a_session_step(shell: Shell) -> None:
    (shell.folder / "slow.py").write_text(SLOW_NOTEBOOK)
    code, out, err = shell.run("session", "open", "slow.py")
    assert code == 0, err
    sid = out.strip()
    process = shell.start("session", "run", sid)
    deadline = time.monotonic() + 120
    while not (shell.folder / "started").exists():
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err.strip() == "notebook-executor: error: interrupted"
    # The session is still there, and its cell stopped: as in-process, Ctrl-C stops the
    # kernel, and the next step (here an evaluation) rebuilds the state without the cell.
    code, _out, err = shell.run("session", "show", sid, "--json")
    assert code == 0, err
    began = time.monotonic()
    code, out, err = shell.run("session", "eval", sid, "x", "--json")
    assert code == 0, err
    assert json.loads(out)["output"] == "6\n"
    assert time.monotonic() - began < 50, "the evaluation waited for the cell"
    assert not (shell.folder / "finished").exists()
    assert shell.run("session", "close", sid)[0] == 0


def test_a_tmpdir_too_long_for_a_socket_still_uses_the_server(
    shell: Shell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A socket's path holds 107 bytes: below a long $TMPDIR (and no runtime folder set) the
    # server's folder goes in a short temporary folder, as private as ever. The command used to
    # run in-process, and said nothing of it.
    from notebook_executor._faces.server.paths import server_files

    long = tmp_path.joinpath(*(["t" * 50] * 2))
    long.mkdir(parents=True)
    for name in ("NOTEBOOK_EXECUTOR_RUNTIME_DIR", "XDG_RUNTIME_DIR"):
        shell.env.pop(name, None)
        monkeypatch.delenv(name, raising=False)
    shell.env["TMPDIR"] = str(long)
    monkeypatch.setenv("TMPDIR", str(long))
    monkeypatch.setattr("tempfile.tempdir", None)
    folder = Path(server_files().folder)  # where this test's server goes: removed after
    try:
        code, out, err = shell.run("-v", "run", "hello.py", "--json")
        assert code == 0, err
        assert json.loads(out)["status"] == "success"
        assert "no run server" not in err
        status = shell.status()
        assert Path(status["socket"]).parent == folder
        assert not folder.is_relative_to(long)
        info = folder.lstat()
        assert (info.st_mode & 0o777, info.st_uid) == (0o700, os.getuid())
        code, out, err = shell.run("session", "open", "hello.py", "--json")  # its socket too
        assert code == 0, err
        session_id = json.loads(out)["session_id"]
        code, out, err = shell.run("session", "run", session_id, "--json")
        assert code == 0, err
        assert shell.run("session", "close", session_id)[0] == 0
    finally:
        shell.run("server", "stop")
        shutil.rmtree(folder, ignore_errors=True)


KERNEL_START_NOTEBOOK = """# %%
import os
import scrapbook as sb
with open("/proc/self/stat") as stat:
    ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
sb.glue("started", ticks / os.sysconf("SC_CLK_TCK"))
sb.glue("seen", os.environ.get("NBX_CLIENT_ONLY", "unset"))
sb.glue("pid", os.getpid())
"""


def _children(parent: int) -> dict[int, float]:
    """The living children of ``parent``: when each started (seconds since boot)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                found[int(stat.parent.name)] = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return found


def test_the_next_run_in_the_same_shell_takes_a_kernel_started_ahead(shell: Shell) -> None:
    # Between commands the server forks the next command's child, which starts a kernel like
    # the last run's: a run in the same folder and environment takes it, started before the
    # command was; a run in another environment never does.
    (shell.folder / "start.py").write_text(KERNEL_START_NOTEBOOK)

    used = [0]  # the last run's kernel

    def run(value: str) -> tuple[dict[int, float], dict[str, Any]]:
        # Once a command has answered, the next one's child starts a kernel (on a loaded
        # machine it may take a while): a child of the template other than the last run's
        # kernel, which may have started even before the client saw its answer.
        # (A wait, not the test: the assertions below on which kernel the run took are.)
        template = shell.status()["template_pid"]
        deadline = time.monotonic() + 60
        while not set(ahead := _children(template)) - {used[0]}:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        code, out, err = shell.run("run", "start.py", "--json", env={"NBX_CLIENT_ONLY": value})
        assert code == 0, err
        scraps: dict[str, Any] = json.loads(out)["scraps"]
        used[0] = scraps["pid"]
        return ahead, scraps

    code, out, err = shell.run("run", "start.py", "--json", env={"NBX_CLIENT_ONLY": "a"})
    assert code == 0, err
    used[0] = json.loads(out)["scraps"]["pid"]
    for _ in range(2):
        ahead, scraps = run("a")
        assert scraps["seen"] == "a"
        # started ahead: a kernel living before the command was run (by pid: the clock's
        # tick of 10 ms cannot order two events of the same tick)
        assert ahead.get(scraps["pid"]) == scraps["started"]
    ahead, scraps = run("b")
    assert scraps["seen"] == "b"
    assert scraps["pid"] not in ahead  # its own, started for it
    ahead, scraps = run("b")
    assert scraps["seen"] == "b"
    assert ahead.get(scraps["pid"]) == scraps["started"]


def test_reading_commands_go_to_a_running_server_and_leave_its_next_kernel(
    shell: Shell,
) -> None:
    """``runs``, ``show``, ``diff``... start no server; one that runs serves them (the same
    output as in-process), each in a child of its own: the kernel started ahead for the next
    run is still there, and that run takes it."""
    code, out, err = shell.run("-v", "runs", "--json")
    assert code == 0, err
    assert json.loads(out) == []
    assert "no run server (none runs): running in-process" in err
    assert shell.status()["pid"] is None  # none started for it
    (shell.folder / "start.py").write_text(KERNEL_START_NOTEBOOK)
    code, out, err = shell.run("run", "start.py", "--json")
    assert code == 0, err
    first = json.loads(out)
    status = shell.status()
    template = status["template_pid"]
    deadline = time.monotonic() + 60
    while not (ahead := set(_children(template)) - {first["scraps"]["pid"]}):
        assert time.monotonic() < deadline, "no kernel was started ahead"
        time.sleep(0.05)
    served = status["served"]
    for argv in (
        ("show", first["run_id"], "--json"),
        ("runs", "--json"),
        ("diff", first["run_id"], first["run_id"], "--json"),
        ("inspect", "start.py", "--json"),
    ):
        code, out, err = shell.run(*argv)
        assert code == 0, err
        assert (code, out, err) == shell.run(*argv, "--no-server"), argv
    after = shell.status()
    assert after["pid"] == status["pid"]
    assert after["served"] == served + 4
    assert ahead <= set(_children(template))  # the kernel started ahead waits on
    code, out, err = shell.run("run", "start.py", "--json")
    assert code == 0, err
    assert json.loads(out)["scraps"]["pid"] in ahead


LONG_RUN_NOTEBOOK = """# %%
import os, pathlib, time
pathlib.Path("pid").write_text(str(os.getpid()))
time.sleep(4)
"""


def test_the_next_kernel_starts_while_a_run_goes_on(shell: Shell) -> None:
    # A run tells the server its kernel as soon as it chose it (not once it answered): the
    # next command's child, and its kernel like this run's, start meanwhile, so that a
    # command straight after this one finds its kernel started rather than waiting for it.
    (shell.folder / "long.py").write_text(LONG_RUN_NOTEBOOK)
    code, _out, err = shell.run("run", "long.py")  # the server up, and its kernel known
    assert code == 0, err
    (shell.folder / "pid").unlink()
    running = shell.start("run", "long.py")
    try:
        deadline = time.monotonic() + 60
        while not (shell.folder / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        own = int((shell.folder / "pid").read_text())
        template = shell.status()["template_pid"]
        others: set[int] = set()
        while running.poll() is None and not others:
            others = set(_children(template)) - {own}
            time.sleep(0.05)
        assert others, "no kernel was started for the next command while the run went on"
    finally:
        _out, err = running.communicate(timeout=120)
    assert running.returncode == 0, err


def test_a_session_answers_the_command_right_after_its_open(shell: Shell) -> None:
    # Its socket listens before `session open` answers (it used to be bound after: a command
    # run at once could find no session).
    for _ in range(3):
        code, out, err = shell.run("session", "open", "hello.py")
        assert code == 0, err
        session_id = out.strip()
        code, out, err = shell.run("session", "show", session_id, "--json")
        assert code == 0, err
        assert json.loads(out)["session_id"] == session_id
        assert shell.run("session", "close", session_id)[0] == 0


#: In a fresh interpreter: what the server does before it forks a child (import what the
#: children use, build the parser), then a ``run`` as a child runs it; prints the package's
#: modules (and the readers') the run imported, and whether it compiled the tokenizer's
#: expressions.
_CHILD_IMPORTS = """
import importlib, json, sys, tokenize
from notebook_executor._faces import cli
from notebook_executor._faces.server import daemon
for name in daemon._PRELOAD:
    importlib.import_module(name)
cli.prebuild()
before, compiled = set(sys.modules), tokenize._compile.cache_info().misses
code = cli.main(["run", *sys.argv[1:], "--no-server"])
watched = ("notebook_executor", "jupytext", "nbformat", "markdown_it", "pyarrow")
print(json.dumps({
    "code": code,
    "imported": sorted(m for m in set(sys.modules) - before if m.startswith(watched)),
    "compiled": tokenize._compile.cache_info().misses - compiled,
}))
"""

#: A percent script that is not of the plainest kind (jupytext reads it), gluing a data frame.
_FRAME_SCRIPT = """
# %% [markdown]
# A table

# %% tags=["parameters"]
rows = 3

# %%
import pandas as pd
import scrapbook as sb
sb.glue("table", pd.DataFrame({"x": range(rows)}), encoder="pandas")
"""


@pytest.mark.parametrize(
    "argv",
    [["hello.py", "-p", "name", "Ada"], ["frame.py"], ["logbook.md", "-p", "station", "X"]],
    ids=["plain percent script", "jupytext's script, a data frame", "markdown"],
)
def test_a_served_run_imports_and_compiles_nothing_the_server_could_have(
    tmp_path: Path, argv: list[str]
) -> None:
    """Each command's child is forked from the server: a module it imports, or a regular
    expression it compiles, is paid again by every command (a served ``run`` of
    notebooks/hello.py imported 26 modules and compiled the tokenizer, 28 ms of its CPU; of a
    markdown notebook, jupytext and nbformat besides, 0.3 s)."""
    (tmp_path / "hello.py").write_text(HELLO.read_text())
    (tmp_path / "logbook.md").write_text((HELLO.parent / "logbook.md").read_text())
    (tmp_path / "frame.py").write_text(_FRAME_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "NOTEBOOK_EXECUTOR_NO_SERVER"}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_IMPORTS, *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"code": 0, "imported": [], "compiled": 0}
