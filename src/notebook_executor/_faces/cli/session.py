"""``session``: a live kernel stepped through from the shell (docs/how-to/server.md).

The session lives in the run server (a child of it holds it: see
``notebook_executor._faces.server.session_host``); these handlers run in the server's child
that serves each command. ``session open`` opens it there, in the client's folder and
environment; the other commands ask its holder over its socket and print the answer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from . import common
from .common import EXIT_FAILED, EXIT_OK, UsageError, print_json
from .jobs import add_detach, detach_command

__all__ = ["register"]

_SESSION_ID = re.compile(r"[0-9a-f]{8,64}")
#: Longest answer read from a session's holder (a step result is bounded, this is generous).
_MAX_ANSWER = 64 * 1024 * 1024


def register(commands: Any) -> None:
    """Add the ``session`` command to the ``commands`` subparsers."""
    session = commands.add_parser(
        "session",
        help="step through a notebook on a live kernel, with time travel (rerun after an edit)",
        description="Sessions live in the run server until closed, idle past --idle-timeout, "
        "or the server stops. Exit status: 0 success, 1 the step failed, 2 refused input.",
    )
    actions = session.add_subparsers(dest="action", metavar="ACTION", parser_class=common.Parser)
    actions.required = True

    open_ = actions.add_parser("open", help="start a session on NOTEBOOK; prints its id")
    open_.add_argument("notebook", metavar="NOTEBOOK")
    open_.add_argument(
        "-p", "--parameters", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
        help="a parameter, converted like run's -p",
    )  # fmt: skip
    open_.add_argument(
        "-r", "--parameters-raw", nargs=2, action="append", default=[], metavar=("NAME", "RAW"),
        help="a parameter passed as the raw string",
    )  # fmt: skip
    open_.add_argument("-f", "--parameters-file", metavar="PARAMS.yaml", help="YAML parameters")
    open_.add_argument("--request", metavar="TEXT", help="why the session is opened")
    open_.add_argument("--timeout", type=common.seconds, metavar="S", help="limit for each step")
    open_.add_argument("--cell-timeout", type=common.seconds, metavar="S", help="limit per cell")
    open_.add_argument(
        "--idle-timeout",
        type=common.seconds,
        default=1800.0,
        metavar="S",
        help="close the session after S seconds without a command (default 1800)",
    )
    open_.add_argument("--cwd", metavar="DIR", help="kernel working directory")
    open_.add_argument(
        "--secret", action="append", default=[], metavar="NAME",
        help="pass environment variable NAME to the kernel as a secret (repeatable)",
    )  # fmt: skip
    common.add_runs_dir(open_)
    open_.add_argument("--json", action="store_true", help="print {session_id, run_id, ...}")
    open_.set_defaults(handler=_cmd_open)

    run = actions.add_parser("run", help="run the next code cells (up to --until N)")
    run.add_argument("session_id", metavar="ID")
    run.add_argument("--until", type=common.non_negative_int, metavar="N", help="last cell")
    run.add_argument("--json", action="store_true", help="print the step result")
    add_detach(run)
    run.set_defaults(handler=_cmd_step, op="run")

    rerun = actions.add_parser("rerun", help="restore the state before cell N, run from N")
    rerun.add_argument("session_id", metavar="ID")
    rerun.add_argument(
        "--from", dest="start", type=common.non_negative_int, required=True, metavar="N"
    )
    rerun.add_argument("--until", type=common.non_negative_int, metavar="M", help="last cell")
    rerun.add_argument("--json", action="store_true", help="print the step result")
    add_detach(rerun)
    rerun.set_defaults(handler=_cmd_step, op="rerun")

    evaluate = actions.add_parser("eval", help="run CODE in the session's state ('-': stdin)")
    evaluate.add_argument("session_id", metavar="ID")
    evaluate.add_argument("code", metavar="CODE")
    evaluate.add_argument("--json", action="store_true", help="print the answer as JSON")
    evaluate.set_defaults(handler=_cmd_eval)

    show = actions.add_parser("show", help="a session's notebook, run and checkpoints")
    show.add_argument("session_id", metavar="ID")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(handler=_cmd_simple, op="show")

    list_ = actions.add_parser("list", help="the open sessions")
    list_.add_argument("--json", action="store_true", help="print JSON")
    list_.set_defaults(handler=_cmd_list)

    close = actions.add_parser("close", help="end a session and finish its run record")
    close.add_argument("session_id", metavar="ID")
    close.add_argument("--json", action="store_true", help="print JSON")
    close.set_defaults(handler=_cmd_simple, op="close")


def _files() -> Any:
    from ..server import served

    return served.server_files()


def _cmd_open(args: argparse.Namespace) -> int:
    from ..server import served
    from .run import parameter_values

    _files()
    values = parameter_values(args)
    options = common.run_options(args).given()
    ex = common.executor(args)
    try:
        session = ex.open_session(
            args.notebook, parameters=values, idle_timeout=args.idle_timeout, **options
        )
    except BaseException:
        ex.close()
        raise
    served.hold_session(ex, session)
    if args.json:
        print_json({"session_id": session.id, "run_id": session.run_id, "notebook": args.notebook})
    else:
        print(session.id)
    return EXIT_OK


def _ask(session_id: str, message: dict[str, Any]) -> dict[str, Any]:
    """The answer of the holder of session ``session_id`` to ``message``; a holder gone
    before it answered (or while it answered) is one :class:`UsageError`, never a hang."""
    import socket

    from ..server import served, wire

    if not _SESSION_ID.fullmatch(session_id):
        raise UsageError(f"not a session id: {session_id!r}")
    path = _files().session_socket(session_id)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    holder: int | None = None
    try:
        try:
            sock.connect(str(path))
            # The holder's pidfd: its death is seen even where its socket outlives it.
            holder = os.pidfd_open(wire.check_peer(sock))
            wire.send(sock, message)
        except OSError:
            raise UsageError(f"no open session {session_id!r}") from None
        try:
            try:
                answer = _receive(sock, holder)
            except KeyboardInterrupt:
                # Ctrl-C is relayed: the step is cancelled there, and answers. The server's end
                # (its SIGTERM here) is not: the holder ends the step itself, and says so.
                if not served.server_gone():
                    wire.send(sock, {"op": "interrupt"})
                answer = _receive(sock, holder)
        except OSError:
            raise UsageError(f"session {session_id!r} ended during the command") from None
    finally:
        sock.close()
        if holder is not None:
            os.close(holder)
    if answer.get("interrupted"):
        raise KeyboardInterrupt
    if "error" in answer:
        raise UsageError(str(answer["error"]).splitlines()[0] or "the session refused")
    return answer


def _receive(sock: Any, holder: int) -> dict[str, Any]:
    """The holder's answer, waited for in short slices: a Ctrl-C relayed here (SIGINT, which
    Linux may hand to another thread) is raised at once, not when the answer comes; the
    holder's exit (its pidfd ``holder``) with nothing to read ends the wait (``OSError``)."""
    import select

    from ..server import wire

    while True:
        ready = select.select([sock, holder], [], [], 0.05)[0]
        if sock in ready:
            return wire.receive(sock, limit=_MAX_ANSWER)
        if holder in ready:
            raise wire.WireError("the session's holder exited")


