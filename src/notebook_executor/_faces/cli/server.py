"""``server status`` and ``server stop``: the per-user run server (see ``docs/howto/server``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from .common import EXIT_OK, print_json

__all__ = ["register"]


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
    stop = actions.add_parser("stop", help="stop the server (open sessions are closed)")
    stop.set_defaults(handler=_cmd_stop)


def _status() -> dict[str, Any]:
    from ..server.client import request
    from ..server.paths import server_files

    answer = request(server_files(), {"op": "status"})
    if answer is None or "pid" not in answer:
        return {"pid": None, "sessions": []}
    return answer


def _cmd_status(args: argparse.Namespace) -> int:
    status = _status()
    if args.json:
        print_json(status)
    elif status["pid"] is None:
        print("no run server")
    else:
        print(
            f"run server {status['pid']} (since {status['started_at']}, "
            f"{status['commands']} commands running, {len(status['sessions'])} sessions open)"
        )
        for session in status["sessions"]:
            print(f"  session {session['session_id']}  {session['notebook']}")
    return EXIT_OK


def _cmd_stop(args: argparse.Namespace) -> int:
    from ..server.client import request
    from ..server.paths import server_files

    answer = request(server_files(), {"op": "stop"})
    if answer is None or "pid" not in answer:
        print("no run server", file=sys.stderr)
        return EXIT_OK
    pid = int(answer["pid"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    print(f"stopped run server {pid}", file=sys.stderr)
    return EXIT_OK


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
