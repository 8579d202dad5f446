"""Run records: run ids, run paths, display paths, the markdown record, output capping."""

from __future__ import annotations

import copy
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook_executor import RunNotFoundError
from notebook_executor._records import provenance
from notebook_executor._records import streams as _streams
from notebook_executor._records.ids import new_run_id
from notebook_executor._records.provenance import display_path
from notebook_executor._records.run_markdown import render_markdown
from notebook_executor._records.store import RunStore, read_run_file
from notebook_executor._records.streams import cap_streams
from unit.fake_engine import scrap_output

STARTED = datetime(2024, 3, 9, 17, 26, 45, 123456, tzinfo=timezone.utc)
SAFE = re.compile(r"^[A-Za-z0-9_.-]+$")


@pytest.mark.parametrize(
    ("stem", "slug"),
    [
        ("hello", "hello"),
        ("my notebook (copy)", "my-notebook-copy"),
        ("ünïcödé", "n-c-d"),
        ("日本語", "notebook"),
        ("...", "notebook"),
        ("a" * 100, "a" * 40),
        ("-lead-", "lead"),
    ],
)
def test_run_id_format(stem: str, slug: str) -> None:
    run_id = new_run_id(Path(f"/x/{stem}.py"), STARTED)
    assert re.fullmatch(rf"20240309T172645Z-{re.escape(slug)}-[0-9a-f]{{8}}", run_id), run_id
    assert SAFE.match(run_id)
    assert RunStore(Path("runs")).path(run_id) == Path(f"runs/2024-03-09/{run_id}.ipynb")


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(min_size=1, max_size=60).filter(lambda s: "/" not in s and "\x00" not in s))
def test_any_stem_gives_a_safe_run_id(stem: str) -> None:
    run_id = new_run_id(Path(stem + ".py"), STARTED)
    assert SAFE.match(run_id)
    assert len(run_id) < 100
    assert RunStore(Path("runs")).path(run_id).parent == Path("runs/2024-03-09")


def test_run_ids_are_unique_and_sort_by_time() -> None:
    ids = {new_run_id(Path("nb.py"), STARTED) for _ in range(2000)}
    assert len(ids) == 2000
    later = new_run_id(Path("nb.py"), STARTED.replace(second=46))
    assert max(ids) < later


@pytest.mark.parametrize(
    "run_id",
    [
        "../../etc/passwd",
        "20240101T000000Z-x/../../y",
        "20240101T000000Z-../x",
        "/abs/20240101T000000Z-x",
        "20240101T000000Z-",
        "20240101T000000Z-x\x00",
        "2024-01-01",
        "",
        "20240101T000000Z-x\n",
        "20240101T000000Z-" + "a" * 81,
    ],
)
def test_run_paths_refuse_anything_but_a_run_id(run_id: str) -> None:
    with pytest.raises(RunNotFoundError) as info:
        RunStore(Path("runs")).path(run_id)
    assert info.value.run_id == run_id


def test_read_record_of_a_missing_run(tmp_path: Path) -> None:
    with pytest.raises(RunNotFoundError):
        read_run_file(RunStore(tmp_path).path("20240101T000000Z-x-00000000"))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home" / "ada"
    (folder / "work").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(elsewhere)
    return folder


def test_display_path_under_home_is_tilde_based(home: Path) -> None:
    assert display_path(home / "work" / "nb.py") == "~/work/nb.py"
    assert display_path(str(home / "nb.py")) == "~/nb.py"


def test_display_path_under_cwd_is_relative(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(home / "work")
    assert display_path(home / "work" / "sub" / "nb.py") == "sub/nb.py"
    assert display_path("rel/nb.py") == "rel/nb.py"


def test_display_path_elsewhere_stays_absolute(home: Path) -> None:
    other = home.parent.parent / "data" / "nb.py"
    assert display_path(other) == other.as_posix()


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.from_regex(r"[A-Za-z0-9_. -]{1,12}", fullmatch=True), min_size=1, max_size=4))
def test_display_path_never_shows_an_absolute_home_path(parts: list[str]) -> None:
    home = Path.home()
    shown = display_path(home.joinpath(*parts))
    assert not Path(shown).is_absolute() or not shown.startswith(home.as_posix())
    assert home.as_posix() not in shown


def _run_notebook() -> Any:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})
    injected = nbformat.v4.new_code_cell("x = 2", metadata={"tags": ["injected-parameters"]})
    code = nbformat.v4.new_code_cell("print(x)")
    code.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="\x1b[31m2\x1b[0m\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "'v'"}, execution_count=1),
        nbformat.v4.new_output("display_data", data={"text/markdown": "**bold**"}),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"}),
        *scrap_output("answer", 42),
    ]
    code.metadata["notebook_executor"] = {"status": "completed"}
    failing = nbformat.v4.new_code_cell("raise ValueError('bad')")
    failing.outputs = [
        nbformat.v4.new_output(
            "error", ename="ValueError", evalue="bad", traceback=["\x1b[31mValueError\x1b[0m: bad"]
        )
    ]
    never = nbformat.v4.new_code_cell("print('never')")
    never.metadata["notebook_executor"] = {"status": "not_run"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        params,
        injected,
        code,
        failing,
        never,
        nbformat.v4.new_raw_cell("raw ``` text"),
    ]
    return nb


