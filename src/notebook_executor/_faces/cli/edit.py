"""``edit``, ``insert`` and ``delete``: change one cell of a notebook source from a shell.

The rules are those of :meth:`NotebookExecutor.edit_cell
<notebook_executor.NotebookExecutor.edit_cell>`: the file keeps its format, every other cell's
text stays byte-identical, the write is atomic, and a text that would split or merge cells is
refused. ``--expect`` refuses the change when the cell is no longer what the caller read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import common
from .common import EXIT_OK, print_json

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add this module's commands to the ``commands`` subparsers."""
    edit = commands.add_parser(
        "edit",
        help="replace the source of one cell of a notebook",
        description="Replace the source of cell INDEX (as in failed_cell.index) with the text "
        "of FILE ('-': standard input), in the file's own format.",
    )
    _target(edit)
    edit.add_argument("file", metavar="FILE", help="the new source ('-': standard input)")
    _expect(edit)
    edit.set_defaults(handler=_cmd_edit)

    insert = commands.add_parser(
        "insert",
        help="insert a cell into a notebook",
        description="Insert a cell holding the text of FILE ('-': standard input) at INDEX "
        "(the number of cells appends).",
    )
    _target(insert)
    insert.add_argument("file", metavar="FILE", help="the new cell's source ('-': stdin)")
    insert.add_argument(
        "--cell-type",
        choices=("code", "markdown"),
        default="code",
        help="the new cell's type (default: code)",
    )
    insert.add_argument("--json", action="store_true", help="print the cell as JSON")
    insert.set_defaults(handler=_cmd_insert)

    cells = commands.add_parser(
        "cells",
        help="list a notebook's cells with their indices (for edit, --edit, failed_cell)",
        description="List the cells of NOTEBOOK: index (as in failed_cell.index and for "
        "edit/insert/delete and run --edit), type, tags and first line.",
    )
    cells.add_argument("path", metavar="NOTEBOOK", help="the notebook source")
    cells.add_argument("--json", action="store_true", help="print the cells as JSON")
    cells.set_defaults(handler=_cmd_cells)

    delete = commands.add_parser("delete", help="delete one cell of a notebook")
    _target(delete)
    _expect(delete)
    delete.set_defaults(handler=_cmd_delete)


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="NOTEBOOK", help="the notebook source")
    parser.add_argument("index", type=_index, metavar="INDEX", help="the cell's index (from 0)")


def _expect(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--expect", metavar="TEXT", help="refuse unless the cell's source is exactly TEXT"
    )
    group.add_argument(
        "--expect-file",
        metavar="FILE",
        help="refuse unless the cell's source is exactly the text of FILE",
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")


def _index(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a cell index: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a cell index is 0 or more: {text!r}")
    return value


def _text(path: str, what: str) -> str:
    """The text of ``path`` (``-``: standard input) as a cell source: a file's final line
    break is not part of the cell, as a notebook stores it."""
    text = common.read_input(path, what)
    for ending in ("\r\n", "\n"):
        if text.endswith(ending):
            return text[: -len(ending)]
    return text


def _existing(path: str) -> None:
    from ..._errors import NotebookSourceError

    if not Path(path).is_file():
        raise NotebookSourceError(path, "no such file")


def _expected(args: argparse.Namespace) -> str | None:
    if args.expect_file is not None:
        return _text(args.expect_file, "the expected source")
    expect: str | None = args.expect
    return expect


# The review functions themselves, not the executor's methods: a command prints a count and
# needs no nbformat node (importing nbformat costs a command about 0.8 s next to JupyterLab).


def _cmd_edit(args: argparse.Namespace) -> int:
    from ..._review.edit import edit_cell

    _existing(args.path)
    source = _text(args.file, "the new source")
    nb = edit_cell(args.path, args.index, source, expect=_expected(args))
    _warn_syntax(args.path, nb, args.index)
    return _report(args, "edited", args.index, nb)


def _cmd_insert(args: argparse.Namespace) -> int:
    from ..._review.edit import insert_cell

    _existing(args.path)
    source = _text(args.file, "the new cell's source")
    nb = insert_cell(args.path, args.index, source, args.cell_type)
    _warn_syntax(args.path, nb, args.index)
    return _report(args, "inserted", args.index, nb)


def _warn_syntax(path: str, nb: Any, index: int) -> None:
    """One line on stderr when the cell written does not compile (``validate``'s check): the
    change is written all the same, as an editor saves a file mid-edit."""
    from ..._notebook import notebook_language
    from ..._review.validate import cell_syntax_problem
    from ..._run.plan import parses_parameters

    if not parses_parameters(notebook_language(nb)):
        return
    problem = cell_syntax_problem(nb.cells[index])
    if problem is not None:
        print(
            f"{common.PROG}: warning: cell {index} of {path}: {problem} (written; "
            "validate reports it)",
            file=sys.stderr,
        )


def _cmd_delete(args: argparse.Namespace) -> int:
    from ..._review.edit import delete_cell

    _existing(args.path)
    nb = delete_cell(args.path, args.index, expect=_expected(args))
    return _report(args, "deleted", args.index, nb)


#: How much of a cell's first line ``cells`` shows.
_FIRST_LINE_CHARS = 70


def _cmd_cells(args: argparse.Namespace) -> int:
    from ..._sources.formats import load_source

    nb = load_source(args.path).nb
    logbook = "front_matter" in nb.metadata
    listed = []
    for index, cell in enumerate(nb.cells):
        tags = list(cell.get("metadata", {}).get("tags", []))
        lines = [line for line in cell.source.splitlines() if line.strip()]
        first = lines[0] if lines else ""
        if len(first) > _FIRST_LINE_CHARS:
            first = first[: _FIRST_LINE_CHARS - 3] + "..."
        listed.append(
            {
                "index": index,
                "cell_type": cell.cell_type,
                "tags": tags,
                "first_line": first,
                "lines": len(cell.source.splitlines()),
                # A logbook's front matter is read as its parameters cell (edited by hand).
                "front_matter": logbook and index == 0,
            }
        )
    if args.json:
        print_json({"path": args.path, "cells": listed})
        return EXIT_OK
    for item in listed:
        shown_tags = f"[{', '.join(item['tags'])}] " if item["tags"] else ""
        kind = "front matter" if item["front_matter"] else item["cell_type"]
        print(f"{item['index']:>3}  {kind:<12} {shown_tags}{item['first_line']}")
    return EXIT_OK


def _report(args: argparse.Namespace, done: str, index: int, nb: Any) -> int:
    cells = len(nb.cells)
    if args.json:
        answer: dict[str, Any] = {"path": args.path, done: index, "cells": cells}
        if done != "deleted":
            cell = nb.cells[index]
            answer["cell"] = {"index": index, "cell_type": cell.cell_type, "source": cell.source}
        print_json(answer)
    else:
        print(f"{done} cell {index} of {args.path} ({cells} cells now)")
    return EXIT_OK
