"""The JSON Schema the docs publish for the result dict holds for real results: notebooks run on
real kernels (a success, a cell error, a timeout), their results validated with jsonschema
against the schema generated from the ``TypedDict`` that ``execute`` is annotated to return."""

from __future__ import annotations

import inspect
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import notebook_executor
from notebook_executor import NotebookExecutor

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import ne_schema  # noqa: E402

pytestmark = pytest.mark.kernel

FAILS = '# %%\nimport scrapbook as sb\nsb.glue("before", [1, 2])\n\n# %%\n{}["price"]\n'
SLOW = "# %%\nimport time\n\n# %%\ntime.sleep(30)\n"


def result_schema(method: str = "execute") -> dict[str, Any]:
    """The schema of what ``NotebookExecutor.<method>`` returns, by its annotation's name."""
    annotation = inspect.signature(getattr(NotebookExecutor, method)).return_annotation
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    name = name.removeprefix("list[").removesuffix("]")
    schemas = ne_schema.json_schemas(notebook_executor)
    assert name in schemas, (
        f"NotebookExecutor.{method} returns {annotation!r}, not a TypedDict exported by "
        "notebook_executor: it has no published schema"
    )
    schema: dict[str, Any] = schemas[name]
    return schema


def test_real_results_match_the_published_schema(tmp_path: Path) -> None:
    schema = result_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    (tmp_path / "fails.py").write_text(FAILS)
    (tmp_path / "slow.py").write_text(SLOW)
    with NotebookExecutor(runs_dir=tmp_path / "runs", warm_kernels=0) as ex:
        results = [
            ex.execute(tmp_path / "notebooks" / "hello.py", parameters={"name": "Ada"}),
            ex.execute(tmp_path / "notebooks" / "dataframe.py"),
            ex.execute(tmp_path / "fails.py", request="the failing one"),
            ex.execute(tmp_path / "slow.py", cell_timeout=1),
        ]
        listed = ex.runs()
        again = ex.get_run(results[0]["run_id"])
    assert [r["error_kind"] for r in results] == [None, None, "cell_error", "timeout"]
    for result in [*results, *listed, again]:
        # What a caller receives is JSON; validate it as JSON, as a tool would.
        jsonschema.validate(json.loads(json.dumps(result)), schema)


def test_the_schema_refuses_a_result_with_a_key_it_does_not_name(tmp_path: Path) -> None:
    schema = result_schema()
    with NotebookExecutor(runs_dir=tmp_path / "runs", warm_kernels=0) as ex:
        result = ex.execute(ROOT / "notebooks" / "hello.py")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**result, "unexpected": 1}, schema)


def test_session_steps_digests_and_modified_runs_match_their_schemas(tmp_path: Path) -> None:
    schemas = ne_schema.json_schemas(notebook_executor)
    for name in ("StepResult", "EvaluationResult", "Digest", "RunResult"):
        jsonschema.Draft202012Validator.check_schema(schemas[name])
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    hello = tmp_path / "notebooks" / "hello.py"
    with NotebookExecutor(runs_dir=tmp_path / "runs", warm_kernels=0) as ex:
        modified = ex.execute(
            hello, edits=[{"index": 3, "source": "1 / 0", "note": "break it"}], request="why"
        )
        with ex.open_session(hello, parameters={"name": "Ada"}) as session:
            steps = [session.run(until=2), session.run()]
            evaluations = [session.evaluate("greeting"), session.evaluate("undefined_name")]
            ex.edit_cell(hello, 3, 'sb.glue("greeting", greeting.upper())')
            steps.append(session.rerun_from(3))
        digest = ex.digest()
        recorded = ex.runs()
    assert modified["edited_cells"] == [3] and modified["status"] == "error"
    assert [e["status"] for e in evaluations] == ["success", "error"]
    assert steps[-1]["scraps"] == {"greeting": "HELLO, ADA!"}
    assert digest["errors"] and digest["notes"]
    checks = [
        *((step, "StepResult") for step in steps),
        *((evaluation, "EvaluationResult") for evaluation in evaluations),
        (digest, "Digest"),
        *((result, "RunResult") for result in [modified, *recorded]),
    ]
    for value, name in checks:
        jsonschema.validate(json.loads(json.dumps(value)), schemas[name])
