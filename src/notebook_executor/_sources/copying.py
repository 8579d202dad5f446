"""Deep copies of notebooks, several times faster than ``copy.deepcopy``.

A run copies its notebook twice on the way (the parsed source, then the executed notebook that
is scrubbed for storage). A notebook is a tree of JSON values: nodes, lists, dicts and scalars,
so it is copied by walking that tree, without ``deepcopy``'s memo and dispatch. The copy has the
same containers as the original (a node stays a node, a plain dict a plain dict), as
``copy.deepcopy`` gives; any other value in the tree is handed to ``copy.deepcopy``, and so is a
tree that is not made of this package's nodes (nbformat's, say).
"""

from __future__ import annotations

import copy
from typing import Any

from .._notebook import NotebookNode

__all__ = ["copy_notebook"]

#: Values ``copy.deepcopy`` returns as they are.
_ATOMIC = frozenset({str, int, float, bool, bytes, type(None), complex})


def copy_notebook(nb: NotebookNode) -> NotebookNode:
    """A deep copy of ``nb`` (or of any node of one), equal to ``copy.deepcopy(nb)``.

    Unlike ``deepcopy``, an object that appears twice in ``nb`` is copied twice: a notebook
    read from JSON or built by a kernel client never shares one.
    """
    if type(nb) is not NotebookNode:
        return copy.deepcopy(nb)
    copied: NotebookNode = _copy(nb)
    return copied


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is NotebookNode:
        node = NotebookNode()
        # dict.update stores the copies as they are (no conversion by __setitem__).
        dict.update(node, {key: _copy(item) for key, item in value.items()})
        return node
    if kind is list:
        return [_copy(item) for item in value]
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    return copy.deepcopy(value)
