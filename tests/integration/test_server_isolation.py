"""A served command is the in-process one: its client's environment, umask, limits and bytes,
and nothing of the client that started the server (docs/how-to/server.md), proven against the real
server process (the ``shell`` fixture of test_run_server.py).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from integration.test_run_server import Shell, shell  # noqa: F401

PROBE = """# %% tags=["parameters"]
secret_name: str = "NONE"
server: int = 0

# %%
import os, pathlib, resource
import scrapbook as sb

wanted = (secret_name + "=").encode()
sb.glue("in_environ", os.environ.get(secret_name, "unset"))
held = {}
for entry in pathlib.Path("/proc").iterdir():
    try:
        block = (entry / "environ").read_bytes() if entry.name.isdigit() else b""
    except OSError:
        continue
    held.update({entry.name: v.decode() for v in block.split(b"\\0") if v.startswith(wanted)})
sb.glue("held", held)
try:
    block = pathlib.Path(f"/proc/{server}/environ").read_bytes()
    sb.glue("server_environ", [v.decode() for v in block.split(b"\\0") if v.startswith(wanted)])
except OSError as exc:
    sb.glue("server_environ", type(exc).__name__)
status = pathlib.Path("/proc/self/status").read_text().splitlines()
sb.glue("umask", next(line.split()[1] for line in status if line.startswith("Umask:")))
sb.glue("nofile", list(resource.getrlimit(resource.RLIMIT_NOFILE)))
pathlib.Path("made.txt").write_text("x")
sb.glue("made", oct(pathlib.Path("made.txt").stat().st_mode & 0o777))
sb.glue("parent", os.getppid())
"""

BYTES = """# %%
import os
import scrapbook as sb
sb.glue("bad", os.environb.get(b"NBX_BAD", b"unset").hex())
sb.glue("cwd", os.fsencode(os.getcwd()).hex())
sb.glue("parent", os.getppid())
"""


def _run(
    shell: Shell,  # noqa: F811
    *argv: str,
    setup: str = ":",
    folder: Path | None = None,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> tuple[int, str, str]:
    """``notebook-executor ARGV`` from a shell that first runs ``setup`` (umask, ulimit)."""
    done = subprocess.run(
        [
            *prefix,
            "sh",
            "-c",
            f'{setup} && exec "$0" "$@"',
            sys.executable,
            "-m",
            "notebook_executor",
            *argv,
        ],
        cwd=folder or shell.folder,
        env={**shell.env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=240,
    )
    return done.returncode, done.stdout, done.stderr


def _modes(folder: Path, result: dict[str, Any]) -> tuple[str, str]:
    output = folder / result["output_path"]
    return oct((folder / "runs").stat().st_mode & 0o777), oct(output.stat().st_mode & 0o777)


def _files_holding(folder: Path, value: bytes) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and value in path.read_bytes()]


def test_a_later_client_gets_nothing_of_the_first(shell: Shell, tmp_path: Path) -> None:  # noqa: F811
    # A name the server would otherwise keep of its starting client's environment.
    name, value = f"NOTEBOOK_EXECUTOR_SECRET_{uuid.uuid4().hex}", uuid.uuid4().hex
    (shell.folder / "probe.py").write_text(PROBE)
    first = ("run", "probe.py", "-p", "secret_name", name, "--secret", name, "--json")
    code, out, err = _run(shell, *first, setup="umask 000 && ulimit -n 512", env={name: value})
    assert code == 0, err
    scraps = json.loads(out)["scraps"]
    assert (scraps["umask"], scraps["nofile"]) == ("0000", [512, 512])  # its own
    server = shell.status()["pid"]
    assert isinstance(server, int)

    # A second client, in its own folder, with its own umask and limits (under the first's).
    results = {}
    for where, extra in (("served", ()), ("local", ("--no-server",))):
        folder = tmp_path / where
        folder.mkdir()
        (folder / "probe.py").write_text(PROBE)
        argv = ("run", "probe.py", "-p", "secret_name", name, "-p", "server", str(server))
        code, out, err = _run(
            shell,
            *argv,
            "--json",
            *extra,
            setup="umask 077 && ulimit -S -n 256 && ulimit -H -n 400",
            folder=folder,
        )
        assert code == 0, err
        results[where] = json.loads(out)
        assert not _files_holding(folder, value.encode())  # nowhere in its record
    served, local = results["served"], results["local"]
    scraps = served["scraps"]
    status = shell.status()
    assert status["pid"] == server
    assert scraps["parent"] == status["template_pid"]  # served: forked from its template
    assert scraps["in_environ"] == "unset"
    assert scraps["held"] == {}  # no process it can read shows the first client's secret
    # Not dumpable: its /proc files are root's (only root reads them, and finds no secret).
    assert scraps["server_environ"] == ([] if os.geteuid() == 0 else "PermissionError")
    assert (scraps["umask"], scraps["made"], scraps["nofile"]) == ("0077", "0o600", [256, 400])
    assert _modes(tmp_path / "served", served) == ("0o700", "0o600")
    assert _modes(tmp_path / "served", served) == _modes(tmp_path / "local", local)
    assert {k: scraps[k] for k in ("umask", "made", "nofile")} == {
        k: local["scraps"][k] for k in ("umask", "made", "nofile")
    }


def test_limits_above_the_servers_are_never_lowered(shell: Shell) -> None:  # noqa: F811
    # The server (and so every child) cannot raise a hard limit above the one of the client
    # that started it: a client with a higher one runs in-process, as it would with
    # --no-server, and a session (which needs the server) is refused in one line. (Root may
    # raise it: the server is then started without that power.)
    (shell.folder / "probe.py").write_text(PROBE)
    unprivileged = ("setpriv", "--bounding-set", "-sys_resource") if os.geteuid() == 0 else ()
    code, _out, err = _run(shell, "run", "hello.py", setup="ulimit -n 512", prefix=unprivileged)
    assert code == 0, err
    code, out, err = _run(shell, "-v", "run", "probe.py", "--json", setup="ulimit -n 600")
    assert code == 0, err
    assert json.loads(out)["scraps"]["nofile"] == [600, 600]
    assert err.count("running in-process") == 1, err
    code, out, err = _run(shell, "session", "open", "hello.py", setup="ulimit -n 600")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "server stop" in err


def test_bytes_that_are_not_utf8_are_carried_exactly(shell: Shell) -> None:  # noqa: F811
    folder = shell.folder / os.fsdecode(b"d\xff")
    folder.mkdir()
    (folder / "bytes.py").write_text(BYTES)
    (folder / "hello.py").write_text((shell.folder / "hello.py").read_text())
    bad = {"NBX_BAD": os.fsdecode(b"x\xfe\xffy")}
    answers = {}
    parents = []
    for extra in ((), ("--no-server",)):
        code, out, err = _run(shell, "run", "bytes.py", "--json", *extra, folder=folder, env=bad)
        assert code == 0, err
        scraps = json.loads(out)["scraps"]
        parents.append(scraps.pop("parent"))
        assert scraps == {"bad": b"x\xfe\xffy".hex(), "cwd": os.fsencode(folder).hex()}
        # A parameter that is not UTF-8 text: the same one-line refusal.
        argv = ("run", "hello.py", "-p", "name", os.fsdecode(b"a\xffb"), *extra)
        answers[extra] = _run(shell, *argv, folder=folder)
    assert parents[0] == shell.status()["template_pid"]  # served indeed
    served, local = answers[()], answers[("--no-server",)]
    assert served == local
    assert served[0] == 2 and len(served[2].strip().splitlines()) == 1, served


def _raw_command(path: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The server's answer to a command request made of the client's own, with ``fields``
    replaced."""
    from notebook_executor._faces.server import client

    message = {**client.command_request(["run", "hello.py"], str(Path.cwd())), **fields}
    data = json.dumps(message).encode()
    with socket.socket(socket.AF_UNIX) as sock, Path(os.devnull).open("rb+") as null:
        sock.connect(path)
        socket.send_fds(sock, [struct.pack(">I", len(data)) + data], [null.fileno()] * 3)
        head = sock.recv(4)
        (size,) = struct.unpack(">I", head)
        answer: dict[str, Any] = json.loads(sock.recv(size))
    return answer


def test_hostile_umask_and_limits_are_refused_in_one_line(shell: Shell) -> None:  # noqa: F811
    assert _run(shell, "run", "hello.py")[0] == 0
    path = shell.status()["socket"]
    hostile: tuple[dict[str, Any], ...] = (
        {"umask": "077"},
        {"umask": 0o1000},
        {"umask": True},
        {"rlimits": {"NOFILE": [10, 5]}},
        {"rlimits": {"NOFILE": [-2, 5]}},
        {"rlimits": {"NOFILE": [1 << 64, None]}},
        {"rlimits": {"BOGUS": [1, 1]}},
        {"rlimits": {"NOFILE": [1]}},
        {"rlimits": []},
        {"argv": ["not hexadecimal"]},
        {"argv": ["6"]},
        {"argv": "72756e"},
        {"env": {"4e": 5}},
        {"env": {"": "00"}},
        {"env": {"3d": "31"}},
        {"cwd": "2f00"},
        {"cwd": "2F"},
        {"cwd": "746d70"},
    )
    for fields in hostile:
        answer = _raw_command(path, fields)
        assert set(answer) == {"error"}, (fields, answer)
        assert "\n" not in answer["error"]
    assert _run(shell, "run", "hello.py")[0] == 0  # still serving
