"""Modified runs (docs/how-to/modified-runs.md): cells replaced for one run, the template
untouched (fake engine)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

from notebook_executor import (
    CellEdit,
    NotebookExecutor,
    NotebookExecutorError,
    NotebookSourceError,
    ParameterError,
    RunResult,
)
from notebook_executor._faces.cli import main
from unit.fake_engine import FakeEngine

SECRET = "tok-3141592653-secret"

#: The logbook pattern's greeting, with a declared secret and a scrap.
TEMPLATE = """\
---
title: Greeting
parameters:
  name: ...   # who to greet
env: [GREETING_TOKEN]
---

# Greeting {name}

The template greets {name}.

```python
print("Hello, {name}!")
```

A second snippet uses the token.

```python
import os

import scrapbook as sb

token = os.environ["GREETING_TOKEN"]
sb.glue("token_length", len(token))
```
"""
REQUEST = "modify the greeting to be extra friendly and address Richard casually"
NOTE = "Modified to be extra friendly and casual as requested"
FRIENDLY = 'print("Hey {name}! So great to see you, buddy!")'


def _logbook(tmp_path: Path) -> Path:
    path = tmp_path / "greet.md"
    path.write_bytes(TEMPLATE.encode("utf-8"))
    return path


@pytest.fixture
def ex(tmp_path: Path) -> Any:
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as executor:
        yield executor


def _modified(ex: NotebookExecutor, path: Path, **options: Any) -> RunResult:
    edits: list[CellEdit] = [{"index": 2, "source": FRIENDLY, "note": NOTE}]
    return ex.execute(
        path,
        parameters={"name": "Richard"},
        request=REQUEST,
        secrets={"GREETING_TOKEN": SECRET},
        edits=edits,
        **options,
    )


def _stdout(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_a_modified_run_with_placeholders_and_a_secret(
    ex: NotebookExecutor, tmp_path: Path
) -> None:
    path = _logbook(tmp_path)
    before = path.read_bytes()
    result = _modified(ex, path)
    assert result["status"] == "success", result
    assert path.read_bytes() == before  # the template, byte for byte
    assert result["edited_cells"] == [2]
    assert result["scraps"] == {"token_length": len(SECRET)}
    nb = nbformat.read(result["output_path"], as_version=4)
    edited = nb.cells[3]  # cell 2 of the source; the injected parameters cell comes before
    assert edited.source == 'print("Hey Richard! So great to see you, buddy!")'
    assert _stdout(edited) == "Hey Richard! So great to see you, buddy!\n"
    info = edited.metadata["notebook_executor"]
    assert info["original_source"] == 'print("Hello, Richard!")'  # after substitution
    assert info["edit_note"] == NOTE and info["status"] == "completed"
    assert nb.metadata["notebook_executor"]["edits"] == [{"index": 2, "note": NOTE}]
    assert ex.get_run(result["run_id"])["edited_cells"] == [2]
    assert ex.runs()[0]["edited_cells"] == [2]
    # The secret reached the kernel and nothing written.
    runs = tmp_path / "runs"
    for written in [*runs.rglob("*.ipynb"), *runs.rglob("*.md"), *runs.glob("catalog.sqlite*")]:
        assert SECRET.encode() not in written.read_bytes(), written


def test_the_record_reads_like_the_pattern(ex: NotebookExecutor, tmp_path: Path) -> None:
    result = _modified(ex, _logbook(tmp_path))
    text = Path(result["output_path"]).with_suffix(".md").read_text(encoding="utf-8")
    _, front_text, body = text.split("---\n", 2)
    front = yaml.safe_load(front_text)
    assert list(front)[:5] == ["parameters", "uuid", "user_request", "executed_at", "status"]
    assert front["parameters"] == {"name": "Richard"}
    assert front["user_request"] == REQUEST and front["status"] == "success"
    assert front["edited_cells"] == [2]
    # Neither the parameters cell made from the front matter nor the injected one is shown.
    assert "name = " not in body and "Injected parameters" not in body
    assert body.startswith("\n# Greeting Richard\n\nThe template greets Richard.\n")
    expected = (
        '```python\nprint("Hello, Richard!")\n```\n\n'
        f"{NOTE}:\n\n"
        '```python\nprint("Hey Richard! So great to see you, buddy!")\n```\n\n'
        "Results:\n\n```text\nHey Richard! So great to see you, buddy!\n```\n"
    )
    assert expected in body


def test_without_a_note_the_request_says_why(ex: NotebookExecutor, tmp_path: Path) -> None:
    result = ex.execute(
        _logbook(tmp_path),
        parameters={"name": "Ada"},
        request="be casual",
        secrets={"GREETING_TOKEN": SECRET},
        edits=[{"index": 2, "source": 'print("Hi {name}")'}],
    )
    text = Path(result["output_path"]).with_suffix(".md").read_text(encoding="utf-8")
    assert 'Modified as requested (be casual):\n\n```python\nprint("Hi Ada")' in text


def test_a_plain_run_of_a_percent_script_keeps_its_layout(
    ex: NotebookExecutor, tmp_path: Path
) -> None:
    path = tmp_path / "nb.py"
    path.write_text('# %% tags=["parameters"]\nx = 1\n\n# %%\nprint(x)\n', encoding="utf-8")
    result = ex.execute(path, parameters={"x": 2}, edits=[{"index": 1, "source": "print(x * 10)"}])
    text = Path(result["output_path"]).with_suffix(".md").read_text(encoding="utf-8")
    assert "# Run of `nb.py`: success" in text
    assert "```python\nx = 1\n```" in text and "*Injected parameters:*" in text
    assert "```python\nprint(x)\n```\n\nModified for this run:\n\n```python\nprint(x * 10)" in text
    assert "Results:\n\n```text\n20\n```" in text
    assert path.read_text(encoding="utf-8").endswith("print(x)\n")


def test_the_diff_shows_the_edits(ex: NotebookExecutor, tmp_path: Path) -> None:
    path = _logbook(tmp_path)
    result = _modified(ex, path)
    found = ex.diff_notebooks(path, result["run_id"])
    assert not found["identical"]
    changed = {cell["index_a"]: cell for cell in found["cells"] if cell["op"] == "modified"}
    assert 2 in changed
    diff = changed[2]["source_diff"]
    assert '-print("Hello, {name}!")' in diff
    assert '+print("Hey Richard! So great to see you, buddy!")' in diff


def test_search_finds_the_note_and_the_edited_text(ex: NotebookExecutor, tmp_path: Path) -> None:
    path = _logbook(tmp_path)
    plain = ex.execute(path, parameters={"name": "Ada"}, secrets={"GREETING_TOKEN": SECRET})
    result = _modified(ex, path)
    hits = ex.search('"extra friendly and casual"')
    assert [(hit["run_id"], hit["where"]) for hit in hits] == [(result["run_id"], "request")]
    hits = ex.search("buddy")
    assert [(hit["run_id"], hit["where"]) for hit in hits] == [(result["run_id"], "output")]
    assert plain["run_id"] not in {hit["run_id"] for hit in ex.search("buddy")}
    digest = ex.digest(path)
    edits = [note for note in digest["notes"] if note["kind"] == "edit"]
    assert edits == [
        {
            "kind": "edit",
            "text": NOTE,
            "cell": 2,
            "notebook": ex.get_run(result["run_id"])["notebook"],
            "run_id": result["run_id"],
            "started_at": result["started_at"],
            "status": "success",
            "runs": 1,
        }
    ]
    assert f'`{result["run_id"]}` success, edit of cell 2: "{NOTE}"' in digest["text"]


BAD_EDITS: list[tuple[str, Any, type[Exception], str]] = [
    ("out of range", [{"index": 9, "source": "x"}], NotebookExecutorError, "out of range"),
    ("negative", [{"index": -1, "source": "x"}], NotebookExecutorError, "out of range"),
    ("front matter", [{"index": 0, "source": "x"}], NotebookExecutorError, "front matter"),
    ("splits", [{"index": 1, "source": "<!-- #region -->\nx"}], NotebookSourceError,
     "cell boundary"),
    ("unknown key", [{"index": 2, "source": "x", "why": "?"}], NotebookExecutorError,
     "unknown key 'why'"),
    ("no source", [{"index": 2}], NotebookExecutorError, "'source' is missing"),
    ("index as text", [{"index": "2", "source": "x"}], NotebookExecutorError, "'index' must"),
    ("bool index", [{"index": True, "source": "x"}], NotebookExecutorError, "'index' must"),
    ("source bytes", [{"index": 2, "source": b"x"}], NotebookExecutorError, "'source' must"),
    ("note number", [{"index": 2, "source": "x", "note": 3}], NotebookExecutorError, "'note'"),
    ("twice", [{"index": 2, "source": "x"}, {"index": 2, "source": "y"}],
     NotebookExecutorError, "edited twice"),
    ("not a list", {"index": 2, "source": "x"}, NotebookExecutorError, "must be a list"),
    ("a string", "print(1)", NotebookExecutorError, "must be a list"),
    ("not mappings", [(2, "x")], NotebookExecutorError, "must be a mapping"),
    ("lone surrogate", [{"index": 2, "source": "x\udc80"}], NotebookExecutorError, "source"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("edits", "error", "match"),
    [pytest.param(e, err, m, id=name) for name, e, err, m in BAD_EDITS],
)
def test_bad_edits_are_refused_before_any_kernel_starts(
    tmp_path: Path, edits: Any, error: type[Exception], match: str
) -> None:
    path = _logbook(tmp_path)
    before = path.read_bytes()
    engine = FakeEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(error, match=match),
    ):
        ex.execute(
            path, parameters={"name": "Richard"}, secrets={"GREETING_TOKEN": SECRET}, edits=edits
        )
    assert engine.jobs == []
    assert path.read_bytes() == before
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.ipynb"))


def test_other_refusals(tmp_path: Path) -> None:
    script = tmp_path / "nb.py"
    script.write_text(
        '# %% tags=["parameters"]\nx = 1\n\n# %% [raw]\nraw text\n\n# %%\nprint(x)\n',
        encoding="utf-8",
    )
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        with pytest.raises(NotebookExecutorError, match="raw cell"):
            ex.execute(script, edits=[{"index": 1, "source": "text"}])
        with pytest.raises(NotebookExecutorError, match="parameters cell"):
            ex.execute(script, edits=[{"index": 0, "source": "x = 5"}])
        with pytest.raises(NotebookSourceError, match="cell"):
            ex.execute(script, edits=[{"index": 2, "source": "a = 1\n# %%\nb = 2"}])
        # The same parameter checks as a plain run.
        with pytest.raises(ParameterError, match="nobody"):
            ex.execute(script, parameters={"nobody": 1}, edits=[{"index": 2, "source": "1"}])
        with pytest.raises(NotebookExecutorError, match="local source"):
            ex.execute("https://example.org/nb.py", edits=[{"index": 2, "source": "1"}])
    assert engine.jobs == []


def test_an_empty_list_of_edits_is_a_plain_run(ex: NotebookExecutor, tmp_path: Path) -> None:
    script = tmp_path / "nb.py"
    script.write_text("# %%\nprint(1)\n", encoding="utf-8")
    result = ex.execute(script, edits=[])
    assert result["status"] == "success" and result["edited_cells"] == []


def test_the_command_line_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _logbook(tmp_path)
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GREETING_TOKEN", SECRET)
    monkeypatch.setattr("sys.stdin", io.StringIO(FRIENDLY + "\n"))
    runs = str(tmp_path / "runs")
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(
            "notebook_executor._faces.cli.common.executor",
            lambda args, **options: NotebookExecutor(runs_dir=args.runs_dir, engine=FakeEngine()),
        )
        argv = ["run", "greet.md", "-p", "name", "Richard", "--request", REQUEST]
        argv += ["--edit", "2", "-", "--edit-note", NOTE, "--runs-dir", runs, "--json"]
        assert main(argv) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["edited_cells"] == [2]
        assert path.read_bytes() == before
        text = Path(tmp_path / result["output_path"]).with_suffix(".md").read_text()
        assert f'{NOTE}:\n\n```python\nprint("Hey Richard! So great' in text
        (tmp_path / "edit.py").write_text("print('file {name}')\n", encoding="utf-8")
        assert main([*argv[:7], "--edit", "2", "edit.py", "--runs-dir", runs, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["edited_cells"] == [2]
        for bad in (
            ["--edit", "two", "edit.py"],
            ["--edit", "9", "edit.py"],
            ["--edit", "2", "missing.py"],
            ["--edit-note", "why"],
            ["--edit", "2", "edit.py", "--edit-note", "a", "--edit-note", "b"],
            ["--edit", "2", "-", "--edit", "3", "-"],
        ):
            assert main([*argv[:5], *bad, "--runs-dir", runs, "--json"]) == 2, bad
            captured = capsys.readouterr()
            assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, bad
    assert path.read_bytes() == before


def test_a_sweep_of_a_modified_notebook(ex: NotebookExecutor, tmp_path: Path) -> None:
    script = tmp_path / "nb.py"
    script.write_text('# %% tags=["parameters"]\nx = 1\n\n# %%\nprint(x)\n', encoding="utf-8")
    edits: list[CellEdit] = [{"index": 1, "source": "print(x * 100)", "note": "bigger"}]
    results = ex.execute_many(script, [{"x": 1}, {"x": 2}], edits=edits)
    assert [r["edited_cells"] for r in results] == [[1], [1]]
    for result, printed in zip(results, ("100\n", "200\n"), strict=True):
        nb = nbformat.read(result["output_path"], as_version=4)
        assert _stdout(nb.cells[-1]) == printed
    with pytest.raises(NotebookExecutorError, match="out of range"):
        ex.execute_many(script, [{"x": 1}], edits=[{"index": 5, "source": "1"}])
