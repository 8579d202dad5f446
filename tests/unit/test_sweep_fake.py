"""Sweeps without a cluster: the grid, the sweep command on the fake engine, what is checked
before anything is submitted to a cluster, the shipped folder and the secrets' mask."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

from notebook_executor import NotebookExecutor, NotebookExecutorError, ParameterError
from notebook_executor._cluster import folder as _folder
from notebook_executor._cluster.grid import combine, parse_grid_option, split_values
from notebook_executor._cluster.worker import _unpack, mask, unmask
from support import run_cli
from unit.fake_engine import FakeEngine

NOTEBOOK = """# %% tags=["parameters"]
count: int = 1
ratio: float = 0.5
name: str = "world"
tags: list = []

# %%
import scrapbook as sb
sb.glue("seen", {"count": count, "ratio": ratio, "name": name, "tags": tags})
if count < 0:
    raise ValueError("negative count")
"""


@pytest.fixture(autouse=True)
def fake_executor(tmp_path: Path, cli_engine: FakeEngine) -> None:
    (tmp_path / "nb.py").write_text(NOTEBOOK)


# -- the grid ------------------------------------------------------------------------------


def test_split_values_respects_brackets_and_quotes() -> None:
    assert split_values("1, 2,3") == ["1", "2", "3"]
    assert split_values("[1,2],{a: 1, b: 2},'x,y',\"p,q\"") == [
        "[1,2]",
        "{a: 1, b: 2}",
        "x,y",
        "p,q",
    ]


@pytest.mark.parametrize("text", ["1,,2", "[1,2", "'open", "1]", "a,"])
def test_split_values_refuses_malformed_lists(text: str) -> None:
    with pytest.raises(NotebookExecutorError):
        split_values(text)


@pytest.mark.parametrize("option", ["count", "=1,2", "count=", "9x=1", "a b=1"])
def test_parse_grid_option_refuses_bad_syntax(option: str) -> None:
    with pytest.raises(NotebookExecutorError, match="-g"):
        parse_grid_option(option)


def test_combine_is_the_product_first_dimension_slowest() -> None:
    grid: list[tuple[str, list[Any]]] = [("a", [1, 2]), ("b", ["x", "y", "z"])]
    assert combine(None, grid) == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 1, "b": "z"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
        {"a": 2, "b": "z"},
    ]


def test_combine_joins_every_set_with_every_point() -> None:
    sets = [{"c": 1}, {"c": 2, "d": True}]
    assert combine(sets, [("a", [10, 20])]) == [
        {"c": 1, "a": 10},
        {"c": 1, "a": 20},
        {"c": 2, "d": True, "a": 10},
        {"c": 2, "d": True, "a": 20},
    ]
    assert combine(sets, []) == sets


def test_combine_refuses_a_name_given_twice() -> None:
    with pytest.raises(NotebookExecutorError, match="more than once"):
        combine(None, [("a", [1]), ("a", [2])])
    with pytest.raises(NotebookExecutorError, match="set 1 of the file"):
        combine([{"b": 1}, {"a": 1}], [("a", [2])])


# -- the sweep command -----------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    # One run at a time: the fake engine swaps sys.stdout while a notebook prints.
    if "--scheduler" not in argv and "--workers" not in argv:
        argv = (*argv, "--workers", "1")
    return run_cli(capsys, *argv)


def test_sweep_grid_converts_to_declared_types_and_prints_results_in_order(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine
) -> None:
    code, out, err = _run(
        capsys, "sweep", "nb.py", "-g", "count=1,2", "-g", "ratio=1,2.5", "--json"
    )
    assert code == 0, err
    results = json.loads(out)
    assert [r["scraps"]["seen"]["count"] for r in results] == [1, 1, 2, 2]
    assert [r["scraps"]["seen"]["ratio"] for r in results] == [1.0, 2.5, 1.0, 2.5]
    assert all(isinstance(r["scraps"]["seen"]["ratio"], float) for r in results)
    assert len(engine.jobs) == 4


def test_sweep_file_and_grid_make_the_product(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "sets.yaml").write_text("- {name: Ada, tags: [1, 2]}\n- {name: Bob}\n")
    code, out, _ = _run(capsys, "sweep", "nb.py", "-f", "sets.yaml", "-g", "count=3,4", "--json")
    assert code == 0
    seen = [r["scraps"]["seen"] for r in json.loads(out)]
    assert [(s["name"], s["count"], s["tags"]) for s in seen] == [
        ("Ada", 3, [1, 2]),
        ("Ada", 4, [1, 2]),
        ("Bob", 3, []),
        ("Bob", 4, []),
    ]


def test_sweep_exits_1_when_any_run_fails_and_prints_a_line_per_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(capsys, "sweep", "nb.py", "-g", "count=1,-1,2")
    assert code == 1
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["success", "error", "success"]
    assert "ValueError" in lines[1]
    assert lines[3] == "2/3 runs succeeded"


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "nb.py"],
        ["sweep", "nb.py", "-g", "count"],
        ["sweep", "nb.py", "-g", "count=1,,2"],
        ["sweep", "nb.py", "-g", "nope=1,2"],
        ["sweep", "nb.py", "-g", "count=1", "-g", "count=2"],
        ["sweep", "nb.py", "-g", "count=x,2"],
        ["sweep", "nb.py", "-f", "bad.yaml"],
        ["sweep", "nb.py", "-f", "missing.yaml"],
        ["sweep", "nb.py", "-f", "sets.yaml", "-g", "name=a"],
        ["sweep", "nb.py", "-f", "unknown.yaml"],
        ["sweep", "nb.py", "-g", "count=1", "--workers", "0"],
        ["sweep", "nb.py", "-g", "count=1", "--workers", "2", "--scheduler", "tcp://x:1"],
        ["sweep", "missing.py", "-g", "count=1"],
        ["sweep", "nb.py", "-g", "count=1", "--retries", "1"],
        ["sweep", "nb.py", "-g", "count=1", "--scheduler", "tcp://x:1", "--retries", "-1"],
    ],
)
def test_sweep_bad_input_exits_2_before_anything_runs(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine, tmp_path: Path, argv: list[str]
) -> None:
    (tmp_path / "bad.yaml").write_text("{count: 1}\n")
    (tmp_path / "sets.yaml").write_text("- {name: a}\n")
    (tmp_path / "unknown.yaml").write_text("- {count: 1}\n- {nope: 2}\n")
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("notebook-executor: error: ")
    assert len(err.strip().splitlines()) == 1, err
    assert engine.jobs == []
    assert not (tmp_path / "runs").exists()


# -- checked before a cluster is reached ---------------------------------------------------


def test_every_set_is_checked_before_the_cluster_is_reached(tmp_path: Path) -> None:
    # The address is never contacted: a bad set fails first.
    with NotebookExecutor(engine=FakeEngine()) as ex, pytest.raises(ParameterError, match="nope"):
        ex.execute_many("nb.py", [{"count": 1}, {"nope": 1}], client="tcp://127.0.0.1:9")
    assert not (tmp_path / "runs").exists()


def test_client_and_max_workers_do_not_go_together() -> None:
    with NotebookExecutor(engine=FakeEngine()) as ex, pytest.raises(NotebookExecutorError):
        ex.execute_many("nb.py", [{}], client="tcp://127.0.0.1:9", max_workers=2)


@pytest.mark.parametrize("retries", [-1, True, 1.0, "1"])
def test_retries_must_be_a_count(retries: Any) -> None:
    with (
        NotebookExecutor(engine=FakeEngine()) as ex,
        pytest.raises(NotebookExecutorError, match="retries must be an int"),
    ):
        ex.execute_many("nb.py", [{}], client="tcp://127.0.0.1:9", retries=retries)


def test_retries_apply_to_cluster_runs_only(engine: FakeEngine) -> None:
    with (
        NotebookExecutor(engine=engine) as ex,
        pytest.raises(NotebookExecutorError, match="Dask cluster"),
    ):
        ex.execute_many("nb.py", [{}], retries=1)
    assert engine.jobs == []


def test_the_markdown_record_lists_the_attempts_of_a_cluster_run() -> None:
    from notebook_executor._cluster.dask import _ended, _provenance
    from notebook_executor._records.run_markdown import render_markdown

    lost = {"worker": "tcp://10.0.0.1:4001", "started": "2026-01-01T00:00:00.000Z"}
    again = {"worker": "tcp://10.0.0.2:4002", "started": "2026-01-01T00:00:09.000Z"}
    provenance = _provenance((lost,), _ended(again, "success", None))
    assert provenance == {
        "dask_worker": "tcp://10.0.0.2:4002",
        "dask_attempts": [
            {**lost, "status": "error", "error_kind": "interrupted"},
            {**again, "status": "success", "error_kind": None},
        ],
    }
    text = render_markdown(
        nbformat.v4.new_notebook(), {"run_id": "r", "status": "success", **provenance}
    )
    front = yaml.safe_load(text.split("---")[1])
    assert front["attempts"] == provenance["dask_attempts"]
    assert "attempts" not in render_markdown(nbformat.v4.new_notebook(), {"run_id": "r"})


def test_a_client_of_the_wrong_type_is_refused() -> None:
    with NotebookExecutor(engine=FakeEngine()) as ex, pytest.raises(NotebookExecutorError):
        ex.execute_many("nb.py", [{}], client=42)


def test_a_notebook_folder_too_big_to_ship_is_refused_before_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_folder, "MAX_FOLDER_BYTES", 1000)
    (tmp_path / "data.bin").write_bytes(b"x" * 2000)
    with (
        NotebookExecutor(engine=FakeEngine()) as ex,
        pytest.raises(NotebookExecutorError, match="cwd="),
    ):
        ex.execute_many("nb.py", [{}], client="tcp://127.0.0.1:9")
    assert not (tmp_path / "runs").exists()


# -- the shipped folder and the secrets' mask -----------------------------------------------


def test_pack_folder_ships_files_but_not_hidden_entries_runs_or_links(tmp_path: Path) -> None:
    src = tmp_path / "project"
    (src / "data").mkdir(parents=True)
    (src / "nb.py").write_text("x = 1\n")
    (src / "data" / "table.csv").write_text("a,b\n1,2\n")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    (src / ".env").write_text("TOKEN=x")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "m.pyc").write_bytes(b"\0")
    (src / "runs").mkdir()
    (src / "runs" / "catalog.sqlite").write_bytes(b"\0")
    (src / "link.csv").symlink_to(src / "data" / "table.csv")
    archive = _folder.pack_folder(src, exclude=src / "runs")
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["data/table.csv", "nb.py"]
    out = tmp_path / "copy"
    out.mkdir()
    _unpack(archive, out)
    assert (out / "data" / "table.csv").read_text() == "a,b\n1,2\n"
    assert (out / "nb.py").read_text() == "x = 1\n"


@pytest.mark.parametrize("name", ["../escape.txt", "/abs.txt"])
def test_unpack_refuses_members_outside_the_folder(tmp_path: Path, name: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    (tmp_path / "copy").mkdir()
    with pytest.raises(RuntimeError, match="refusing"):
        _unpack(buffer.getvalue(), tmp_path / "copy")
    assert not (tmp_path / "escape.txt").exists()


def test_mask_hides_every_byte_and_unmask_restores() -> None:
    values = {
        "TOKEN": "tok_live_9f8E7d6C5b4A3x2Y1z0",
        "PASS": "p@ss'w\"rd-\u00e9t\u00e9-\U0001f511",
    }
    pad = {name: os.urandom(len(v.encode())) for name, v in values.items()}
    masked = mask(values, pad)
    for name, value in values.items():
        assert value.encode() not in masked[name]
        assert masked[name] != value.encode()
    assert unmask(masked, pad) == values


def test_sweep_takes_k_for_the_kernel_as_run_does(
    capsys: pytest.CaptureFixture[str], engine: FakeEngine
) -> None:
    code, _, err = _run(capsys, "sweep", "nb.py", "-g", "count=1,2", "-k", "python3", "--json")
    assert code == 0, err
    assert [job.kernel.name for job in engine.jobs] == ["python3", "python3"]
