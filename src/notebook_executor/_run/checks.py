"""Checks of the caller's arguments: paths, limits in seconds, environments, text a record can hold.

Each raises the typed error of bad input before anything starts; the planner, the facade and
the catalog's filters call these, so that one argument is checked one way everywhere.
"""

from __future__ import annotations

import math
import os
import posixpath
import uuid
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from .._errors import InvalidArgumentError, NotebookSourceError, OutputPathError
from .._sources.bounded import unencodable
from .._sources.files import missing_folder
from .._sources.formats import FORMATS, find_format
from .._sources.remote import is_url

__all__ = [
    "PathLike",
    "check_count",
    "check_env",
    "check_hooks",
    "check_output_path",
    "check_path",
    "check_seconds",
    "check_unicode",
]

PathLike = str | os.PathLike[str]


def check_seconds(name: str, value: float | None) -> float | None:
    """A limit ``name`` in seconds: None (no limit), or a positive number as a float (an
    infinite or overflowing one is no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidArgumentError(
            f"{name} must be a positive number of seconds, got {value!r}", argument=name
        )
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond any float: no limit, as infinity
        return None
    if math.isinf(seconds):
        return None
    return seconds


def check_count(name: str, value: int | None, *, minimum: int) -> int | None:
    """``value`` when it is None or an int of at least ``minimum`` (0 or 1).

    Raises
    ------
    InvalidArgumentError
        It is not.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        wanted = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise InvalidArgumentError(f"{name} must be {wanted}, got {value!r}", argument=name)
    return value


def check_path(name: str, value: object) -> None:
    """Refuse an argument ``name`` that is not a path (a ``str`` or ``os.PathLike``)."""
    if isinstance(value, (str, os.PathLike)):
        return
    hint = " (parameters go in parameters=...)" if isinstance(value, Mapping) else ""
    raise InvalidArgumentError(
        f"{name} must be a path, got {type(value).__name__}{hint}", argument=name
    )


def check_env(kind: str, values: Mapping[str, str] | None) -> dict[str, str]:
    """An environment given as ``kind`` (``env``, ``secrets``, ``base_env``), as a dict of
    valid names to strings; a secret's value must also be valid Unicode."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise InvalidArgumentError(f"{kind} must be a mapping of names to strings", argument=kind)
    checked: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
            raise InvalidArgumentError(
                f"{kind}: {name!r} is not a valid environment name", argument=kind
            )
        if not isinstance(value, str) or "\x00" in value:
            raise InvalidArgumentError(
                f"{kind}: the value of {name!r} must be a string", argument=kind
            )
        if kind == "secrets" and unencodable(value):
            # Searched for in outputs as UTF-8 text (an env value may hold any bytes).
            raise InvalidArgumentError(
                f"{kind}: the value of {name!r} is not valid Unicode", argument=kind
            )
        if not _os_text(name) or not _os_text(value):
            # A byte that is not UTF-8 comes as \udcXX and goes back to the kernel as that byte;
            # another lone surrogate (a JSON "\ud800") is no byte: no process could get it.
            raise InvalidArgumentError(
                f"{kind}: {name!r} holds a lone surrogate, which no environment can hold",
                argument=kind,
            )
        checked[name] = value
    return checked


def _os_text(text: str) -> bool:
    """Whether ``text`` can be handed to a process (as ``os.fsencode`` encodes it)."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


def check_unicode(notebook: str, output_path: PathLike | None, request: str | None) -> None:
    """Refuse text that the run records (UTF-8 files, the catalog) could not hold.

    A file name with bytes that are not UTF-8 reaches Python as lone surrogates
    (``surrogateescape``); it is refused rather than recorded under another name.
    """
    problem = unencodable(notebook)
    if problem:
        raise NotebookSourceError(notebook, f"the file name is not UTF-8 ({problem}); rename it")
    if output_path is not None and unencodable(os.fspath(output_path)):
        raise OutputPathError(
            f"output_path {os.fspath(output_path)!r}: the file name is not UTF-8; rename it",
            argument="output_path",
        )
    problem = unencodable(request) if request is not None else None
    if problem:
        raise InvalidArgumentError(f"request: {problem}", argument="request")


def check_output_path(input_path: PathLike, output_path: PathLike) -> None:
    """Refuse an ``output_path`` that cannot take the copy, or that is the source itself.

    A local path's folder must exist (it is not created) and be writable: a uniquely named
    probe file is created there (``O_EXCL``: never an existing file) and removed at once, so
    a bad path is found before any kernel starts.
    """
    target = Path(output_path)
    fmt = find_format(target)
    if fmt is None or fmt.is_text:
        # The copy holds outputs: only a format that stores them can take it.
        stored = [f.extension for f in FORMATS if not f.is_text]
        raise OutputPathError(
            f"output_path must end in {' or '.join(stored)}, got {output_path!r}",
            argument="output_path",
        )
    if is_url(output_path):
        # A store's object, written by papermill's I/O; it must not be the source's URL.
        if is_url(input_path) and _url_key(os.fspath(input_path)) == _url_key(
            os.fspath(output_path)
        ):
            raise OutputPathError(
                f"output_path {os.fspath(output_path)!r} is the source notebook itself; "
                "give another path (the source is never overwritten)",
                argument="output_path",
            )
        return
    shown = os.fspath(output_path)
    if target.is_dir():
        raise OutputPathError(f"output_path {shown!r} is a directory", argument="output_path")
    same = target.resolve() == Path(input_path).resolve()
    if not same and target.exists():
        try:
            same = target.samefile(input_path)
        except OSError:
            same = False
    if same:
        raise OutputPathError(
            f"output_path {shown!r} is the source notebook itself; "
            "give another path (the source is never overwritten)",
            argument="output_path",
        )
    _check_writable_folder(shown, target.parent)


def _url_key(url: str) -> tuple[str, str, str, str]:
    """What names a store's object: scheme, host and normalised path (``/x/../`` folded)."""
    parts = urlsplit(url)
    path = posixpath.normpath(parts.path or "/")
    return parts.scheme.lower(), parts.netloc, path.lstrip("/"), parts.query


def _check_writable_folder(shown: str, folder: Path) -> None:
    """Refuse ``output_path`` (shown as ``shown``) unless ``folder`` exists and takes a file."""
    problem = missing_folder(folder / "probe")
    if problem:
        raise OutputPathError(f"output_path {shown!r}: {problem}", argument="output_path")
    probe = folder / f".notebook-executor-probe-{uuid.uuid4().hex}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise OutputPathError(
            f"output_path {shown!r}: the folder {os.fspath(folder)!r} is not writable "
            f"({exc.strerror or type(exc).__name__})",
            argument="output_path",
        ) from None
    os.close(fd)
    probe.unlink()


def check_hooks(on_cell: object, cancel: object) -> None:
    """``execute``'s ``on_cell`` (a callable) and ``cancel`` (an event), each None or that."""
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise InvalidArgumentError(
            f"cancel must be a threading.Event (or None), got {type(cancel).__name__}"
        )
    if on_cell is not None and not callable(on_cell):
        raise InvalidArgumentError(
            f"on_cell must be a callable (or None), got {type(on_cell).__name__}"
        )
