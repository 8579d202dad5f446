"""The text rows of the format table: scripts and markdown notebooks, read by jupytext.

A script (``.py``) is read in the format jupytext detects (percent, light, sphinx-gallery...)
and written as percent; a markdown notebook (``.md``) is jupytext markdown or MyST, and keeps
the flavour it was read in when written. Each row's sniffer tells, from the head of a file
found in a folder, whether it is a notebook at all.
"""

from __future__ import annotations

import copy
import re
import warnings
from typing import TYPE_CHECKING

from .._errors import NotebookSourceError
from .dependencies import script_cells
from .front_matter import translate_front_matter
from .parsing import normalised, parse_failure
from .percent import read_plain_percent

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .source_format import SourceFormat

__all__ = [
    "has_myst_cells",
    "markdown_near_miss",
    "read_markdown",
    "read_script",
    "read_text",
    "script_near_miss",
    "sniff_markdown",
    "sniff_script",
    "write_text",
    "writing_format",
]

_PERCENT = re.compile(r"^#\s*%%", re.MULTILINE)
_JUPYTEXT_HEADER = re.compile(r"^(# )?---\s*$\n(?:.*\n)*?(# )?\s*(jupyter|jupytext)\s*:", re.M)
_LOGBOOK = re.compile(r"\A---\s*\n(?:.*\n)*?parameters\s*:", re.MULTILINE)
#: A MyST code cell's opening fence at the start of a line, and its language.
_MYST_CODE_CELL = re.compile(r"^(?:`{3,}|~{3,})\{code-cell\}[ \t]*(\S*)", re.MULTILINE)


def sniff_script(head: str) -> bool:
    """A script is a notebook when it has a ``# %%`` cell marker (at the start of a line,
    outside any string, as jupytext reads it) or a jupytext header."""
    return bool(_JUPYTEXT_HEADER.match(head)) or _percent_markers(head)[0] > 0


def script_near_miss(head: str) -> str | None:
    """Why a script that looks like a notebook is none (its ``# %%`` lines are all inside
    strings: a test module holding a notebook's text), or None."""
    if sniff_script(head):
        return None
    quoted = _percent_markers(head)[1]
    if not quoted:
        return None
    lines = ", ".join(map(str, quoted[:3])) + (", ..." if len(quoted) > 3 else "")
    word = "line" if len(quoted) == 1 else "lines"
    return f"its '# %%' lines are inside strings ({word} {lines}), not cell markers"


def _percent_markers(head: str) -> tuple[int, list[int]]:
    """How many ``# %%`` lines of ``head`` are cell markers, and the (1-based) numbers of
    those inside strings, found with jupytext's own string parser."""
    if not _PERCENT.search(head):
        return 0, []
    from jupytext.stringparser import StringParser

    parser = StringParser("python")
    markers, quoted = 0, []
    for number, line in enumerate(head.splitlines(), 1):
        if _PERCENT.match(line):
            if parser.is_quoted():
                quoted.append(number)
            else:
                markers += 1
        parser.read_line(line)
    return markers, quoted


def sniff_markdown(head: str) -> bool:
    """A markdown file is a notebook when it has a jupytext header, MyST code cells (fences
    of its own, not inside another block) or a logbook front matter declaring
    ``parameters:``; a page with code blocks, or one showing a MyST example, is not."""
    return bool(_JUPYTEXT_HEADER.match(head) or _LOGBOOK.match(head)) or has_myst_cells(head)


def markdown_near_miss(head: str) -> str | None:
    """Why a markdown file that mentions ``{code-cell}`` is no notebook, or None."""
    if "{code-cell}" not in head or sniff_markdown(head):
        return None
    return "it mentions {code-cell} only inside code blocks or text: no MyST cell of its own"


def has_myst_cells(text: str) -> bool:
    """Whether ``text`` has a MyST code cell: a fence of its own whose info string is
    ``{code-cell}`` (found by markdown-it, the parser MyST and jupytext use, so a cell shown
    inside a longer fence, a quote or inline code is not one)."""
    if "{code-cell}" not in text or not _MYST_CODE_CELL.search(text):
        return False
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    return any(
        token.type == "fence" and token.info.strip().startswith("{code-cell}") for token in tokens
    )


