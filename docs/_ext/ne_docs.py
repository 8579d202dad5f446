"""Directives of the notebook-executor docs: pages generated from the code itself.

- ``cli-reference``: one section per command, from the parser the command line builds
  (``notebook_executor._faces.cli._build_parser``): usage, description, every argument.
- ``typeddict-schemas``: the JSON Schema of every ``TypedDict`` in ``notebook_executor.__all__``
  (:mod:`ne_schema`), also written as ``_static/schemas/<Name>.json`` in the built site.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import ne_schema
from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx

__all__ = ["setup"]

#: The width usage lines are wrapped at.
COLUMNS = 88


def _section(document: Any, title: str, ids: str) -> nodes.section:
    section = nodes.section(ids=[nodes.make_id(ids)], names=[nodes.fully_normalize_name(ids)])
    section += nodes.title(text=title)
    document.note_implicit_target(section)
    return section


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(parser.prog, width=COLUMNS)


class CliReference(Directive):
    """Every command of ``notebook-executor``, from its argument parser."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from notebook_executor._faces.cli import _build_parser

        parser = _build_parser()
        document = self.state.document
        out: list[nodes.Node] = [self._parser_body(parser)]
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            if not isinstance(action, argparse._SubParsersAction):
                continue
            for name, sub in action.choices.items():
                section = _section(document, f"notebook-executor {name}", f"cli-{name}")
                section += self._parser_body(sub)
                out.append(section)
        return out

    def _parser_body(self, parser: argparse.ArgumentParser) -> nodes.Element:
        body = nodes.container(classes=["cli-command"])
        usage = _formatter(parser)
        usage.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
        body += nodes.literal_block(text=usage.format_help().strip(), language="text")
        if parser.description:
            body += nodes.paragraph(text=parser.description)
        items = nodes.definition_list()
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(
                action, (argparse._HelpAction, argparse._SubParsersAction)
            ):
                continue
            formatter = _formatter(parser)
            invocation = formatter._format_action_invocation(action)
            text = formatter._expand_help(action) if action.help else ""
            item = nodes.definition_list_item()
            term = nodes.term()
            term += nodes.literal(text=invocation)
            item += term
            definition = nodes.definition()
            definition += nodes.paragraph(text=text)
            item += definition
            items += item
        if len(items):
            body += items
        return body


class TypedDictSchemas(Directive):
    """A section per exported ``TypedDict``: its description and its JSON Schema."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        env = self.state.document.settings.env
        schemas = ne_schema.json_schemas()
        if not schemas:
            return [nodes.paragraph(text="notebook_executor.__all__ exports no TypedDict yet.")]
        out: list[nodes.Node] = []
        folder = Path(env.app.outdir) / "_static" / "schemas"
        folder.mkdir(parents=True, exist_ok=True)
        for name, schema in schemas.items():
            text = json.dumps(schema, indent=2)
            (folder / f"{name}.json").write_text(text + "\n", encoding="utf-8")
            section = _section(self.state.document, name, f"schema-{name}")
            if schema.get("description"):
                section += nodes.paragraph(text=schema["description"])
            up = "../" * env.docname.count("/")
            link = nodes.paragraph(text="As a file: ")
            link += nodes.reference(text=f"{name}.json", refuri=f"{up}_static/schemas/{name}.json")
            section += link
            section += nodes.literal_block(text=text, language="json")
            out.append(section)
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("cli-reference", CliReference)
    app.add_directive("typeddict-schemas", TypedDictSchemas)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
