"""Output regression: cells' outputs compared with golden ones, after normalisation.

Shared by ``check --execute`` (through ``validate``) and ``pytest --notebooks``.

**What is compared.** Text only, as nbval's lax mode does: streams, errors (name and value),
and the ``text/plain``, ``text/html``, ``text/markdown``, ``text/latex`` and
``application/json`` data of results; images and other binary data are not compared.

**Normalisation**, on both sides: ANSI codes removed, memory addresses (``0x7f3a...``),
ISO-like timestamps (``2024-05-01 12:30:00``, ``2024-05-01T12:30:00.123+00:00``) and uuids
replaced by placeholders, trailing spaces dropped, then the user's rules applied in order. A
rules file has nbval's ``--nbval-sanitize-with`` format (an INI file whose sections each hold a
``regex`` and a ``replace``)::

    [object ids]
    regex: id=\\d+
    replace: id=ID

**Where golden outputs live.** Per parameter set, in every format. An ``.ipynb`` run with its
only set keeps them in the notebook itself (the outputs saved with it, as nbval reads them: a
cell saved with neither outputs nor an execution count, never run, has none yet). Otherwise
(a text source, ``.py`` or ``.md``, which keeps no outputs, or any notebook run with several
parameter sets) they are in a JSON file beside the source named after it: ``analysis.py`` ->
``analysis.py.golden.json``, ``report.ipynb`` -> ``report.ipynb.golden.json``, holding one
entry per parameter set (``""`` for a notebook's only set), each mapping a cell index to its
outputs. A compared cell with no golden outputs yet is not compared (a warning says so).
Regenerating writes the new outputs of the compared cells there (in the ``.ipynb``: only those
cells' ``outputs`` and ``execution_count`` change; the file is written as nbformat writes one,
so a notebook saved by Jupyter differs in those cells only).
"""

from __future__ import annotations

import configparser
import difflib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import InvalidArgumentError
from .._sources.bounded import MAX_SOURCE_BYTES, MAX_TEXT_SOURCE_BYTES
from .._sources.regular import read_regular_text
from .diff import normalised_outputs

__all__ = [
    "COMPARED_MIMES",
    "GOLDEN_SUFFIX",
    "OutputRules",
    "comparable",
    "golden_path",
    "load_rules",
    "readable_diff",
    "store_outputs",
    "stored_outputs",
]

#: Output types compared.
COMPARED_MIMES = frozenset(
    {"text/plain", "text/html", "text/markdown", "text/latex", "application/json"}
)
#: A text source's golden outputs: ``<source name>`` + this.
GOLDEN_SUFFIX = ".golden.json"
_GOLDEN_VERSION = 1

_BUILT_IN: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
        ),
        "<timestamp>",
    ),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
)


@dataclass(frozen=True)
class OutputRules:
    """How outputs are compared: which cells, the user's sanitising rules, and whether the
    golden outputs are regenerated instead of compared."""

    #: Every code cell compared, not only ``NBVAL_CHECK_OUTPUT`` ones.
    every_cell: bool = False
    #: ``(regex, replacement)`` applied after the built-in normalisation.
    rules: tuple[tuple[re.Pattern[str], str], ...] = field(default=())
    #: Store the new outputs as the golden ones.
    update: bool = False
    #: The parameter set's id: a text source's golden file has one entry per set.
    set_id: str | None = None


