"""The docs' generated and hand-written reference stay true: the JSON Schema generator
(``docs/_ext/ne_schema.py``) on shapes like the package's, and the environment variables page
against the names the source reads."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any, Literal, TypedDict

import jsonschema
import pytest
from typing_extensions import NotRequired

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import ne_schema  # noqa: E402


class Failure(TypedDict):
    """Where a run failed."""

    index: int
    ename: str
    traceback: list[str]


class Outcome(TypedDict):
    """A run's outcome.

    More text that the schema's description leaves out.
    """

    run_id: str
    status: Literal["success", "error"]
    failed_cell: Failure | None
    parameters: dict[str, Any]
    duration_seconds: float
    cut: NotRequired[list[tuple[int, str]]]


GOOD: dict[str, Any] = {
    "run_id": "r1",
    "status": "error",
    "failed_cell": {"index": 2, "ename": "KeyError", "traceback": ["..."]},
    "parameters": {"n": [1, 2]},
    "duration_seconds": 1,
}


def _module(**names: object) -> types.ModuleType:
    module = types.ModuleType("fake")
    module.__dict__.update(names)
    module.__all__ = sorted(names)  # type: ignore[attr-defined]
    return module


def test_every_exported_typeddict_gets_a_schema_and_nothing_else_does() -> None:
    module = _module(Outcome=Outcome, Failure=Failure, function=len, Error=ValueError)
    assert sorted(ne_schema.json_schemas(module)) == ["Failure", "Outcome"]


def test_the_schema_accepts_what_the_type_allows() -> None:
    schema = ne_schema.json_schema(Outcome)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["title"] == "Outcome"
    assert schema["description"] == "A run's outcome."
    assert schema["required"] == [
        "run_id",
        "status",
        "failed_cell",
        "parameters",
        "duration_seconds",
    ]
    jsonschema.validate(GOOD, schema)
    jsonschema.validate({**GOOD, "failed_cell": None, "cut": [[3, "lost"]]}, schema)


@pytest.mark.parametrize(
    "change",
    [
        {"status": "done"},  # not one of the literal values
        {"failed_cell": {"index": "2", "ename": "E", "traceback": []}},  # nested type
        {"duration_seconds": "1.5"},
        {"cut": [[3]]},  # a tuple is its items, all of them
        {"extra": 1},  # a key the type does not name
    ],
)
def test_the_schema_refuses_what_the_type_does_not_allow(change: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**GOOD, **change}, ne_schema.json_schema(Outcome))


def test_a_missing_required_key_is_refused() -> None:
    shown = {key: value for key, value in GOOD.items() if key != "run_id"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(shown, ne_schema.json_schema(Outcome))


def test_a_type_the_generator_does_not_know_is_an_error_not_a_weaker_schema() -> None:
    class Odd(TypedDict):
        when: complex

    with pytest.raises(TypeError, match="no JSON Schema"):
        ne_schema.json_schema(Odd)


def test_the_environment_page_names_every_variable_the_source_reads() -> None:
    page = (ROOT / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    source = "\n".join(
        path.read_text(encoding="utf-8")
        for path in (ROOT / "src" / "notebook_executor").rglob("*.py")
    )
    read = set(re.findall(r"""environ(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]+)["']""", source))
    read |= set(re.findall(r"""getenv\(\s*["']([A-Z][A-Z0-9_]+)["']""", source))
    constants = set(re.findall(r"""^[A-Z_]+ = ["']((?:NOTEBOOK_EXECUTOR|AWS)_[A-Z0-9_]+)["']""",
                               source, re.MULTILINE))  # fmt: skip
    from notebook_executor._faces.mcp.server import KERNEL_ENV_NAMES

    names = read | constants | set(KERNEL_ENV_NAMES)
    assert {"NO_COLOR", "NOTEBOOK_EXECUTOR_MCP_TOKEN", "NOTEBOOK_EXECUTOR_KERNEL_ID"} <= names
    assert sorted(name for name in names if f"`{name}`" not in page) == []


def test_the_docstrings_examples_run() -> None:
    """The examples of the docstrings (the API and engine reference pages render them) run as
    ``sphinx-build -b doctest`` ran them, with Sphinx's default option flags. The docs session
    builds the site only; the pages' own examples run in tests/integration/
    test_docs_snippets.py."""
    import doctest
    import importlib
    import io

    package = ROOT / "src" / "notebook_executor"
    modules = sorted(
        ".".join(
            ("notebook_executor", *path.relative_to(package).with_suffix("").parts)
        ).removesuffix(".__init__")
        for path in package.rglob("*.py")
        if ">>> " in path.read_text(encoding="utf-8")
    )
    assert "notebook_executor.engine" in modules
    flags = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL | doctest.DONT_ACCEPT_TRUE_FOR_1
    printed = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=flags)
    for name in modules:
        for test in doctest.DocTestFinder().find(importlib.import_module(name)):
            runner.run(test, out=printed.write)
    failed, tried = runner.summarize(verbose=False)
    assert failed == 0, printed.getvalue()
    assert tried >= 4, modules  # the engine's example, at least
