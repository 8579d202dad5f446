"""A logbook's YAML front matter, turned into the ``parameters`` cell every format has.

jupytext reads a markdown notebook's front matter as a raw first cell; a logbook declares its
parameters there. :func:`translate_front_matter` makes that cell a code cell tagged
``parameters``, so the rest of the package sees one shape of notebook whatever the format.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import TYPE_CHECKING

from .._errors import NotebookSourceError
from .bounded import YamlRefused, load_yaml
from .literals import to_literal
from .parsing import first_line

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["front_matter", "translate_front_matter"]

#: Front matter keys whose YAML must be valid: they declare what a run needs.
_DECLARING = re.compile(r"^(parameters|dependencies|requires-python)\s*:", re.MULTILINE)

_PARAMETER_LINE = re.compile(r"^\s+([^\s:#][^:#]*?)\s*:.*?\s#\s?(?P<help>.*)$")


def translate_front_matter(notebook: str, nb: NotebookNode) -> None:
    """Turn a logbook front matter (a raw first cell) into a ``parameters`` code cell."""
    from .._notebook import new_code_cell

    body = _front_matter_body(nb)
    if body is None:
        return
    front = _load_front_matter(notebook, body)
    if not isinstance(front, dict) or "parameters" not in front:
        return
    declared = front.pop("parameters")
    if declared is None:
        declared = {}
    if not isinstance(declared, dict):
        raise NotebookSourceError(
            notebook, "front matter 'parameters' must be a mapping of name to default"
        )
    helps = _front_matter_helps(body)
    lines = []
    for name, default in declared.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise NotebookSourceError(
                notebook, f"front matter parameter {name!r} is not a valid Python name"
            )
        if default == "...":
            literal = "..."
        else:
            try:
                literal = to_literal(default)
            except TypeError as exc:
                raise NotebookSourceError(
                    notebook, f"front matter parameter {name!r}: {exc}; quote it as a string"
                ) from None
        comment = f"  # {helps[name]}" if helps.get(name) else ""
        lines.append(f"{name} = {literal}{comment}")
    cell = new_code_cell("\n".join(lines), metadata={"tags": ["parameters"]})
    nb.cells[0] = cell
    # Present (maybe empty) on every logbook: it is what makes placeholders apply.
    nb.metadata["front_matter"] = json.loads(json.dumps(_string_keys(front), default=str))


def front_matter(notebook: str, nb: NotebookNode) -> dict[str, object] | None:
    """A markdown notebook's front matter as a mapping, or None when it has none: the one
    :func:`translate_front_matter` kept (a logbook), else the raw first cell's YAML."""
    kept = nb.metadata.get("front_matter")
    if isinstance(kept, dict):
        return kept
    body = _front_matter_body(nb)
    if body is None:
        return None
    front = _load_front_matter(notebook, body)
    return front if isinstance(front, dict) else None


def _front_matter_body(nb: NotebookNode) -> str | None:
    """The YAML between the ``---`` lines of a raw first cell, or None."""
    if not nb.cells or nb.cells[0].cell_type != "raw":
        return None
    text = nb.cells[0].source.strip()
    if not (text.startswith("---") and text.endswith("---") and len(text) >= 6):
        return None
    return str(text[3:-3])


def _load_front_matter(notebook: str, body: str) -> object:
    """The YAML of a front matter; None when it is not YAML and declares nothing of ours
    (a markdown page may open with something else between ``---`` lines)."""
    import yaml

    try:
        return load_yaml(body)
    except YamlRefused as exc:
        raise NotebookSourceError(notebook, f"front matter refused: {exc}") from None
    except yaml.YAMLError as exc:
        if _DECLARING.search(body):
            raise NotebookSourceError(
                notebook, f"front matter is not valid YAML: {first_line(exc)}"
            ) from None
        return None


def _string_keys(value: object) -> object:
    """YAML keys may be dates or numbers; JSON (and notebook metadata) needs strings."""
    if isinstance(value, dict):
        return {str(key): _string_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_string_keys(item) for item in value]
    return value


def _front_matter_helps(body: str) -> dict[str, str]:
    helps: dict[str, str] = {}
    inside = False
    for line in body.splitlines():
        if re.match(r"^parameters\s*:", line):
            inside = True
            continue
        if inside and line and not line[0].isspace():
            break
        match = _PARAMETER_LINE.match(line) if inside else None
        if match:
            helps[match.group(1).strip()] = match.group("help").strip()
    return helps
