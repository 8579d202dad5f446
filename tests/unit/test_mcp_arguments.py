"""Strict tool arguments, text converted for typed parameters, and root-relative messages,
as plain functions (no server)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from notebook_executor._faces.mcp.paths import Root
from notebook_executor._parameters.declared import parse_parameters
from notebook_executor._parameters.values import TextValue, typed_values

pytest.importorskip("mcp")

from notebook_executor._faces.mcp.arguments import (
    client_values,
    unknown_arguments,
)

EXECUTE = ["path", "parameters", "timeout", "request", "secrets"]


def test_known_arguments_pass() -> None:
    assert unknown_arguments("execute", EXECUTE, {"path": "a.py", "parameters": {}}) is None


def test_an_unknown_argument_is_named_with_the_closest_known_one() -> None:
    message = unknown_arguments("execute", EXECUTE, {"path": "a.py", "timout": 3})
    assert message == (
        "unknown argument 'timout'; execute takes path, parameters, timeout, request, "
        "secrets; did you mean 'timeout'?"
    )


def test_a_notebook_parameter_given_as_an_argument_is_pointed_to_parameters() -> None:
    message = unknown_arguments("execute", EXECUTE, {"path": "a.py", "name": "Bob"})
    assert message is not None
    assert message.endswith("did you mean parameters={'name': ...}?")
    # A tool without parameters has nothing to point to.
    message = unknown_arguments("get_run", ["run_id"], {"run_id": "x", "name": "Bob"})
    assert message == "unknown argument 'name'; get_run takes run_id"


def test_text_converts_only_for_typed_parameters() -> None:
    declared = parse_parameters(
        'times: int = 1\nratio = 0.5\nloud = False\nwords: list = []\nlabel = "x"\n'
        "anything = None\n"
    )
    given = {
        "times": "3",
        "ratio": "2",
        "loud": "TRUE",
        "words": "[1, 2]",
        "label": "7",
        "anything": "8",
        "undeclared": "9",
    }
    assert typed_values(declared, client_values(given) or {}) == {
        "times": 3,
        "ratio": 2.0,
        "loud": True,
        "words": [1, 2],
        "label": "7",
        "anything": "8",
        "undeclared": "9",
    }
    # Not text: left for validation as it is; text that does not fit too.
    assert typed_values(declared, client_values({"times": 3.5, "loud": "maybe"}) or {}) == {
        "times": 3.5,
        "loud": "maybe",
    }
    # The command line's -p text converts whatever the name, as papermill's -p does.
    assert typed_values(declared, {"anything": TextValue("8"), "undeclared": TextValue("9")}) == {
        "anything": 8,
        "undeclared": 9,
    }


def test_messages_name_paths_under_the_root_relative_to_it(tmp_path: Path) -> None:
    root = Root(tmp_path / "root")
    base = str(root.folder)
    sep = os.sep
    assert root.relative_text(f"no such file '{base}{sep}a{sep}b.py'") == (
        f"no such file 'a{sep}b.py'"
    )
    assert root.relative_text(f"put it in {base}{sep}.env or {base}") == "put it in .env or ."
    # A longer name, or the same path inside another one, is not the root.
    for other in (f"{base}-old{sep}a.py", f"{sep}mnt{base}{sep}a.py", f"{base}x"):
        assert root.relative_text(other) == other
