"""Read and write notebook sources in any supported format.

The formats are data (:data:`FORMATS`): ``.ipynb`` (nbformat 4), Python scripts (``.py``:
read in the format jupytext detects, percent, light, sphinx-gallery...; written as percent) and
markdown notebooks (``.md``, jupytext markdown or MyST). Markdown "logbook"
templates declare their parameters in a YAML front matter; jupytext reads that front matter as a
raw cell, which :func:`load_source` turns into a code cell tagged ``parameters`` so the rest of the
package sees one shape of notebook whatever the source format.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import keyword
import os
import re
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import NotebookSourceError
from .bounded import (
    MAX_SOURCE_BYTES,
    MAX_TEXT_SOURCE_BYTES,
    YamlRefused,
    load_yaml,
    unencodable,
)
from .files import atomic_write_text, missing_folder
from .literals import to_literal
from .percent import read_plain_percent
from .remote import is_url, read_url, write_url

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "FORMATS",
    "LoadedSource",
    "SourceFormat",
    "format_for",
    "load_source",
    "notebook_to_text",
    "parse_source_text",
    "read_notebook",
    "write_notebook",
]


@dataclass(frozen=True)
class SourceFormat:
    """One supported source format."""

    extension: str
    name: str
    #: jupytext format for text formats; None means nbformat JSON.
    jupytext_format: str | None


FORMATS: tuple[SourceFormat, ...] = (
    SourceFormat(".ipynb", "notebook", None),
    SourceFormat(".py", "percent script", "py:percent"),
    SourceFormat(".md", "markdown notebook", "md"),
)


@dataclass(frozen=True)
class LoadedSource:
    """A parsed source with what the run record needs to know about it."""

    path: Path
    nb: NotebookNode
    sha256: str
    format: SourceFormat


def format_for(path: str | os.PathLike[str]) -> SourceFormat:
    """Return the format of ``path`` by its extension, or raise NotebookSourceError."""
    suffix = Path(path).suffix.lower()
    for fmt in FORMATS:
        if fmt.extension == suffix:
            return fmt
    known = ", ".join(f.extension for f in FORMATS)
    raise NotebookSourceError(
        os.fspath(path),
        f"unsupported format {suffix or '(no extension)'!r}; expected one of {known}",
    )


def read_notebook(path: str | os.PathLike[str]) -> NotebookNode:
    """Read any supported source as an nbformat 4 notebook."""
    return load_source(path).nb


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
        raise NotebookSourceError(notebook, "not a regular file")
    if size > MAX_SOURCE_BYTES:
        raise NotebookSourceError(
            notebook, f"too large ({size} bytes; the limit is {MAX_SOURCE_BYTES} bytes)"
        )
    try:
        data = source_path.read_bytes()
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
    if fmt.jupytext_format is not None and len(data) > MAX_TEXT_SOURCE_BYTES:
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
    return LoadedSource(path=source_path, nb=nb, sha256=digest, format=fmt)


def parse_source_text(notebook: str, text: str, fmt: SourceFormat) -> NotebookNode:
    """Parse ``text`` (a source's content, named ``notebook`` in errors) as :func:`load_source`
    does, without the cache."""
    return _parse(notebook, text, fmt)


#: Parsed sources by (extension, sha256): a sweep or a warm loop parses its notebook once.
_PARSED: OrderedDict[tuple[str, str], NotebookNode] = OrderedDict()
_PARSED_LOCK = threading.Lock()
_PARSED_MAX = 32


def _parse_cached(notebook: str, text: str, fmt: SourceFormat, digest: str) -> NotebookNode:
    """``_parse`` memoised on the bytes; every caller gets its own copy to change."""
    key = (fmt.extension, digest)
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
    if fmt.jupytext_format is None:
        return _parse_ipynb(notebook, text)
    return _parse_text(notebook, text, fmt)


def _parse_ipynb(notebook: str, text: str) -> NotebookNode:
    import nbformat

    from .._notebook import from_dict

    try:
        raw = json.loads(text)
    except RecursionError:
        raise NotebookSourceError(notebook, f"not valid JSON ({NESTED_TOO_DEEP})") from None
    except ValueError as exc:
        raise NotebookSourceError(notebook, f"not valid JSON ({_first_line(exc)})") from None
    if _SURROGATE_ESCAPE.search(text):
        # JSON may spell a lone surrogate ("\ud800"), which no UTF-8 file can hold: the run
        # records could not be written. Only a document with such an escape is checked.
        problem = unencodable(json.dumps(raw, ensure_ascii=False))
        if problem:
            raise NotebookSourceError(notebook, problem)
    if not isinstance(raw, dict) or ("cells" not in raw and "worksheets" not in raw):
        raise NotebookSourceError(notebook, "not a notebook (a JSON object with 'cells' expected)")
    major = raw.get("nbformat")
    if major != 4:
        raise NotebookSourceError(
            notebook, f"nbformat {major!r} is not supported (nbformat 4 notebooks only)"
        )
    _check_shape(notebook, raw)
    try:
        from nbformat.v4.rwbase import rejoin_lines

        nb: NotebookNode = rejoin_lines(from_dict(raw))
        nbformat.validate(_with_whole_kernelspec(nb))
    except nbformat.ValidationError as exc:
        raise NotebookSourceError(notebook, f"invalid notebook: {_first_line(exc)}") from None
    except Exception as exc:  # a malformed document can break nbformat in many ways
        raise NotebookSourceError(notebook, f"invalid notebook: {_parse_failure(exc)}") from None
    return _normalised(nb)


#: What a source nested deeper than the parsers go is told.
NESTED_TOO_DEEP = "it is nested too deep"


def _check_shape(notebook: str, raw: dict[str, object]) -> None:
    """Refuse the shapes that would break nbformat before its schema check can name them."""
    cells = raw.get("cells", [])
    if not isinstance(cells, list):
        raise NotebookSourceError(
            notebook, f"invalid notebook: 'cells' must be a list, got {type(cells).__name__}"
        )
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise NotebookSourceError(
                notebook,
                f"invalid notebook: cell {index} is a {type(cell).__name__}, not an object",
            )
        if not isinstance(cell.get("metadata", {}), dict):
            raise NotebookSourceError(
                notebook, f"invalid notebook: the metadata of cell {index} is not an object"
            )
    if not isinstance(raw.get("metadata", {}), dict):
        raise NotebookSourceError(notebook, "invalid notebook: its metadata is not an object")


def _parse_failure(exc: BaseException) -> str:
    """A parser's failure in the user's terms: no names of Python internals."""
    import yaml

    if isinstance(exc, RecursionError):
        return NESTED_TOO_DEEP
    if isinstance(exc, yaml.YAMLError):
        return f"its YAML header is not valid YAML ({_first_line(exc)})"
    if isinstance(exc, (AttributeError, TypeError, KeyError, IndexError)):
        return "its header or a cell's metadata holds a value of the wrong type"
    return _first_line(exc)


#: A JSON escape of a UTF-16 surrogate (a pair spells a character beyond the BMP).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _with_whole_kernelspec(nb: NotebookNode) -> NotebookNode:
    """``nb`` to validate: a kernelspec naming only its language (``{"language": "python"}``)
    is one nbclient and papermill run (on the default kernel), so the schema's required
    ``name`` and ``display_name`` are lent to a shallow copy; ``nb`` itself keeps its own."""
    spec = nb.get("metadata", {}).get("kernelspec")
    if not isinstance(spec, dict) or ("name" in spec and "display_name" in spec):
        return nb
    whole = {"name": "", "display_name": "", **spec}
    return type(nb)({**nb, "metadata": type(nb)({**nb.metadata, "kernelspec": whole})})


def _parse_text(notebook: str, text: str, fmt: SourceFormat) -> NotebookNode:
    from .._notebook import from_dict

    if fmt.extension == ".py":
        plain = read_plain_percent(text)
        if plain is not None:
            return _normalised(plain)
    import jupytext

    jupytext_format = fmt.jupytext_format
    assert jupytext_format is not None
    if fmt.extension == ".py":
        # As ``jupytext.read`` does: the script's own format, detected (percent, light,
        # sphinx-gallery, hydrogen...), never a light script read as one percent cell.
        jupytext_format = "py"
    mixed_lexers = False
    if fmt.extension == ".md" and "```{code-cell}" in text:
        jupytext_format = "md:myst"
        mixed_lexers = _check_one_language(notebook, text)
    try:
        with warnings.catch_warnings() if mixed_lexers else contextlib.nullcontext():
            if mixed_lexers:
                # Names of one language (python, ipython3): checked, nothing to warn about.
                warnings.filterwarnings("ignore", "All code cells in a MyST notebook")
            nb = from_dict(jupytext.reads(text, fmt=jupytext_format))
    except Exception as exc:  # jupytext raises many types for malformed text
        raise NotebookSourceError(
            notebook, f"cannot parse as {fmt.name}: {_parse_failure(exc)}"
        ) from None
    _translate_front_matter(notebook, nb)
    return _normalised(nb)


#: A MyST code cell's opening fence at the start of a line, and its language.
_MYST_CODE_CELL = re.compile(r"^(?:`{3,}|~{3,})\{code-cell\}[ \t]*(\S*)", re.MULTILINE)


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


def _normalised(nb: NotebookNode) -> NotebookNode:
    # Every cell gets an id, so later stages need no special cases; ids exist from nbformat
    # 4.5 on, so an older nb becomes a 4.5 one (or it would no longer validate).
    from .._notebook import random_cell_id

    for cell in nb.cells:
        if "id" not in cell:
            cell["id"] = random_cell_id()
    return _with_cell_ids_version(nb)


#: The nbformat minor version that introduced cell ids.
_CELL_IDS_MINOR = 5


def _with_cell_ids_version(nb: NotebookNode) -> NotebookNode:
    """``nb`` marked nbformat 4.5 when its cells have ids and it says an older 4.x."""
    old = nb.get("nbformat") == 4 and nb.get("nbformat_minor", 0) < _CELL_IDS_MINOR
    if old and any("id" in cell for cell in nb.get("cells", ())):
        nb["nbformat_minor"] = _CELL_IDS_MINOR
    return nb


_PARAMETER_LINE = re.compile(r"^\s+([^\s:#][^:#]*?)\s*:.*?\s#\s?(?P<help>.*)$")


def _translate_front_matter(notebook: str, nb: NotebookNode) -> None:
    """Turn a logbook front matter (a raw first cell) into a ``parameters`` code cell."""
    import yaml

    from .._notebook import new_code_cell

    if not nb.cells or nb.cells[0].cell_type != "raw":
        return
    text = nb.cells[0].source.strip()
    if not (text.startswith("---") and text.endswith("---") and len(text) >= 6):
        return
    body = text[3:-3]
    try:
        front = load_yaml(body)
    except YamlRefused as exc:
        raise NotebookSourceError(notebook, f"front matter refused: {exc}") from None
    except yaml.YAMLError as exc:
        if re.search(r"^parameters\s*:", body, re.MULTILINE):
            raise NotebookSourceError(
                notebook, f"front matter is not valid YAML: {_first_line(exc)}"
            ) from None
        return
    if not isinstance(front, dict) or "parameters" not in front:
        return
    declared = front.pop("parameters")
    if declared is None:
        declared = {}
    if not isinstance(declared, dict):
        raise NotebookSourceError(
            notebook, "front matter 'parameters' must be a mapping of name to default"
        )
    helps = _front_matter_helps(body)
    lines = []
    for name, default in declared.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise NotebookSourceError(
                notebook, f"front matter parameter {name!r} is not a valid Python name"
            )
        if default == "...":
            literal = "..."
        else:
            try:
                literal = to_literal(default)
            except TypeError as exc:
                raise NotebookSourceError(
                    notebook, f"front matter parameter {name!r}: {exc}; quote it as a string"
                ) from None
        comment = f"  # {helps[name]}" if helps.get(name) else ""
        lines.append(f"{name} = {literal}{comment}")
    cell = new_code_cell("\n".join(lines), metadata={"tags": ["parameters"]})
    nb.cells[0] = cell
    # Present (maybe empty) on every logbook: it is what makes placeholders apply.
    nb.metadata["front_matter"] = json.loads(json.dumps(_string_keys(front), default=str))


def _string_keys(value: object) -> object:
    """YAML keys may be dates or numbers; JSON (and notebook metadata) needs strings."""
    if isinstance(value, dict):
        return {str(key): _string_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_string_keys(item) for item in value]
    return value


def _front_matter_helps(body: str) -> dict[str, str]:
    helps: dict[str, str] = {}
    inside = False
    for line in body.splitlines():
        if re.match(r"^parameters\s*:", line):
            inside = True
            continue
        if inside and line and not line[0].isspace():
            break
        match = _PARAMETER_LINE.match(line) if inside else None
        if match:
            helps[match.group(1).strip()] = match.group("help").strip()
    return helps


def notebook_to_text(nb: NotebookNode, fmt: SourceFormat) -> str:
    """Serialise ``nb`` in format ``fmt``."""
    if fmt.jupytext_format is None:
        import nbformat

        document = _with_kernelspec(nb)
        if document is nb and nb.get("nbformat_minor", 0) < _CELL_IDS_MINOR:
            document = copy.deepcopy(nb)
        return str(nbformat.writes(_with_cell_ids_version(document)))
    import jupytext
    import nbformat

    # As nbformat's own nodes: jupytext writes metadata with YAML representers for those.
    nb = nbformat.from_dict(copy.deepcopy(nb))
    # A notebook read from text carries jupytext's cell filter for that text, which may drop
    # all cell metadata; the tags (``parameters`` above all) must survive a conversion.
    nb.metadata.get("jupytext", {}).pop("cell_metadata_filter", None)
    jupytext_format = fmt.jupytext_format
    if fmt.extension == ".md":
        representation = nb.metadata.get("jupytext", {}).get("text_representation", {})
        if representation.get("format_name") == "myst":
            jupytext_format = "md:myst"
    return str(jupytext.writes(nb, fmt=jupytext_format))


def _with_kernelspec(nb: NotebookNode) -> NotebookNode:
    """A copy of ``nb`` naming the Python kernel when it names none, as Jupyter and
    papermill expect of an ``.ipynb``."""
    if nb.metadata.get("kernelspec"):
        return nb
    language = nb.metadata.get("jupytext", {}).get("main_language", "python")
    if language != "python":
        return nb
    copied = copy.deepcopy(nb)
    copied.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    copied.metadata.setdefault("language_info", {"name": "python"})
    return copied


def write_notebook(nb: NotebookNode, path: str | os.PathLike[str]) -> Path:
    """Write ``nb`` to ``path`` in the format its extension names, atomically.

    A URL (``s3://...``) is written by papermill's I/O handler for its scheme. Raises
    NotebookSourceError when ``path`` is not a path, names no format, or cannot be written (a
    file where a folder should be, no permission, a full disk).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise NotebookSourceError(repr(path), f"not a path but {type(path).__name__}")
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookSourceError(os.fspath(path), "nothing to write: not a notebook")
    if is_url(path):
        url = os.fspath(path)
        write_url(notebook_to_text(nb, format_for(_url_path(url))), url)
        return Path(url)
    fmt = format_for(path)
    target = Path(path)
    problem = missing_folder(target)
    if problem:
        raise NotebookSourceError(os.fspath(path), f"cannot write: {problem}")
    text = notebook_to_text(nb, fmt)
    # A final newline, as ``nbformat.write`` and ``jupytext.write`` end a file.
    text = text if text.endswith("\n") else text + "\n"
    try:
        atomic_write_text(target, text, private=False)
    except (OSError, ValueError) as exc:
        raise NotebookSourceError(os.fspath(path), f"cannot write: {_first_line(exc)}") from None
    return target


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
