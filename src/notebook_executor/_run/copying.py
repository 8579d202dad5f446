"""Deep copies of notebooks, several times faster than ``copy.deepcopy``.

A run copies its notebook twice on the way (the parsed source, then the executed notebook that
is scrubbed for storage). A notebook is a tree of JSON values: nodes, lists and scalars, so it
is copied by walking that tree, without ``deepcopy``'s memo and dispatch. The copy has the same
types as ``copy.deepcopy`` gives (a node's mapping values become nodes, a plain dict in a list
stays a plain dict); any other value in the tree is handed to ``copy.deepcopy``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["copy_notebook"]

#: Values ``copy.deepcopy`` returns as they are.
_ATOMIC = frozenset({str, int, float, bool, bytes, type(None), complex})
#: The instance state of a node (its ``Struct`` base's flag), copied as it is.
_USUAL_STATE = {"_allownew": True}


def copy_notebook(nb: NotebookNode) -> NotebookNode:
    """A deep copy of ``nb`` (or of any node of one), as ``copy.deepcopy(nb)`` makes it.

    Unlike ``deepcopy``, an object that appears twice in ``nb`` is copied twice: a notebook
    read from JSON or built by a kernel client never shares one.
    """
    from nbformat import NotebookNode

    if type(nb) is not NotebookNode:
        return copy.deepcopy(nb)
    copied: NotebookNode = _node(nb, NotebookNode)
    return copied


def _node(node: Any, node_type: type[Any]) -> Any:
    # No __init__: it only sets the instance state copied next.
    new = dict.__new__(node_type)
    state = node.__dict__
    new.__dict__.update(state if state == _USUAL_STATE else copy.deepcopy(state))
    dict.update(
        new,
        {
            key: value if type(value) in _ATOMIC else _node_value(value, node_type)
            for key, value in node.items()
        },
    )
    return new


def _node_value(value: Any, node_type: type[Any]) -> Any:
    """A copy of a value held by a node: a mapping becomes a node, as the node's
    ``__setitem__`` makes it when ``deepcopy`` rebuilds the node."""
    kind = type(value)
    if kind is list:
        return [_value(item, node_type) for item in value]
    if kind is node_type:
        return _node(value, node_type)
    copied = copy.deepcopy(value)
    if isinstance(copied, Mapping) and not isinstance(copied, node_type):
        from nbformat import from_dict

        return from_dict(copied)
    return copied


def _value(value: Any, node_type: type[Any]) -> Any:
    """A copy of a value held by a list or a plain dict (a plain dict stays plain)."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is list:
        return [_value(item, node_type) for item in value]
    if kind is node_type:
        return _node(value, node_type)
    if kind is dict:
        return {key: _value(item, node_type) for key, item in value.items()}
    return copy.deepcopy(value)
