"""The run server's private folder and its messages (no server process: see
tests/integration/test_run_server.py for the real one)."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from notebook_executor._faces.server import paths, served, wire
from notebook_executor._faces.server.client import (
    NEED_SERVER,
    SERVED,
    SERVED_WHEN_RUNNING,
    served_command,
    starts_server,
    takes_kernel,
)
from notebook_executor._faces.server.paths import RuntimeFolderError, private_folder, server_key
from notebook_executor._kernels import socket_paths
from notebook_executor.engine import CellEnd


def test_one_server_per_interpreter_and_version() -> None:
    keys = {
        server_key("/venv-a/bin/python", "0.1.0"),
        server_key("/venv-b/bin/python", "0.1.0"),
        server_key("/venv-a/bin/python", "0.2.0"),
    }
    assert len(keys) == 3


def test_the_folder_is_made_private(tmp_path: Path) -> None:
    folder = tmp_path / "rt"
    private_folder(folder)
    assert folder.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o755, 0o770, 0o701])
def test_a_folder_open_to_others_is_refused_and_left_alone(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "rt"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(RuntimeFolderError, match="open to other users"):
        private_folder(folder)
    assert folder.stat().st_mode & 0o777 == mode  # never chmod what we did not make


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "rt").symlink_to(target)
    with pytest.raises(RuntimeFolderError, match="not a folder"):
        private_folder(tmp_path / "rt")


def test_messages_round_trip_and_the_peer_is_this_user() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        assert wire.check_peer(a) == os.getpid()
        wire.send(a, {"op": "status", "text": "héllo"})
        assert wire.receive(b) == {"op": "status", "text": "héllo"}


@pytest.mark.parametrize(
    "message",
    [
        {"op": "command", "argv": ["72756e"], "umask": 18, "rlimits": {"NOFILE": [1024, None]}},
        {"text": 'h\u00e9llo \u2028 "quoted" \\ \n\t\u0000', "nested": {"a": [1, 2.5, -0.0]}},
        {"big": 10**30, "small": 1e-300, "flags": [True, False, None]},
        {"inf": float("inf"), "minus": -float("inf")},
        {},
    ],
)
def test_the_wire_writes_and_reads_what_the_json_module_does(message: dict[str, Any]) -> None:
    written = wire.encode(message)
    assert written == json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    assert wire.decode(written) == json.loads(written)
    spaced = b" \n" + json.dumps(message, indent=2).encode() + b"\r\n\t"
    assert wire.decode(spaced) == json.loads(spaced)


def test_a_value_json_cannot_hold_raises_as_json_does_unless_given_a_default() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        wire.encode({"path": Path("x")})
    assert json.loads(wire.encode({"path": Path("x")}, default=str)) == {"path": "x"}


def test_a_served_command_s_client_imports_no_json_nor_re() -> None:
    """The client of a served command imports what forwarding needs and no more: ``json``
    (with ``re`` and ``enum``) was most of its imports' time."""
    code = (
        "import sys; from notebook_executor._faces.cli import main; "
        "from notebook_executor._faces.server import client, wire; "
        "wire.decode(wire.encode({'exit': 0})); "
        "print(sorted({'json', 're', 'enum', 'socket'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (struct.pack(">I", wire.MAX_REQUEST_BYTES + 1), "refused"),
        (struct.pack(">I", 3) + b"{x}", "not JSON"),
        (struct.pack(">I", 2) + b"[]", "not a JSON object"),
        (struct.pack(">I", 10) + b"{}", "closed mid-message"),
    ],
)
def test_bad_messages_are_refused(payload: bytes, problem: str) -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        a.sendall(payload)
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(wire.WireError, match=problem):
            wire.receive(b)


