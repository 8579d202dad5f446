"""Placeholders of logbook templates: ``{name}`` replaced by the value of parameter ``name``.

A logbook template writes ``print("Hello, {name}!")`` and means the parameter's value. Before a
run, each ``{name}`` (``name`` a declared parameter) is replaced:

- in narrative (markdown cells), by ``str(value)`` (a list reads as Python prints it);
- in code cells, only inside plain string literals, found with :mod:`tokenize` (never by a
  regular expression over the code). The value is escaped for the literal it lands in, so it
  can never end the string: ``"); open("x","w").close(); print("`` stays text.

Left alone: f-strings (there ``{name}`` already reads the injected variable), everything outside
string literals, doubled braces (``{{name}}``), ``\\N{NAME}`` escapes, names that are not
parameters, literals on IPython magic and shell lines and in cell-magic cells (shell text, which
Python escaping cannot make safe), and code cells that do not tokenize (the kernel reports
their syntax error).

Per literal:

- ``"..."``, ``'...'``, triple-quoted and ``u``-prefixed: backslashes, the literal's own quote
  character and control characters are written as escape sequences; other characters as they
  are (so ``['a', 'b']`` reads ``"Topics: ['a', 'b']"``, as the logbook pattern writes it: the
  other quote character cannot end the literal).
- ``b"..."``: the value's UTF-8 bytes, every byte outside printable ASCII as ``\\xNN``.
- raw literals (``r"..."``, ``rb"..."``): escapes do not exist there, so the value goes in
  verbatim when it can (no backslash, no quote character of the literal, no line break or other
  control character, ASCII only for ``rb``); otherwise :class:`ParameterError` is raised,
  naming the parameter and the cell, before any kernel starts.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import ParameterError
from .declared import INJECTED_TAG, PARAMETERS_TAG

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "placeholder_text",
    "substitute_in_code",
    "substitute_placeholders",
    "substitute_source",
]

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PREFIX = re.compile(r"^[A-Za-z]*")


def placeholder_text(value: Any) -> str:
    """The text a value stands for in a template: ``str(value)``."""
    return value if isinstance(value, str) else str(value)


def substitute_placeholders(
    nb: NotebookNode,
    values: Mapping[str, Any],
    declared: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Replace the placeholders of ``values``' names in ``nb``'s cells, in place.

    The parameters cell and an injected-parameters cell are left as they are. ``declared``
    (the notebook's parameters, as ``inspect_parameters`` gives them) goes into an error.

    Raises
    ------
    ParameterError
        A value cannot be written into a raw string literal without changing its meaning.
    """
    if not values:
        return
    texts = {name: placeholder_text(value) for name, value in values.items()}
    pattern = _placeholder_pattern(texts)
    for index, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if PARAMETERS_TAG in tags or INJECTED_TAG in tags:
            continue
        cell.source = _substituted(cell.cell_type, cell.source, index, texts, pattern, declared)


