"""The ``notebook-executor`` command line; ``main(argv=None) -> int``.

Exit status: 0 success, 1 the notebook failed (the result is still printed), 2 bad input or
usage (one line on stderr naming the problem, no traceback). ``--json`` prints exactly one JSON
document on stdout and nothing else there. This is the only package that configures logging.

Each module here registers its commands (``register(commands)``); :data:`COMMAND_MODULES` lists
them in the order ``--help`` shows them. A new command goes in a module of its own, named there.
"""

from __future__ import annotations

import os
import sys

# A served command's client imports only what forwarding it needs (see ..server.client):
# the parser, the commands and ``typing`` load when the command runs in this process.
TYPE_CHECKING = False

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import NoReturn

__all__ = ["console", "main"]

#: The modules of this package that add commands, in ``--help`` order.
COMMAND_MODULES = (
    "run",
    "sweep",
    "checkpoints",
    "catalog",
    "review",
    "edit",
    "report",
    "mcp",
    "guide",
    "session",
    "jobs",
    "server",
)

#: The parser built once by the run server, for the children it forks (see :func:`prebuild`).
_PREBUILT: list[argparse.ArgumentParser] = []


def prebuild() -> None:
    """Build the parser once, for every later :func:`main` of this process and of the
    children it forks: the run server does, so a served command pays for none.

    Also compiles, once, the regular expressions that reading a notebook and its parameters
    cell needs (the tokenizer's, jupytext's): each child compiled them again, 11 ms of a
    served run of a plain percent script and 55 ms of any other (measured 2026-11-28).
    """
    from ..._parameters.declared import parse_parameters
    from ..._sources.formats import format_for, parse_source_text

    _PREBUILT[:] = [_build_parser()]
    parse_parameters("x = 1  # a parameter\n")
    for name, text in _READ_AHEAD:
        parse_source_text(name, text, format_for(name))


#: Sources :func:`prebuild` reads, one per reader: a percent script jupytext reads (the
#: plainest ones are read without it) and a markdown notebook.
_READ_AHEAD = (
    ("script.py", "\n# %% [markdown]\n# A title\n\n# %%\nx = 1\n"),
    ("notebook.md", "---\nparameters:\n  x: 1\n---\n# A title\n\n```python\nx = 1\n```\n"),
)


def _build_parser() -> argparse.ArgumentParser:
    import importlib

    from .common import PROG, Parser

    parser = Parser(
        prog=PROG,
        description="Run Jupyter notebooks (.ipynb, percent .py, markdown .md) as "
        "reproducible, parameterized tasks.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(commands)
    from ..server.client import no_server_commands

    for name in no_server_commands():
        commands.choices[name].add_argument(
            "--no-server",
            action="store_true",
            help="run in this process, not through the per-user run server (also: "
            "NOTEBOOK_EXECUTOR_NO_SERVER=1)",
        )
    return parser


def _version() -> str:
    from ... import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    from ..server.client import forward

    status = forward(sys.argv[1:] if argv is None else argv)
    if status is not None:
        return status
    return _in_process(argv)


def console() -> NoReturn:
    """The ``notebook-executor`` program (and ``python -m notebook_executor``): :func:`main`
    on ``sys.argv``.

    A command the run server ran ends as soon as its answer is in, its output flushed: the
    interpreter's teardown of what the client imported is not needed (5 ms of a served run's
    150 ms, measured 2026-11-28 on two CPUs at load 1).
    """
    from ..server.client import forward

    status = forward(sys.argv[1:])
    if status is None:
        sys.exit(_in_process(None))
    for stream in (sys.stdout, sys.stderr):
        # Not contextlib.suppress: the client imports no more than forwarding needs.
        try:  # noqa: SIM105
            stream.flush()
        except (OSError, ValueError):  # a reader gone (`| head`), a stream closed
            pass
    os._exit(status & 0xFF)


def _in_process(argv: Sequence[str] | None) -> int:
    """Run the command line with ``argv`` in this process; return the exit status."""
    from ..._errors import NotebookExecutorError
    from .common import EXIT_OK, EXIT_USAGE, UsageError, configure_logging, fail, settle_runs_dir

    parser = _PREBUILT[0] if _PREBUILT else _build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        fail(str(exc))
        return EXIT_USAGE
    configure_logging(args.verbose)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        settle_runs_dir(args)
        return handler(args)
    except (NotebookExecutorError, UsageError) as exc:
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        # The run server's end, during a run, is an error of its own (exit status 2).
        status = getattr(exc, "exit_status", None)
        fail(str(exc.message) if status is not None else "interrupted")  # type: ignore[attr-defined]
        return 130 if status is None else int(status)
    except BrokenPipeError:
        # The reader went away (`| head`); nothing more to say.
        sys.stderr.close()
        return EXIT_OK
