"""Edit one cell of a source file in place, in the file's own format.

Every other cell's text stays byte-identical: the file is never round-tripped through a
converter. Instead the text is cut into cell spans (for ``.ipynb`` the elements of the JSON
``cells`` array; for text formats the line ranges jupytext's own cell readers consume), the
changed span alone is replaced, and the result is read back: when the notebook read from the new
text does not have exactly the intended cells (a new source holding ``# %%`` in a percent
script, a fence in markdown...), nothing is written and :class:`NotebookSourceError` says why.

Indices are positions in ``read_notebook(path).cells``: those of a result's
``failed_cell.index``. In a logbook the YAML front matter is cell 0 (read as the parameters
cell); it is edited by hand, not through these functions.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import (
    EditConflictError,
    InvalidArgumentError,
    NotebookSourceError,
)
from .._sources.bounded import unencodable
from .._sources.formats import (
    LoadedSource,
    SourceFormat,
    format_for,
    load_source,
    parse_source_text,
)
from .._sources.spans import UnwritableText
from .edit_ipynb import EditRequest, change_ipynb

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["CELL_TYPES", "checked_edit", "delete_cell", "edit_cell", "insert_cell"]

PathLike = str | os.PathLike[str]

CELL_TYPES = ("code", "markdown", "raw")

#: ``(cell_type, source)`` of each cell: what an edit must leave as intended.
_Shape = list[tuple[str, str]]


def edit_cell(
    path: PathLike, index: int, source: str, *, expect: str | None = None
) -> NotebookNode:
    """Replace the source of cell ``index`` of ``path``; return the notebook read back.

    Parameters
    ----------
    path : path
        ``.ipynb``, percent ``.py`` or markdown ``.md`` source; changed in place.
    index : int
        Position in ``read_notebook(path).cells`` (as in a result's ``failed_cell.index``).
    source : str
        The cell's new text.
    expect : str, optional
        The source the caller read for that cell; when the file now holds another text, the
        edit is refused (someone else changed it) and nothing is written.

    Raises
    ------
    NotebookSourceError
        Unreadable source, or a new text that would change the notebook's cells.
    NotebookExecutorError
        Index out of range, or ``expect`` does not match.
    """
    _check_text("source", source)
    return _write(_changed(path, "edit", index, source, None, expect))


def insert_cell(path: PathLike, index: int, source: str, cell_type: str = "code") -> NotebookNode:
    """Insert a new cell at position ``index`` (``len(cells)`` appends); return the notebook.

    Same rules as :func:`edit_cell`; ``cell_type`` is ``"code"``, ``"markdown"`` or ``"raw"``.
    """
    _check_text("source", source)
    if cell_type not in CELL_TYPES:
        raise InvalidArgumentError(
            f"cell_type must be one of {', '.join(CELL_TYPES)}, got {cell_type!r}"
        )
    return _write(_changed(path, "insert", index, source, cell_type, None))


def delete_cell(path: PathLike, index: int, *, expect: str | None = None) -> NotebookNode:
    """Delete cell ``index`` of ``path``; return the notebook read back.

    Same rules as :func:`edit_cell`.
    """
    return _write(_changed(path, "delete", index, None, None, expect))


def _check_text(name: str, value: object) -> None:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be a str, got {type(value).__name__}")
    problem = unencodable(value)
    if problem:
        raise InvalidArgumentError(f"{name}: {problem}; a notebook file cannot hold it")


def checked_edit(
    path: PathLike, index: object, source: str, *, loaded: LoadedSource | None = None
) -> str:
    """The source cell ``index`` of ``path`` would hold after :func:`edit_cell` with
    ``source``, checked as :func:`edit_cell` checks it; nothing is written. ``loaded`` is the
    source already read (the planner's): then the file is not read again."""
    _check_text("source", source)
    return _changed(path, "edit", index, source, None, None, loaded)[3] or ""


def _write(change: tuple[Path, bytes, bytes, str | None]) -> NotebookNode:
    """Write a change :func:`_changed` made, and read the notebook back."""
    target, data, new, _ = change
    _replace_file(target, data, new)
    return load_source(target).nb


def _changed(
    path: PathLike,
    op: str,
    index: object,
    source: str | None,
    cell_type: str | None,
    expect: str | None,
    loaded: LoadedSource | None = None,
) -> tuple[Path, bytes, bytes, str | None]:
    """The file, its bytes now and after the change, and the changed cell's new source;
    ``loaded`` is the file already read (else it is read now, once)."""
    shown = os.fspath(path)
    fmt = format_for(path)
    if isinstance(index, bool) or not isinstance(index, int):
        raise InvalidArgumentError(f"cell index must be an int, got {index!r}")
    if expect is not None:
        _check_text("expect", expect)
    target = Path(path)
    if loaded is None:
        loaded = load_source(target)
    data = loaded.data
    nb = loaded.nb
    count = len(nb.cells)
    limit = count if op == "insert" else count - 1
    if not 0 <= index <= limit:
        have = f"cells 0-{count - 1}" if count else "no cells"
        raise InvalidArgumentError(
            f"{shown}: cell index {index} is out of range (the notebook has {have})",
            argument="index",
        )
    if expect is not None and nb.cells[index].source != expect:
        raise EditConflictError(
            f"{shown}: cell {index} changed since it was read (its source is not the expected "
            "one); read the notebook again before editing"
        )
    if source is not None and fmt.is_text:
        # A text format ends a cell's source at its last line: the line breaks after it are
        # the gap to the next cell, and reading the file back drops them. The edit keeps the
        # source as the file can hold it, so "z = 1\n" is the same edit as "z = 1".
        source = source.rstrip("\r\n")
    request = EditRequest(op, index, source, cell_type)
    shape: _Shape = [(cell.cell_type, cell.source) for cell in nb.cells]
    if op == "edit":
        assert source is not None
        shape[index] = (shape[index][0], source)
    elif op == "insert":
        assert source is not None and cell_type is not None
        shape.insert(index, (cell_type, source))
    else:
        del shape[index]
    bom = data.startswith(b"\xef\xbb\xbf")
    text = data.decode("utf-8-sig")
    if fmt.spans is None:
        new_text = change_ipynb(shown, text, request)
    else:
        try:
            new_text = _change_text(shown, text, fmt, nb, request)
        except UnwritableText as exc:
            raise NotebookSourceError(
                shown,
                f"the {request.op} of cell {request.index} cannot be written in this format "
                f"as given ({exc}); nothing was written",
            ) from None
    _verify(shown, new_text, fmt, shape, request)
    return target, data, (b"\xef\xbb\xbf" if bom else b"") + new_text.encode("utf-8"), source


def _verify(shown: str, text: str, fmt: SourceFormat, shape: _Shape, request: EditRequest) -> None:
    """Read ``text`` back; refuse unless its cells are exactly ``shape``."""
    try:
        nb = parse_source_text(shown, text, fmt)
    except NotebookSourceError as exc:
        raise NotebookSourceError(
            shown, f"the {request.op} would make the file unreadable ({exc.reason}); not written"
        ) from None
    got = [(cell.cell_type, cell.source) for cell in nb.cells]
    if got == shape:
        return
    what = {"edit": "new source of", "insert": "inserted", "delete": "deletion of"}[request.op]
    if len(got) == len(shape):
        changed = next(
            i for i, (want, have) in enumerate(zip(shape, got, strict=True)) if want != have
        )
        raise NotebookSourceError(
            shown,
            f"the {what} cell {request.index} cannot be written in this format as given: "
            f"cell {changed} would read back as {_brief(_cell_text(got[changed]))} instead of "
            f"{_brief(_cell_text(shape[changed]))}; nothing was written",
        )
    hint = ""
    if request.source is not None and fmt.is_text:
        hint = (
            "; it holds text this format reads as a cell boundary (such as '# %%' in a "
            "percent script, or a fence or '+++' in markdown)"
        )
    raise NotebookSourceError(
        shown,
        f"the {what} cell {request.index} would change the notebook's other cells "
        f"({len(shape)} cells intended, {len(got)} read back){hint}; nothing was written",
    )


def _cell_text(cell: tuple[str, str]) -> str:
    return f"{cell[0]} {cell[1]!r}"


def _brief(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _replace_file(target: Path, old: bytes, new: bytes) -> None:
    """Write ``new`` over ``target`` atomically, keeping its mode; refuse when the file no
    longer holds ``old`` (another writer changed it meanwhile)."""
    mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(new)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(mode)
        if target.read_bytes() != old:
            raise EditConflictError(
                f"{target}: the file changed while it was being edited; nothing was written"
            )
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- text formats: the line ranges of cells -------------------------------------------------


@dataclass
class _TextLayout:
    lines: list[str]  # with their line ends
    #: [start, end) line range of each cell; spans are contiguous and cover everything
    #: after the header.
    spans: list[tuple[int, int]]
    #: the first cell is the front matter (a logbook's parameters)
    header_is_cell: bool


def _layout(shown: str, text: str, fmt: SourceFormat, nb: NotebookNode) -> _TextLayout:
    lines = text.splitlines(keepends=True)
    assert fmt.spans is not None
    header_end, spans = fmt.spans(text, nb, fmt)
    header_is_cell = len(spans) + 1 == len(nb.cells) and header_end > 0
    if header_is_cell:
        spans.insert(0, (0, header_end))
    if len(spans) != len(nb.cells):
        raise NotebookSourceError(
            shown, "cannot locate its cells in the text for a surgical edit; nothing was written"
        )
    return _TextLayout(lines, spans, header_is_cell)


def _change_text(
    shown: str, text: str, fmt: SourceFormat, nb: NotebookNode, request: EditRequest
) -> str:
    import copy

    import nbformat

    from .._sources.spans import Renderer

    layout = _layout(shown, text, fmt, nb)
    index = request.index
    if layout.header_is_cell and index == 0:
        raise InvalidArgumentError(
            f"{shown}: cell 0 is the front matter (the logbook's parameters); edit it by hand"
        )
    renderer = Renderer(nb, fmt)
    lines = layout.lines
    cells = list(nb.cells)
    first = 1 if layout.header_is_cell else 0
    previous = cells[index - 1] if index - 1 >= first else None
    new_cell = None
    if request.op == "edit":
        assert request.source is not None
        new_cell = copy.deepcopy(cells[index])
        new_cell.source = request.source
    elif request.op == "insert":
        assert request.source is not None and request.cell_type is not None
        maker = {
            "code": nbformat.v4.new_code_cell,
            "markdown": nbformat.v4.new_markdown_cell,
            "raw": nbformat.v4.new_raw_cell,
        }[request.cell_type]
        new_cell = maker(request.source)  # type: ignore[no-untyped-call]
    if request.op == "insert":
        start = end = layout.spans[index][0] if index < len(cells) else len(lines)
        following = cells[index] if index < len(cells) else None
    else:
        start, end = layout.spans[index]
        following = cells[index + 1] if index + 1 < len(cells) else None
    before = lines[:start]
    after = lines[end:]
    middle: list[str] = []
    if request.op == "edit":
        # Blank lines that open the cell's span (before a MyST markdown cell) stay.
        middle = _leading_blank(lines[start:end])
    # A file with Windows line ends keeps them in the new text too.
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    if new_cell is not None:
        body = renderer.cell_text(previous, new_cell).replace("\n", eol)
        if before and not before[-1].endswith(("\n", "\r")):
            before[-1] += eol
        if request.op == "insert" and previous is not None:
            blanks, _ = renderer.joint(previous, new_cell)
            before += [eol] * max(0, blanks - len(_trailing_blank(before)))
        middle = [*middle, body]
        tail_blanks = _trailing_blank(lines[start:end]) if request.op == "edit" else []
        joined = new_cell
    else:
        tail_blanks = []
        joined = previous
    if following is not None:
        blanks, marker = renderer.joint(joined, following)
        have = len(tail_blanks) if new_cell is not None else len(_trailing_blank(before))
        have += len(_leading_blank(after))
        gap = [eol] * max(0, blanks - have)
        if marker and not _starts_with(after, marker):
            gap.append(marker.replace("\n", eol))
        if new_cell is not None:
            middle += tail_blanks + gap
        else:
            before += gap
    elif new_cell is None:
        # The last cell went: the cell now last ends the file, with no blank line after it.
        while before and not before[-1].strip() and len(before) > 1:
            before.pop()
    elif tail_blanks:
        middle += tail_blanks
    elif request.op == "edit" and end == len(lines) and not lines[-1].endswith(("\n", "\r")):
        middle[-1] = middle[-1].rstrip("\r\n")
    return "".join(before + middle + after)


def _starts_with(lines: list[str], marker: str) -> bool:
    text = "".join(lines).lstrip("\n")
    return text.startswith(marker.rstrip("\n"))


def _leading_blank(span: list[str]) -> list[str]:
    blanks: list[str] = []
    for line in span:
        if line.strip():
            break
        blanks.append(line)
    return blanks


def _trailing_blank(span: list[str]) -> list[str]:
    blanks: list[str] = []
    for line in reversed(span):
        if line.strip():
            break
        blanks.insert(0, line)
    return blanks
