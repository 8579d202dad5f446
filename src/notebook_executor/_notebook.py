"""Notebooks as data: nbformat 4 cells and outputs built without importing nbformat.

Importing nbformat loads its schema validator, and with it jsonschema and whatever format
checkers are installed beside it. Next to JupyterLab that includes rfc3987-syntax, which builds
a grammar when imported: about 0.8 s before a command's kernel could start. The run path of a
text notebook needs none of that. It needs a dict whose keys read as attributes, the few
constructors of cells and outputs, and nbformat's rules for storing text as lines.
:class:`NotebookNode` behaves like nbformat's class of the same name: a mapping stored in it
becomes a node. The constructors build what nbformat's would, with the same keys and defaults.

nbformat itself is still used where its schema is wanted: reading and validating ``.ipynb``
files, and anything given to or taken from other libraries.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "NotebookNode",
    "code_cell_indices",
    "from_dict",
    "is_blank",
    "new_code_cell",
    "new_markdown_cell",
    "new_notebook",
    "new_output",
    "notebook_language",
    "output_from_msg",
    "random_cell_id",
    "skipped",
    "strip_transient",
]

#: The nbformat version written: 4.5 is the first with cell ids.
NBFORMAT = 4
NBFORMAT_MINOR = 5

#: Values ``copy.deepcopy`` returns as they are.
_ATOMIC = (str, int, float, bool, bytes, type(None))


class NotebookNode(dict[str, Any]):
    """A notebook, cell or output: a dict whose keys also read and write as attributes.

    As with :class:`nbformat.NotebookNode`, a mapping stored in a node is stored as a node, so
    ``cell.metadata.tags`` works however the metadata was assigned. nbformat's functions take
    these nodes as they take their own.
    """

    __slots__ = ()

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        try:
            del self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, Mapping) and not isinstance(value, NotebookNode):
            value = from_dict(value)
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """``dict.update``, storing mappings as nodes."""
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        """``dict.setdefault``, storing a mapping default as a node."""
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> NotebookNode:
        """A shallow copy, as a node."""
        return NotebookNode(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> NotebookNode:
        new = NotebookNode()
        memo[id(self)] = new
        for key, value in self.items():
            if type(value) in _ATOMIC:
                dict.__setitem__(new, key, value)
            else:
                dict.__setitem__(new, key, copy.deepcopy(value, memo))
        return new


def from_dict(value: Any) -> Any:
    """``value`` with every dict in it, at any depth, made a :class:`NotebookNode` (lists and
    tuples become lists); what is neither comes back as it is."""
    if isinstance(value, dict):
        node = NotebookNode()
        for key, item in value.items():
            dict.__setitem__(node, key, from_dict(item))
        return node
    if isinstance(value, (list, tuple)):
        return [from_dict(item) for item in value]
    return value


def _node(value: Mapping[str, Any]) -> NotebookNode:
    node: NotebookNode = from_dict(dict(value))
    return node


def random_cell_id() -> str:
    """A new cell id, as nbformat makes them (eight hex digits)."""
    return uuid.uuid4().hex[:8]


def new_code_cell(
    source: str = "", *, metadata: Mapping[str, Any] | None = None, cell_id: str | None = None
) -> NotebookNode:
    """A code cell that has not run, as :func:`nbformat.v4.new_code_cell` makes it."""
    return _node(
        {
            "id": cell_id or random_cell_id(),
            "cell_type": "code",
            "metadata": dict(metadata or {}),
            "execution_count": None,
            "source": source,
            "outputs": [],
        }
    )


def new_markdown_cell(
    source: str = "", *, metadata: Mapping[str, Any] | None = None, cell_id: str | None = None
) -> NotebookNode:
    """A markdown cell, as :func:`nbformat.v4.new_markdown_cell` makes it."""
    return _node(
        {
            "id": cell_id or random_cell_id(),
            "cell_type": "markdown",
            "metadata": dict(metadata or {}),
            "source": source,
        }
    )


def new_notebook(
    cells: Iterable[NotebookNode] = (), *, metadata: Mapping[str, Any] | None = None
) -> NotebookNode:
    """An nbformat 4.5 notebook, as :func:`nbformat.v4.new_notebook` makes it."""
    nb = _node(
        {"nbformat": NBFORMAT, "nbformat_minor": NBFORMAT_MINOR, "metadata": dict(metadata or {})}
    )
    nb["cells"] = list(cells)
    return nb


def new_output(output_type: str, **fields: Any) -> NotebookNode:
    """An output of ``output_type`` with nbformat's defaults, updated by ``fields``."""
    defaults: dict[str, Any]
    if output_type == "stream":
        defaults = {"name": "stdout", "text": ""}
    elif output_type == "display_data":
        defaults = {"metadata": {}, "data": {}}
    elif output_type == "execute_result":
        defaults = {"metadata": {}, "data": {}, "execution_count": None}
    elif output_type == "error":
        defaults = {"ename": "NotImplementedError", "evalue": "", "traceback": []}
    else:
        raise ValueError(f"not an output type: {output_type!r}")
    defaults.update(fields)
    return _node({"output_type": output_type, **defaults})


def output_from_msg(msg: Mapping[str, Any]) -> NotebookNode:
    """The output an IOPub message carries (``execute_result``, ``stream``, ``display_data``
    or ``error``), as :func:`nbformat.v4.output_from_msg` makes it; raises ValueError for any
    other message."""
    kind = msg["header"]["msg_type"]
    content = msg["content"]
    if kind == "execute_result":
        return new_output(
            kind,
            metadata=content["metadata"],
            data=content["data"],
            execution_count=content["execution_count"],
        )
    if kind == "stream":
        return new_output(kind, name=content["name"], text=content["text"])
    if kind == "display_data":
        return new_output(kind, metadata=content["metadata"], data=content["data"])
    if kind == "error":
        return new_output(
            kind, ename=content["ename"], evalue=content["evalue"], traceback=content["traceback"]
        )
    raise ValueError(f"not an output message: {kind!r}")


def strip_transient(nb: NotebookNode) -> NotebookNode:
    """``nb`` without the values nbformat never stores in a file (as
    :func:`nbformat.v4.rwbase.strip_transient`)."""
    metadata = nb.get("metadata", {})
    for key in ("orig_nbformat", "orig_nbformat_minor", "signature"):
        metadata.pop(key, None)
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("trusted", None)
    return nb


def notebook_language(nb: NotebookNode) -> str:
    """The language ``nb`` says it is in (its kernelspec's, else its ``language_info``'s,
    else jupytext's), lower case; ``python`` when it says none."""
    metadata = nb.metadata
    return str(
        metadata.get("kernelspec", {}).get("language")
        or metadata.get("language_info", {}).get("name")
        or metadata.get("jupytext", {}).get("main_language")
        or "python"
    ).lower()


def skipped(cell: Mapping[str, Any]) -> bool:
    """Whether ``cell`` is tagged ``skip-execution`` (nbclient's and nbmake's convention)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and "skip-execution" in tags


def is_blank(cell: Mapping[str, Any]) -> bool:
    """Whether a code cell has nothing to run (never sent to the kernel, as with nbclient)."""
    return not str(cell.get("source", "")).strip()


def code_cell_indices(nb: NotebookNode) -> list[int]:
    """The code cells a run executes, in order (not those tagged ``skip-execution``)."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and not skipped(c)]
