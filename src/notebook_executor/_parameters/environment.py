"""Environment variables a notebook declares it needs, found before any kernel starts.

A logbook declares them in its front matter (``env: [API_TOKEN, ...]``), any other notebook in
its metadata (``metadata["notebook_executor"]["env"]``). Each is looked up, first match wins,
in: the run's ``secrets=``, its ``env=``, the caller's environment, a ``.env`` file in the
notebook's folder, a ``.env`` file in the working directory. Their values are run secrets:
handed to the kernel, redacted from everything written, their names recorded.

``.env`` files are read by python-dotenv (:func:`read_dotenv`); lines it does not understand
are skipped, never logged (they may hold secrets).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import NotebookSourceError, ParameterError
from .._sources.confine import OutsideRoot, confined
from .._sources.regular import read_regular_text

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["declared_env_names", "read_dotenv", "resolve_declared_env"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Largest ``.env`` file read, in bytes (a file of names and values; never a data set).
MAX_DOTENV_BYTES = 1024 * 1024


def declared_env_names(shown: str, nb: NotebookNode) -> list[str]:
    """The environment variable names ``nb`` declares, in order.

    Raises
    ------
    NotebookSourceError
        The declaration is not a list of environment variable names.
    """
    front = nb.metadata.get("front_matter")
    declared: Any = None
    if isinstance(front, Mapping) and "env" in front:
        declared, where = front["env"], "front matter 'env'"
    else:
        own = nb.metadata.get("notebook_executor")
        if isinstance(own, Mapping) and "env" in own:
            declared, where = own["env"], "metadata notebook_executor.env"
    if declared is None:
        return []
    if not isinstance(declared, list) or not all(
        isinstance(name, str) and _NAME.fullmatch(name) for name in declared
    ):
        raise NotebookSourceError(
            shown, f"{where} must be a list of environment variable names, got {declared!r}"
        )
    return list(dict.fromkeys(declared))


def resolve_declared_env(
    names: list[str],
    *,
    env: dict[str, str],
    secrets: dict[str, str],
    folders: list[Path],
    declared: Mapping[str, Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
    root: Path | None = None,
) -> None:
    """Move or add every declared name into ``secrets`` (in place), from the first source
    that has it; ``env`` gives up the names it holds. ``environ`` is the caller's environment
    (default: this process's). With ``root`` (resolved), a ``.env`` file is read only when it
    lies inside it, symlinks followed (:func:`read_dotenv`).

    Raises
    ------
    ParameterError
        Naming every declared variable found nowhere.
    """
    caller = os.environ if environ is None else environ
    files: list[dict[str, str]] | None = None
    missing = []
    for name in names:
        if name in secrets:
            env.pop(name, None)
            continue
        if name in env:
            secrets[name] = env.pop(name)
            continue
        if name in caller:
            secrets[name] = caller[name]
            continue
        if files is None:
            files = [read_dotenv(folder / ".env", root) for folder in dict.fromkeys(folders)]
        found = next((values[name] for values in files if name in values), None)
        if found is None:
            missing.append(name)
        else:
            secrets[name] = found
    if missing:
        places = " or ".join(dict.fromkeys(str(folder / ".env") for folder in folders))
        # A given ``environ`` is not the caller's own: setting a variable there is no remedy.
        setting = "set it in the environment, " if environ is None else ""
        raise ParameterError(
            missing[0],
            [
                f"the notebook needs environment variable {name!r}, which is not set: give it "
                f"as a secret, {setting}or put it in {places}"
                for name in missing
            ],
            declared,
        )


def read_dotenv(path: Path, root: Path | None = None) -> dict[str, str]:
    """The variables of a ``.env`` file; empty when there is none or it cannot be read, or,
    confined to ``root`` (resolved), when it resolves outside it (a symlink to a file
    elsewhere: :func:`~notebook_executor._sources.confine.confined`).

    Read by python-dotenv, values taken literally (no ``${VAR}`` expansion: a secret may hold
    a ``$``). A leading UTF-8 byte order mark (Windows editors write one) is not part of the
    first name. A line python-dotenv cannot parse is skipped (it logs its line number, never
    its text), and so is a name with no ``=`` or a value holding NUL.
    """
    from dotenv import dotenv_values

    if root is not None:
        try:
            path = confined(path, root)
        except OutsideRoot:
            return {}

    try:
        text = read_regular_text(path, MAX_DOTENV_BYTES, encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return {}
    parsed = dotenv_values(stream=io.StringIO(text), interpolate=False)
    return {
        name: value
        for name, value in parsed.items()
        if value is not None and "\x00" not in value and _NAME.fullmatch(name)
    }
