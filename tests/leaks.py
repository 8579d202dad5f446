"""The one check every secret test uses: no trace of a secret's value, in any form, anywhere.

Importable as ``leaks`` from every test module (``pythonpath`` in the pytest settings).

A text or a file's bytes are searched as they are and through the decodings a reader applies:
JSON strings decoded (an ``.ipynb`` stores an escape code as ``\\u001b``), terminal escape codes
removed (as a terminal or a plain-text view shows them), escape codes removed as the notebook
renderers do (``\\x1b\\[(.*?)([@-~])``, however malformed), backspaces and carriage returns
applied (a terminal writes over what it showed), markdown files rendered (by markdown-it, not
the library's engine), HTML tags and character references decoded (as a browser shows them). In
each view, a value is looked for plainly, escaped once or twice (a repr or JSON string, then
stored in a JSON file), as the printed forms of its bytes (``b'...'`` reprs of UTF-8 and
UTF-16, hex), base64 and UTF-16. A test that knows which pieces a notebook wrote separately
(``write(s[:9]); write(s[9:])``) names them as ``pieces``.

Its own decoders on purpose: the library's redaction is what is being checked.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["escapes", "needles", "scan_tree", "traces"]

# Every ECMA-48 escape sequence (CSI, OSC and the other string sequences, two-byte ones) and the
# 8-bit CSI: what a terminal swallows. Broader than any one renderer on purpose.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -/]*[0-~]"
)
_TAGS = re.compile(r"<[^<>]*>")
# What nbconvert's strip_ansi and JupyterLab's output area remove, then what shows as nothing.
_RENDERER_ESCAPES = re.compile(r"\x1b\[(.*?)([@-~])")
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2060-\u2064\ufeff]"
)


def _overwritten(text: str) -> str:
    """``text`` as a terminal leaves it: a backspace moves back one column, a carriage return
    to the line's start, and what follows is written over what was there."""
    if "\x08" not in text and "\r" not in text:
        return text
    lines = []
    for line in text.split("\n"):
        columns: list[str] = []
        at = 0
        for char in line:
            if char == "\r":
                at = 0
            elif char == "\x08":
                at = max(0, at - 1)
            else:
                columns[at : at + 1] = [char]
                at += 1
        lines.append("".join(columns))
    return "\n".join(lines)


def _markdown_shown(text: str) -> str:
    from markdown_it import MarkdownIt

    return html.unescape(_TAGS.sub("", MarkdownIt("commonmark").render(text)))


def escapes(value: str) -> list[str]:
    """``value`` as the body of a Python repr, an ASCII repr and a JSON string."""
    return [
        repr(value)[1:-1],
        ascii(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value)[1:-1],
    ]


def needles(value: str) -> dict[str, bytes]:
    """The forms a leaked ``value`` could take in a file, by name."""
    forms = {"plain": value.encode()}
    for n, once in enumerate(escapes(value)):
        forms[f"escaped-{n}"] = once.encode()
        for m, twice in enumerate(escapes(once)):
            forms[f"escaped-{n}-{m}"] = twice.encode()
    for encoding in ("utf-8", "utf-16-le", "utf-16-be"):
        data = value.encode(encoding)
        forms[encoding] = data
        forms[f"{encoding}-repr"] = repr(data)[2:-1].encode()
        forms[f"{encoding}-hex"] = data.hex().encode()
        forms[f"{encoding}-HEX"] = data.hex().upper().encode()
    forms["base64"] = base64.b64encode(value.encode())
    forms["base64-url"] = base64.urlsafe_b64encode(value.encode())
    return forms


def _json_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def _views(data: bytes, markdown: bool) -> dict[str, bytes]:
    text = data.decode("utf-8", "replace")
    texts = {"text": text}
    with contextlib.suppress(ValueError):
        texts["json"] = "\n".join(_json_strings(json.loads(text)))
    views = {"raw": data}
    for name, one in texts.items():
        plain = _ESCAPES.sub("", one)
        rendered = _INVISIBLE.sub("", _RENDERER_ESCAPES.sub("", one))
        views[f"{name}-no-escapes"] = plain.encode()
        views[f"{name}-unescaped"] = html.unescape(one).encode()
        views[f"{name}-as-shown"] = html.unescape(_TAGS.sub("", plain)).encode()
        views[f"{name}-as-rendered"] = html.unescape(_TAGS.sub("", rendered)).encode()
        views[f"{name}-overwritten"] = _overwritten(_ESCAPES.sub("", one)).encode()
        if markdown:
            views[f"{name}-markdown"] = _markdown_shown(rendered).encode()
    return views


def traces(
    data: bytes | str,
    secrets: Mapping[str, str],
    pieces: tuple[str, ...] = (),
    *,
    markdown: bool = False,
) -> list[str]:
    """Every form of every value of ``secrets`` (and every one of ``pieces``) in ``data``;
    ``markdown`` data is also searched as rendered."""
    raw = data.encode() if isinstance(data, str) else data
    found: dict[str, list[str]] = {}
    looked_for = {**secrets, **{f"piece {piece!r}": piece for piece in pieces}}
    views = _views(raw, markdown)
    for name, value in looked_for.items():
        for form, needle in needles(value).items():
            seen = [view for view, data in views.items() if needle in data]
            if seen:
                found.setdefault(f"{name} as {form} in the view(s)", seen[:1])
    return [f"{where} {', '.join(views)}" for where, views in found.items()]


def scan_tree(
    root: Path, secrets: Mapping[str, str], pieces: tuple[str, ...] = ()
) -> dict[str, list[str]]:
    """Every file under ``root`` that holds a trace of a secret (see :func:`traces`); a
    markdown file (``.md``, ``.markdown``) is searched as rendered too."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            markdown = path.suffix in (".md", ".markdown")
            leaks = traces(path.read_bytes(), secrets, pieces, markdown=markdown)
            if leaks:
                found[str(path.relative_to(root))] = leaks
    return found
