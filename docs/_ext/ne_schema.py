"""JSON Schema of the ``TypedDict`` shapes that ``notebook_executor.__all__`` exports.

Every ``TypedDict`` in ``__all__`` gets a schema (JSON Schema 2020-12), nested shapes under
``$defs``. A small generator rather than pydantic's ``TypeAdapter(...).json_schema()``:
pydantic refuses ``typing.TypedDict`` before Python 3.12 (its error ``typed-dict-version``),
and the package supports 3.10. It knows the types the package's shapes use: ``str``, ``int``,
``float``, ``bool``, ``None``, ``Any``/``object``, ``Literal``, unions, ``list``/``tuple``,
``dict[str, X]``, ``Mapping``, ``Sequence`` and nested ``TypedDict``; anything else raises, so
that the reference never shows a schema weaker than the type.
"""

from __future__ import annotations

import collections.abc
import sys
import types
import typing
from typing import Any

import typing_extensions

__all__ = ["SCHEMA_DIALECT", "exported_typeddicts", "json_schema", "json_schemas"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_SCALARS: dict[object, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
    Any: {},
    object: {},
}
_OPTIONAL = typing_extensions.NotRequired
_LISTS = (list, tuple, collections.abc.Sequence, collections.abc.Iterable)
_MAPPINGS = (dict, collections.abc.Mapping)


def exported_typeddicts(module: types.ModuleType | None = None) -> dict[str, type]:
    """The ``TypedDict`` classes among ``module.__all__`` (default: ``notebook_executor``),
    by exported name, in ``__all__`` order."""
    if module is None:
        module = sys.modules.get("notebook_executor") or __import__("notebook_executor")
    found = {}
    for name in getattr(module, "__all__", ()):
        value = getattr(module, name, None)
        if isinstance(value, type) and typing_extensions.is_typeddict(value):
            found[name] = value
    return found


def json_schemas(module: types.ModuleType | None = None) -> dict[str, dict[str, Any]]:
    """A schema per exported ``TypedDict`` (see :func:`exported_typeddicts`)."""
    return {name: json_schema(shape) for name, shape in exported_typeddicts(module).items()}


def json_schema(shape: type) -> dict[str, Any]:
    """The JSON Schema of one ``TypedDict``: its own object schema at the top, the shapes
    it nests under ``$defs`` (referenced by class name)."""
    defs: dict[str, dict[str, Any]] = {}
    top = _typeddict(shape, defs, top=True)
    schema = {"$schema": SCHEMA_DIALECT, "title": shape.__name__, **top}
    if defs:
        schema["$defs"] = dict(sorted(defs.items()))
    return schema


def _typeddict(shape: type, defs: dict[str, dict[str, Any]], *, top: bool) -> dict[str, Any]:
    name = shape.__name__
    if not top:
        if name not in defs:
            defs[name] = {}  # placeholder: a shape may nest itself
            defs[name] = {"title": name, **_object(shape, defs)}
        return {"$ref": f"#/$defs/{name}"}
    return _object(shape, defs)


def _object(shape: type, defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    hints = typing.get_type_hints(shape, include_extras=True)
    # A ``NotRequired[...]`` written under ``from __future__ import annotations`` is a string
    # when the class is made, so before Python 3.12 ``__required_keys__`` still lists it: the
    # evaluated hint is the truth.
    marked = {key: typing_extensions.get_origin(hint) for key, hint in hints.items()}
    required = {
        key
        for key in hints
        if marked[key] is typing_extensions.Required
        or (key in getattr(shape, "__required_keys__", hints) and marked[key] is not _OPTIONAL)
    }
    properties = {key: _type(hint, defs) for key, hint in hints.items()}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    doc = (shape.__doc__ or "").strip()
    if doc and not doc.startswith(f"{shape.__name__}("):
        schema["description"] = doc.split("\n\n", 1)[0].replace("\n", " ")
    schema["required"] = [key for key in hints if key in required]
    # A key the type does not name is drift between the code and its documented shape.
    schema["additionalProperties"] = False
    return schema


def _type(hint: Any, defs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    origin = typing_extensions.get_origin(hint)
    args = typing_extensions.get_args(hint)
    if origin in (
        typing_extensions.Annotated,
        typing_extensions.Required,
        typing_extensions.NotRequired,
        typing_extensions.ReadOnly,
    ):
        return _type(args[0], defs)
    if isinstance(hint, type) and typing_extensions.is_typeddict(hint):
        return _typeddict(hint, defs, top=False)
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    if origin is typing_extensions.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type(arg, defs) for arg in args]}
    if origin in _LISTS or hint in _LISTS:
        if origin is tuple and args and args[-1] is not Ellipsis:
            items = [_type(arg, defs) for arg in args]
            return {"type": "array", "prefixItems": items, "minItems": len(items)}
        return {"type": "array", "items": _type(args[0], defs) if args else {}}
    if origin in _MAPPINGS or hint in _MAPPINGS:
        value = _type(args[1], defs) if len(args) == 2 else {}
        return {"type": "object", "additionalProperties": value}
    raise TypeError(f"no JSON Schema for the type {hint!r}")