RECORD: dict[str, Any] = {
    "run_id": "20240309T172645Z-nb-0123abcd",
    "uuid": "6f1c0e6e-0000-4000-8000-000000000000",
    "notebook": "notebooks/nb.py",
    "parameters": {"x": 2, "when": datetime(2024, 1, 1)},
    "request": "check: the 'numbers' #1",
    "started_at": "2024-03-09T17:26:45.123Z",
    "finished_at": "2024-03-09T17:26:46.000Z",
    "duration_seconds": 0.877,
    "status": "error",
    "error_kind": "cell_error",
    "output_path": "runs/2024-03-09/20240309T172645Z-nb-0123abcd.ipynb",
    "failed_cell": {"index": 3, "ename": "ValueError", "evalue": "bad"},
}


def test_markdown_record_front_matter() -> None:
    text = render_markdown(_run_notebook(), RECORD)
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["run_id"] == RECORD["run_id"]
    assert front["uuid"] == RECORD["uuid"]
    assert front["parameters"] == {"x": 2, "when": "2024-01-01 00:00:00"}
    assert front["user_request"] == RECORD["request"]
    assert front["executed_at"] == RECORD["started_at"]
    assert front["status"] == "error"
    assert front["error_kind"] == "cell_error"


def test_markdown_record_body() -> None:
    text = render_markdown(_run_notebook(), RECORD)
    assert "# Run of `nb.py`: error" in text
    assert "Failed in cell 3: `ValueError: bad`" in text
    assert "*Injected parameters:*" in text
    assert "*Not run.*" in text
    assert "```text\n2\n```" in text  # ANSI-free stream
    assert "ValueError: bad" in text
    assert "**bold**" in text
    assert "*[image/png output]*" in text
    assert "````text\nraw ``` text\n````" in text  # the fence outgrows the content
    assert '"answer": 42' in text
    assert "\x1b" not in text
    assert "application/scrapbook" not in text


def test_run_files_cap_long_streams(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_streams, "MAX_STREAM_CHARS", 100)
    nb = _run_notebook()
    nb.cells[3].outputs[0].text = "x" * 250
    nb.cells[3].outputs.append(nbformat.v4.new_output("stream", name="stderr", text=["y"] * 50))
    capped, cut = cap_streams(nb)
    assert cut == [3]
    assert nb.cells[3].outputs[0].text == "x" * 250  # the notebook given is not changed
    record = {"run_id": RECORD["run_id"]}
    path = RunStore(tmp_path).write(RECORD["run_id"], capped, record, final=True)
    assert path == tmp_path / "2024-03-09" / f"{RECORD['run_id']}.ipynb"
    stored = nbformat.read(path, as_version=4)
    streams = [o for o in stored.cells[3].outputs if o.output_type == "stream"]
    assert streams[0].text.startswith("x" * 100 + "\n[notebook-executor: output truncated, 150 ")
    assert streams[1].text == "y" * 50
    assert path.with_suffix(".md").exists()
    assert read_run_file(path).record == {"run_id": RECORD["run_id"]}


def test_write_run_files_not_final_writes_no_markdown(tmp_path: Path) -> None:
    path = RunStore(tmp_path).write(RECORD["run_id"], _run_notebook(), {"a": 1}, final=False)
    assert not path.with_suffix(".md").exists()
    assert json.loads(path.read_text())["metadata"]["notebook_executor"] == {"a": 1}
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def _layout_notebook() -> Any:
    nb = _run_notebook()
    nb.cells[0].source = "# Title\n\nTwo\nlines ![x](attachment:x.svg)"
    nb.cells[0].attachments = {"x.svg": {"image/svg+xml": "<svg>\n</svg>\n"}}
    nb.cells[3].source = "print(x)\nprint(x)\n"
    nb.cells[3].outputs += [
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": "<b>a</b>\n<i>b</i>",
                "application/json": {"k": ["v\nw"]},
                "application/javascript": "x = 1;\ny = 2;",
                "application/vnd.custom+json": "keep\nwhole",
            },
            metadata={"isolated": True},
        ),
        nbformat.v4.new_output("stream", name="stderr", text="e1\ne2\n"),
    ]
    nb.metadata["orig_nbformat"] = 3  # transient: never stored
    return nb


def test_final_run_file_has_nbformats_own_layout(tmp_path: Path) -> None:
    from nbformat.v4.nbjson import writes

    notebook = _layout_notebook()
    expected = copy.deepcopy(notebook)
    expected.metadata["notebook_executor"] = {"a": 1}
    path = RunStore(tmp_path).write(RECORD["run_id"], notebook, {"a": 1}, final=True)
    assert path.read_text(encoding="utf-8") == writes(expected) + "\n"
    stored = nbformat.read(path, as_version=4)
    nbformat.validate(stored)
    assert "orig_nbformat" not in json.loads(path.read_text())["metadata"]


def test_running_run_file_is_the_same_notebook_compact(tmp_path: Path) -> None:
    notebook = _layout_notebook()
    again = copy.deepcopy(notebook)
    path = RunStore(tmp_path).write(RECORD["run_id"], notebook, {"a": 1}, final=False)
    text = path.read_text(encoding="utf-8")
    assert "\n" not in text
    stored = nbformat.reads(text, as_version=4)
    nbformat.validate(stored)
    final = RunStore(tmp_path).write(RECORD["run_id"], again, {"a": 1}, final=True)
    assert stored == nbformat.read(final, as_version=4)


def test_environment_record_has_versions_and_no_values() -> None:
    record = provenance.environment_record()
    assert set(record) == {"python", "implementation", "platform", "packages"}
    assert "nbformat" in record["packages"]
    text = json.dumps(record)
    for name in ("HOME", "PATH"):
        value = os.environ.get(name)
        if value and len(value) > 3:
            assert value not in text
