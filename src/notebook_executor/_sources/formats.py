"""Read and write notebook sources in any supported format.

The formats are data: :data:`FORMATS` is a table of :class:`SourceFormat` rows, each carrying
its file suffixes, its sniffer (is a file found in a folder a notebook?), its reader, its writer
and its cell-span finder (for editing one cell in place), as jupytext's own format table does.
Every part of the package asks the table: reading and writing here, the folder walk of
``check`` and of the MCP listing (:mod:`.discover`), and the cell editor. A new format is one
more row.

The rows: ``.ipynb`` (nbformat 4), Python scripts (``.py``: read in the format jupytext
detects, percent, light, sphinx-gallery...; written as percent) and markdown notebooks
(``.md``, jupytext markdown or MyST). Markdown "logbook" templates declare their parameters in
a YAML front matter, which the reader turns into a code cell tagged ``parameters``
(:mod:`.front_matter`), so the rest of the package sees one shape of notebook whatever the
source format.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import NotebookSourceError
from .bounded import MAX_SOURCE_BYTES, MAX_TEXT_SOURCE_BYTES
from .dependencies import Dependencies, declared_dependencies
from .files import atomic_write_text, missing_folder
from .ipynb import read_ipynb, write_ipynb
from .parsing import NESTED_TOO_DEEP, first_line
from .regular import read_regular, regular_head
from .remote import is_url, read_url, write_url
from .source_format import SNIFF_CHARS, SourceFormat
from .spans import text_cell_spans
from .text_formats import (
    markdown_near_miss,
    read_markdown,
    read_script,
    script_near_miss,
    sniff_markdown,
    sniff_script,
    write_text,
)

if TYPE_CHECKING:
    import nbformat

    from .._notebook import NotebookNode

logger = logging.getLogger(__name__)

__all__ = [
    "FORMATS",
    "NESTED_TOO_DEEP",
    "SNIFF_CHARS",
    "LoadedSource",
    "SourceFormat",
    "find_format",
    "format_for",
    "is_notebook",
    "load_source",
    "notebook_to_text",
    "notebook_verdict",
    "parse_source_text",
    "read_notebook",
    "reading_note",
    "write_notebook",
]

FORMATS: tuple[SourceFormat, ...] = (
    SourceFormat("notebook", (".ipynb",), None, None, read_ipynb, write_ipynb, None),
    SourceFormat(
        "percent script",
        (".py",),
        "py:percent",
        sniff_script,
        read_script,
        write_text,
        text_cell_spans,
        script_near_miss,
    ),
    SourceFormat(
        "markdown notebook",
        (".md",),
        "md",
        sniff_markdown,
        read_markdown,
        write_text,
        text_cell_spans,
        markdown_near_miss,
    ),
)


@dataclass(frozen=True)
class LoadedSource:
    """A parsed source with what the run record needs to know about it."""

    path: Path
    nb: NotebookNode
    sha256: str
    format: SourceFormat
    #: What the source declares it needs (docs/how-to/environments.md), or None.
    dependencies: Dependencies | None = None
    #: The bytes read (of a URL: its text, UTF-8): a check that needs the file's text (an
    #: edit's, :mod:`notebook_executor._review.edit`) works on them instead of reading again.
    data: bytes = field(default=b"", repr=False)


def find_format(path: str | os.PathLike[str]) -> SourceFormat | None:
    """The format of ``path`` by its suffix (any case), or None."""
    suffix = Path(path).suffix.lower()
    for fmt in FORMATS:
        if suffix in fmt.suffixes:
            return fmt
    return None


def format_for(path: str | os.PathLike[str]) -> SourceFormat:
    """Return the format of ``path`` by its extension, or raise NotebookSourceError."""
    fmt = find_format(path)
    if fmt is not None:
        return fmt
    if not is_url(path) and _is_dir(path):
        raise NotebookSourceError(os.fspath(path), _A_FOLDER)
    suffix = Path(path).suffix.lower()
    known = ", ".join(suffix for f in FORMATS for suffix in f.suffixes)
    raise NotebookSourceError(
        os.fspath(path),
        f"unsupported format {suffix or '(no extension)'!r}; expected one of {known}",
    )


def is_notebook(path: Path) -> bool:
    """Whether ``path`` (a file found in a folder) is a notebook source: its suffix names a
    format, and the format's sniffer accepts the head of its text."""
    return notebook_verdict(path)[0]