def substitute_source(
    cell_type: str,
    source: str,
    index: int,
    values: Mapping[str, Any],
    declared: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """``source`` of a cell (``cell_type``, at ``index``) as :func:`substitute_placeholders`
    writes it: the template's text of a cell a modified run replaces."""
    if not values:
        return source
    texts = {name: placeholder_text(value) for name, value in values.items()}
    return _substituted(cell_type, source, index, texts, _placeholder_pattern(texts), declared)


def _substituted(
    cell_type: str,
    source: str,
    index: int,
    texts: Mapping[str, str],
    pattern: re.Pattern[str],
    declared: Mapping[str, Mapping[str, Any]] | None,
) -> str:
    if cell_type == "markdown":
        return pattern.sub(lambda m: texts[m.group(1)], source)
    if cell_type != "code":
        return source
    try:
        return substitute_in_code(source, texts, cell_index=index)
    except ParameterError as exc:
        raise ParameterError(exc.parameter, exc.problems, declared) from None


def _placeholder_pattern(texts: Mapping[str, str]) -> re.Pattern[str]:
    names = "|".join(re.escape(name) for name in sorted(texts, key=len, reverse=True))
    return re.compile(r"(?<!\{)\{(" + names + r")\}(?!\})")


def substitute_in_code(source: str, texts: Mapping[str, str], *, cell_index: int = 0) -> str:
    """``source`` with the placeholders inside its plain string literals replaced."""
    if "{" not in source or not texts:
        return source
    tokens = _string_tokens(source)
    if not tokens:
        return source
    pattern = _placeholder_pattern(texts)
    starts = _line_starts(source)
    pieces: list[str] = []
    position = 0
    for (row, col), (end_row, end_col), text in tokens:
        begin, end = starts[row - 1] + col, starts[end_row - 1] + end_col
        if source[begin:end] != text:  # tokenized with magic lines blanked: not this text
            continue
        replaced = _substitute_literal(text, pattern, texts, cell_index)
        if replaced != text:
            pieces += [source[position:begin], replaced]
            position = end
    pieces.append(source[position:])
    return "".join(pieces)


def _line_starts(source: str) -> list[int]:
    starts = [0]
    for line in io.StringIO(source):
        starts.append(starts[-1] + len(line))
    return starts


_Span = tuple[tuple[int, int], tuple[int, int], str]


def _string_tokens(source: str) -> list[_Span]:
    """The plain string literal tokens of ``source`` that are Python.

    Left out: f-string parts; a cell magic's cell (``%%bash``...); literals on a line that is
    an IPython magic or shell escape (``%...``, ``!...``) or holds one (``files = !ls "x"``):
    there a literal is shell text, which Python escaping cannot make safe. A cell that does not
    tokenize, even with those lines blanked, has none.
    """
    lines = io.StringIO(source).readlines() or [""]
    first = next((line.strip() for line in lines if line.strip()), "")
    if first.startswith("%%"):
        return []
    magic = {number for number, line in enumerate(lines, 1) if _is_magic(line)}
    blanked = "".join("\n" if number in magic else line for number, line in enumerate(lines, 1))
    for text in (source, blanked):
        try:
            return _python_strings(text, magic)
        except (tokenize.TokenError, SyntaxError):
            continue
    return []


def _is_magic(line: str) -> bool:
    return line.lstrip().startswith(("%", "!"))


def _python_strings(text: str, skipped_rows: set[int]) -> list[_Span]:
    found: list[_Span] = []
    shell_rows: set[int] = set()
    depth = 0  # inside an f-string (Python 3.12 splits them into several tokens)
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == fstring_start:
            depth += 1
        elif token.type == fstring_end:
            depth -= 1
        elif depth == 0 and token.string == "!":  # IPython's ``x = !command``
            shell_rows.add(token.start[0])
        elif token.type == tokenize.STRING and depth == 0:
            found.append((token.start, token.end, token.string))
    skipped = skipped_rows | shell_rows
    return [span for span in found if span[0][0] not in skipped]


def _substitute_literal(
    literal: str, pattern: re.Pattern[str], texts: Mapping[str, str], cell_index: int
) -> str:
    prefix = _PREFIX.match(literal)
    letters = (prefix.group(0) if prefix else "").lower()
    if "f" in letters or "t" in letters:
        return literal
    body_start = len(letters)
    quote = literal[body_start : body_start + 3]
    if quote not in ('"""', "'''"):
        quote = literal[body_start]
    body = literal[body_start + len(quote) : len(literal) - len(quote)]
    raw, is_bytes = "r" in letters, "b" in letters

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if not raw and not is_bytes and _after_named_escape(body, match.start()):
            return match.group(0)
        if raw:
            return _raw_text(texts[name], quote[0], is_bytes, name, cell_index)
        escaped = _escaped_bytes if is_bytes else _escaped
        return escaped(texts[name], quote[0])

    new_body = pattern.sub(replace, body)
    if new_body == body:
        return literal
    replaced = literal[: body_start + len(quote)] + new_body + quote
    _check_still_one_literal(literal, replaced, cell_index)
    return replaced


def _after_named_escape(body: str, at: int) -> bool:
    # ``"\N{DASH}"`` names a character: the braces belong to the escape.
    if at < 2 or body[at - 1] != "N":
        return False
    slashes = len(body[: at - 1]) - len(body[: at - 1].rstrip("\\"))
    return slashes % 2 == 1


def _escaped(text: str, quote: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char == quote:
            out.append("\\" + char)
        elif char.isprintable() or char == " ":
            out.append(char)
        else:
            code = ord(char)
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}"
                if code < 0x10000
                else f"\\U{code:08x}"
            )
    return "".join(out)


def _escaped_bytes(text: str, quote: str) -> str:
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char == quote:
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def _raw_text(text: str, quote: str, is_bytes: bool, name: str, cell_index: int) -> str:
    bad = (
        "\\" in text
        or quote in text
        or any(not (char.isprintable() or char == " ") for char in text)
        or (is_bytes and not text.isascii())
    )
    if bad:
        raise ParameterError(
            name,
            [
                f"the value of {name!r} cannot be placed in the raw string literal of cell "
                f"{cell_index} without changing its meaning (it holds a backslash, a "
                f"{quote} quote, a line break{' or non-ASCII text' if is_bytes else ''}); "
                "use a plain string literal or an f-string there"
            ],
        )
    return text


def _check_still_one_literal(before: str, after: str, cell_index: int) -> None:
    # By construction the new literal evaluates to a string; checked anyway, as the whole point
    # is that a value can never turn into code.
    try:
        value = ast.literal_eval(after)
        ok = type(value) is type(ast.literal_eval(before))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        ok = False
    if not ok:
        raise ParameterError(
            "",
            [f"a placeholder in a string literal of cell {cell_index} cannot be substituted"],
        )