def _cmd_step(args: argparse.Namespace) -> int:
    from ..._dispatch.jobs import PROCESS_JOB

    message: dict[str, Any] = {"op": args.op, "until": args.until}
    if args.op == "rerun":
        message["from"] = args.start
    if args.detach:  # no such session: refused before the job id (its holder may be busy)
        if not (
            _SESSION_ID.fullmatch(args.session_id)
            and Path(_files().session_socket(args.session_id)).exists()
        ):
            raise UsageError(f"no open session {args.session_id!r}")
        return detach_command(args)
    if PROCESS_JOB:  # this step is a job: its cell is the one the session's run lock says
        PROCESS_JOB[0].in_run_of(_ask(args.session_id, {"op": "lock"})["lock"])
    step = _ask(args.session_id, message)["step"]
    if args.json:
        print_json(step)
    else:
        common.print_step(step)
    return EXIT_OK if step["status"] == "success" else EXIT_FAILED


def _cmd_eval(args: argparse.Namespace) -> int:
    from ..._sources.bounded import MAX_CODE_CHARS

    # Standard input past the bound is refused here, before it is sent (an argument cannot
    # be that long: Linux bounds one at 128 KiB).
    code = common.read_input("-", "CODE", MAX_CODE_CHARS) if args.code == "-" else args.code
    answer = _ask(args.session_id, {"op": "eval", "code": code})["answer"]
    if args.json:
        print_json(answer)
    else:
        if answer["output"]:
            sys.stdout.write(answer["output"].rstrip("\n") + "\n")
        error = answer.get("error")
        if error:
            sys.stdout.write(f"{error['ename']}: {error['evalue']}\n")
    return EXIT_OK if answer["status"] != "error" else EXIT_FAILED


def _cmd_simple(args: argparse.Namespace) -> int:
    answer = _ask(args.session_id, {"op": args.op})
    document = answer.get("session") or answer.get("closed")
    if args.json:
        print_json(document)
    else:
        for key, value in (document or {}).items():
            print(f"{key}: {json.dumps(value) if not isinstance(value, str) else value}")
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    from ..server.client import request

    try:
        answer = request(_files(), {"op": "status"}) or {}
    except OSError:  # the server went away as it answered
        answer = {}
    sessions = answer.get("sessions", [])
    if args.json:
        print_json(sessions)
    elif not sessions:
        print("no open sessions")
    else:
        for entry in sessions:
            given = entry.get("parameters") or "(no parameters given)"
            print(f"{entry['session_id']}  {entry['run_id']}  {entry['notebook']}  {given}")
    return EXIT_OK
