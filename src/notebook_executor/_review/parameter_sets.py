"""Parameter sets per notebook, from one YAML file: read by ``check`` and by ``pytest --notebooks``.

The file maps notebooks (paths or glob patterns, relative to the file's own folder) to their
parameters::

    # notebook-parameters.yaml
    logbook.md:                  # one set: the parameters themselves
      station: north-3
    dataframe.py:                # several sets: a list, each {id, parameters}
      - id: small
        parameters: {n: 2}
      - id: large
        parameters: {n: 40}
    hello.py:                    # or plain mappings, as `sweep -f` reads them: ids made of
      - {name: Ada}              # the values (hello.py[name=Ada], hello.py[name=Bob])
      - {name: Bob}
    "reports/*.ipynb":           # a glob (``*`` matches across folders too)
      year: 2024

A notebook takes the sets of the first key (in the file's order) that names it; a notebook no
key names runs once with its defaults. With several sets, each is a test item (``check`` line,
JUnit case, pytest item) named ``path[id]``; with one, the item is the path alone. Values are
YAML values, checked against the notebook's declared parameters as ``run -f`` checks them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InvalidArgumentError
from .._sources.bounded import MAX_TEXT_SOURCE_BYTES
from .._sources.regular import read_regular_text

__all__ = ["DEFAULT_SET", "ParameterSet", "ParameterSets", "load_parameter_sets"]

_ID = re.compile(r"^[\w.=,+-]{1,80}$")


@dataclass(frozen=True)
class ParameterSet:
    """One run of a notebook: its id (``None`` for a notebook's only set) and parameters
    (``None``: the notebook's defaults)."""

    id: str | None
    parameters: dict[str, Any] | None

    def label(self, path: str) -> str:
        """``path``, with ``[id]`` when the set has an id."""
        return path if self.id is None else f"{path}[{self.id}]"


#: The set of a notebook the file does not name: its defaults, no id.
DEFAULT_SET = ParameterSet(None, None)


@dataclass(frozen=True)
class ParameterSets:
    """The sets of a parameter-sets file, looked up by notebook path."""

    base: Path
    entries: tuple[tuple[str, tuple[ParameterSet, ...]], ...] = ()

    def for_notebook(self, notebook: str | os.PathLike[str]) -> tuple[ParameterSet, ...]:
        """The sets ``notebook`` runs with (one :data:`DEFAULT_SET` when no key names it)."""
        try:
            relative = Path(notebook).resolve().relative_to(self.base).as_posix()
        except ValueError:
            return (DEFAULT_SET,)
        for pattern, sets in self.entries:
            if fnmatch.fnmatchcase(relative, pattern):
                return sets
        return (DEFAULT_SET,)


def load_parameter_sets(path: str | os.PathLike[str] | None) -> ParameterSets | None:
    """Read a parameter-sets file (see the module's docstring); ``None`` for ``None``.

    Raises
    ------
    InvalidArgumentError
        The file cannot be read, is not YAML, or does not have the shape above (the message
        names the key at fault).
    """
    import yaml

    from .._sources.bounded import YamlRefused, load_yaml

    if path is None:
        return None
    where = os.fspath(path)
    try:
        text = read_regular_text(path, MAX_TEXT_SOURCE_BYTES)
        data = load_yaml(text)
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise _bad(where, f"cannot be read: {reason}") from None
    except (YamlRefused, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        raise _bad(where, f"is not valid YAML ({first})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _bad(where, "must be a mapping of notebook paths to parameters")
    entries = []
    for key, value in data.items():
        if not isinstance(key, str) or not key.strip():
            raise _bad(where, f"key {key!r} is not a notebook path")
        pattern = Path(key).as_posix().removeprefix("./")
        entries.append((pattern, _sets(where, key, value)))
    return ParameterSets(Path(path).resolve().parent, tuple(entries))


def _sets(where: str, key: str, value: Any) -> tuple[ParameterSet, ...]:
    if value is None:
        return (DEFAULT_SET,)
    if isinstance(value, dict):
        return (ParameterSet(None, _parameters(where, key, value)),)
    if not isinstance(value, list) or not value:
        raise _bad(
            where,
            f"{key!r}: give a mapping of parameters, or a list of sets "
            "({id: ..., parameters: {...}} or mappings of parameters)",
        )
    sets: list[ParameterSet] = []
    for position, item in enumerate(value):
        if not isinstance(item, dict):
            raise _bad(where, f"{key!r}, set {position}: a set is a mapping")
        named = "parameters" in item and not set(item) - {"id", "parameters"}
        parameters = _parameters(where, key, item["parameters"] if named else item)
        set_id = str(item["id"]) if named and "id" in item else _id_of(parameters, position)
        if not _ID.match(set_id):
            raise _bad(
                where,
                f"{key!r}, set {position}: id {set_id!r} must be 1-80 letters, digits or '_.=,+-'",
            )
        if any(known.id == set_id for known in sets):
            raise _bad(where, f"{key!r}: two sets have the id {set_id!r}")
        sets.append(ParameterSet(set_id, parameters))
    if len(sets) == 1:
        return (ParameterSet(None, sets[0].parameters),)
    return tuple(sets)


def _id_of(parameters: dict[str, Any], position: int) -> str:
    """A readable id made of a set's values (``n=2,label=cubes``), else its position."""
    text = ",".join(f"{name}={value}" for name, value in parameters.items())
    text = re.sub(r"[^\w.=,+-]+", "_", text)[:80]
    return text if text else str(position)


def _parameters(where: str, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
        raise _bad(where, f"{key!r}: parameters must be a mapping of names to values")
    return dict(value)


def _bad(where: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"parameter-sets file {where!r}: {problem}", argument="parameter_sets"
    )