@pytest.mark.parametrize(
    ("argv", "served"),
    [
        (["run", "nb.py"], "run"),
        (["-v", "run", "nb.py"], "run"),
        (["run", "nb.py", "--no-server"], None),
        (["run", "--help"], None),
        (["sweep", "nb.py", "-g", "a=1,2"], "sweep"),
        (["sweep", "nb.py", "--scheduler", "tcp://x:8786"], None),
        (["check", "nb.py"], "check"),
        (["check", "--execute", "nb.py"], "check"),
        (["session", "list"], "session"),
        (["runs"], "runs"),
        (["-v", "show", "RUN"], "show"),
        (["show", "RUN", "--no-server"], None),
        (["jobs"], "jobs"),
        (["server", "status"], None),
        (["mcp"], None),
        (["guide"], None),
    ],
)
def test_which_commands_go_to_the_server(
    argv: list[str], served: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOTEBOOK_EXECUTOR_NO_SERVER", raising=False)
    assert served_command(argv) == served
    monkeypatch.setenv("NOTEBOOK_EXECUTOR_NO_SERVER", "1")
    assert served_command(argv) == ("session" if served == "session" else None)


@pytest.mark.parametrize(
    ("argv", "starts", "kernel"),
    [
        (["run", "nb.py"], True, True),
        (["-v", "sweep", "nb.py"], True, True),
        (["resume", "RUN"], True, True),
        (["check", "--execute", "nb.py"], True, True),
        (["session", "open", "nb.py"], True, True),
        (["jobs"], True, False),
        (["job", "show", "JOB"], True, False),
        (["check", "nb.py"], False, False),
        (["runs", "--json"], False, False),
        (["reproduce", "RUN"], False, False),
        (["edit", "nb.py", "1", "x = 1"], False, False),
    ],
)
def test_which_commands_start_the_server_and_which_take_its_kernel(
    argv: list[str], starts: bool, kernel: bool
) -> None:
    """A command that reads or edits goes to a server that runs, never starting one, and its
    child leaves the kernel started ahead to the next run."""
    assert starts_server(argv) is starts
    assert takes_kernel(argv) is kernel


def test_every_command_served_when_a_server_runs_takes_no_server() -> None:
    """Each command the server may run accepts ``--no-server`` (but those that need it)."""
    from notebook_executor._faces.cli import _build_parser

    commands = next(
        action for action in _build_parser()._actions if action.dest == "command"
    ).choices
    assert isinstance(commands, dict)
    for name in (*SERVED, *SERVED_WHEN_RUNNING):
        options = {o for action in commands[name]._actions for o in action.option_strings}
        assert ("--no-server" in options) is (name not in NEED_SERVER), name


def test_a_folder_too_long_for_a_socket_gives_way_to_a_short_private_one(
    tmp_path: Path, short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = tmp_path.joinpath(*(["t" * 50] * 2))
    long.mkdir(parents=True)
    monkeypatch.setenv(paths.RUNTIME_ENV, str(long))
    monkeypatch.setattr(paths, "SHORT_TEMP_DIRS", (str(tmp_path / "missing"), str(short_tmp_path)))
    files = paths.server_files()
    folder = Path(files.folder)
    assert folder.parent == short_tmp_path
    for socket_path in (files.socket, files.session_socket("0" * 16)):
        assert len(os.fsencode(socket_path)) <= socket_paths.MAX_SOCKET_PATH
    info = folder.lstat()
    assert (info.st_mode & 0o777, info.st_uid) == (0o700, os.getuid())
    # Another long folder, another server (as two folders that fit have two).
    other = tmp_path.joinpath(*(["u" * 50] * 2))
    other.mkdir(parents=True)
    monkeypatch.setenv(paths.RUNTIME_ENV, str(other))
    assert Path(paths.server_files().folder) not in (folder, long)


def test_the_short_folder_is_refused_when_not_private(
    tmp_path: Path, short_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = tmp_path.joinpath(*(["t" * 50] * 2))
    long.mkdir(parents=True)
    monkeypatch.setenv(paths.RUNTIME_ENV, str(long))
    monkeypatch.setattr(paths, "SHORT_TEMP_DIRS", (str(short_tmp_path),))
    folder = Path(paths.server_files().folder)
    folder.chmod(0o755)
    with pytest.raises(RuntimeFolderError, match="open to other users"):
        paths.server_files()
    assert folder.stat().st_mode & 0o777 == 0o755


def test_no_folder_short_enough_for_a_socket_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = tmp_path.joinpath(*(["t" * 50] * 2))
    long.mkdir(parents=True)
    monkeypatch.setenv(paths.RUNTIME_ENV, str(long))
    monkeypatch.setattr(paths, "SHORT_TEMP_DIRS", (str(long),))
    with pytest.raises(RuntimeFolderError, match="too long for a socket"):
        paths.server_files()


class _DyingKernel:
    """A kernel that dies during its cell, as one forked from the server's template does
    when the server is killed."""

    def __init__(self) -> None:
        self.info: dict[str, object] = {}

    def run_cell(self, nb: object, index: int, limit: float | None) -> CellEnd:
        return CellEnd("dead", exit_status=1)


def _serving(server_pid: int) -> served.Serving:
    """What a child of a server of process ``server_pid`` knows of it."""
    return served.Serving(paths.ServerFiles("/nonexistent", "key"), server_pid)


def test_a_kernel_dead_with_the_server_ends_the_run_as_stopped_by_the_server() -> None:
    # The server is no longer this process's parent: the kernel died with it, before the
    # parent-death signal came. The run is interrupted by the server's end, not kernel_died.
    here = _serving(os.getppid() + 100_000)
    kernel = served._ServedKernel(_DyingKernel(), here)  # type: ignore[arg-type]
    with pytest.raises(served.ServerStopped):
        kernel.run_cell({}, 2, None)  # type: ignore[arg-type]
    assert here.gone.is_set()
    # The parent-death signal that follows does not interrupt the records being finished.
    here.on_server_gone(signal.SIGTERM, None)


def test_a_kernel_dead_while_the_server_lives_is_a_dead_kernel() -> None:
    here = _serving(os.getppid())
    kernel = served._ServedKernel(_DyingKernel(), here)  # type: ignore[arg-type]
    assert kernel.run_cell({}, 2, None).how == "dead"  # type: ignore[arg-type]
    # The first SIGTERM interrupts, as Ctrl-C does.
    with pytest.raises(KeyboardInterrupt):
        here.on_server_gone(signal.SIGTERM, None)


def test_outside_the_server_nothing_is_served() -> None:
    assert served.current() is None and not served.serving() and not served.server_gone()
    assert served.take_detach() is None and served.executor_engine({}) is None
    with pytest.raises(served.ServerUnavailableError):
        served.server_files()


def _send_in_thread(sock: socket.socket, data: bytes) -> threading.Thread:
    thread = threading.Thread(target=sock.sendall, args=(data,), daemon=True)
    thread.start()
    return thread


def test_a_message_nested_too_deeply_is_refused_not_raised() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        body = b"[" * 200_000
        sender = _send_in_thread(a, struct.pack(">I", len(body)) + body)
        with pytest.raises(wire.WireError, match="nested too deeply"):
            wire.receive(b)
        sender.join(10)


def test_a_message_must_come_whole_within_its_time_however_it_trickles() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    stop = threading.Event()

    def trickle() -> None:
        a.sendall(struct.pack(">I", 100))
        while not stop.wait(0.05):
            a.sendall(b" ")

    with a, b:
        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        began = time.monotonic()
        try:
            with pytest.raises(wire.WireError, match=r"no whole message within 0\.5 s"):
                wire.receive(b, seconds=0.5)
            assert time.monotonic() - began < 2
        finally:
            stop.set()
            thread.join(10)


def test_a_message_is_read_as_it_arrives_and_never_past_its_end() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    with a, b:
        b.setblocking(False)
        incoming = wire.Incoming(b, 10)
        frame = struct.pack(">I", 2) + b"{}"
        assert incoming.read() is None  # nothing yet
        a.sendall(frame[:3])
        assert incoming.read() is None
        a.sendall(frame[3:] + frame)  # the rest, and the next message
        assert incoming.read() == {}
        b.setblocking(True)
        assert wire.receive(b) == {}  # left where it was


def test_one_failing_request_is_answered_and_the_server_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_executor._faces.server import daemon

    server = daemon._Server(paths.ServerFiles(str(tmp_path), "k"), 60, lambda argv: 0, dict)

    def broken() -> dict[str, object]:
        raise RuntimeError("a bug\nover two lines")

    monkeypatch.setattr(server, "status", broken)
    a, b = socket.socketpair(socket.AF_UNIX)
    with a:
        server.handle(b, {"op": "status"}, [])  # no exception
        a.settimeout(10)
        answer = wire.receive(a)
    assert answer == {"error": "the run server failed on this request (RuntimeError)"}


def test_a_request_that_came_in_time_is_answered_though_its_reader_was_late() -> None:
    """A request whole in the socket when its time is up (the server busy meanwhile: a
    template replaced under load) is read and answered, not refused as slow (``chaos`` saw
    ``session open`` refused so); one still incomplete is refused."""
    arrivals = wire.Arrivals(0.0, 4)  # every connection's time is up at once
    server, client = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    slow_server, slow_client = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with server, client, slow_server, slow_client:
        assert arrivals.add(server) is None and arrivals.add(slow_server) is None
        wire.send(client, {"op": "status"})
        slow_client.sendall(struct.pack(">I", 100) + b"{")
        (whole,) = arrivals.expire()
        assert whole[0] is server and whole[1][0] == {"op": "status"}
        assert not arrivals.incoming
        slow_client.settimeout(5)
        assert "no whole request" in wire.receive(slow_client)["error"]
