"""The ``.ipynb`` row of the format table: nbformat 4 JSON, read and written."""

from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING

from .._errors import NotebookSourceError
from .bounded import unencodable
from .parsing import (
    CELL_IDS_MINOR,
    NESTED_TOO_DEEP,
    first_line,
    normalised,
    parse_failure,
    with_cell_ids_version,
)

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .source_format import SourceFormat

__all__ = ["read_ipynb", "write_ipynb"]

#: A JSON escape of a UTF-16 surrogate (a pair spells a character beyond the BMP).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def read_ipynb(notebook: str, text: str, fmt: SourceFormat) -> NotebookNode:
    """Parse and validate an nbformat 4 document (``notebook`` names it in errors)."""
    import nbformat

    from .._notebook import from_dict

    try:
        raw = json.loads(text)
    except RecursionError:
        raise NotebookSourceError(notebook, f"not valid JSON ({NESTED_TOO_DEEP})") from None
    except ValueError as exc:
        raise NotebookSourceError(notebook, f"not valid JSON ({first_line(exc)})") from None
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
        raise NotebookSourceError(notebook, f"invalid notebook: {first_line(exc)}") from None
    except Exception as exc:  # a malformed document can break nbformat in many ways
        raise NotebookSourceError(notebook, f"invalid notebook: {parse_failure(exc)}") from None
    return normalised(nb)


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


def _with_whole_kernelspec(nb: NotebookNode) -> NotebookNode:
    """``nb`` to validate: a kernelspec naming only its language (``{"language": "python"}``)
    is one nbclient and papermill run (on the default kernel), so the schema's required
    ``name`` and ``display_name`` are lent to a shallow copy; ``nb`` itself keeps its own."""
    spec = nb.get("metadata", {}).get("kernelspec")
    if not isinstance(spec, dict) or ("name" in spec and "display_name" in spec):
        return nb
    whole = {"name": "", "display_name": "", **spec}
    return type(nb)({**nb, "metadata": type(nb)({**nb.metadata, "kernelspec": whole})})


def write_ipynb(nb: NotebookNode, fmt: SourceFormat) -> str:
    """``nb`` as nbformat writes it, naming the Python kernel when it names none."""
    import nbformat

    document = _with_kernelspec(nb)
    if document is nb and nb.get("nbformat_minor", 0) < CELL_IDS_MINOR:
        document = copy.deepcopy(nb)
    return str(nbformat.writes(with_cell_ids_version(document)))


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
