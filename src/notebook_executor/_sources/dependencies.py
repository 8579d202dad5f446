"""What a notebook declares it needs to run: its dependencies and the Python it runs on.

One reader per place a declaration lives (docs/how-to/environments.md):

- a script's PEP 723 block (``# /// script`` ... ``# ///``): :func:`script_metadata`, with the
  PEP's reference regular expression and ``tomllib``, so a block reads here exactly as
  ``uv run`` reads it;
- a markdown notebook's front matter ``dependencies:`` and ``requires-python:``:
  :func:`front_matter_dependencies`;
- an ``.ipynb``'s metadata, ``metadata.notebook_executor.dependencies`` and
  ``metadata.notebook_executor["requires-python"]``: :func:`metadata_dependencies`.

:func:`declared_dependencies` asks the one that fits the source, and every reader checks what
it found with :func:`checked_declaration` (requirements as PEP 508 reads them, ``requires-python``
as a PEP 440 specifier set), so a malformed declaration is a :class:`NotebookSourceError` before
anything is installed.

A script's PEP 723 block is no cell: :func:`is_script_block` tells the lines a reader took as
a first cell are only that, for the script reader (:func:`script_cells`) and for ``edit``'s
span finder alike.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import DependencyError, NotebookSourceError
from .parsing import first_line

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .source_format import SourceFormat

__all__ = [
    "METADATA_KEY",
    "SCRIPT_BLOCK",
    "Dependencies",
    "checked_declaration",
    "declared_dependencies",
    "front_matter_dependencies",
    "is_script_block",
    "metadata_dependencies",
    "refuse_local_paths_outside",
    "script_metadata",
]

#: PEP 723's reference regular expression for a metadata block, as the PEP writes it.
SCRIPT_BLOCK = re.compile(
    r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$"
)

#: The notebook metadata key that holds a declaration (and the run record, in a run's .ipynb).
METADATA_KEY = "notebook_executor"


@dataclass(frozen=True)
class Dependencies:
    """A notebook's declared dependencies.

    Attributes
    ----------
    dependencies : tuple of str
        PEP 508 requirements, as declared (order kept).
    requires_python : str or None
        A PEP 440 specifier set for the interpreter, or None.
    declared_in : str
        Where: ``"script block"``, ``"front matter"`` or ``"metadata"``.
    """

    dependencies: tuple[str, ...]
    requires_python: str | None
    declared_in: str

    def as_dict(self) -> dict[str, Any]:
        """The declaration as JSON: ``{"dependencies", "requires-python", "declared_in"}``."""
        return {
            "dependencies": list(self.dependencies),
            "requires-python": self.requires_python,
            "declared_in": self.declared_in,
        }


def script_metadata(notebook: str, text: str) -> dict[str, Any] | None:
    """The TOML of ``text``'s PEP 723 ``script`` block, or None when it has none.

    Follows the PEP's reference implementation: more than one ``script`` block is an error,
    each content line loses its ``# `` (or ``#``), and the content is read with ``tomllib``.

    Raises
    ------
    NotebookSourceError
        Several ``script`` blocks, or one that is not valid TOML.
    """
    matches = [m for m in SCRIPT_BLOCK.finditer(text) if m.group("type") == "script"]
    if not matches:
        return None
    if len(matches) > 1:
        raise NotebookSourceError(notebook, "more than one '# /// script' block (PEP 723)")
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in matches[0].group("content").splitlines(keepends=True)
    )
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]
    try:
        table: dict[str, Any] = tomllib.loads(content)
        return table
    except tomllib.TOMLDecodeError as exc:
        raise NotebookSourceError(
            notebook, f"the '# /// script' block is not valid TOML: {first_line(exc)}"
        ) from None


def is_script_block(text: str) -> bool:
    """Whether ``text`` (the lines a script's reader took as its first cell) is PEP 723
    metadata blocks and nothing else, blank lines aside: comments, and no cell
    (docs/how-to/environments.md). The one test of it: the readers leave such a cell out
    (:func:`script_cells`), and the
    span finder of ``edit`` skips its lines."""
    text = text.strip("\n") + "\n"
    return SCRIPT_BLOCK.search(text) is not None and not SCRIPT_BLOCK.sub("", text).strip()


def script_cells(nb: NotebookNode) -> NotebookNode:
    """``nb``, read from a script, without the cell its PEP 723 block was read as: a code
    cell in a percent script, a markdown one (the comment marks gone) in a light script. Its
    declaration goes to the metadata."""
    if not nb.cells:
        return nb
    first = nb.cells[0]
    source = first.source
    if first.cell_type == "markdown":
        source = "\n".join(f"# {line}".rstrip() for line in source.split("\n"))
    elif first.cell_type != "code":
        return nb
    if is_script_block(source):
        del nb.cells[0]
        _keep_declaration(nb, source)
    return nb


def _keep_declaration(nb: NotebookNode, block: str) -> None:
    """The left-out block's declaration, kept in the notebook's metadata the ``.ipynb`` way
    (:func:`metadata_dependencies`), so that a conversion to ``.ipynb`` loses nothing. A
    malformed block is kept out here and refused where the script's declaration is read."""
    try:
        table = script_metadata("", block)
    except NotebookSourceError:
        return
    if table is None:
        return
    kept = {key: table[key] for key in ("dependencies", "requires-python") if key in table}
    if kept:
        nb.metadata.setdefault(METADATA_KEY, {}).update(kept)


def checked_declaration(
    notebook: str, where: str, dependencies: object, requires_python: object
) -> Dependencies:
    """A declaration whose parts are checked: a list of PEP 508 requirement strings and a
    PEP 440 specifier set (or None).

    Raises
    ------
    NotebookSourceError
        Naming the part, and the requirement, that is malformed.
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if dependencies is None:
        dependencies = []
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise NotebookSourceError(
            notebook, f"{where}: 'dependencies' must be a list of requirement strings"
        )
    for requirement in dependencies:
        try:
            Requirement(requirement)
        except InvalidRequirement as exc:
            raise NotebookSourceError(
                notebook, f"{where}: requirement {requirement!r} is malformed: {first_line(exc)}"
            ) from None
    if requires_python is not None:
        if not isinstance(requires_python, str):
            raise NotebookSourceError(notebook, f"{where}: 'requires-python' must be a string")
        try:
            SpecifierSet(requires_python)
        except InvalidSpecifier:
            raise NotebookSourceError(
                notebook,
                f"{where}: 'requires-python' {requires_python!r} is not a version specifier",
            ) from None
    return Dependencies(tuple(dependencies), requires_python, where)


def _declaration(notebook: str, where: str, table: Mapping[str, Any]) -> Dependencies | None:
    if "dependencies" not in table and "requires-python" not in table:
        return None
    return checked_declaration(
        notebook, where, table.get("dependencies"), table.get("requires-python")
    )


def front_matter_dependencies(notebook: str, front: Mapping[str, Any]) -> Dependencies | None:
    """The declaration in a markdown notebook's front matter (``dependencies:``,
    ``requires-python:``), or None."""
    return _declaration(notebook, "front matter", front)


def metadata_dependencies(notebook: str, metadata: Mapping[str, Any]) -> Dependencies | None:
    """The declaration in a notebook's metadata (``notebook_executor.dependencies`` and
    ``notebook_executor.requires-python``), or None."""
    table = metadata.get(METADATA_KEY)
    if not isinstance(table, Mapping):
        return None
    return _declaration(notebook, "metadata", table)


def declared_dependencies(
    notebook: str, text: str, nb: NotebookNode, fmt: SourceFormat
) -> Dependencies | None:
    """What the source declares, or None: a script's PEP 723 block, a markdown notebook's
    front matter, else the notebook's metadata (the ``.ipynb`` way, read for every format).

    Raises
    ------
    NotebookSourceError
        The declaration is malformed.
    """
    if fmt.name == "percent script":
        block = script_metadata(notebook, text)
        if block is not None:
            return checked_declaration(
                notebook,
                "script block",
                block.get("dependencies"),
                block.get("requires-python"),
            )
    if fmt.name == "markdown notebook":
        from .front_matter import front_matter

        front = front_matter(notebook, nb)
        found = None if front is None else front_matter_dependencies(notebook, front)
        if found is not None:
            return found
    return metadata_dependencies(notebook, nb.metadata)


#: The transports of a direct URL that fetch from elsewhere (``https://``, ``git+ssh://``...):
#: any other direct reference (``file:``, ``git+file:``, a bare path) names a local folder.
_REMOTE_TRANSPORTS = frozenset({"http", "https", "ssh", "git", "svn"})


def refuse_local_paths_outside(notebook: str, dependencies: Sequence[str], root: Path) -> None:
    """Refuse a requirement that names a local path outside ``root`` (resolved): making the
    environment would run that project's build code (``name @ file:///dir``, ``name @
    git+file:///repo``, ``name @ ./dir``). A server confined to ``root`` (the MCP server)
    calls this before any environment is made or reused.

    Raises
    ------
    DependencyError
        A requirement names such a path, or a local path that cannot be told (``$``).
    """
    from urllib.parse import unquote, urlsplit
    from urllib.request import url2pathname

    from packaging.requirements import InvalidRequirement, Requirement

    from .confine import OutsideRoot, confined

    for requirement in dependencies:
        try:
            url = Requirement(requirement).url
        except InvalidRequirement:
            continue  # refused as malformed where the declaration is read
        if not url:
            continue
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme.rpartition("+")[2] in _REMOTE_TRANSPORTS:
            continue
        if scheme.rpartition("+")[2] == "file":
            path = url2pathname(parts.path)
            if "+" in scheme and "@" in path.rpartition("/")[2]:
                path = path.rpartition("@")[0]  # a VCS revision: ``git+file:///repo@v1``
        else:
            path = url
        try:
            if "$" in path:
                raise OutsideRoot("a variable in it")
            for candidate in {path, unquote(path)}:
                confined(Path.cwd() / Path(candidate).expanduser(), root)
        except OutsideRoot:
            raise DependencyError(
                notebook,
                requirement,
                "a local project outside the server's root folder: making the environment "
                "would run its build code, so it is refused",
            ) from None
