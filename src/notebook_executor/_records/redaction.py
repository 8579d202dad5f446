"""Finding secrets in text: every shape a printed secret takes, through escape codes.

Shapes searched for, for each secret ``s`` (:func:`_printed`):

* ``s`` itself;
* the inside of ``repr(s)`` and ``ascii(s)`` (either quoting) and of ``json.dumps(s)``
  (``\\uXXXX`` escapes or not);
* the inside of the repr of those escaped forms as bytes (``s.encode("unicode_escape")``);
* the inside of the repr of ``s``'s bytes in UTF-8, UTF-16-LE and UTF-16-BE
  (``print(s.encode())``, ``print(s.encode("utf-16"))``), either quoting;
* those bytes in hex, lower and upper case (``s.encode().hex()``);
* the base64 (standard and URL-safe) of its UTF-8 bytes, at each of the three
  alignments, where at least :data:`_MIN_BASE64_CHARS` characters depend on ``s`` alone;
* each of these with escape codes or invisible characters between its characters
  (:data:`_GAPS`: every ECMA-48 escape sequence, control characters, zero-width
  characters): such a text is searched as it shows, and the secret is replaced with the
  codes inside it, so that no later step that strips codes (the record's markdown, the
  search index, the report, exports, a terminal) can rejoin it. A text is searched as a
  terminal shows it (:data:`_GAPS`: ECMA-48 sequences removed whole), and, when they differ,
  as the notebook renderers show it (:data:`_RENDERED`: nbconvert and JupyterLab remove
  ``ESC [ (.*?) ([@-~])``, which swallows what follows a malformed ``ESC [`` up to the next
  letter, and leave the rest of other sequences shown).

Secrets shorter than :data:`MIN_SECRET_CHARS` characters are not searched for (see
:mod:`.scrub`).

Cost, linear in the text: a run without secrets does none of this. With two secrets (about
30 forms), a redactor is built in 0.2 ms; a text is scanned once per form (about 10 ms a MB,
about 1 ms for a run of 20 cells printing 4 kB each), and a text holding escape codes once
more as it shows (about 130 ms a MB of densely coloured output), and once more as the
renderers show it when an escape in it is not a well-formed CSI (as much again); short
strings (shorter than every form) are not scanned. Shown live, each piece costs some 30 us.
"""

from __future__ import annotations

import base64
import bisect
import functools
import html
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MIN_SECRET_CHARS", "Redactor", "for_terminal", "redact", "secret_byte_forms"]

#: Secrets shorter than this are not searched for in what a run stores (see the module doc).
MIN_SECRET_CHARS = 6

#: What shows nothing between two characters on a terminal or in a page: every ECMA-48 escape
#: sequence (CSI, OSC and the other string sequences, with either terminator, and their 8-bit
#: forms, two-character escapes), the other control characters but tab and line moves, and the
#: invisible format characters (soft hyphen, zero-width spaces and joiners, direction marks).
#: Broader than :func:`.text.strip_ansi` on purpose: whatever any reader removes is removed
#: here before a secret is looked for, so no reader can rejoin one.
_GAP_CHARS = "".join(
    map(
        chr,
        [
            *range(0x00, 0x09),
            *range(0x0E, 0x20),
            *range(0x7F, 0xA0),
            0xAD,
            *range(0x200B, 0x2010),
            *range(0x2060, 0x2065),
            0xFEFF,
        ],
    )
)
_ASCII_GAP_CHARS = "".join(char for char in _GAP_CHARS if char.isascii())
_GAP_CLASS = "[" + re.escape(_GAP_CHARS) + "]"
#: Every gap starts with one of these: a text without any is searched as it is (the fast path).
_GAP_START = re.compile(_GAP_CLASS)
# One class first, then what follows an ESC or an 8-bit introducer: the pattern then scans at
# the speed of a class (three times faster than alternatives that each start differently).
_GAPS = re.compile(
    _GAP_CLASS + r"(?:(?<=\x1b)(?:[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS...
    r"|\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|[ -/]*[0-~])"  # two-character escapes, charset selection
    r"|(?<=[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # 8-bit OSC, DCS...
    r"|(?<=\x9b)[0-?]*[ -/]*[@-~])?"  # 8-bit CSI
)
#: An escape sequence begun at the end of a text: the rest may come with the next piece.
_UNFINISHED = re.compile(
    r"(?:\x1b(?:\[[0-?]*[ -/]*|[\]PX^_][^\x07\x1b\x9c]*\x1b?|[ -/]*)?"
    r"|\x9b[0-?]*[ -/]*|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*\x1b?)\Z"
)
#: What the notebook renderers remove (nbconvert's ``strip_ansi`` and ``ansi2html``,
#: JupyterLab's output area): ``ESC [`` up to the first character in ``@-~`` on its line,
#: however malformed what lies between; then each invisible character alone (other escape
#: sequences show, but for their ``ESC``).
_RENDERED = re.compile(r"\x1b\[[^\n]*?[@-~]|" + _GAP_CLASS)
#: A text the renderers show otherwise than a terminal: an ``ESC`` that does not begin a
#: well-formed CSI, or an 8-bit introducer.
_RENDERED_DIFFERS = re.compile(r"\x1b(?!\[[0-?]*[ -/]*[@-~])|[\x90\x98\x9b\x9d-\x9f]")
_TAGS = re.compile(r"<[^<>]*>")  # bounded by the next "<": linear
_MARKDOWN_ESCAPES = re.compile(r"\\([!-/:-@\[-`{-~])")

