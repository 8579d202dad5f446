"""What an executed notebook goes through before anything of it is stored: no secret survives.

- A cell's consecutive stream outputs of one name are merged into one (a kernel sends a long
  print in many messages): the record reads as the notebook printed it.
- Every secret's value is replaced by ``[secret NAME]`` wherever it occurs, plainly or as a
  repr or JSON string. A stream is searched as a whole, so a secret written in several pieces
  (``write(s[:9]); flush(); write(s[9:])``) is found too.
- Outputs that are not text are decoded enough to be searched: base64 payloads (images, PDFs,
  other binary scraps) as bytes, a DataFrame scrap's parquet value by value. An output that
  holds a secret, or a DataFrame scrap that cannot be read back to be checked, is *withheld*:
  replaced by a marker saying so and why.
- Secrets shorter than :data:`MIN_SECRET_CHARS` characters are not searched for: they would
  match ordinary text (a secret ``1`` would turn ``version 1.10`` into nonsense). The run
  record names them (``secrets_not_searched``) and a warning is logged.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .copying import copy_notebook
from .scraps import PAPERMILL_PREFIX, SCRAP_PREFIX

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["MIN_SECRET_CHARS", "Redactor", "coalesce_streams", "redact", "scrub_notebook"]

logger = logging.getLogger(__name__)

#: Secrets shorter than this are not searched for in what a run stores (see the module doc).
MIN_SECRET_CHARS = 6

#: Mime types whose values are text (searched as text); other string values may be base64.
_TEXT_MIMES = ("text/", "application/json", "application/javascript", "image/svg+xml")


class Redactor:
    """Finds and replaces the values of ``secrets`` (a name -> value mapping)."""

    def __init__(self, secrets: Mapping[str, str]) -> None:
        names: dict[str, str] = {}
        for name, value in sorted(secrets.items()):
            if value and len(value) >= MIN_SECRET_CHARS:
                for form in _printed(value):
                    names.setdefault(form, name)
        #: The names of secrets too short to be searched for.
        self.unsearched = sorted(
            name for name, value in secrets.items() if value and len(value) < MIN_SECRET_CHARS
        )
        self._names = names
        # Longest first: at one position the longest form (a whole secret, not a part) wins.
        forms = sorted(names, key=lambda form: (-len(form), form))
        self._forms = forms
        self._pattern = re.compile("|".join(map(re.escape, forms))) if forms else None
        self._bytes = sorted(
            {
                encoded: names[form]
                for form in forms
                for encoded in (
                    form.encode("utf-8"),
                    form.encode("utf-16-le"),
                    form.encode("utf-16-be"),
                )
            }.items(),
            key=lambda item: -len(item[0]),
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by ``[secret NAME]``."""
        if self._pattern is None or not any(form in text for form in self._forms):
            return text
        return self._pattern.sub(lambda match: f"[secret {self._names[match.group()]}]", text)

    def found_in(self, text: str) -> str | None:
        """The name of a secret that occurs in ``text``, or None."""
        for form in self._forms:
            if form in text:
                return self._names[form]
        return None

    def found_in_bytes(self, data: bytes) -> str | None:
        """The name of a secret that occurs in ``data`` (UTF-8 or UTF-16), or None."""
        for encoded, name in self._bytes:
            if encoded in data:
                return name
        return None

    @property
    def held(self) -> int:
        """How many trailing characters of a stream shown as it arrives must wait for more.

        One less than the longest form of a secret: a secret cut by a flush is then still
        whole in the text kept plus the piece that follows (:meth:`release`).
        """
        return max((len(form) for form in self._forms), default=1) - 1

    def release(self, text: str) -> tuple[str, str]:
        """Split a stream's ``text`` (what waited plus a new piece) for showing it live.

        Returns the part that may be shown now, redacted, and the raw tail that must wait
        for the next piece (or be shown through :meth:`text` when the stream ends). A secret
        that starts in the part shown ends in it too.
        """
        if self._pattern is None:
            return text, ""
        cut = len(text) - self.held
        if cut <= 0:
            return "", text
        shown = []
        cursor = 0
        for match in self._pattern.finditer(text):
            if match.start() >= cut:
                break
            shown.append(text[cursor : match.start()])
            shown.append(f"[secret {self._names[match.group()]}]")
            cursor = match.end()
        cut = max(cut, cursor)
        shown.append(text[cursor:cut])
        return "".join(shown), text[cut:]

    def pieces(self, pieces: list[str]) -> list[str]:
        """Redact ``pieces`` as one text (a stream sent in parts), keeping the parts apart.

        A secret that spans parts is replaced in the part where it starts; the rest of it is
        removed from the parts that follow.
        """
        if self._pattern is None:
            return pieces
        joined = "".join(pieces)
        if not any(form in joined for form in self._forms):
            return pieces
        spans = [
            (m.start(), m.end(), self._names[m.group()]) for m in self._pattern.finditer(joined)
        ]
        redacted = []
        low = 0
        for piece in pieces:
            high = low + len(piece)
            parts = []
            cursor = low
            for start, end, name in spans:
                if end <= low or start >= high:
                    continue
                if start > cursor:
                    parts.append(joined[cursor:start])
                if start >= low:
                    parts.append(f"[secret {name}]")
                cursor = max(cursor, min(end, high))
            parts.append(joined[cursor:high])
            redacted.append("".join(parts))
            low = high
        return redacted

    def value(self, value: Any) -> Any:
        """``value`` with every secret replaced, recursively (a new object; lists, tuples,
        dicts and notebook nodes are rebuilt)."""
        if self._pattern is None:
            return value
        return self._value(value)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._value(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self._value(item) for item in value)
        if isinstance(value, dict):
            redacted = type(value)() if type(value) is not dict else {}
            for key, item in value.items():
                redacted[self._value(key) if isinstance(key, str) else key] = self._value(item)
            return redacted
        return value