def read_text(
    notebook: str, text: str, fmt: SourceFormat, jupytext_format: str | None = None
) -> NotebookNode:
    """Read ``text`` with jupytext in ``jupytext_format`` (by default the row's own)."""
    import jupytext

    from .._notebook import from_dict

    try:
        nb = from_dict(jupytext.reads(text, fmt=jupytext_format or fmt.jupytext_format))
    except Exception as exc:  # jupytext raises many types for malformed text
        raise NotebookSourceError(
            notebook, f"cannot parse as {fmt.name}: {parse_failure(exc)}"
        ) from None
    translate_front_matter(notebook, nb)
    return normalised(nb)


def read_script(notebook: str, text: str, fmt: SourceFormat) -> NotebookNode:
    """A script: the plainest percent scripts by :func:`read_plain_percent`, any other in the
    format jupytext detects, as ``jupytext.read`` does (a light script is never read as one
    percent cell), without its PEP 723 block (:func:`.dependencies.script_cells`)."""
    plain = read_plain_percent(text)
    if plain is not None:
        return normalised(plain)
    # A PEP 723 block above the first cell is no cell (the plain reader takes no such text).
    return script_cells(read_text(notebook, text, fmt, "py"))


def read_markdown(notebook: str, text: str, fmt: SourceFormat) -> NotebookNode:
    """A markdown notebook: MyST when it has ``{code-cell}`` cells, jupytext markdown else."""
    if not has_myst_cells(text):
        return read_text(notebook, text, fmt)
    if not _check_one_language(notebook, text):
        return read_text(notebook, text, fmt, "md:myst")
    with warnings.catch_warnings():
        # Names of one language (python, ipython3): checked, nothing to warn about.
        warnings.filterwarnings("ignore", "All code cells in a MyST notebook")
        return read_text(notebook, text, fmt, "md:myst")


def _check_one_language(notebook: str, text: str) -> bool:
    """Refuse a MyST notebook whose code cells name different languages: one kernel runs them
    all, so a ``bash`` cell among ``python`` ones would fail at run time (jupytext only warns).
    True when its cells use several names of one language (``python``, ``ipython3``)."""
    first: str | None = None
    several = False
    for match in _MYST_CODE_CELL.finditer(text):
        language = match.group(1)
        if not language or language == first:
            continue
        if first is None:
            first = language
            continue
        several = True
        if _language_family(language) != _language_family(first):
            line = text.count("\n", 0, match.start()) + 1
            raise NotebookSourceError(
                notebook,
                f"line {line}: a {language} code cell after {first} ones; a notebook runs on "
                "one kernel, so all its code cells need the same language",
            )
    return several


def _language_family(lexer: str) -> str:
    # ``python``, ``python3``, ``ipython3``... all run on a Python kernel.
    name = lexer.lower().rstrip("0123456789")
    return "python" if name in ("python", "ipython", "py") else name


def writing_format(nb: NotebookNode, fmt: SourceFormat) -> str:
    """The jupytext format ``nb`` is written in as ``fmt``: a MyST notebook stays MyST."""
    jupytext_format = fmt.jupytext_format
    assert jupytext_format is not None
    representation = nb.metadata.get("jupytext", {}).get("text_representation", {})
    if jupytext_format.startswith("md") and representation.get("format_name") == "myst":
        return "md:myst"
    return jupytext_format


def write_text(nb: NotebookNode, fmt: SourceFormat) -> str:
    """``nb`` as jupytext writes it in ``fmt``."""
    import jupytext
    import nbformat

    # As nbformat's own nodes: jupytext writes metadata with YAML representers for those.
    document = nbformat.from_dict(copy.deepcopy(nb))
    # A notebook read from text carries jupytext's cell filter for that text, which may drop
    # all cell metadata; the tags (``parameters`` above all) must survive a conversion.
    document.metadata.get("jupytext", {}).pop("cell_metadata_filter", None)
    return str(jupytext.writes(document, fmt=writing_format(nb, fmt)))
