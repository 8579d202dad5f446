"""Each run reads its source once, and the catalog indexes a run from what was written.

The planner reads the source and every check works on that read: edits, text parameters
(the command line's ``-p``, a JSON client's strings), the command line's kernel head start.
Opens are counted by an audit hook on the ``open`` event, which sees every open of a file
(``open``, ``io.open``, ``os.open``, ``Path.read_*``) whoever makes it. Scripted engine: no
kernel.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._catalog.search import run_texts
from notebook_executor._catalog.store import Catalog
from notebook_executor._records.store import RunStore
from notebook_executor._run import plan as planning
from notebook_executor._run.options import RunOptions
from notebook_executor.engine import ScriptedEngine
from support import cli_on_engine, run_cli
from unit.fake_engine import FakeEngine

SOURCE = """\
# %% tags=["parameters"]
x = 0

# %%
print(x)

# %% [markdown]
# A note.

# %%
y = 2
"""

#: Resolved paths whose opens are counted, and the opens seen (the hook stays installed for
#: the process: an audit hook cannot be removed; with nothing watched it returns at once).
_WATCHED: set[str] = set()
_OPENED: list[tuple[str, Any]] = []
_HOOKED = False


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _WATCHED or not args:
        return
    path = args[0]
    if isinstance(path, int) or not isinstance(path, (str, bytes, os.PathLike)):
        return  # an open of a descriptor already counted when it was opened
    name = os.fsdecode(path)
    if Path(name).name not in {Path(p).name for p in _WATCHED}:
        return
    if os.path.realpath(name) in _WATCHED:
        _OPENED.append((name, args[1:]))


@pytest.fixture
def opens() -> Iterator[Any]:
    """``watch(path)`` starts counting the opens of ``path``; ``count()`` is their number."""
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_on_audit)
        _HOOKED = True

    class Opens:
        def watch(self, path: Path) -> None:
            _WATCHED.add(os.path.realpath(path))
            _OPENED.clear()

        def count(self) -> int:
            return len(_OPENED)

    try:
        yield Opens()
    finally:
        _WATCHED.clear()
        _OPENED.clear()


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    path = tmp_path / "nb.py"
    path.write_text(SOURCE, encoding="utf-8")
    return path


def test_the_audit_hook_sees_every_way_of_opening(notebook: Path, opens: Any) -> None:
    import io

    opens.watch(notebook)
    notebook.read_text(encoding="utf-8")
    with io.open(notebook, encoding="utf-8"):  # noqa: UP020 - io.open is counted too
        pass
    os.close(os.open(notebook, os.O_RDONLY))
    assert opens.count() == 3


def test_execute_with_edits_reads_the_source_once(
    notebook: Path, tmp_path: Path, opens: Any
) -> None:
    edits: list[Any] = [
        {"index": 3, "source": "y = 3", "note": "three"},
        {"index": 1, "source": "print(x + 1)", "note": None},
    ]
    engine = ScriptedEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        ex.execute(notebook)  # imports done, caches warm: only this run's opens are counted
        opens.watch(notebook)
        result = ex.execute(notebook, parameters={"x": 5}, edits=edits)
        assert opens.count() == 1, _OPENED
        assert result["status"] == "success", result
        assert result["edited_cells"] == [1, 3]
        sources = [cell.source for cell in engine.jobs[-1].nb.cells]
        assert "y = 3" in sources and "print(x + 1)" in sources
        # One edit or one plain run: one read too.
        opens.watch(notebook)
        ex.execute(notebook, edits=edits[:1])
        assert opens.count() == 1, _OPENED


def test_a_command_line_run_with_text_parameters_reads_the_source_once(
    notebook: Path,
    tmp_path: Path,
    opens: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli_on_engine(monkeypatch, ScriptedEngine())
    runs = str(tmp_path / "runs")
    assert run_cli(capsys, "run", str(notebook), "--runs-dir", runs)[0] == 0
    opens.watch(notebook)
    code, out, err = run_cli(
        capsys, "run", str(notebook), "-p", "x", "1", "--runs-dir", runs, "--json"
    )
    assert code == 0, err
    assert opens.count() == 1, _OPENED
    # The text was typed against the declared parameter (an int), as before.
    assert json.loads(out)["parameters"] == {"x": 1}
    (tmp_path / "y.py").write_text("y = 3\n", encoding="utf-8")
    opens.watch(notebook)
    code, out, err = run_cli(
        capsys, "run", str(notebook), "--edit", "3", str(tmp_path / "y.py"), "--runs-dir", runs
    )
    assert code == 0, err
    assert opens.count() == 1, _OPENED


def test_an_mcp_execute_reads_the_source_once(tmp_path: Path, opens: Any) -> None:
    import anyio
    from mcp.client.client import Client

    from notebook_executor._faces.mcp.server import build_server

    root = tmp_path / "root"
    root.mkdir()
    notebook = root / "nb.py"
    notebook.write_text(SOURCE, encoding="utf-8")
    engine = ScriptedEngine()
    answers: list[Any] = []
    with NotebookExecutor(
        runs_dir=tmp_path / "runs", engine=engine, base_env={}, dotenv_root=root
    ) as ex:
        server, _ = build_server(root, ex)

        async def call(arguments: dict[str, Any]) -> None:
            async with Client(server) as client:
                answers.append(await client.call_tool("execute", arguments))

        anyio.run(call, {"path": "nb.py"})
        opens.watch(notebook)
        # A number sent as text, and an edit.
        anyio.run(
            call,
            {"path": "nb.py", "parameters": {"x": "7"}, "edits": [{"index": 3, "source": "y = 9"}]},
        )
        assert opens.count() == 1, _OPENED
    answer = answers[-1]
    assert not answer.is_error, answer
    cells = engine.jobs[-1].nb.cells
    (injected,) = [c.source for c in cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "x = 7" in injected.splitlines()  # the text typed as the declared int
    assert any(cell.source == "y = 9" for cell in engine.jobs[-1].nb.cells)


def test_an_edit_of_a_markdown_cell_on_the_command_line_is_refused_by_the_planner(
    notebook: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = ScriptedEngine()
    cli_on_engine(monkeypatch, engine)
    (tmp_path / "text.md").write_text("Another note.\n", encoding="utf-8")
    argv = ["run", str(notebook), "--edit", "2", str(tmp_path / "text.md")]
    code, _, err = run_cli(capsys, *argv, "--runs-dir", str(tmp_path / "runs"))
    assert code == 2
    assert "cell 2 of" in err and "is a markdown cell, not code" in err
    assert "--edit-markdown" in err and engine.jobs == []
    code, _, err = run_cli(capsys, *argv, "--edit-markdown", "--runs-dir", str(tmp_path / "r"))
    assert code == 0, err


def test_the_command_line_head_start_comes_once_the_source_is_read(
    notebook: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = FakeEngine()
    cli_on_engine(monkeypatch, engine)
    runs = str(tmp_path / "runs")
    assert run_cli(capsys, "run", str(notebook), "--runs-dir", runs)[0] == 0
    assert engine.prepared == [0]
    # Bad input: the source is read, but no head start is given for a run that never starts
    # (it comes before the parameters are checked, as it did).
    code, _, err = run_cli(capsys, "run", str(tmp_path / "missing.py"), "--runs-dir", runs)
    assert code == 2 and "no such file" in err
    assert engine.prepared == [0]
    out = str(tmp_path / "prepared.ipynb")
    assert run_cli(capsys, "run", str(notebook), out, "--prepare-only", "--runs-dir", runs)[0] == 0
    assert engine.prepared == [0]


def test_no_head_start_for_a_run_in_a_declared_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "deps.py"
    path.write_text(
        '# /// script\n# dependencies = ["six"]\n# ///\n\n# %%\nprint(1)\n', encoding="utf-8"
    )

    class Stop(Exception):
        pass

    def no_environment(*args: object) -> Any:
        raise Stop

    monkeypatch.setattr(planning, "_in_declared_environment", no_environment)
    started: list[str] = []
    with pytest.raises(Stop):
        planning.plan_run(path, RunOptions(), head_start=lambda: started.append("now"))
    assert started == []
    planning.plan_run(
        path, RunOptions(environment="current"), head_start=lambda: started.append("now")
    )
    assert started == ["now"]


BIG = "".join(f"value {i:06d} of the table\n" for i in range(200))


def test_the_catalog_indexes_what_was_written_without_reading_the_run_file(
    notebook: Path, tmp_path: Path, opens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[Any] = []
    finish = Catalog.finish

    def spy(self: Catalog, record: Any, *cells: Any) -> None:
        handed.append(cells[0] if cells else None)
        finish(self, record, *cells)

    monkeypatch.setattr(Catalog, "finish", spy)

    def handler(job: Any, index: int) -> list[dict[str, Any]]:
        return [{"output_type": "stream", "name": "stdout", "text": BIG}]

    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs, engine=ScriptedEngine(handler)) as ex:
        ex.execute(notebook)
        store = RunStore(runs)
        real_write = RunStore.write

        def write(self: RunStore, run_id: str, nb: Any, record: Any, *, final: bool) -> Path:
            path = real_write(self, run_id, nb, record, final=final)
            if final:
                opens.watch(path)  # from here on, every open of the run file is counted
            return path

        monkeypatch.setattr(RunStore, "write", write)
        result = ex.execute(notebook)
        monkeypatch.setattr(RunStore, "write", real_write)
        assert opens.count() == 0, _OPENED
        # The row is there, searchable by what the outputs say.
        hits = ex.search("value 000123")
        assert result["run_id"] in [hit["run_id"] for hit in hits]
    # What was handed is what the file holds, as the catalog indexes it.
    written = store.read(result["run_id"])
    assert handed[-1] is not None
    assert run_texts(written.record, handed[-1]) == run_texts(written.record, written.cells)
