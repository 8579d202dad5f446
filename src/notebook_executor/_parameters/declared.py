"""The parameters a notebook declares: its parameters cell, parsed.

A notebook declares its parameters in its first cell tagged ``parameters`` (a logbook's front
matter becomes such a cell when it is read). Each top-level assignment there is one parameter::

    name: str = "world"   # who to greet          -> str, default "world", with help
    count = 3                                     -> int (from the literal)
    threshold: float = ...                        -> float, required
    tags: list                                    -> list, required (annotation, no value)
    anything = None                               -> any type, default None

The values a caller gives are checked against these in :mod:`.values`.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import io
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import NotebookSourceError
from .._sources.literals import is_literal_value
from .._types import ParameterInfo

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "INJECTED_TAG",
    "PARAMETERS_TAG",
    "Parameter",
    "check_parameters_cell",
    "declared_parameters",
    "parameters_cell_error",
    "parameters_cell_index",
    "parse_parameters",
    "parse_python",
]

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"

# Annotation names understood, mapped to the type name reported by inspect_parameters.
_TYPE_NAMES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "list": "list",
    "List": "list",
    "Sequence": "list",
    "tuple": "list",
    "Tuple": "list",
    "dict": "dict",
    "Dict": "dict",
    "Mapping": "dict",
    "Any": "any",
    "object": "any",
}


@dataclass(frozen=True)
class Parameter:
    """One declared parameter."""

    name: str
    type: str
    default: Any
    help: str
    required: bool
    #: True when None is an accepted value (None default or Optional annotation).
    nullable: bool = False
    #: False when the default is an expression only the kernel can evaluate.
    literal_default: bool = True

    def as_dict(self) -> ParameterInfo:
        """The public form returned by ``inspect_parameters``."""
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "help": self.help,
            "required": self.required,
        }


def parameters_cell_index(nb: NotebookNode) -> int | None:
    """Index of the first cell tagged ``parameters``, or None."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and PARAMETERS_TAG in cell.metadata.get("tags", []):
            return index
    return None


def declared_parameters(nb: NotebookNode) -> dict[str, Parameter]:
    """The parameters declared by ``nb``, in declaration order."""
    index = parameters_cell_index(nb)
    if index is None:
        return {}
    return parse_parameters(nb.cells[index].source)


def parse_parameters(source: str) -> dict[str, Parameter]:
    """Parse the source of a parameters cell.

    Statements other than assignments to a single name are ignored. A cell that is not valid
    Python declares no parameters (the kernel will report the syntax error when it runs).
    """
    # A warm loop or a sweep parses one cell again and again: the parse is kept, and each
    # caller gets defaults of its own to change (a list default reaches the result dict).
    return {name: _fresh(parameter) for name, parameter in _parse_cached(source).items()}


def _fresh(parameter: Parameter) -> Parameter:
    if type(parameter.default) in _IMMUTABLE:
        return parameter
    return dataclasses.replace(parameter, default=copy.deepcopy(parameter.default))


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def parameters_cell_error(nb: NotebookNode) -> tuple[int, str] | None:
    """``(cell index, problem)`` when the parameters cell is not valid Python, else None.

    IPython magics and shell escapes on lines of their own are allowed (the kernel runs them).
    """
    index = parameters_cell_index(nb)
    if index is None:
        return None
    source = nb.cells[index].source
    if source.lstrip().startswith("%%"):
        return None  # a cell magic: its body is not Python to check here
    error = _syntax_error(source)
    return None if error is None else (index, error)


def check_parameters_cell(notebook: str, nb: NotebookNode) -> None:
    """Refuse a notebook whose parameters cell does not parse: found before any kernel
    starts, rather than as the run's first cell error.

    Raises
    ------
    NotebookSourceError
        Naming the cell (its index in the source) and the line.
    """
    found = parameters_cell_error(nb)
    if found is not None:
        index, problem = found
        raise NotebookSourceError(notebook, f"the parameters cell (cell {index}) {problem}")