#: A found secret: where it starts and ends in the text searched, and its name.
_Span = tuple[int, int, str]


class Redactor:
    """Finds and replaces the values of ``secrets`` (a name -> value mapping).

    Each value is looked for in every printed form of :func:`_printed`, and through escape
    codes and invisible characters (:data:`_GAPS`) between its characters: a text holding a
    gap is searched as it shows (gaps removed), and what is found is replaced together with
    the gaps inside it. Texts without gaps (nearly all) are searched as they are; a redactor
    without secrets returns at once.
    """

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
        self._pattern = _alternation(tuple(forms)) if forms else None
        # The forms as they show (gaps removed), for texts that hold gaps.
        shown: dict[str, str] = {}
        for form in forms:
            shown.setdefault(_GAPS.sub("", form) or form, names[form])
        self._shown = shown
        self._shown_forms = sorted(shown, key=lambda form: (-len(form), form))
        self._shown_pattern = (
            self._pattern if self._shown_forms == forms else _alternation(tuple(self._shown_forms))
        )
        self._longest = max((len(form) for form in self._shown_forms), default=0)
        # No text shorter than every form can hold one, gaps or not (most strings of a notebook).
        self._shortest = min((len(form) for form in self._shown_forms), default=0)
        self._held: tuple[frozenset[str], frozenset[str]] | None = None
        self._bytes: list[tuple[bytes, str]] | None = None  # made when a payload is searched

    def __bool__(self) -> bool:
        return self._pattern is not None

    def _spans(self, text: str) -> list[_Span]:
        """Where secrets occur in ``text``, in order, not overlapping."""
        if self._pattern is None or self._shown_pattern is None or len(text) < self._shortest:
            return []
        # A secret may lie inside a gap too (an OSC title): the text as it is is searched.
        spans = (
            _found(self._pattern, self._names, text)
            if any(form in text for form in self._forms)
            else []
        )
        if not _has_gap(text):
            return spans
        views = [_GAPS, _RENDERED] if _RENDERED_DIFFERS.search(text) else [_GAPS]
        for gaps in views:
            shown = gaps.sub("", text)
            if not any(form in shown for form in self._shown_forms):
                continue
            where = _where(text, gaps)
            spans += [
                (where(start), where(end - 1) + 1, name)
                for start, end, name in _found(self._shown_pattern, self._shown, shown)
            ]
        spans.sort()
        merged: list[_Span] = []
        for start, end, name in spans:
            if merged and start < merged[-1][1]:
                if end > merged[-1][1]:
                    merged[-1] = (merged[-1][0], end, merged[-1][2])
                continue
            merged.append((start, end, name))
        return merged

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by ``[secret NAME]``."""
        spans = self._spans(text)
        if not spans:
            return text
        parts = []
        cursor = 0
        for start, end, name in spans:
            parts += [text[cursor:start], f"[secret {name}]"]
            cursor = end
        parts.append(text[cursor:])
        return "".join(parts)

    def found_in(self, text: str) -> str | None:
        """The name of a secret that occurs in ``text``, or None."""
        spans = self._spans(text)
        return spans[0][2] if spans else None

    def found_in_bytes(self, data: bytes) -> str | None:
        """The name of a secret that occurs in ``data`` (UTF-8 or UTF-16), or None."""
        if self._bytes is None:
            encoded = {
                form.encode(encoding): self._names[form]
                for form in self._forms
                for encoding in ("utf-8", "utf-16-le", "utf-16-be")
            }
            self._bytes = sorted(encoded.items(), key=lambda item: -len(item[0]))
        for encoded_form, name in self._bytes:
            if encoded_form in data:
                return name
        return None

    def found_in_markup(self, text: str) -> str | None:
        """The name of a secret that ``text`` (HTML, XML, markdown) shows once decoded.

        Character references are decoded (``&#116;``, ``&#x74;``, ``&lowbar;``), with and
        without the tags between them, and markdown's backslash escapes removed. Secrets
        written plainly are not counted: :meth:`text` replaces those.
        """
        if self._pattern is None:
            return None
        plain = self.text(text)
        decoded = []
        if "&" in plain:
            decoded.append(html.unescape(plain))
        untagged = _TAGS.sub("", plain) if "<" in plain else plain
        if untagged is not plain:
            decoded.append(html.unescape(untagged))
        if "\\" in untagged:
            decoded.append(html.unescape(_MARKDOWN_ESCAPES.sub(r"\1", untagged)))
        return next((name for shown in decoded if (name := self.found_in(shown))), None)

    def found_in_markdown(self, text: str) -> str | None:
        """The name of a secret that ``text`` (markdown) shows once rendered, or None.

        Rendered by mistune, the engine nbconvert renders markdown with (the report, HTML
        exports): emphasis, links and code spans written inside a secret
        (``tok3n*ABCDEF*``, ``[tok3n](x)ABCDEF``) show it joined. Then searched as
        :meth:`found_in_markup` searches HTML. Costs what rendering costs (about 2 s a MB:
        callers bound the text, see :data:`.scrub.MAX_RENDERED_MARKDOWN`).
        """
        if self._pattern is None:
            return None
        found = self.found_in_markup(text)
        if found is not None:
            return found
        import mistune

        rendered = mistune.html(self.text(text))
        return self.found_in_markup(rendered if isinstance(rendered, str) else str(rendered))

    def release(self, text: str) -> tuple[str, str]:
        """Split ``text`` (what waited plus a new piece) for showing it as it arrives.

        Returns the part that may be shown now, redacted, and the raw tail that must wait
        for the next piece (or be shown through :meth:`text` at the end): the shortest tail
        that could be the beginning of a secret, or of an escape sequence. A secret written
        in pieces is so masked whole, however its pieces were sent.
        """
        if self._pattern is None:
            return text, ""
        held = self._held_from(text)
        shown = []
        cursor = 0
        for start, end, name in self._spans(text):
            if start >= held:
                break
            shown += [text[cursor:start], f"[secret {name}]"]
            cursor = end
        held = max(held, cursor)
        shown.append(text[cursor:held])
        return "".join(shown), text[held:]

    def _held_from(self, text: str) -> int:
        """Where the tail of ``text`` that may begin a secret (as it shows) starts."""
        unfinished = _UNFINISHED.search(text) if _has_gap(text) else None
        end = len(text) if unfinished is None else unfinished.start()
        # Only the last characters shown matter: a window wide enough for the longest form
        # and the gaps among them (the whole text when gaps fill it).
        low = max(0, end - 4 * self._longest - 4096)
        window = text[low:end]
        gapped = _has_gap(window)
        shown = _GAPS.sub("", window) if gapped else window
        if gapped and low and len(shown) < self._longest:
            low, window = 0, text[:end]
            shown = _GAPS.sub("", window)
        # A tail that begins a form holds only characters of forms: walk back over those, then
        # take the longest such tail that is a proper prefix of a form.
        chars, prefixes = self._prefixes()
        held = len(shown)
        stop = max(0, held - self._longest + 1)
        while held > stop and shown[held - 1] in chars:
            held -= 1
        held = next((i for i in range(held, len(shown)) if shown[i:] in prefixes), len(shown))
        if held == len(shown):
            return end
        return low + (_where(window)(held) if gapped else held)

    def _prefixes(self) -> tuple[frozenset[str], frozenset[str]]:
        """The characters of the forms, and their proper prefixes (made when first needed:
        only text shown as it arrives asks)."""
        if self._held is None:
            self._held = (
                frozenset("".join(self._shown_forms)),
                frozenset(form[:k] for form in self._shown_forms for k in range(1, len(form))),
            )
        return self._held

    def pieces(self, pieces: list[str]) -> list[str]:
        """Redact ``pieces`` as one text (a stream sent in parts), keeping the parts apart.

        A secret that spans parts is replaced in the part where it starts; the rest of it is
        removed from the parts that follow.
        """
        if self._pattern is None:
            return pieces
        joined = "".join(pieces)
        spans = self._spans(joined)
        if not spans:
            return pieces
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


def _found(pattern: re.Pattern[str], names: Mapping[str, str], text: str) -> list[_Span]:
    return [(m.start(), m.end(), names[m.group()]) for m in pattern.finditer(text)]


def _has_gap(text: str) -> bool:
    """Whether ``text`` holds a character that may begin a gap."""
    if len(text) < 4096:
        return _GAP_START.search(text) is not None
    # On long texts, one C-level scan per character is several times faster than the class.
    return any(char in text for char in (_ASCII_GAP_CHARS if text.isascii() else _GAP_CHARS))


def _where(text: str, gaps: re.Pattern[str] = _GAPS) -> Callable[[int], int]:
    """Where the character ``i`` of ``text`` as it shows (``gaps`` removed) is in ``text``."""
    shown_at: list[int] = []  # where each run of shown characters starts, shown and in text
    text_at: list[int] = []
    cursor = length = 0
    for gap in gaps.finditer(text):
        if gap.start() > cursor:
            shown_at.append(length)
            text_at.append(cursor)
            length += gap.start() - cursor
        cursor = gap.end()
    shown_at.append(length)
    text_at.append(cursor)

    def where(index: int) -> int:
        run = bisect.bisect_right(shown_at, index) - 1
        return text_at[run] + index - shown_at[run]

    return where


#: Colours and other graphic renditions: the only escape sequences :func:`for_terminal` keeps.
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def for_terminal(text: str) -> str:
    """``text`` (redacted) fit to write to a terminal: it shows what was searched.

    A terminal does not only hide escape codes: a backspace, a carriage return or a cursor
    move writes what follows over what was shown, so a secret written ``tok3X\\bnABC``
    shows whole though no text holds it. So every gap (:data:`_GAPS`) is removed but colours
    (SGR sequences), and a carriage return becomes a line end: nothing moves the cursor back,
    and the terminal shows the text as the redactor searched it, gaps removed.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not _has_gap(text):
        return text
    return _GAPS.sub(lambda gap: gap.group() if _SGR.fullmatch(gap.group()) else "", text)


def redact(value: Any, secrets: Mapping[str, str]) -> Any:
    """Return ``value`` with every secret value replaced by ``[secret NAME]``, recursively.

    A value is also found as a notebook commonly prints it (see :func:`_printed`) and with
    escape codes between its characters. Secrets shorter than :data:`MIN_SECRET_CHARS` are
    not searched for.
    """
    return Redactor(secrets).value(value)


#: Encodings whose bytes a notebook may print (``print(s.encode("utf-16"))`` prints a byte
#: order mark, then the little-endian form).
_ENCODINGS = ("utf-8", "utf-16-le", "utf-16-be")

#: A base64 form shorter than this could match unrelated text: not searched for.
_MIN_BASE64_CHARS = 8


def secret_byte_forms(secrets: Mapping[str, str]) -> list[bytes]:
    """Every printed form of each secret (:func:`_printed`) as bytes, in UTF-8, UTF-16 and
    UTF-32 (as pickles and arrays hold text): what a durable checkpoint must not hold. Short
    secrets too: a checkpoint refused by mistake costs a rerun, never a leak."""
    forms: set[bytes] = set()
    for value in secrets.values():
        if not value:
            continue
        for form in _printed(value):
            for encoding in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le"):
                forms.add(form.encode(encoding, "surrogatepass"))
    return sorted(forms, key=len, reverse=True)


@functools.lru_cache(maxsize=32)
def _alternation(forms: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern matching any of ``forms`` (kept: a run builds its redactor several times,
    and escaping the forms costs more than the rest of a redactor)."""
    return re.compile("|".join(map(re.escape, forms)))


def _printed(text: str) -> set[str]:
    """Every printed form of ``text`` searched for (the list is in the module doc)."""
    both = "'\""  # a repr of a text holding both quotes escapes its single quotes
    forms = {
        text,
        repr(text)[1:-1],
        repr(text + both)[1:-4],
        ascii(text)[1:-1],
        ascii(text + both)[1:-4],
        json.dumps(text, ensure_ascii=False)[1:-1],
        json.dumps(text)[1:-1],
    }
    # The bytes of an escaped form (``s.encode("unicode_escape")``) print with backslashes
    # doubled.
    forms |= {repr(form.encode("ascii", "backslashreplace"))[2:-1] for form in list(forms)}
    for encoding in _ENCODINGS:
        data = text.encode(encoding)
        forms |= {
            repr(data)[2:-1],
            repr(data + b"'\"")[2:-4],
            data.hex(),
            data.hex().upper(),
        }
        if encoding == "utf-8":
            forms |= _base64_forms(data)
    return forms


def _base64_forms(data: bytes) -> set[str]:
    """The base64 characters that only ``data`` decides, at each of the three alignments."""
    forms = set()
    for skip in range(3):
        encoded = base64.b64encode(bytes(skip) + data).decode()
        whole = (skip + len(data)) // 3 * 4  # characters of complete groups
        core = encoded[4 if skip else 0 : whole]
        if len(core) >= _MIN_BASE64_CHARS:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return forms