def load_rules(path: str | os.PathLike[str] | None) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The ``(regex, replace)`` rules of an nbval sanitize file, in the file's order.

    Raises
    ------
    InvalidArgumentError
        The file cannot be read, a section lacks ``regex``, or a regex does not compile.
    """
    if path is None:
        return ()
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_regular_text(path, MAX_TEXT_SOURCE_BYTES), os.fspath(path))
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise InvalidArgumentError(
            f"sanitize file {os.fspath(path)!r} cannot be read: {exc}", argument="sanitize"
        ) from None
    rules = []
    for section in parser.sections():
        if "regex" not in parser[section]:
            raise InvalidArgumentError(
                f"sanitize file {os.fspath(path)!r}: section [{section}] has no regex",
                argument="sanitize",
            )
        try:
            pattern = re.compile(parser[section]["regex"])
        except re.error as exc:
            raise InvalidArgumentError(
                f"sanitize file {os.fspath(path)!r}: section [{section}]: bad regex: {exc}",
                argument="sanitize",
            ) from None
        rules.append((pattern, parser[section].get("replace", "")))
    return tuple(rules)


def _normalise(text: str, rules: Iterable[tuple[re.Pattern[str], str]]) -> str:
    for pattern, replacement in (*_BUILT_IN, *rules):
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def comparable(outputs: Sequence[Mapping[str, Any]], rules: OutputRules) -> list[list[Any]]:
    """``outputs`` as compared: text outputs only, normalised (see the module's docstring)."""
    items = normalised_outputs(outputs, mimes=COMPARED_MIMES)
    return [
        [_normalise(part, rules.rules) if isinstance(part, str) else part for part in item]
        for item in items
    ]


def _lines(items: list[list[Any]]) -> list[str]:
    lines: list[str] = []
    for item in items:
        kind = item[0]
        if kind == "stream":
            lines.append(f"[{item[1]}]")
            lines.extend(str(item[2]).rstrip("\n").split("\n"))
        elif kind == "error":
            lines.append(f"[error] {item[1]}: {item[2]}")
        else:
            for mime, value in json.loads(item[1]).items():
                lines.append(f"[{mime}]")
                text = value if isinstance(value, str) else json.dumps(value, indent=1)
                lines.extend(text.rstrip("\n").split("\n"))
    return lines


def readable_diff(want: list[list[Any]], got: list[list[Any]], *, limit: int = 60) -> str:
    """A unified diff of two cells' compared outputs (golden first), at most ``limit`` lines."""
    lines = list(
        difflib.unified_diff(_lines(want), _lines(got), "golden", "this run", n=2, lineterm="")
    )
    if len(lines) > limit:
        lines = [*lines[:limit], f"[... {len(lines) - limit} more diff lines]"]
    return "\n".join(lines)


def golden_path(source: str | os.PathLike[str], set_id: str | None = None) -> Path:
    """Where ``source``'s golden outputs for parameter set ``set_id`` are: an ``.ipynb``'s
    only set's (``set_id`` None) in the notebook itself; any other in the ``.golden.json``
    file beside the source, which holds one entry per set."""
    path = Path(source)
    if path.suffix.lower() == ".ipynb" and set_id is None:
        return path
    return path.with_name(path.name + GOLDEN_SUFFIX)


def stored_outputs(
    source: str | os.PathLike[str], nb: Any, set_id: str | None
) -> dict[int, list[Any]] | None:
    """The golden outputs of ``source``'s cells for parameter set ``set_id``, ``{index:
    outputs}``; ``None`` when none are stored. ``nb`` is the source as read: an ``.ipynb``
    holds its only set's, for each cell that was run when it was saved (a cell with neither
    outputs nor an execution count has none: it was never run).

    Raises
    ------
    InvalidArgumentError
        The golden file cannot be read (not a regular file, not UTF-8, not JSON, not golden
        outputs), said in one line naming it.
    """
    path = golden_path(source, set_id)
    if path == Path(source):
        return {
            i: list(cell.get("outputs") or [])
            for i, cell in enumerate(nb.cells)
            if cell.get("outputs") or cell.get("execution_count") is not None
        }
    try:
        data = json.loads(read_regular_text(path, MAX_SOURCE_BYTES))
        sets = data.get("sets", {}) if isinstance(data, dict) else None
        if not isinstance(sets, dict):
            raise ValueError('not golden outputs (no "sets" mapping)')
        entry = sets.get(set_id or "")
        if entry is None:
            return None
        if not isinstance(entry, dict) or not all(
            isinstance(outputs, list) for outputs in entry.values()
        ):
            raise ValueError(f"not golden outputs (set {set_id or ''!r})")
        return {int(index): list(outputs) for index, outputs in entry.items()}
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        if isinstance(exc, json.JSONDecodeError):
            reason = f"not JSON ({exc})"
        raise InvalidArgumentError(
            f"golden outputs {os.fspath(path)!r} cannot be read: {reason}", argument="golden"
        ) from None


def store_outputs(
    source: str | os.PathLike[str],
    set_id: str | None,
    outputs: Mapping[int, list[Any]],
    execution_counts: Mapping[int, int | None] | None = None,
) -> Path:
    """Write ``outputs`` (``{index: outputs}``) as ``source``'s golden ones for parameter set
    ``set_id`` (see :func:`golden_path`); the path written (an :class:`InvalidArgumentError`
    naming the ``.golden.json`` file when it cannot be). In an ``.ipynb``, each cell gets its
    ``execution_count`` in this run (``execution_counts``) too: a cell that printed nothing
    then still holds golden outputs, none."""
    from .._sources.files import atomic_write_text

    path = golden_path(source, set_id)
    if path == Path(source):
        nb = json.loads(read_regular_text(path, MAX_SOURCE_BYTES))
        for index, cell_outputs in outputs.items():
            cell = nb["cells"][index]
            cell["outputs"] = _split([_stored(o) for o in cell_outputs])
            counts = [o.get("execution_count") for o in cell_outputs]
            ran = (execution_counts or {}).get(index)
            cell["execution_count"] = next((c for c in counts if c is not None), ran)
        # As nbformat writes a notebook: a file nbformat wrote changes in those cells only.
        atomic_write_text(path, json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n")
        return path
    data: dict[str, Any] = {"golden_version": _GOLDEN_VERSION, "source": Path(source).name}
    try:
        old = json.loads(read_regular_text(path, MAX_SOURCE_BYTES))
        if isinstance(old, dict) and isinstance(old.get("sets"), dict):
            data["sets"] = old["sets"]
    except (OSError, ValueError):
        pass
    sets = data.setdefault("sets", {})
    sets[set_id or ""] = {
        str(index): [_stored(o) for o in cell_outputs]
        for index, cell_outputs in sorted(outputs.items())
    }
    try:
        atomic_write_text(
            path, json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
        )
    except OSError as exc:
        raise InvalidArgumentError(
            f"golden outputs {os.fspath(path)!r} cannot be written: {exc.strerror or exc}",
            argument="golden",
        ) from None
    return path


def _split(outputs: list[dict[str, Any]]) -> list[Any]:
    """``outputs`` with multi-line text as lists of lines, as nbformat writes them."""
    import nbformat
    from nbformat.v4.rwbase import split_lines

    holder = nbformat.from_dict(
        {"cells": [{"cell_type": "code", "source": "", "outputs": outputs}]}
    )
    return json.loads(json.dumps(split_lines(holder).cells[0].outputs))  # type: ignore[no-any-return]


def _stored(output: Mapping[str, Any]) -> dict[str, Any]:
    """An output as nbformat stores it: no transient keys."""
    kept = {key: value for key, value in output.items() if key != "transient"}
    return json.loads(json.dumps(kept, default=str))  # type: ignore[no-any-return]