@functools.lru_cache(maxsize=64)
def _syntax_error(source: str) -> str | None:
    try:
        parse_python(source)
    except SyntaxError as exc:
        return f"is not valid Python: {exc.msg} (line {exc.lineno} of the cell)"
    except (ValueError, RecursionError, MemoryError):  # NUL bytes, nesting beyond the parser
        return "is not valid Python: the parser cannot read it"
    return None


@functools.lru_cache(maxsize=64)
def _parse_cached(source: str) -> dict[str, Parameter]:
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    comments = _comments_by_line(source)
    found: dict[str, Parameter] = {}
    for node in tree.body:
        parameter = _parameter_from(node, source, comments)
        if parameter is not None:
            found[parameter.name] = parameter
    return found


def _is_magic(line: str) -> bool:
    return line.lstrip().startswith(("%", "!", "?"))


def parse_python(source: str) -> ast.Module:
    """Parse a code cell's ``source`` as Python, IPython's line magics, shell escapes and help
    lines (``%``, ``!``, ``?``) aside.

    Such a line is read as ``pass`` at its indentation (it may be a block's only line), else
    as a blank line (it may be indented where Python allows no indentation). Raises the
    SyntaxError of the first reading when neither parses.
    """
    lines = source.splitlines()
    as_pass = "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass" if _is_magic(line) else line
        for line in lines
    )
    try:
        return ast.parse(as_pass)
    except SyntaxError:
        if not any(_is_magic(line) for line in lines):
            raise
        try:
            return ast.parse("\n".join("" if _is_magic(line) else line for line in lines))
        except SyntaxError:
            pass
        raise


def _comments_by_line(source: str) -> dict[int, str]:
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string.lstrip("#").strip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return comments


def _parameter_from(node: ast.stmt, source: str, comments: dict[int, str]) -> Parameter | None:
    annotation: ast.expr | None = None
    value: ast.expr | None
    if isinstance(node, ast.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return None
        name = node.targets[0].id
        value = node.value
    elif isinstance(node, ast.AnnAssign):
        if not isinstance(node.target, ast.Name):
            return None
        name = node.target.id
        annotation = node.annotation
        value = node.value
    else:
        return None
    help_text = comments.get(node.end_lineno or node.lineno) or comments.get(node.lineno, "")
    type_name, optional = _annotation_type(annotation)
    required = value is None or (isinstance(value, ast.Constant) and value.value is Ellipsis)
    default: Any = None
    literal_default = not required
    if not required:
        assert value is not None
        try:
            default = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            # Not a literal (an expression, a call): its value is only known in the kernel.
            literal_default = False
        else:
            if not is_literal_value(default):
                # A set, bytes or complex literal: the notebook keeps it, we cannot inject it.
                default, literal_default = None, False
            elif annotation is None:
                type_name = _literal_type(default)
    if isinstance(default, tuple):
        default = list(default)
    return Parameter(
        name=name,
        type=type_name,
        default=default,
        help=help_text,
        required=required,
        nullable=optional or (literal_default and default is None),
        literal_default=literal_default,
    )


def _annotation_type(annotation: ast.expr | None) -> tuple[str, bool]:
    """Return (type name, whether None is allowed) for an annotation."""
    if annotation is None:
        return "any", False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return "any", False
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, left_optional = _annotation_type(annotation.left)
        right, right_optional = _annotation_type(annotation.right)
        if _is_none(annotation.left):
            return right, True
        if _is_none(annotation.right):
            return left, True
        return "any", left_optional or right_optional
    if isinstance(annotation, ast.Subscript):
        base = _dotted_tail(annotation.value)
        if base == "Optional":
            inner, _ = _annotation_type(annotation.slice)
            return inner, True
        if base == "Union":
            return "any", False
        return _TYPE_NAMES.get(base, "any"), False
    if _is_none(annotation):
        return "any", True
    return _TYPE_NAMES.get(_dotted_tail(annotation), "any"), False


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _dotted_tail(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _literal_type(value: Any) -> str:
    if value is None:
        return "any"
    if isinstance(value, bool):
        return "bool"
    for kind, name in ((int, "int"), (float, "float"), (str, "str"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    if isinstance(value, (list, tuple)):
        return "list"
    return "any"