def notebook_verdict(path: Path) -> tuple[bool, str | None]:
    """``(is_notebook(path), why not)``: the reason is given for a file that looks like a
    notebook and is not one (a test module whose ``# %%`` lines are inside strings), None
    for any other file."""
    fmt = find_format(path)
    if fmt is None:
        return False, None
    if fmt.sniff is None:
        return path.is_file(), None  # a FIFO, a device, a socket named like one is none
    try:
        # At most 4 bytes a character: the head holds SNIFF_CHARS characters.
        head = regular_head(path, 4 * SNIFF_CHARS).decode("utf-8", "replace")[:SNIFF_CHARS]
    except OSError as exc:
        return False, f"unreadable: {exc.strerror or exc}"
    if fmt.sniff(head):
        return True, None
    return False, None if fmt.near_miss is None else fmt.near_miss(head)


def read_notebook(path: str | os.PathLike[str]) -> nbformat.NotebookNode:
    """Read any supported source (``.ipynb``, percent ``.py``, markdown ``.md``) as an
    nbformat 4 notebook: an ``nbformat.NotebookNode``, as docs/reference/api.md says.

    The run path reads sources as light nodes (:func:`load_source`, no nbformat import);
    this public reader hands back nbformat's own type, converted here at the boundary: for
    a 200-cell percent script, 2.3 ms to read and 3.5 ms to convert, once nbformat is
    imported (``python benchmarks/bench_read_notebook.py``). A run does not pay it.

    Raises
    ------
    NotebookSourceError
        The file is missing, unreadable, malformed or of an unsupported format.
    """
    import nbformat

    nb: nbformat.NotebookNode = nbformat.from_dict(load_source(path).nb)
    return nb


#: What a folder given as a notebook is told.
_A_FOLDER = (
    "is a folder, not a notebook: name a notebook file in it "
    "(`notebook-executor check FOLDER` finds and checks them all)"
)


