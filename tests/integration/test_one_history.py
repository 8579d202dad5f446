"""One notebook, one history: a notebook run through the API, the command line from two
working directories and the MCP server from a third is one notebook in every record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from integration.mcp_client import stdio_session, structured
from notebook_executor import NotebookExecutor

NOTEBOOK = """\
# %% tags=["parameters"]
n = 1

# %%
import scrapbook as sb
sb.glue("square", n * n)

# %%
if n == 3:
    {}["missing"]
"""


def _cli(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run(
        [sys.executable, "-m", "notebook_executor", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_face_and_working_directory_files_runs_under_one_name(tmp_path: Path) -> None:
    project = tmp_path / "clone"
    (project / "notebooks" / "scratch").mkdir(parents=True)
    source = project / "notebooks" / "greet.py"
    source.write_text(NOTEBOOK, encoding="utf-8")
    runs = project / "runs"

    # The API, given an absolute path, from the test's working directory.
    with NotebookExecutor(runs_dir=runs) as ex:
        assert ex.execute(source, parameters={"n": 1}, request="api")["status"] == "success"
    # The command line from the project, and from a subfolder (the runs folder named there).
    done = _cli(project, "run", "notebooks/greet.py", "-p", "n", "2", "--request", "cli one")
    assert done.returncode == 0, done.stderr
    done = _cli(project / "notebooks" / "scratch", "run", "../greet.py", "-p", "n", "3",
                "--runs-dir", "../../runs", "--request", "cli two")  # fmt: skip
    assert done.returncode == 1, done.stderr  # n == 3 fails: a KeyError

    # The MCP server, started from a third folder (the project's parent) with --root.
    async def scenario() -> dict[str, Any]:
        async with stdio_session(project, cwd=tmp_path) as session:
            answer = structured(
                await session.call_tool(
                    "execute",
                    {"path": "notebooks/greet.py", "parameters": {"n": 3}, "request": "mcp"},
                )
            )
            assert answer["notebook"] == "notebooks/greet.py"
            listed = structured(await session.call_tool("list_runs", {}))
            found = structured(await session.call_tool("list_notebooks", {}))
            return {"execute": answer, "runs": listed, "notebooks": found}

    # A test module holding a notebook's text in a string is no notebook, and is said so.
    (project / "tests").mkdir()
    (project / "tests" / "test_greet.py").write_text('TEXT = """\n' + NOTEBOOK + '"""\n')
    over_mcp = anyio.run(scenario)
    assert over_mcp["notebooks"]["notebooks"] == ["notebooks/greet.py"]
    (skipped,) = over_mcp["notebooks"]["skipped"]
    assert skipped["path"] == "tests/test_greet.py" and "inside strings" in skipped["why"]
    assert {r["notebook"] for r in over_mcp["runs"]["runs"]} == {"notebooks/greet.py"}

    with NotebookExecutor(runs_dir=runs) as ex:
        recorded = ex.runs()
        assert len(recorded) == 4
        assert {r["notebook"] for r in recorded} == {"notebooks/greet.py"}
        assert {r["request"] for r in ex.runs(notebook=source)} == {
            "api", "cli one", "cli two", "mcp"
        }  # fmt: skip
        # search: every hit names the one notebook.
        hits = ex.search("missing")
        assert hits and {h["notebook"] for h in hits} == {"notebooks/greet.py"}
        # digest over all notebooks: one notebook, the KeyError once with a count of 2.
        digest = ex.digest()
        assert digest["runs"] == 4
        errors = digest["errors"]
        assert len(errors) == 1 and errors[0]["count"] == 2, errors
        assert {item["notebook"] for item in digest["scraps"]} == {"notebooks/greet.py"}
        assert "clone/notebooks" not in digest["text"]

    # The report: one notebook in its filter, with all four runs.
    out = tmp_path / "report"
    done = _cli(project, "report", "--out", str(out))
    assert done.returncode == 0, done.stderr
    index = (out / "index.html").read_text(encoding="utf-8")
    assert index.count('<option value="notebooks/greet.py"') == 1, index[:2000]
    assert "scratch" not in index and "clone/notebooks" not in index


def test_reindex_repairs_names_written_under_the_old_rule(tmp_path: Path) -> None:
    project = tmp_path / "clone"
    (project / "notebooks").mkdir(parents=True)
    source = project / "notebooks" / "greet.py"
    source.write_text(NOTEBOOK, encoding="utf-8")
    runs = project / "runs"
    with NotebookExecutor(runs_dir=runs) as ex:
        run_id = ex.execute(source)["run_id"]
        second = ex.execute(source, parameters={"n": 2})["run_id"]
    # Rewrite the records as the old rule wrote them: relative to a server's working dir.
    for rid, old in ((run_id, "tmp/x/clone/notebooks/greet.py"), (second, "greet.py")):
        (path,) = runs.glob(f"*/{rid}.ipynb")
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["metadata"]["notebook_executor"]["notebook"] = old
        doc["metadata"]["notebook_executor"]["source"]["path"] = old
        path.write_text(json.dumps(doc), encoding="utf-8")
    with NotebookExecutor(runs_dir=runs) as ex:
        ex.reindex()
        assert {r["notebook"] for r in ex.runs()} == {"notebooks/greet.py"}
    (path,) = runs.glob(f"*/{run_id}.ipynb")
    record = json.loads(path.read_text(encoding="utf-8"))["metadata"]["notebook_executor"]
    assert record["notebook"] == record["source"]["path"] == "notebooks/greet.py"
    assert "notebook: notebooks/greet.py" in path.with_suffix(".md").read_text(encoding="utf-8")


MANY = """\
# %% tags=["parameters"]
n = 1
label = "a"

# %%
import scrapbook as sb
sb.glue("loss", 1.0 / n)
sb.glue("label", label)

# %%
if n % 3 == 0:
    raise ValueError(f"no multiples of three in {label}")
"""


def test_the_mcp_digest_over_many_notebooks_keeps_its_page_and_cuts_its_lists(
    tmp_path: Path,
) -> None:
    from integration.mcp_client import MAX_RESPONSE_CHARS, response_size
    from unit.fake_engine import FakeEngine

    # 30 notebooks, 4 runs each, long requests: the records only (a fake engine makes them).
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        for i in range(30):
            source = tmp_path / "notebooks" / f"study_{i:02d}.py"
            source.parent.mkdir(exist_ok=True)
            source.write_text(MANY, encoding="utf-8")
            for n in range(1, 5):
                ex.execute(source, parameters={"n": n, "label": f"label-{i}-{n}"},
                           request=f"try n={n} on study {i}: " + "why " * 20)  # fmt: skip
        page = ex.digest()["text"]

    async def scenario() -> Any:
        async with stdio_session(tmp_path) as session:
            return await session.call_tool("digest", {})

    answer = anyio.run(scenario)
    found = structured(answer)
    assert response_size(answer) <= MAX_RESPONSE_CHARS
    # The page is whole (as the API makes it), and the lists are there, cut inside.
    assert found["text"] == page
    for key in ("parameters", "scraps", "trends", "errors", "notes", "statuses"):
        assert isinstance(found[key], list), key
    assert found["scraps"] and found["errors"] and found["notes"]
    assert sum(found["omitted"].values()) > 0
    assert "[..." not in json.dumps(found)
