"""A fast reader for the plainest percent scripts, giving what jupytext would give.

Importing jupytext costs more than parsing: it loads its Jupyter contents managers, and with
jupyter_server installed (as next to JupyterLab) the server's handlers too. A command that runs
one short ``.py`` pays that before its kernel can start. :func:`read_plain_percent` parses the
common shape of a parameterized script (``# %%`` markers, optionally ``tags=[...]``, and
``# %% [markdown]`` cells of commented lines, cells one blank line apart) itself, and returns
None for anything else: a header, raw cells, titles or other cell metadata, anything jupytext
would read as a magic or a command, unusual spacing, top-level functions or classes, triple
quotes. The caller then reads the text with jupytext. For the scripts it accepts, the notebook
is the one ``jupytext.reads(text, fmt="py:percent")`` builds (a test compares them).

Measured by ``benchmarks/bench_library_pieces.py`` (a ten-cell script): importing jupytext takes
370-440 ms in a fresh interpreter (about 0.7 s more next to JupyterLab), then ``jupytext.reads``
3.4-5.3 ms; this reader takes 0.15-0.24 ms and imports nothing.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["read_plain_percent"]

#: A code cell marker this reader accepts: ``# %%`` alone or with one list of tags.
_MARKER = re.compile(r"# %%(?: tags=(\[[^\]\n]*\]))?")

#: The markdown cell marker this reader accepts (no title, no metadata).
_MARKDOWN = "# %% [markdown]"

#: Lines jupytext may treat specially (magics, shell and help commands, markers, metadata):
#: any comment whose text starts with a magic or command character or a shell word, and any
#: code line that starts or ends like a magic or help request, or assigns one.
_SHELL_WORDS = "cat|cd|cp|mv|rm|rmdir|mkdir|copy|ddir|echo|ls|ldir|ren"
_SPECIAL = re.compile(
    r"^\s*(?:"
    # a commented magic, command, assigned magic or cell marker
    rf"#[#\s]*(?:[%!?+\-]|(?:{_SHELL_WORDS})(?:\s|$)|[A-Za-z_][\w$]*\s*=\s*[%!])"
    r"|[%!?]"  # a magic, a shell or help command
    rf"|(?:{_SHELL_WORDS})(?:$|\s$|\s[^=,])"  # a bare shell command
    r"|[A-Za-z_][\w$]*\s*=\s*[%!]"  # an assigned magic
    r")"
    r"|\?\s*$"  # a help request
)

#: Lines that change jupytext's reading around them: a function or class at the top level
#: (PEP 8 spacing between cells, kept in cell metadata) and triple quotes (a string may hide
#: a marker).
_LAYOUT = re.compile(r"^(?:def|class|async|@)|'''|\"\"\"")


def read_plain_percent(text: str) -> NotebookNode | None:
    """The notebook of a plain percent script, or None if ``text`` is not one (see module)."""
    if "\r" in text or not text.startswith("# %%"):
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    cells: list[tuple[list[str], list[str] | None, bool]] = []
    body: list[str] = []
    for line in lines:
        if line == _MARKDOWN:
            body = []
            cells.append((body, None, True))
            continue
        marker = _MARKER.fullmatch(line)
        if marker is not None:
            tags = None
            if marker.group(1) is not None:
                tags = _tags(marker.group(1))
                if tags is None:
                    return None
            body = []
            cells.append((body, tags, False))
        elif _SPECIAL.search(line) or _LAYOUT.search(line) or line.lstrip().startswith("# %%"):
            return None
        else:
            body.append(line)
    sources = []
    for index, (body, _, markdown) in enumerate(cells):
        last = index == len(cells) - 1
        # Text, then exactly one blank line before the next marker (none after the last).
        code = body if last else body[:-1]
        if not last and (not body or body[-1] != ""):
            return None
        if not code or not code[0].strip() or not code[-1].strip():
            return None
        if markdown:
            # Every line commented ("# text", or "#" for a blank line); nothing else.
            if not all(line == "#" or line.startswith("# ") for line in code):
                return None
            code = [line[2:] for line in code]
        sources.append("\n".join(code))
    return _notebook(sources, [(tags, markdown) for _, tags, markdown in cells])


def _tags(literal: str) -> list[str] | None:
    try:
        tags = json.loads(literal)
    except ValueError:
        return None
    if not tags or not all(isinstance(tag, str) and tag for tag in tags):
        return None
    # Only the spelling jupytext writes: a JSON list as ``json.dumps`` gives it.
    return list(tags) if json.dumps(tags) == literal else None


def _notebook(sources: list[str], kinds: list[tuple[list[str] | None, bool]]) -> NotebookNode:
    from .._notebook import new_code_cell, new_markdown_cell, new_notebook

    cells = [
        new_markdown_cell(source)
        if markdown
        else new_code_cell(source, metadata={} if tags is None else {"tags": tags})
        for source, (tags, markdown) in zip(sources, kinds, strict=True)
    ]
    any_tags = any(tags is not None for tags, _ in kinds)
    metadata = {
        "jupytext": {
            "cell_metadata_filter": "tags,-all" if any_tags else "-all",
            "main_language": "python",
            "notebook_metadata_filter": "-all",
            "text_representation": {"extension": ".py", "format_name": "percent"},
        }
    }
    return new_notebook(cells, metadata=metadata)