def redact(value: Any, secrets: Mapping[str, str]) -> Any:
    """Return ``value`` with every secret value replaced by ``[secret NAME]``, recursively.

    A value is also found as a notebook commonly prints it: in a repr or in JSON. Secrets
    shorter than :data:`MIN_SECRET_CHARS` are not searched for.
    """
    return Redactor(secrets).value(value)


def _printed(text: str) -> set[str]:
    """``text`` plain, and as the inside of a repr (either quoting) and of a JSON string."""
    both = "'\""  # a repr of a text holding both quotes escapes its single quotes
    return {
        text,
        repr(text)[1:-1],
        repr(text + both)[1:-4],
        ascii(text)[1:-1],
        ascii(text + both)[1:-4],
        json.dumps(text, ensure_ascii=False)[1:-1],
        json.dumps(text)[1:-1],
    }


#: What a terminal overwrites: a character before a backspace, and a line's text before a
#: carriage return that is not part of a line end (nbclient's ``coalesce_streams`` rules).
_BACKSPACE = re.compile(r"[^\n]\x08")
_CARRIAGE_RETURN = re.compile(r".*\r(?=[^\n])")


def settle_stream_text(text: str) -> str:
    """``text`` as a terminal leaves it: each ``\b`` erases the character before it, and the
    text a ``\r`` returns over is gone (a progress bar keeps its last frame); ``\r\n`` stays."""
    if "\x08" in text:
        shorter = _BACKSPACE.sub("", text)
        while len(shorter) < len(text):
            text, shorter = shorter, _BACKSPACE.sub("", shorter)
    return _CARRIAGE_RETURN.sub("", text) if "\r" in text else text


def coalesce_streams(notebook: NotebookNode) -> None:
    """Merge each cell's consecutive stream outputs of one name into one, in place, their
    text settled as a terminal shows it (:func:`settle_stream_text`)."""
    for cell in notebook.cells:
        outputs = cell.get("outputs")
        if not outputs:
            continue
        if len(outputs) < 2:
            _settle(outputs)
            continue
        merged: list[Any] = []
        texts: list[list[str]] = []
        for output in outputs:
            text = output.get("text", "")
            if isinstance(text, list):
                text = "".join(text)
            previous = merged[-1] if merged else None
            if (
                output.get("output_type") == "stream"
                and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")
            ):
                texts[-1].append(text)
                continue
            merged.append(output)
            texts.append([text] if output.get("output_type") == "stream" else [])
        if len(merged) == len(outputs):
            _settle(outputs)
            continue
        for output, parts in zip(merged, texts, strict=True):
            if output.get("output_type") == "stream" and len(parts) > 1:
                output["text"] = "".join(parts)
        _settle(merged)
        cell["outputs"] = merged


def _settle(outputs: list[Any]) -> None:
    for output in outputs:
        text = output.get("text") if output.get("output_type") == "stream" else None
        if isinstance(text, str) and ("\r" in text or "\x08" in text):
            output["text"] = settle_stream_text(text)