def _is_dir(path: str | os.PathLike[str]) -> bool:
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def load_source(path: str | os.PathLike[str]) -> LoadedSource:
    """Read, parse and normalise a notebook source.

    Raises
    ------
    NotebookSourceError
        The file is missing, not a regular file, too large, not UTF-8, malformed, or of an
        unsupported format.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise NotebookSourceError(repr(path), f"not a path but {type(path).__name__}")
    notebook = os.fspath(path)
    fmt = format_for(_url_path(notebook) if is_url(notebook) else path)
    source_path = Path(path)
    if is_url(notebook):
        # Read by papermill's I/O handler for the scheme (s3://, gs://, https://, ...).
        data = read_url(notebook).encode("utf-8")
        return _loaded(notebook, source_path, data, fmt)
    try:
        size = source_path.stat().st_size
    except FileNotFoundError:
        raise NotebookSourceError(notebook, "no such file") from None
    except OSError as exc:
        raise NotebookSourceError(notebook, f"cannot read: {exc.strerror or exc}") from None
    if not source_path.is_file():
        raise NotebookSourceError(
            notebook, _A_FOLDER if source_path.is_dir() else "not a regular file"
        )
    if size > MAX_SOURCE_BYTES:
        raise NotebookSourceError(
            notebook, f"too large ({size} bytes; the limit is {MAX_SOURCE_BYTES} bytes)"
        )
    try:
        data = read_regular(source_path, MAX_SOURCE_BYTES)
    except OSError as exc:
        raise NotebookSourceError(notebook, f"cannot read: {exc.strerror or exc}") from None
    return _loaded(notebook, source_path, data, fmt)


def _url_path(url: str) -> str:
    """The path part of a URL, for its extension."""
    return url.split("?", 1)[0].split("#", 1)[0]


def _loaded(notebook: str, source_path: Path, data: bytes, fmt: SourceFormat) -> LoadedSource:
    if len(data) > MAX_SOURCE_BYTES:
        raise NotebookSourceError(
            notebook, f"too large ({len(data)} bytes; the limit is {MAX_SOURCE_BYTES} bytes)"
        )
    if fmt.is_text and len(data) > MAX_TEXT_SOURCE_BYTES:
        raise NotebookSourceError(
            notebook,
            f"too large for a {fmt.name} ({len(data)} bytes; the limit is "
            f"{MAX_TEXT_SOURCE_BYTES} bytes; a larger notebook is read as .ipynb)",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NotebookSourceError(
            notebook, f"not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None
    if "\x00" in text:
        raise NotebookSourceError(notebook, "not a text file (it contains NUL bytes)")
    digest = hashlib.sha256(data).hexdigest()
    nb = _parse_cached(notebook, text, fmt, digest)
    declared = declared_dependencies(notebook, text, nb, fmt)
    loaded = LoadedSource(
        path=source_path, nb=nb, sha256=digest, format=fmt, dependencies=declared, data=data
    )
    if logger.isEnabledFor(logging.INFO):  # ``-v``: telling markers from strings imports jupytext
        note = reading_note(loaded)
        if note is not None:
            logger.info("%s: %s", notebook, note)
    return loaded


def reading_note(loaded: LoadedSource) -> str | None:
    """How a script with no ``# %%`` cell marker (or an empty one) was read, which a reader
    would not guess: ``run -v`` logs it and ``inspect`` prints it. None for any other source."""
    if loaded.format.read is not read_script:
        return None
    text = loaded.data.decode("utf-8-sig", errors="replace")
    if not text.strip():
        return "read as an empty script: no cells"
    if sniff_script(text):
        return None
    cells = len(loaded.nb.cells)
    shape = loaded.nb.metadata.get("jupytext", {}).get("text_representation", {})
    how = f" (jupytext's {shape['format_name']} format)" if shape.get("format_name") else ""
    return (
        f"read as a script with no '# %%' cell markers{how}: "
        f"{'one cell' if cells == 1 else f'{cells} cells'}"
    )


def parse_source_text(notebook: str, text: str, fmt: SourceFormat) -> NotebookNode:
    """Parse ``text`` (a source's content, named ``notebook`` in errors) as :func:`load_source`
    does, without the cache."""
    return _parse(notebook, text, fmt)


#: Parsed sources by (format name, sha256): a sweep or a warm loop parses its notebook once.
_PARSED: OrderedDict[tuple[str, str], NotebookNode] = OrderedDict()
_PARSED_LOCK = threading.Lock()
_PARSED_MAX = 32


def _parse_cached(notebook: str, text: str, fmt: SourceFormat, digest: str) -> NotebookNode:
    """``_parse`` memoised on the bytes; every caller gets its own copy to change."""
    key = (fmt.name, digest)
    with _PARSED_LOCK:
        cached = _PARSED.get(key)
        if cached is not None:
            _PARSED.move_to_end(key)
    if cached is None:
        cached = _parse(notebook, text, fmt)
        with _PARSED_LOCK:
            _PARSED[key] = cached
            while len(_PARSED) > _PARSED_MAX:
                _PARSED.popitem(last=False)
    return copy.deepcopy(cached)


def _parse(notebook: str, text: str, fmt: SourceFormat) -> NotebookNode:
    return fmt.read(notebook, text, fmt)


def notebook_to_text(nb: NotebookNode, fmt: SourceFormat) -> str:
    """Serialise ``nb`` in format ``fmt``."""
    return fmt.write(nb, fmt)


def write_notebook(nb: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``nb`` to ``path`` in the format its extension names, atomically; return the path.

    ``nb`` is an nbformat 4 notebook: an ``nbformat.NotebookNode``, or the same as plain
    dicts and lists (as ``json.load`` gives it). A URL (``s3://...``) is written by
    papermill's I/O handler for its scheme.

    Raises
    ------
    NotebookSourceError
        ``path`` is not a path, names no format, or cannot be written (a file where a folder
        should be, no permission, a full disk); or ``nb`` is not an nbformat 4 notebook.
    """
    from .._notebook import NotebookNode, from_dict

    if not isinstance(path, (str, os.PathLike)):
        raise NotebookSourceError(repr(path), f"not a path but {type(path).__name__}")
    if not isinstance(nb, Mapping) or not isinstance(nb.get("cells"), list):
        raise NotebookSourceError(os.fspath(path), "nothing to write: not a notebook")
    # Plain dicts (or nbformat's nodes) become light nodes, as the writers read them; the
    # run path's own notebooks are written as they are (no copy on the hot path).
    node: NotebookNode = nb if isinstance(nb, NotebookNode) else from_dict(dict(nb))
    if not all(
        isinstance(cell, dict) and isinstance(cell.get("cell_type"), str) for cell in node["cells"]
    ):
        raise NotebookSourceError(
            os.fspath(path), "nothing to write: a cell without a cell_type is not nbformat 4"
        )
    if is_url(path):
        url = os.fspath(path)
        write_url(notebook_to_text(node, format_for(_url_path(url))), url)
        return Path(url)
    fmt = format_for(path)
    target = Path(path)
    problem = missing_folder(target)
    if problem:
        raise NotebookSourceError(os.fspath(path), f"cannot write: {problem}")
    text = notebook_to_text(node, fmt)
    # A final newline, as ``nbformat.write`` and ``jupytext.write`` end a file.
    text = text if text.endswith("\n") else text + "\n"
    try:
        atomic_write_text(target, text, private=False)
    except (OSError, ValueError) as exc:
        raise NotebookSourceError(os.fspath(path), f"cannot write: {first_line(exc)}") from None
    return target
