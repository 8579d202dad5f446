"""The command line tells the truth: ``diff`` of two runs reports what ``diff_runs`` reports;
``edit``, ``insert`` and ``delete`` follow ``edit_cell``'s rules; Ctrl-C with ``--json`` still
prints the cancelled run's result."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor
from support import run_cli
from unit.fake_engine import FakeEngine

NOTEBOOK = """\
# %% tags=["parameters"]
name = "World"
fail = False

# %%
import scrapbook as sb
sb.glue("greeting", f"Hello, {name}!")

# %%
if fail:
    raise ValueError("asked to fail")
print("done")
"""


@pytest.fixture
def notebook(tmp_path: Path, cli_engine: FakeEngine) -> Path:
    path = tmp_path / "hello.py"
    path.write_text(NOTEBOOK)
    return path


def _run_json(capsys: pytest.CaptureFixture[str], notebook: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "run", str(notebook), "--json", *args)
    assert code in (0, 1), err
    result: dict[str, Any] = json.loads(out)
    return result


def _usage_error(code: int, out: str, err: str) -> str:
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("notebook-executor: error: ")
    return lines[0]


# -- diff of two runs ----------------------------------------------------------------------------


def test_diff_of_two_runs_with_other_parameters_is_not_identical(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run_json(capsys, notebook, "-p", "name", "Ada")
    b = _run_json(capsys, notebook, "-p", "name", "Bob")
    code, out, _ = run_cli(capsys, "diff", a["run_id"], b["run_id"])
    assert code == 1
    assert "identical" not in out
    assert "name: 'Ada' -> 'Bob'" in out
    assert "greeting: 'Hello, Ada!' -> 'Hello, Bob!'" in out

    code, out, _ = run_cli(capsys, "diff", a["run_id"], b["run_id"], "--json")
    assert code == 1
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        assert json.loads(out) == json.loads(json.dumps(ex.diff_runs(a["run_id"], b["run_id"])))


def test_diff_of_an_error_and_a_success_names_the_status_and_the_failed_cell(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _run_json(capsys, notebook)
    bad = _run_json(capsys, notebook, "-p", "fail", "True")
    assert bad["status"] == "error"
    code, out, _ = run_cli(capsys, "diff", good["run_id"], bad["run_id"])
    assert code == 1
    assert "status: success -> error" in out
    assert f"{bad['run_id']} failed in cell 2 (cell_error): ValueError: asked to fail" in out
    assert "fail: False -> True" in out


def test_diff_of_two_alike_runs_is_identical(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run_json(capsys, notebook)
    b = _run_json(capsys, notebook)
    code, out, _ = run_cli(capsys, "diff", a["run_id"], b["run_id"])
    assert (code, out) == (0, f"identical: runs {a['run_id']} and {b['run_id']}\n")


def test_diff_of_two_files_is_unchanged(
    notebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.py"
    other.write_text(NOTEBOOK.replace('"World"', '"Earth"'))
    code, out, _ = run_cli(capsys, "diff", str(notebook), str(other))
    assert code == 1
    assert '+name = "Earth"' in out


# -- edit, insert, delete ------------------------------------------------------------------------


def test_edit_replaces_one_cell_and_keeps_every_other_byte(
    notebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new.txt"
    new.write_text('print("fixed")\n')
    before = notebook.read_text()
    code, out, err = run_cli(capsys, "edit", str(notebook), "2", str(new), "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["cell"]["source"] == 'print("fixed")'
    assert answer["cells"] == 3
    after = notebook.read_text()
    assert after.endswith('# %%\nprint("fixed")\n')
    assert after[: before.index("if fail")] == before[: before.index("if fail")]


def test_edit_reads_standard_input(
    notebook: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("x = 1\n"))
    code, out, err = run_cli(capsys, "edit", str(notebook), "2", "-")
    assert code == 0, err
    assert out == f"edited cell 2 of {notebook} (3 cells now)\n"
    assert notebook.read_text().endswith("# %%\nx = 1\n")


def test_edit_with_a_stale_expect_is_refused_and_changes_nothing(
    notebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new.txt"
    new.write_text("x = 1\n")
    before = notebook.read_bytes()
    line = _usage_error(
        *run_cli(capsys, "edit", str(notebook), "2", str(new), "--expect", "something else")
    )
    assert "cell 2" in line
    assert notebook.read_bytes() == before
    code, _, err = run_cli(
        capsys,
        "edit",
        str(notebook),
        "2",
        str(new),
        "--expect",
        'if fail:\n    raise ValueError("asked to fail")\nprint("done")',
    )
    assert code == 0, err


def test_a_text_that_would_split_the_cell_is_refused(
    notebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "new.txt"
    new.write_text("x = 1\n# %%\ny = 2\n")
    before = notebook.read_bytes()
    _usage_error(*run_cli(capsys, "edit", str(notebook), "1", str(new)))
    assert notebook.read_bytes() == before


def test_insert_and_delete(
    notebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "note.md"
    text.write_text("A note.\n")
    code, out, err = run_cli(
        capsys, "insert", str(notebook), "1", str(text), "--cell-type", "markdown", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["cell"] == {"index": 1, "cell_type": "markdown", "source": "A note."}
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        assert [c.cell_type for c in ex.read_notebook(notebook).cells] == [
            "code",
            "markdown",
            "code",
            "code",
        ]
    code, out, err = run_cli(capsys, "delete", str(notebook), "1", "--expect", "A note.")
    assert code == 0, err
    assert notebook.read_text() == NOTEBOOK


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["edit", "missing.py", "0", "-"], "missing.py"),
        (["delete", "{nb}", "9"], "9"),
        (["delete", "{nb}", "-1"], "cell index"),
        (["edit", "{nb}", "0", "no-such-file.txt"], "no-such-file.txt"),
    ],
)
def test_bad_edits_are_one_line_exit_2(
    notebook: Path, capsys: pytest.CaptureFixture[str], args: list[str], mentions: str
) -> None:
    before = notebook.read_bytes()
    line = _usage_error(*run_cli(capsys, *(a.replace("{nb}", str(notebook)) for a in args)))
    assert mentions in line
    assert notebook.read_bytes() == before


# -- Ctrl-C with --json --------------------------------------------------------------------------


def test_ctrl_c_with_json_prints_the_cancelled_runs_result(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook.write_text(
        NOTEBOOK.replace('print("done")', 'print("done")\nraise SimulatedInterrupt()')
    )
    code, out, err = run_cli(capsys, "run", str(notebook), "--json")
    assert code == 130
    result = json.loads(out)
    assert result["status"] == "error"
    assert result["error_kind"] == "cancelled"
    assert result["failed_cell"]["index"] == 2
    assert err.strip().splitlines()[-1] == "notebook-executor: error: interrupted"