def scrub_notebook(notebook: NotebookNode, secrets: Mapping[str, str]) -> NotebookNode:
    """A copy of an executed ``notebook`` fit to store: streams coalesced, no secret left."""
    scrubbed = copy_notebook(notebook)
    coalesce_streams(scrubbed)
    redactor = Redactor(secrets)
    if redactor.unsearched:
        logger.warning(
            "secrets shorter than %d characters are not searched for in the run's outputs: %s",
            MIN_SECRET_CHARS,
            ", ".join(redactor.unsearched),
        )
    if not redactor:
        return scrubbed
    for cell in scrubbed.cells:
        outputs = cell.get("outputs")
        if not outputs:
            continue
        kept = []
        streams: dict[str, list[Any]] = {}
        for output in outputs:
            if output.get("output_type") == "stream":
                streams.setdefault(str(output.get("name")), []).append(output)
                kept.append(output)
                continue
            kept.append(_checked(output, redactor))
        for parts in streams.values():
            texts = [_joined_text(output.get("text", "")) for output in parts]
            for output, text in zip(parts, redactor.pieces(texts), strict=True):
                output["text"] = text
        cell["outputs"] = kept
    # Everything else (sources, metadata, text outputs, JSON scraps, errors) as text.
    redacted: NotebookNode = redactor.value(scrubbed)
    return redacted


def _joined_text(text: Any) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


def _checked(output: Any, redactor: Redactor) -> Any:
    """``output``, or a marker in its place when it holds a secret that text search misses."""
    data = output.get("data")
    if not isinstance(data, Mapping):
        return output
    for mime, value in data.items():
        reason = _binary_holds(mime, value, redactor)
        if reason is not None:
            return _withheld(output, reason)
    return output


def _binary_holds(mime: str, value: Any, redactor: Redactor) -> str | None:
    """Why ``value`` (of mime type ``mime``) must be withheld, or None."""
    if mime.startswith((SCRAP_PREFIX, PAPERMILL_PREFIX)):
        if not isinstance(value, Mapping):
            return None
        payload = value.get("data")
        encoder = str(value.get("encoder") or mime[len(SCRAP_PREFIX) :].split("+", 1)[0])
        if encoder == "pandas":
            return _parquet_holds(payload, redactor)
        if isinstance(payload, str):
            return _base64_holds(payload, redactor)
        return None
    if mime.startswith(_TEXT_MIMES) or mime.endswith("+json"):
        return None
    text = _joined_text(value) if isinstance(value, (str, list)) else None
    return None if text is None else _base64_holds(text, redactor)


def _base64_holds(text: str, redactor: Redactor) -> str | None:
    try:
        decoded = base64.b64decode(text.replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return None  # not base64: it is searched as text
    name = redactor.found_in_bytes(decoded)
    return None if name is None else f"it holds the value of secret {name}"


def _parquet_holds(payload: Any, redactor: Redactor) -> str | None:
    """Search a DataFrame scrap (base64 parquet) column by column, names and index too."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(base64.b64decode(payload)))
        texts = [str(name) for name in table.schema.names]
        for key, item in (table.schema.metadata or {}).items():
            texts += [key.decode("utf-8", "replace"), item.decode("utf-8", "replace")]
        name = next((found for t in texts if (found := redactor.found_in(t))), None)
        if name is not None:
            return f"it holds the value of secret {name}"
        for column in table.columns:
            try:
                strings = pc.cast(column, pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                strings = pa.array(
                    [None if v is None else str(v) for v in column.to_pylist()], pa.string()
                )
            for form in redactor._forms:
                if pc.any(pc.match_substring(strings, form)).as_py():
                    return f"it holds the value of secret {redactor._names[form]}"
    except Exception as exc:  # an unreadable payload cannot be checked: withheld
        return f"it could not be read back to check it for secrets ({type(exc).__name__})"
    return None


def _withheld(output: Any, reason: str) -> Any:
    """A marker output in place of ``output``; a scrap stays a scrap (a JSON one)."""
    from .._notebook import new_output

    data = output.get("data") or {}
    names = [
        str(value.get("name"))
        for mime, value in data.items()
        if mime.startswith(SCRAP_PREFIX) and isinstance(value, Mapping) and value.get("name")
    ]
    marker = (output.get("metadata") or {}).get("scrapbook") or {}
    if not names and isinstance(marker, Mapping) and marker.get("name"):
        names = [str(marker["name"])]
    if not names:
        return new_output(
            "display_data", data={"text/plain": f"[notebook-executor: output withheld: {reason}]"}
        )
    name = names[0]
    encoder = next(
        (
            str(value.get("encoder"))
            for mime, value in data.items()
            if mime.startswith(SCRAP_PREFIX) and isinstance(value, Mapping)
        ),
        "display",
    )
    note = {"encoder": encoder, "withheld": reason}
    return new_output(
        "display_data",
        data={
            f"{SCRAP_PREFIX}json+json": {
                "name": name,
                "data": note,
                "encoder": "json",
                "version": 1,
            },
            "text/plain": f"[notebook-executor: scrap {name!r} withheld: {reason}]",
        },
        metadata={"scrapbook": {"name": name, "data": True, "display": False}},
    )
