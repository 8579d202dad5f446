"""``jobs`` and ``job show/wait/logs/cancel``: the runs started with ``run --detach`` (or
``sweep --detach``, or the session steps of ``session run|rerun --detach``), which the run
server goes on with after its client left (see
``docs/how-to/jobs``; the jobs themselves: :mod:`..server.jobs`).

These commands read the job files of the server's private folder in this process: they work
with no server running, and show what a server that died left (its jobs ``interrupted``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from . import common
from .common import EXIT_FAILED, EXIT_OK, UsageError, print_json, print_result

__all__ = ["EXIT_TIMEOUT", "add_detach", "detach_command", "register"]

#: ``job wait``'s exit status when its timeout passed first.
EXIT_TIMEOUT = 3
#: How often ``job wait`` and ``job logs --follow`` look again (seconds).
_POLL = 0.05


def add_detach(parser: argparse.ArgumentParser) -> None:
    """Add ``--detach`` to a command that runs notebooks."""
    parser.add_argument(
        "--detach",
        action="store_true",
        help="start a job: print its id at once and run in the run server, after this "
        "command has returned ('notebook-executor job show|wait|logs|cancel ID')",
    )


def detach_command(args: argparse.Namespace) -> int:
    """Answer with a new job's id, then run this command as that job (in the run server's
    child serving it)."""
    from ..server import served
    from ..server.jobs import detach

    detaching = served.take_detach()
    if detaching is None:
        raise UsageError(
            "--detach needs the run server (not --no-server, nor NOTEBOOK_EXECUTOR_NO_SERVER=1)"
        )
    notebook = getattr(args, "notebook", None)
    if isinstance(notebook, str):
        from pathlib import Path

        from ..._sources.remote import is_url

        if not is_url(notebook) and not Path(notebook).is_file():
            raise UsageError(f"{notebook}: no such file")  # refused now, not in the job
    files, argv, let_go = detaching

    def announce(job_id: str) -> None:
        if args.json:
            print_json({"job_id": job_id})
        else:
            print(job_id)

    from . import main

    return detach(files, argv, announce, let_go, main)


def register(commands: Any) -> None:
    """Add ``jobs`` and ``job`` to the ``commands`` subparsers."""
    jobs = commands.add_parser("jobs", help="list the jobs started with --detach")
    jobs.add_argument("--json", action="store_true", help="print a JSON list of status objects")
    jobs.set_defaults(handler=_cmd_jobs)
    job = commands.add_parser(
        "job",
        help="look at, wait for or cancel a job started with --detach",
        description="A job is a run, sweep or session step started with --detach: it goes on "
        "in the run server after the command that started it returned.",
    )
    actions = job.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser("show", help="its status, cell, elapsed time, output's tail")
    show.add_argument("job_id", metavar="ID")
    show.add_argument("--json", action="store_true", help="print the status object")
    show.set_defaults(handler=_cmd_show)
    wait = actions.add_parser(
        "wait",
        help="wait for its end and print its result (exit status as run's)",
        description="Exit status: as run's (0 success, 1 the notebook failed, 2 refused); 3 "
        "when --timeout passed first (the status object is printed).",
    )
    wait.add_argument("job_id", metavar="ID")
    wait.add_argument("--timeout", type=common.seconds, metavar="S", help="wait at most S s")
    wait.add_argument("--json", action="store_true", help="print the result dict as JSON")
    wait.set_defaults(handler=_cmd_wait)
    logs = actions.add_parser("logs", help="its output (cells' outputs, errors)")
    logs.add_argument("job_id", metavar="ID")
    logs.add_argument("--follow", "-f", action="store_true", help="go on until the job ends")
    logs.set_defaults(handler=_cmd_logs)
    cancel = actions.add_parser("cancel", help="stop it: its cell stops, the run is cancelled")
    cancel.add_argument("job_id", metavar="ID")
    cancel.set_defaults(handler=_cmd_cancel)


def _files() -> Any:
    from ..server.paths import RuntimeFolderError, server_files

    try:
        return server_files()
    except RuntimeFolderError as exc:
        raise UsageError(f"no run server folder: {exc}") from None


def _state(files: Any, job_id: str) -> dict[str, Any]:
    from ..server.jobs import read_state

    state = read_state(files, job_id)
    if state is None:
        raise UsageError(f"no job {job_id!r} ('notebook-executor jobs' lists them)")
    return state


def _ended(state: dict[str, Any]) -> bool:
    return state["status"] not in ("queued", "running")


def _cmd_jobs(args: argparse.Namespace) -> int:
    from ..server.jobs import job_ids, read_state, status

    files = _files()
    found = []
    for job_id in job_ids(files):
        state = read_state(files, job_id)
        if state is not None:
            shown = dict(status(state, files))
            shown["result"] = _summary(shown["result"])
            found.append(shown)
    if args.json:
        print_json(found)
        return EXIT_OK
    if not found:
        print("no jobs")
    for shown in found:
        cell = "" if shown["cell"] is None else f"  cell {shown['cell']}"
        run = ""
        if isinstance(shown["result"], dict) and shown["result"].get("run_id"):
            run = f"  {shown['result']['run_id']}"
        print(
            f"{shown['job_id']}  {shown['status']:11} {shown['elapsed_seconds']:8.1f}s{cell}{run}"
        )
    return EXIT_OK


def _summary(result: Any) -> Any:
    """A result as ``jobs`` lists it: its run id, status and error kind (each of a sweep's)."""
    if isinstance(result, list):
        return [_summary(item) for item in result]
    if not isinstance(result, dict):
        return result
    return {key: result.get(key) for key in ("run_id", "notebook", "status", "error_kind")}


def _cmd_show(args: argparse.Namespace) -> int:
    from ..server.jobs import status

    files = _files()
    shown = status(_state(files, args.job_id), files)
    if args.json:
        print_json(shown)
        return EXIT_OK
    _print_status(dict(shown))
    return EXIT_OK


def _print_status(shown: dict[str, Any]) -> None:
    cell = "" if shown["cell"] is None else f", cell {shown['cell']}"
    print(f"job {shown['job_id']}: {shown['status']}{cell}, {shown['elapsed_seconds']:.1f} s")
    for line in shown["tail"]:
        print(f"  | {line}")
    result = shown["result"]
    if isinstance(result, dict) and result.get("run_id"):
        print(f"run {result['run_id']}: {result.get('status')}")


def _cmd_wait(args: argparse.Namespace) -> int:
    from ..server.jobs import status

    files = _files()
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    state = _state(files, args.job_id)
    while not _ended(state):
        if deadline is not None and time.monotonic() >= deadline:
            shown = status(state, files)
            if args.json:
                print_json(shown)
            else:
                _print_status(dict(shown))
            return EXIT_TIMEOUT
        time.sleep(_POLL)
        state = _state(files, args.job_id)
    result = state.get("result")
    code = state.get("exit")
    if result is None:
        from ..server.jobs import log_text

        last = [line for line in log_text(files, args.job_id, 4096).splitlines() if line.strip()]
        reason = last[-1] if last else f"the job ended {state['status']} with no result"
        common.fail(reason.removeprefix("notebook-executor: error: "))
        return code if isinstance(code, int) and code not in (0, 1) else 2
    if args.json:
        print_json(result)
    elif isinstance(result, dict) and state.get("command") == ["session"]:
        common.print_step(result)  # as ``session run`` prints it
    elif isinstance(result, dict):
        print_result(result)
    else:
        for item in result:
            print_result(item)
    if isinstance(code, int):
        return code
    return EXIT_OK if state["status"] == "success" else EXIT_FAILED


def _cmd_logs(args: argparse.Namespace) -> int:
    from ..server.jobs import log_text

    files = _files()
    state = _state(files, args.job_id)
    shown = 0
    while True:
        text = log_text(files, args.job_id)
        sys.stdout.write(text[shown:] if len(text) >= shown else text)
        sys.stdout.flush()
        shown = len(text)
        if not args.follow or _ended(state):
            return EXIT_OK
        time.sleep(_POLL * 4)
        state = _state(files, args.job_id)


def _cmd_cancel(args: argparse.Namespace) -> int:
    from ..server.jobs import cancel

    files = _files()
    state = _state(files, args.job_id)
    if _ended(state):
        print(f"job {args.job_id} already ended: {state['status']}", file=sys.stderr)
        return EXIT_OK
    if not cancel(files, args.job_id):
        raise UsageError(f"job {args.job_id} could not be cancelled")
    print(f"cancelled job {args.job_id}", file=sys.stderr)
    return EXIT_OK
