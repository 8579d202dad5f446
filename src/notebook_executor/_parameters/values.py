"""The values a caller gives: checked against the declared parameters, converted from
command-line text, and injected.

Values are injected as Python literals in a new cell tagged ``injected-parameters`` placed right
after the parameters cell, so a string value can never run as code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import ParameterError
from .._sources.bounded import MAX_PARAMETERS_CHARS, YamlRefused, load_yaml, unencodable
from .._sources.literals import is_literal_value, to_literal
from .declared import INJECTED_TAG, Parameter, parameters_cell_index

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "TextValue",
    "convert_text_value",
    "inject_parameters",
    "typed_values",
    "unencodable_value",
    "validate_parameters",
]


def _declared_dicts(declared: Mapping[str, Parameter]) -> dict[str, dict[str, Any]]:
    return {name: dict(parameter.as_dict()) for name, parameter in declared.items()}


def validate_parameters(
    declared: Mapping[str, Parameter], given: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Check ``given`` against ``declared``; return the effective values.

    The effective values are the literal defaults overlaid by the given values. A parameter
    whose default is not a literal keeps its notebook default and is left out unless given.

    Raises
    ------
    ParameterError
        Naming every unknown, missing-required or ill-typed parameter.
    """
    given = dict(given or {})
    problems: list[tuple[str, str]] = []
    for name in given:
        if name not in declared:
            problems.append((name, f"unknown parameter {_short_repr(name)}"))
    effective: dict[str, Any] = {}
    for name, parameter in declared.items():
        if name in given:
            ok, value = _fit(parameter, given[name])
            problem = unencodable_value(value) if ok else None
            if problem:
                problems.append((name, f"parameter {name!r}: {problem}"))
                continue
            if not ok:
                problems.append((name, _misfit(name, parameter, given[name])))
                continue
            effective[name] = value
        elif parameter.required:
            problems.append((name, f"missing required parameter {name!r}"))
        elif parameter.literal_default:
            effective[name] = parameter.default
    if problems:
        raise ParameterError(
            problems[0][0], [text for _, text in problems], _declared_dicts(declared)
        )
    return effective


