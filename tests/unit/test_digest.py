"""The digest (docs/how-to/modified-runs.md): every item checked against the runs that produced it
(fake engine)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError, RunResult
from notebook_executor._faces.cli import main
from unit.fake_engine import FakeEngine

NOTEBOOK = """\
# %% tags=["parameters"]
n = 1  # size
mode = "a"  # what to do

# %% [markdown]
# A sweep with two ways to fail.

# %%
import scrapbook as sb

sb.glue("loss", 1.0 / n)
sb.glue("label", f"{mode}-{n}")

# %%
if mode == "zero":
    1 / 0

# %%
if mode == "key":
    {}["missing"]
"""


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[NotebookExecutor, Path, list[RunResult]]]:
    """A notebook with successes, a sweep, two recurring errors, then a last success."""
    source = tmp_path / "sweep.py"
    source.write_text(NOTEBOOK, encoding="utf-8")
    other = tmp_path / "other.py"
    other.write_text("# %%\nx = 1\n", encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        results = [ex.execute(source, parameters={"n": 1}, request="first try")]
        results += ex.execute_many(source, [{"n": n} for n in range(2, 11)], max_workers=1)
        for _ in range(2):
            results.append(ex.execute(source, parameters={"mode": "zero"}, request="try zero"))
        for n in (3, 4, 5):
            results.append(ex.execute(source, parameters={"mode": "key", "n": n}))
        results.append(ex.execute(source, parameters={"n": 5, "mode": "b"}, request="after fix"))
        ex.execute(other, request="another notebook")
        yield ex, source, results


def _ordered(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(results, key=lambda r: (r["started_at"], r["run_id"]))


def test_the_digest_matches_the_runs_item_by_item(
    history: tuple[NotebookExecutor, Path, list[dict[str, Any]]],
) -> None:
    ex, source, results = history
    runs = _ordered(results)
    found = ex.digest(source)
    assert found["notebook"] == str(source)
    assert found["since"] is None
    assert found["runs"] == len(runs) == 16
    assert found["omitted"] == {}

    # Runs by status, with the first and last of each.
    for status, expected_count in (("success", 11), ("error", 5)):
        mine = [r for r in runs if r["status"] == status]
        assert len(mine) == expected_count
        (item,) = [s for s in found["statuses"] if s["status"] == status]
        assert item == {
            "status": status,
            "count": expected_count,
            "first_at": mine[0]["started_at"],
            "first_run_id": mine[0]["run_id"],
            "last_at": mine[-1]["started_at"],
            "last_run_id": mine[-1]["run_id"],
        }
    assert [s["status"] for s in found["statuses"]] == ["success", "error"]

    # Parameters: n took 10 values (a range), mode 4 (a set, most recent first).
    params = {p["name"]: p for p in found["parameters"]}
    assert set(params) == {"n", "mode"}
    n = params["n"]
    assert (n["kind"], n["runs"], n["distinct"], n["min"], n["max"]) == ("range", 16, 10, 1, 10)
    assert n["min_run_id"] == next(r["run_id"] for r in runs if r["parameters"]["n"] == 1)
    assert n["max_run_id"] == next(r["run_id"] for r in runs if r["parameters"]["n"] == 10)
    assert n["values"] == [] and n["more_values"] == 0
    mode = params["mode"]
    assert (mode["kind"], mode["distinct"], mode["min"], mode["max"]) == ("set", 4, None, None)
    expected_values = []
    for value in ("b", "key", "zero", "a"):
        having = [r for r in runs if r["parameters"]["mode"] == value]
        expected_values.append(
            {"value": value, "runs": len(having), "last_run_id": having[-1]["run_id"]}
        )
    assert mode["values"] == expected_values

    # The latest successful run's scraps, and how the numeric ones moved.
    last_success = [r for r in runs if r["status"] == "success"][-1]
    assert last_success["parameters"] == {"n": 5, "mode": "b"}
    assert found["scraps"] == [
        {
            # Named as the records name it: relative to the runs folder's parent.
            "notebook": "sweep.py",
            "run_id": last_success["run_id"],
            "started_at": last_success["started_at"],
            "scraps": {"label": "b-5", "loss": 0.2},
        }
    ]
    (loss,) = found["trends"]
    losses = [(r["scraps"]["loss"], r["run_id"]) for r in runs]
    assert loss["name"] == "loss" and loss["runs"] == 16
    assert (loss["first"], loss["first_run_id"]) == losses[0] == (1.0, runs[0]["run_id"])
    assert (loss["last"], loss["last_run_id"]) == losses[-1]
    assert (loss["min"], loss["min_run_id"]) == min(losses, key=lambda x: x[0]) == (0.1, ANY_ID)
    assert (loss["max"], loss["max_run_id"]) == (1.0, runs[0]["run_id"])

    # The two recurring errors: the most frequent first, each with its cell and last run.
    key_errors = [r for r in runs if r["parameters"]["mode"] == "key"]
    zero_errors = [r for r in runs if r["parameters"]["mode"] == "zero"]
    assert [(e["ename"], e["cell"], e["count"]) for e in found["errors"]] == [
        ("KeyError", 4, 3),
        ("ZeroDivisionError", 3, 2),
    ]
    for error, having in zip(found["errors"], (key_errors, zero_errors), strict=True):
        assert error["cell"] == having[-1]["failed_cell"]["index"]
        assert error["evalue"] == having[-1]["failed_cell"]["evalue"]
        assert error["error_kind"] == "cell_error"
        assert error["last_run_id"] == having[-1]["run_id"]
        assert error["last_at"] == having[-1]["started_at"]
        assert error["first_at"] == having[0]["started_at"]
        assert error["run_ids"] == [r["run_id"] for r in reversed(having)]

    # Requests, newest first, a repeated one counted once with its newest run.
    assert [(n["kind"], n["text"], n["runs"], n["run_id"]) for n in found["notes"]] == [
        ("request", "after fix", 1, runs[-1]["run_id"]),
        ("request", "try zero", 2, zero_errors[-1]["run_id"]),
        ("request", "first try", 1, runs[0]["run_id"]),
    ]

    # Every run id named is one get_run and search accept.
    named = _run_ids(found)
    assert named and named <= {r["run_id"] for r in runs}
    for run_id in named:
        assert ex.get_run(run_id)["run_id"] == run_id
    for note in found["notes"]:
        hits = ex.search(f'"{note["text"]}"', notebook=source, limit=20)
        assert note["run_id"] in {hit["run_id"] for hit in hits}

    # The text is the same digest: each item's run ids and values are there.
    text = found["text"]
    assert len(text) <= 4000
    assert "KeyError" in text and "cell 4" in text and "ZeroDivisionError" in text
    assert f"`{key_errors[-1]['run_id']}`" in text
    assert "1 .. 10" in text and '"after fix"' in text and "more items" not in text


class _AnyId:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)


ANY_ID: Any = _AnyId()


def _run_ids(found: Any) -> set[str]:
    named: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and (key.endswith("run_id") or key == "run_ids"):
            named.add(value)

    walk({k: v for k, v in found.items() if k != "text"})
    return named


def test_every_notebook_since_and_the_limit(
    history: tuple[NotebookExecutor, Path, list[dict[str, Any]]],
) -> None:
    ex, source, results = history
    everything = ex.digest()
    assert everything["notebook"] is None and everything["runs"] == 17
    assert "other.py" in everything["text"] and "another notebook" in everything["text"]
    runs = _ordered(results)
    later = ex.digest(source, since=runs[-1]["started_at"])
    assert later["runs"] >= 1 and later["since"] == runs[-1]["started_at"]
    assert runs[-1]["run_id"] in {s["last_run_id"] for s in later["statuses"]}
    small = ex.digest(source, limit_chars=600)
    assert len(small["text"]) <= 600
    assert "more items not shown" in small["text"]
    assert small["statuses"] == ex.digest(source)["statuses"]  # the dict is not cut
    for bad in (0, 399, "4000", True, 4000.0):
        with pytest.raises(NotebookExecutorError, match="limit_chars"):
            ex.digest(source, limit_chars=bad)  # type: ignore[arg-type]
    with pytest.raises(NotebookExecutorError, match="since"):
        ex.digest(source, since="yesterday")
    empty = ex.digest(source.with_name("never.py"))
    assert empty["runs"] == 0 and empty["statuses"] == [] and "0 runs" in empty["text"]


@pytest.mark.parametrize("limit", [400, 450, 700, 1000, 1500, 2500])
def test_the_text_never_goes_past_the_limit(
    history: tuple[NotebookExecutor, Path, list[dict[str, Any]]], limit: int
) -> None:
    ex, _, _ = history
    text = ex.digest(limit_chars=limit)["text"]
    assert len(text) <= limit
    # Whole items only: every line is a heading, an item, the title or the closing line.
    for line in text.splitlines():
        assert line == "" or line.startswith(("# ", "## ", "- ", "*", "17 runs"))


def test_the_command_line_digest(
    history: tuple[NotebookExecutor, Path, list[dict[str, Any]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ex, source, _ = history
    runs_dir = str(ex.runs_dir)
    assert main(["digest", "--notebook", str(source), "--runs-dir", runs_dir, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(ex.digest(source)))
    assert main(["digest", "--runs-dir", runs_dir]) == 0
    assert capsys.readouterr().out == ex.digest()["text"]
    assert main(["digest", "--since", "not-a-date", "--runs-dir", runs_dir]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "since" in captured.err


def test_notes_keep_the_newest_fifty_and_count_the_rest(tmp_path: Path) -> None:
    from notebook_executor._catalog.digest import MAX_ITEMS

    source = tmp_path / "many.py"
    source.write_text("# %%\nx = 1\n\n# %%\ny = 2\n", encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        results = [ex.execute(source, request=f"request number {n}") for n in range(MAX_ITEMS + 4)]
        edited = ex.execute(
            source,
            request="the newest request",
            edits=[
                {"index": 1, "source": "y = 3", "note": "second cell"},
                {"index": 0, "source": "x = 2"},  # no note: the request stands for it
            ],
        )
        found = ex.digest(source)
    # Newest first; within one run its request, then its edits in the order given.
    assert [(n["kind"], n["text"], n["cell"]) for n in found["notes"][:3]] == [
        ("request", "the newest request", None),
        ("edit", "second cell", 1),
        ("edit", "the newest request", 0),
    ]
    assert {n["run_id"] for n in found["notes"][:3]} == {edited["run_id"]}
    assert len(found["notes"]) == MAX_ITEMS
    # Then the newest 47 other requests (runs of one millisecond are in run id order).
    newest = _ordered([dict(r) for r in results])[::-1][: MAX_ITEMS - 3]
    assert [(n["text"], n["run_id"]) for n in found["notes"][3:]] == [
        (r["request"], r["run_id"]) for r in newest
    ]
    # 54 requests and the last run's 3 notes: 57, of which 50 are listed.
    assert found["omitted"] == {"notes": 7}
    assert found["runs"] == MAX_ITEMS + 5


def test_notebooks_in_a_deep_folder_are_named_by_what_tells_them_apart(tmp_path: Path) -> None:
    # As under a long $TMPDIR: the shared folder is said once, each notebook by its name.
    deep = tmp_path / ("a-long-folder-name-" + "x" * 60) / ("and-another-" + "y" * 60)
    (deep / "sub").mkdir(parents=True)
    first, second = deep / "first.py", deep / "sub" / "second.py"
    for path in (first, second):
        path.write_text('# %%\nimport scrapbook as sb\nsb.glue("n", 1)\n', encoding="utf-8")
    # Runs recorded in another project: the notebooks keep their whole paths.
    with NotebookExecutor(runs_dir=tmp_path / "elsewhere" / "runs", engine=FakeEngine()) as ex:
        for _ in range(3):
            ex.execute(first, request="a request of the first")
            ex.execute(second, request="a request of the second")
        text = ex.digest()["text"]
        one = ex.digest(second)["text"]
    # (a path over 160 characters keeps its end)
    assert text.count(str(deep)[-150:]) == 1
    assert f"Notebooks are named from `...{str(deep)[-157:]}/`." in text
    assert "- first.py: `n`: 1 -> 1 over 3 runs" in text
    assert "- sub/second.py: `n`: 1 -> 1 over 3 runs" in text
    assert '"a request of the first"' in text and '"a request of the second"' in text
    # One notebook's page does not name it in its items; its title keeps the path's end.
    assert one.startswith(f"# Digest of {second}\n") or one.startswith("# Digest of ...")
    assert "second.py" in one.splitlines()[0] and "- sub/second.py" not in one


def test_every_item_is_bounded_however_big_what_a_run_holds(tmp_path: Path) -> None:
    # A 1 MB edit note, a 1 MB request, a 1 MB parameter value and a scrap of 100,000 values:
    # the digest names them, clipped, and stays small (it returned 1 MB before).
    from notebook_executor._catalog.digest import ITEM_TEXT_CHARS

    source = tmp_path / "big.py"
    source.write_text(
        '# %% tags=["parameters"]\nlabel = ""\n\n# %%\nimport scrapbook as sb\n'
        'sb.glue("many", list(range(100_000)))\n',
        encoding="utf-8",
    )
    huge = "note " * 200_000
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        ex.execute(
            source,
            parameters={"label": "v" * 1_000_000},
            request="r" * 1_000_000,
            edits=[{"index": 1, "source": "x = 1", "note": huge}],
        )
        found = ex.digest(source)
    size = len(json.dumps(dict(found)))
    assert size < 20_000, size
    for item in found["notes"]:
        assert len(item["text"]) <= ITEM_TEXT_CHARS + 40
        assert item["text"].startswith(("note note", "rrrr"))
    assert "more characters" in json.dumps(found["parameters"])
