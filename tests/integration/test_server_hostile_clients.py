"""The run server against hostile or slow clients, proven on the real server process.

Each test starts its own server through the command line (the ``shell`` fixture of
``test_run_server``: a private runtime folder, the server stopped after).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_executor._faces.server import wire
from notebook_executor._faces.server.client import command_request
from notebook_executor._faces.server.daemon import REQUEST_SECONDS

from .test_run_server import Shell
from .test_run_server import shell as shell  # the fixture, reused

#: The longest a warm command may take here, however loaded the machine (a stalled one took
#: 10 s per idle connection before).
PROMPT = 8.0


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _answer(sock: socket.socket, seconds: float = 30) -> dict[str, Any]:
    """The one message the server answers on ``sock``."""
    sock.settimeout(seconds)
    answer = wire.receive(sock)
    return answer


def _session_socket(status: dict[str, Any], session_id: str) -> str:
    server_socket = Path(status["socket"])
    return str(server_socket.with_name(f"{server_socket.stem}-s") / f"{session_id}.sock")


@contextlib.contextmanager
def _connections(path: str, count: int) -> Iterator[list[socket.socket]]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_UNIX)
            sockets.append(sock)
            sock.connect(path)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def test_deeply_nested_json_is_refused_and_the_server_serves_on(shell: Shell) -> None:
    assert shell.run("run", "hello.py")[0] == 0
    status = shell.status()
    code, out, err = shell.run("session", "open", "hello.py")
    assert code == 0, err
    session_id = out.strip()
    for path in (status["socket"], _session_socket(status, session_id)):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            sock.sendall(_frame(b"[" * 200_000))
            error = _answer(sock)["error"]
        assert "\n" not in error and "nested" in error, error
    assert shell.run("run", "hello.py")[0] == 0
    assert shell.status()["pid"] == status["pid"]
    code, out, err = shell.run("session", "eval", session_id, "print(6 * 7)")
    assert (code, out.strip()) == (0, "42"), err


def test_idle_and_slow_clients_stall_no_command(shell: Shell) -> None:
    assert shell.run("run", "hello.py")[0] == 0
    path = shell.status()["socket"]
    stop = threading.Event()
    loris_answer: list[dict[str, Any]] = []

    def slow_loris(sock: socket.socket) -> None:
        # A byte now and then: never a whole request.
        with contextlib.suppress(OSError):
            sock.sendall(struct.pack(">I", 1000))
            while not stop.wait(0.3):
                sock.sendall(b" ")
        sock.settimeout(10)
        with contextlib.suppress(OSError):
            loris_answer.append(wire.receive(sock))

    with _connections(path, 7) as sockets:
        *idle, loris = sockets
        began = time.monotonic()
        thread = threading.Thread(target=slow_loris, args=(loris,), daemon=True)
        thread.start()
        try:
            code, _out, err = shell.run("run", "hello.py", "-p", "name", "Bo")
            took = time.monotonic() - began
            assert code == 0, err
            assert took < PROMPT, f"a run waited {took:.1f} s behind idle connections"
            # Each gets a one-line refusal once its time is up, whatever it sends.
            for sock in idle:
                error = _answer(sock, REQUEST_SECONDS + 20)["error"]
                assert "\n" not in error and "within" in error, error
            thread.join(REQUEST_SECONDS + 20)
            assert loris_answer and "within" in loris_answer[0]["error"]
            assert time.monotonic() - began < REQUEST_SECONDS + 10
        finally:
            stop.set()
            thread.join(30)


def test_idle_clients_stall_no_session_step(shell: Shell) -> None:
    code, out, err = shell.run("session", "open", "hello.py")
    assert code == 0, err
    session_id = out.strip()
    path = _session_socket(shell.status(), session_id)
    with _connections(path, 4):
        began = time.monotonic()
        code, out, err = shell.run("session", "eval", session_id, "print(6 * 7)")
        took = time.monotonic() - began
        assert (code, out.strip()) == (0, "42"), err
        assert took < PROMPT, f"a session step waited {took:.1f} s behind idle connections"


def test_a_command_with_an_empty_argv_gets_a_one_line_refusal(shell: Shell) -> None:
    assert shell.run("run", "hello.py")[0] == 0
    status = shell.status()
    message = command_request([], str(shell.folder))  # a whole request, but for its argv
    with socket.socket(socket.AF_UNIX) as sock, Path(os.devnull).open("r+b") as null:
        sock.connect(status["socket"])
        wire.send_with_fds(sock, message, [null.fileno()] * 3)
        error = _answer(sock)["error"]
    assert "\n" not in error and "argv" in error, error
    assert shell.status()["pid"] == status["pid"]


def test_a_fifo_for_the_server_log_blocks_nothing(
    shell: Shell, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_executor._faces.server.paths import RUNTIME_ENV, server_files

    monkeypatch.setenv(RUNTIME_ENV, shell.env[RUNTIME_ENV])
    log = Path(server_files().log)
    os.mkfifo(log, 0o600)
    process = shell.start("-v", "run", "hello.py", "--json")
    try:
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
        process.communicate()
    assert process.returncode == 0, err
    assert json.loads(out)["status"] == "success"
    assert err.count("no run server") == 1 and "not a regular file" in err, err
    assert stat.S_ISFIFO(log.lstat().st_mode)  # left alone
    code, _out, err = shell.run("session", "list")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "regular file" in err, err


def test_a_missing_runtime_folder_is_made_private(shell: Shell) -> None:
    runtime = Path(shell.env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"]) / "made"
    user = Shell(shell.folder, runtime)
    try:
        code, _out, err = user.run("run", "hello.py")
        assert code == 0, err
        status = user.status()
        assert Path(status["socket"]).parent.parent == runtime
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
    finally:
        user.run("server", "stop")


def test_a_runtime_folder_that_cannot_be_made_is_refused_in_one_line(shell: Shell) -> None:
    runtime = Path(shell.env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"]) / "missing" / "deeper"
    user = Shell(shell.folder, runtime)
    code, _out, err = user.run("session", "list")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert str(runtime) in err
    code, out, err = user.run("-v", "run", "hello.py", "--json")
    assert code == 0 and json.loads(out)["status"] == "success", err
    assert err.count("no run server") == 1 and str(runtime) in err
    assert not runtime.parent.exists()
    assert shell.status()["pid"] is None  # no server in the shared folder either


def test_the_pid_file_and_the_session_description_are_private(shell: Shell) -> None:
    code, out, err = shell.run("session", "open", "hello.py")
    assert code == 0, err
    status = shell.status()
    pid_file = Path(status["socket"]).with_suffix(".pid")
    description = Path(_session_socket(status, out.strip())).with_suffix(".json")
    for private in (pid_file, description):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
