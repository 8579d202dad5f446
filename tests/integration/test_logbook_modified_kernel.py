"""The logbook pattern's second example, end to end on real kernels: the API, the command line
and the MCP server (through the official SDK's client), then the digest of those runs.

The user asks to "modify the greeting to be extra friendly and address Richard casually"; the
run replaces the greeting cell for that run only, and its record shows the template's snippet
after substitution, the note, the modified code and its results. The template is never changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
import yaml

from integration.mcp_client import stdio_session, structured
from notebook_executor import NotebookExecutor
from support import failed_cell

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "notebooks" / "logbook_placeholders.md"
MODULE = [sys.executable, "-m", "notebook_executor"]
SECRET = "greeting-token-" + os.urandom(6).hex()
REQUEST = "modify the greeting to be extra friendly and address Richard casually"
NOTE = "Modified to be extra friendly and casual as requested"
#: Cell 2 of the template: the greeting snippet.
FRIENDLY = 'print("Hey {name}! So great to see you, buddy!")\nprint("Topics: {topics}")\n'
SHOWN = 'print("Hey Richard! So great to see you, buddy!")'


def _stdout(path: str | Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "".join(
        output.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )


def _check_record(markdown: str) -> None:
    """The run's ``.md`` reads like the pattern's record of a modified run."""
    _, front_text, body = markdown.split("---\n", 2)
    front = yaml.safe_load(front_text)
    assert list(front)[:5] == ["parameters", "uuid", "user_request", "executed_at", "status"]
    assert front["parameters"] == {"name": "Richard", "topics": ["search", "placeholders"]}
    assert front["user_request"] == REQUEST and front["status"] == "success"
    assert body.startswith("\n# Greeting Richard\n")
    assert "Injected parameters" not in body and "name = " not in body
    # A value is escaped for the literal it goes in: only its own quote character, so the
    # list reads as the pattern writes it.
    topics = "print(\"Topics: ['search', 'placeholders']\")"
    assert (
        f'```python\nprint("Hello, Richard!")\n{topics}\n```\n\n{NOTE}:\n\n'
        f"```python\n{SHOWN}\n{topics}\n```\n\n"
    ) in body
    assert "Results:\n\n```text\nHey Richard! So great to see you, buddy!\nTopics:" in body
    assert SECRET not in markdown


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    shutil.copy(TEMPLATE, tmp_path / "greet.md")
    (tmp_path / "friendly.py").write_text(FRIENDLY, encoding="utf-8")
    yield tmp_path


def test_the_second_example_through_the_api(folder: Path) -> None:
    template = folder / "greet.md"
    before = template.read_bytes()
    with NotebookExecutor(runs_dir=folder / "runs", warm_kernels=0) as ex:
        plain = ex.execute(
            template, parameters={"name": "Richard"}, secrets={"GREETING_TOKEN": SECRET}
        )
        result = ex.execute(
            template,
            parameters={"name": "Richard"},
            request=REQUEST,
            secrets={"GREETING_TOKEN": SECRET},
            edits=[{"index": 2, "source": FRIENDLY, "note": NOTE}],
        )
        broken = ex.execute(
            template,
            parameters={"name": "Ada"},
            request="try a broken greeting",
            secrets={"GREETING_TOKEN": SECRET},
            edits=[{"index": 2, "source": "1 / 0", "note": "see what fails"}],
        )
        assert template.read_bytes() == before
        assert plain["status"] == "success" and _stdout(plain["output_path"]).startswith(
            "Hello, Richard!\n"
        )
        assert result["status"] == "success", result
        assert result["edited_cells"] == [2]
        assert _stdout(result["output_path"]).startswith("Hey Richard! So great to see you")
        assert result["scraps"] == {"greeting": "Hello, Richard!"}
        markdown = Path(result["output_path"]).with_suffix(".md").read_text(encoding="utf-8")
        _check_record(markdown)
        nb = nbformat.read(result["output_path"], as_version=4)
        (edited,) = [c for c in nb.cells if "original_source" in c.metadata.get(
            "notebook_executor", {})]  # fmt: skip
        assert edited.metadata["notebook_executor"]["original_source"].startswith(
            'print("Hello, Richard!")'
        )
        diff = ex.diff_notebooks(template, result["run_id"])
        (cell,) = [c for c in diff["cells"] if c["index_a"] == 2]
        assert '+print("Hey Richard! So great to see you, buddy!")' in cell["source_diff"]
        assert [hit["run_id"] for hit in ex.search('"extra friendly and casual"')] == [
            result["run_id"]
        ]
        # The digest of these three real runs, item by item.
        digest = ex.digest(template)
        assert digest["runs"] == 3
        assert {s["status"]: s["count"] for s in digest["statuses"]} == {"success": 2, "error": 1}
        (name,) = [p for p in digest["parameters"] if p["name"] == "name"]
        assert [(v["value"], v["runs"]) for v in name["values"]] == [("Ada", 1), ("Richard", 2)]
        assert name["values"][1]["last_run_id"] == result["run_id"]
        (latest,) = digest["scraps"]
        assert latest["run_id"] == result["run_id"] and latest["scraps"] == result["scraps"]
        (error,) = digest["errors"]
        assert (error["ename"], error["cell"], error["count"]) == ("ZeroDivisionError", 2, 1)
        assert error["last_run_id"] == broken["run_id"] == broken["run_id"]
        assert failed_cell(broken)["index"] == 2
        notes = [(n["kind"], n["text"], n["run_id"]) for n in digest["notes"]]
        assert notes == [
            ("request", "try a broken greeting", broken["run_id"]),
            ("edit", "see what fails", broken["run_id"]),
            ("request", REQUEST, result["run_id"]),
            ("edit", NOTE, result["run_id"]),
        ]
        assert len(digest["text"]) <= 4000 and NOTE in digest["text"]


def test_the_second_example_from_the_command_line(folder: Path) -> None:
    before = (folder / "greet.md").read_bytes()
    env = {**os.environ, "GREETING_TOKEN": SECRET}
    argv = [*MODULE, "run", "greet.md", "-p", "name", "Richard", "--request", REQUEST]
    done = subprocess.run(
        [*argv, "--edit", "2", "-", "--edit-note", NOTE, "--json"],
        input=FRIENDLY,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["edited_cells"] == [2]
    _check_record(Path(folder / result["output_path"]).with_suffix(".md").read_text())
    assert (folder / "greet.md").read_bytes() == before
    shown = subprocess.run(
        [*MODULE, "digest", "--notebook", "greet.md", "--json"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    digest = json.loads(shown.stdout)
    assert [(n["kind"], n["run_id"]) for n in digest["notes"]] == [
        ("request", result["run_id"]),
        ("edit", result["run_id"]),
    ]
    refused = subprocess.run(
        [*argv, "--edit", "9", "friendly.py", "--json"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert "out of range" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_the_second_example_through_mcp(folder: Path) -> None:
    before = (folder / "greet.md").read_bytes()
    env = {**os.environ, "GREETING_TOKEN": SECRET}

    async def scenario() -> dict[str, Any]:
        async with stdio_session(
            folder, env=env, args=("--allow-secret", "GREETING_TOKEN")
        ) as session:
            refused = await session.call_tool(
                "execute",
                {
                    "path": "greet.md",
                    "parameters": {"name": "Richard"},
                    "secrets": ["GREETING_TOKEN"],
                    "edits": [{"index": 2, "source": FRIENDLY, "why": NOTE}],
                },
            )
            assert refused.is_error and "unknown key 'why'" in refused.content[0].text  # type: ignore[union-attr]
            executed = await session.call_tool(
                "execute",
                {
                    "path": "greet.md",
                    "parameters": {"name": "Richard"},
                    "request": REQUEST,
                    "secrets": ["GREETING_TOKEN"],
                    "edits": [{"index": 2, "source": FRIENDLY, "note": NOTE}],
                },
            )
            result = structured(executed)
            assert result["status"] == "success", result
            assert result["edited_cells"] == [2]
            digest = structured(
                await session.call_tool("digest", {"notebook": "greet.md", "limit_chars": 1000})
            )
            assert digest["notebook"] == "greet.md" and digest["runs"] == 1
            assert [n["text"] for n in digest["notes"]] == [REQUEST, NOTE]
            assert digest["notes"][0]["notebook"] == "greet.md"
            assert len(digest["text"]) <= 1000 and str(folder) not in digest["text"]
            bad = await session.call_tool("digest", {"limit_chars": 10})
            assert bad.is_error
            for answer in (executed,):
                assert SECRET not in answer.model_dump_json()
            return result

    result = anyio.run(scenario)
    _check_record(Path(folder / result["output_path"]).with_suffix(".md").read_text())
    assert (folder / "greet.md").read_bytes() == before
