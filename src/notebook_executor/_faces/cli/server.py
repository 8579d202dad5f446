"""``server status`` and ``server stop``: the per-user run server (see ``docs/how-to/server``).

A server told to stop stops answering at once (its socket goes first), then waits for its
commands and sessions to finish their records before it exits: ``server stop`` waits for the
process to be gone (``--timeout``, default 30 s) and says which, and ``server status`` shows a
server still stopping (its pid file names a live server process) as stopping.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from . import common
from .common import EXIT_FAILED, EXIT_OK, print_json

__all__ = ["STOP_SECONDS", "register"]

#: How long ``server stop`` waits for the server to exit, by default (the server gives its
#: children 20 s to finish their records before it kills them).
STOP_SECONDS = 30.0


def register(commands: Any) -> None:
    """Add the ``server`` command to the ``commands`` subparsers."""
    server = commands.add_parser(
        "server",
        help="show or stop this user's run server",
        description="run, sweep, check --execute and session go through a per-user run server "
        "that keeps kernels warm; it starts on demand and exits when idle.",
    )
    actions = server.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    status = actions.add_parser("status", help="the server's pid and sessions")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(handler=_cmd_status)
    stop = actions.add_parser(
        "stop",
        help="stop the server (open sessions are closed) and wait until it is gone",
        description="Exit status: 0 stopped (or none ran), 1 still stopping after --timeout.",
    )
    stop.add_argument(
        "--timeout",
        type=common.seconds,
        default=STOP_SECONDS,
        metavar="S",
        help=f"wait at most S seconds for the server to exit (default {STOP_SECONDS:g})",
    )
    stop.set_defaults(handler=_cmd_stop)


def _status() -> dict[str, Any]:
    from ..server.client import request
    from ..server.paths import server_files

    answer = request(server_files(), {"op": "status"})
    if answer is None or "pid" not in answer:
        stopping = _stopping_pid()
        if stopping is not None:
            return {"pid": stopping, "stopping": True, "sessions": []}
        return {"pid": None, "sessions": []}
    return answer


def _cmd_status(args: argparse.Namespace) -> int:
    status = _status()
    if args.json:
        print_json(status)
    elif status["pid"] is None:
        print("no run server")
    elif status.get("stopping"):
        print(f"run server {status['pid']} is stopping (its commands and sessions are finishing)")
    else:
        print(
            f"run server {status['pid']} (since {status['started_at']}, "
            f"{status['commands']} commands running, {len(status['sessions'])} sessions open)"
        )
        for session in status["sessions"]:
            given = f"  {session['parameters']}" if session.get("parameters") else ""
            print(f"  session {session['session_id']}  {session['notebook']}{given}")
    return EXIT_OK


def _cmd_stop(args: argparse.Namespace) -> int:
    from ..server.client import request
    from ..server.paths import server_files

    answer = request(server_files(), {"op": "stop"})
    pid = int(answer["pid"]) if answer is not None and "pid" in answer else _stopping_pid()
    if pid is None:
        print("no run server", file=sys.stderr)
        return EXIT_OK
    deadline = time.monotonic() + args.timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        print(
            f"run server {pid} is still stopping after {args.timeout:g} s (its commands and "
            "sessions are finishing); 'server status' says when it is gone",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"stopped run server {pid}", file=sys.stderr)
    return EXIT_OK


def _stopping_pid() -> int | None:
    """The pid of this user's server that no longer answers but has not exited: it stops
    (its socket is removed first, its pid file last). None when there is none."""
    from ..server.paths import server_files

    try:
        pid = int(Path(server_files().pid_file).read_text().strip())
        # A pid file left by a killed server may name another process since: it must be one.
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if _SERVER_MODULE in cmdline and _alive(pid) else None


#: What a run server's command line holds (``client.start_server`` starts it so).
_SERVER_MODULE = b"notebook_executor._faces.cli.serve"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # The server is its starter's child only in tests; a zombie is gone.
    try:
        with Path(f"/proc/{pid}/stat").open() as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
