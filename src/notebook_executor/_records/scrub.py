"""What an executed notebook goes through before anything of it is stored: no secret survives.

- A cell's consecutive stream outputs of one name are merged into one (a kernel sends a long
  print in many messages): the record reads as the notebook printed it.
- Every secret's value is replaced by ``[secret NAME]`` wherever it occurs, in any of its
  shapes (below). The streams of all cells (stdout and stderr, in the order they came) are
  searched as one text, what a terminal showed: a secret written in pieces
  (``write(s[:9]); flush(); write(s[9:])``, half to each stream, half in each of two cells)
  is found too.
- Shapes searched for: every printed form of a secret listed in :mod:`.redaction` (plain,
  repr and JSON escapes, the printed forms of its bytes, base64), also with escape codes or
  invisible characters between its characters.
- Outputs that are not plain text are decoded enough to be searched: base64 payloads (images,
  PDFs, other binary scraps) as bytes (UTF-8 and UTF-16 of every shape above), a DataFrame
  scrap's parquet value by value, markup (HTML, SVG, XML, markdown) as a viewer shows it:
  character references decoded (``&#116;``, ``&#x74;``, ``&lowbar;``), with and without its
  tags, markdown escapes removed, markdown also as rendered (emphasis or a link inside a
  secret shows it joined; a markdown output over :data:`MAX_RENDERED_MARKDOWN` characters is
  withheld rather than rendered). An output that holds a secret in one of these, or a
  DataFrame scrap that cannot be read back to be checked, is *withheld*: replaced by a marker
  saying so and why.
- Secrets shorter than :data:`MIN_SECRET_CHARS` characters are not searched for: they would
  match ordinary text (a secret ``1`` would turn ``version 1.10`` into nonsense). The run
  record names them (``secrets_not_searched``) and a warning is logged.
"""

from __future__ import annotations

import base64
import binascii
import copy
import io
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .redaction import MIN_SECRET_CHARS, Redactor, redact
from .scraps import PAPERMILL_PREFIX, SCRAP_PREFIX

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["MIN_SECRET_CHARS", "Redactor", "coalesce_streams", "redact", "scrub_notebook"]

logger = logging.getLogger(__name__)

#: Mime types whose values are text (searched as text); other string values may be base64.
_TEXT_MIMES = ("text/", "application/json", "application/javascript", "image/svg+xml")

#: Mime types whose text a viewer shows decoded (character references, tags; see the module doc).
_MARKUP_MIMES = (
    "text/html",
    "text/markdown",
    "image/svg+xml",
    "application/xhtml+xml",
    "application/xml",
    "text/xml",
)


#: Longest markdown output searched as rendered; a longer one is withheld in a run with secrets.
#: Rendering costs about 2 s a MB (mistune, as markdown-it; 20 s a MB with the machine's two
#: cores loaded 10 times over): this bounds it to well under a second an output.
MAX_RENDERED_MARKDOWN = 200_000

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
    scrubbed = copy.deepcopy(notebook)
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
    # All streams of all cells, in order, are searched as one text: what a terminal showed.
    streams: list[Any] = []
    for cell in scrubbed.cells:
        outputs = cell.get("outputs")
        if not outputs:
            continue
        kept = []
        for output in outputs:
            if output.get("output_type") == "stream":
                streams.append(output)
                kept.append(output)
                continue
            kept.append(_checked(output, redactor))
        cell["outputs"] = kept
    texts = [_joined_text(output.get("text", "")) for output in streams]
    for output in streams:
        output["text"] = ""  # searched once, as one text, below
    # Everything else (sources, metadata, text outputs, JSON scraps, errors) as text.
    redacted: NotebookNode = redactor.value(scrubbed)
    copies = [
        output
        for cell in redacted.cells
        for output in cell.get("outputs") or ()
        if output.get("output_type") == "stream"
    ]
    for output, text in zip(copies, redactor.pieces(texts), strict=True):
        output["text"] = text
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
    if mime.startswith(_MARKUP_MIMES) and isinstance(value, (str, list)):
        markup = _joined_text(value)
        if mime.startswith("text/markdown") and len(markup) > MAX_RENDERED_MARKDOWN:
            return (
                f"a markdown output over {MAX_RENDERED_MARKDOWN:,} characters is not rendered "
                "to be searched for secrets"
            )
        shown = (
            redactor.found_in_markdown(markup)
            if mime.startswith("text/markdown")
            else redactor.found_in_markup(markup)
        )
        return None if shown is None else f"it shows the value of secret {shown} once decoded"
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
