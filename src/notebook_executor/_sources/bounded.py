"""Inputs read within bounds: YAML documents of parameters and front matter, text that must
be UTF-8.

Every place that reads YAML written by a user (``-f``, ``-y``, ``-p`` values, sweep sets, a
logbook's front matter) reads it through :func:`load_yaml`, so that a small document cannot
grow into gigabytes once its aliases are followed (a "billion laughs" document: PyYAML builds
it as shared objects, and what walks it later, writing literals or JSON, pays the full size).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_CODE_CHARS",
    "MAX_PARAMETERS_CHARS",
    "MAX_SOURCE_BYTES",
    "MAX_TEXT_SOURCE_BYTES",
    "MAX_YAML_NODES",
    "YamlRefused",
    "load_yaml",
    "unencodable",
]

#: Largest YAML or JSON document of parameters (``-f``, ``-y``, ``-p``, a front matter), in
#: characters. Parameters are values injected as literals, not data sets: 16 MiB is far more
#: than any real set needs and small enough to parse in well under a second.
MAX_PARAMETERS_CHARS = 16 * 1024 * 1024

#: Most nodes (scalars, lists, mappings) one YAML document may hold as written. Time and
#: memory go with nodes, not characters: ``[0,0,0,...]`` holds a node every two characters,
#: and 4 MB of it took a minute and a gigabyte to build. Counted on the parser's events
#: before anything is built, so a refusal costs at most this many events. Measured here
#: (libyaml, a loaded 2-core machine): a list of 100,000 numbers loads in 1.7 s, 2,000,000
#: are refused in 0.4 s; a quiet machine takes about a sixth of that.
MAX_YAML_NODES = 100_000

#: Most nodes that the aliases (``*name``) of one YAML document may add once expanded.
#: Anchors and aliases stay usable for sharing a few defaults; a document whose aliases
#: multiply it is refused.
MAX_ALIAS_NODES = 100_000

#: Largest notebook source read, in bytes (an ``.ipynb`` with its outputs).
MAX_SOURCE_BYTES = 64 * 1024 * 1024

#: Largest text source (``.py``, ``.md``) read, in bytes. jupytext reads text a character at
#: a time: measured here, a 2 MB cell takes 2.7 s to read and a 50 MB one 40 s. Text notebooks
#: are written by hand; 4 MiB is far beyond one. (Many small cells cost jupytext more, 89 s for
#: 1.1 MB in 20,000 cells: this limit does not bound that.)
MAX_TEXT_SOURCE_BYTES = 4 * 1024 * 1024

#: Longest code a session evaluates (``Session.evaluate``, ``session eval``), in characters:
#: code typed or written by an agent, not data. Longer code is refused before anything runs.
#: A quarter of the run server's bound on a request (4 MiB).
MAX_CODE_CHARS = 1024 * 1024


class YamlRefused(ValueError):
    """A YAML document is refused: too long, or its aliases expand too far, or nested too
    deep. The message says which, in user terms."""


def load_yaml(text: str) -> Any:
    """Parse one YAML document with PyYAML's safe loader, within bounds.

    Raises
    ------
    YamlRefused
        The text is longer than :data:`MAX_PARAMETERS_CHARS`, holds lone surrogates (bytes
        that were not UTF-8), more than :data:`MAX_YAML_NODES` nodes, or aliases that would
        add more than :data:`MAX_ALIAS_NODES` nodes, or it is nested deeper than the parser
        allows.
    yaml.YAMLError
        The text is not valid YAML.
    """
    import yaml

    if len(text) > MAX_PARAMETERS_CHARS:
        raise YamlRefused(
            f"the YAML document is longer than {MAX_PARAMETERS_CHARS:,} characters "
            "(the limit for parameters)"
        )
    problem = unencodable(text)
    if problem:  # libyaml reads UTF-8 bytes: the text is encoded first
        raise YamlRefused(f"the YAML document is not UTF-8: {problem}")
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it
    aliases = _count_nodes(text, loader_class)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        added = _alias_nodes(node) if aliases else 0
        if added > MAX_ALIAS_NODES:
            raise YamlRefused(
                f"the YAML document's aliases (*name) expand to more than {MAX_ALIAS_NODES:,} "
                "nodes; write the values out, or share less"
            )
        return loader.construct_document(node)
    except RecursionError:
        raise YamlRefused("the YAML document is nested too deep") from None
    finally:
        loader.dispose()


def _count_nodes(text: str, loader_class: Any) -> int:
    """Refuse a document of more than :data:`MAX_YAML_NODES` nodes, from the parser's events
    (one per scalar, alias, list and mapping), before any node is built; return how many of
    them are aliases."""
    import yaml

    counted = (yaml.ScalarEvent, yaml.AliasEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)
    parser = loader_class(text)
    nodes = aliases = 0
    try:
        while parser.check_event():
            event = parser.get_event()
            if isinstance(event, counted):
                nodes += 1
                aliases += isinstance(event, yaml.AliasEvent)
                if nodes > MAX_YAML_NODES:
                    raise YamlRefused(
                        f"the YAML document holds more than {MAX_YAML_NODES:,} values "
                        "(the limit for parameters); pass a data set as a file path instead"
                    )
    finally:
        parser.dispose()
    return aliases


def _alias_nodes(root: Any) -> int:
    """How many nodes the aliases of the graph under ``root`` add once every alias is followed.

    The composed graph holds each anchored node once, and each alias as one more reference to
    it. The expanded size of a node is counted once per node (memoised by identity, in
    post-order, without recursion), so a billion-laughs document costs a walk of its written
    size, not of its expansion.
    """
    import yaml

    expanded: dict[int, int] = {}
    written: set[int] = set()
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in expanded:
            continue
        children = _children(node, yaml)
        if not children_done:
            if key in open_nodes:
                raise YamlRefused("the YAML document holds itself (a recursive alias)")
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in expanded)
            continue
        open_nodes.discard(key)
        written.add(key)
        expanded[key] = 1 + sum(expanded[id(child)] for child in children)
        if expanded[key] - len(written) > MAX_ALIAS_NODES:
            return expanded[key] - len(written)  # no need to walk further
    return expanded[id(root)] - len(written)


def _children(node: Any, yaml: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def unencodable(text: str) -> str | None:
    """Describe where ``text`` holds a lone surrogate (which no UTF-8 file can hold), or None.

    Lone surrogates come from a string built from bytes that were not UTF-8 (``surrogateescape``
    on a command line, ``\\udcXX``) or from a JSON ``"\\ud800"`` escape.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        if "\udc80" <= char <= "\udcff":  # a byte that was not UTF-8, kept by surrogateescape
            return f"it holds the byte 0x{ord(char) - 0xDC00:02x}, which is not UTF-8 text"
        return f"it holds {char!r}, a lone surrogate, which is not valid Unicode text"
    return None