def unencodable_value(value: Any) -> str | None:
    """Where a value holds text no UTF-8 file can hold (the run records could not keep it).

    ``value`` passed the literal check: no cycle, nested at most ``MAX_DEPTH`` deep.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            problem = unencodable(item)
            if problem:
                return problem
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return None


def _misfit(name: str, parameter: Parameter, value: Any) -> str:
    """Why ``value`` does not fit ``parameter``, in one line."""
    try:
        to_literal(value)
    except (TypeError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, TypeError) else "the value is nested too deep"
        return f"parameter {name!r} cannot be injected: {why}"
    return (
        f"parameter {name!r} expects {_expected(parameter)}, "
        f"got {type(value).__name__} {_short_repr(value)}"
    )


def _expected(parameter: Parameter) -> str:
    return parameter.type + (" or None" if parameter.nullable and parameter.type != "any" else "")


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int too long to print, a value nested too deep
        return f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _fit(parameter: Parameter, value: Any) -> tuple[bool, Any]:
    """Return (fits, value as it will be injected)."""
    if not is_literal_value(value):
        return False, value
    if value is None:
        return parameter.nullable or parameter.type == "any", None
    kind = parameter.type
    if kind == "any":
        return True, value
    if kind == "bool":
        return isinstance(value, bool), value
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool), value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        return True, float(value)
    if kind == "str":
        return isinstance(value, str), value
    if kind == "list":
        return isinstance(value, (list, tuple)), list(value) if isinstance(value, tuple) else value
    if kind == "dict":
        return isinstance(value, dict), value
    return True, value


def convert_text_value(
    parameter: Parameter | None, text: str, declared: Mapping[str, Parameter] | None = None
) -> Any:
    """Convert a command-line string to a value for ``parameter``.

    First as papermill's ``-p`` does (``True``/``False``/``None``, int, float, else the string),
    then towards the declared type: a ``str`` parameter keeps the text as typed, ``list`` and
    ``dict`` parameters parse YAML/JSON, ``bool`` accepts true/false in any case, ``float``
    accepts an int. Anything that still does not fit is left for validation to report.

    A value longer than :data:`MAX_PARAMETERS_CHARS`, or YAML whose aliases expand too far,
    raises ParameterError (listing ``declared``, the notebook's parameters, when given).
    """
    value = _papermill_value(text)
    if parameter is None:
        return value
    if len(text) > MAX_PARAMETERS_CHARS:
        raise ParameterError(
            parameter.name,
            [f"{parameter.name}: the value is longer than {MAX_PARAMETERS_CHARS:,} characters"],
            _declared_dicts(declared or {parameter.name: parameter}),
        )
    kind = parameter.type
    if kind == "str":
        if value is None and parameter.nullable:
            return None
        return text
    if kind == "bool" and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind in ("list", "dict") and isinstance(value, str):
        return _structured_value(parameter, text, declared)
    if kind == "any" and isinstance(value, str) and text.lstrip()[:1] in ("[", "{"):
        return _structured_value(parameter, text, declared)
    return value


@dataclass(frozen=True)
class TextValue:
    """A parameter value given as text, typed once the notebook's declared parameters are
    read: by the planner (:func:`typed_values`), so a face need not read the source itself.

    ``always``: the command line's ``-p`` (and ``sweep -g``): converted by
    :func:`convert_text_value` whatever the name. Otherwise a string from a JSON client (the
    MCP server's ``parameters``): converted only for a declared parameter whose type a string
    is not a value of (int, float, bool, list, dict); clients often send numbers as text.
    """

    text: str
    always: bool = True


#: Declared types a string is already a value of.
_AS_TEXT = frozenset({"str", "any"})


def typed_values(declared: Mapping[str, Parameter], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with each :class:`TextValue` typed against ``declared`` (the notebook's
    parameters; empty when its parameters cell cannot be parsed here)."""
    typed = dict(values)
    for name, value in values.items():
        if not isinstance(value, TextValue):
            continue
        parameter = declared.get(name)
        if value.always:
            typed[name] = convert_text_value(parameter, value.text, declared)
        elif parameter is not None and parameter.type not in _AS_TEXT:
            typed[name] = convert_text_value(parameter, value.text)
        else:
            typed[name] = value.text
    return typed


def _papermill_value(text: str) -> Any:
    if text == "True":
        return True
    if text == "False":
        return False
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _structured_value(
    parameter: Parameter, text: str, declared: Mapping[str, Parameter] | None
) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deep; YAML says so
        pass
    import yaml

    try:
        return load_yaml(text)
    except YamlRefused as exc:
        problem = f"{parameter.name}: {exc}"
        raise ParameterError(
            parameter.name, [problem], _declared_dicts(declared or {parameter.name: parameter})
        ) from None
    except yaml.YAMLError:
        return text


def inject_parameters(
    nb: NotebookNode, values: Mapping[str, Any], language: str = "python"
) -> int | None:
    """Insert a cell assigning ``values`` after the parameters cell; return its index.

    Nothing is inserted when there is nothing to inject. Without a parameters cell the
    injected cell goes first.
    """
    if not values:
        return None
    from .._notebook import new_code_cell

    cell = new_code_cell(_injection_source(values, language), metadata={"tags": [INJECTED_TAG]})
    index = parameters_cell_index(nb)
    position = 0 if index is None else index + 1
    nb.cells.insert(position, cell)
    return position


def _injection_source(values: Mapping[str, Any], language: str) -> str:
    if language == "python":
        lines = ["# Parameters"]
        lines += [f"{name} = {to_literal(value)}" for name, value in values.items()]
        return "\n".join(lines)
    # Other kernels: papermill knows how to write literals for R, Julia, Scala, and more.
    from papermill.exceptions import PapermillException
    from papermill.translators import translate_parameters

    try:
        return str(translate_parameters("", language, dict(values), "Parameters"))
    except PapermillException as exc:
        name = next(iter(values))
        raise ParameterError(name, [f"cannot inject parameters into {language}: {exc}"]) from None
