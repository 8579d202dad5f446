"""Full-text search over the run records: index, queries, filters, rebuild and corruption.

The runs are made with the fake engine (tests/unit/fake_engine.py); the catalog, its index and
the queries are the real SQLite ones. Real-kernel search tests are in tests/integration.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError
from notebook_executor._catalog.search import WHERE, match_expression
from notebook_executor._faces.cli import main
from notebook_executor._types import SearchHit
from unit.fake_engine import FakeEngine

NOTEBOOK = """# %% [markdown]
# Narrative about the quarterly turbine inspection.

# %% tags=["parameters"]
station: str = "KX-7"
factor: float = 1.5

# %%
import scrapbook as sb
frame_rows = len("read_csv")
print("loaded", frame_rows, "rows from", station)
sb.glue("verdict", "nominal vibration")

# %%
ratio = 1 / (factor - 42.0)
"""

SECRET = "Hx72-secret-Zebra-token"


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "inspect.py"
    path.write_text(NOTEBOOK, encoding="utf-8")
    other = tmp_path / "other.py"
    other.write_text('# %%\nprint("unrelated astronomy output 299792458")\n', encoding="utf-8")
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        made = {
            "plain": ex.execute(path, request="check the turbine at KX-7"),
            "failing": ex.execute(
                path, parameters={"station": "QZ-9", "factor": 42.0}, request="stress test"
            ),
            "secret": ex.execute(
                path,
                parameters={"station": SECRET},
                secrets={"TOKEN": SECRET},
                request=f"with {SECRET}",
            ),
            "other": ex.execute(other, request="look at the sky"),
        }
    assert made["failing"]["status"] == "error"
    return made


def _search(query: str, **options: Any) -> list[SearchHit]:
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        return ex.search(query, **options)


def _ids(hits: Sequence[Mapping[str, Any]]) -> set[str]:
    return {hit["run_id"] for hit in hits}


def test_hit_shape(runs: dict[str, Any]) -> None:
    hits = _search("turbine inspection")
    assert hits
    for hit in hits:
        assert set(hit) == {"run_id", "notebook", "status", "started_at", "where", "snippet"} | {
            "score"
        }
        assert hit["where"] in WHERE
        assert isinstance(hit["score"], float) and hit["score"] > 0
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    json.dumps(hits)


@pytest.mark.parametrize(
    ("query", "where", "run"),
    [
        ("stress test", "request", "failing"),
        ("QZ-9", "parameters", "failing"),
        ("ZeroDivisionError", "error", "failing"),
        ("astronomy", "output", "other"),
        ("299792458", "output", "other"),
        ("nominal vibration", "scraps", "plain"),
    ],
)
def test_finds_by_place(runs: dict[str, Any], query: str, where: str, run: str) -> None:
    hits = _search(query)
    assert runs[run]["run_id"] in _ids(hits)
    best = next(hit for hit in hits if hit["run_id"] == runs[run]["run_id"])
    assert best["where"] == where
    assert "**" in best["snippet"]


def test_identifiers_numbers_and_prefixes(runs: dict[str, Any]) -> None:
    everything = {runs[k]["run_id"] for k in ("plain", "failing", "secret")}
    assert _ids(_search("read_csv")) == everything
    assert _ids(_search("read_cs*")) == everything
    assert _ids(_search("csv")) == everything  # a piece of an identifier
    assert _ids(_search("KX-7")) == everything  # the default, in the code of every run
    assert _ids(_search("QZ-9")) == {runs["failing"]["run_id"]}
    assert _search("KX-8") == []
    assert _ids(_search("turb*")) == everything
    assert _search("read_csx") == []
    assert _ids(_search('"quarterly turbine"')) == everything
    assert _search('"turbine quarterly"') == []


def test_operators(runs: dict[str, Any]) -> None:
    assert _ids(_search("astronomy OR ZeroDivisionError")) == {
        runs["other"]["run_id"],
        runs["failing"]["run_id"],
    }
    assert runs["failing"]["run_id"] not in _ids(_search("turbine NOT ZeroDivisionError"))
    assert _ids(_search("(sky OR stress) AND test")) == {runs["failing"]["run_id"]}
    # Words may match in different places of one run (request and error here).
    assert _ids(_search("stress ZeroDivisionError")) == {runs["failing"]["run_id"]}
    # Lower-case words are words, not operators.
    assert _search("turbine and") == []


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ('"unbalanced', "quote is not closed"),
        ("AND", "needs a term before it"),
        ("turbine AND", "needs a term after it"),
        ("NOT turbine", "needs a term before it"),
        ("a OR OR b", "needs a term before it"),
        ("(turbine", "'(' is not closed"),
        ("turbine)", "')' has no '('"),
        ("()", "empty parentheses"),
        ('""', "no letter or digit"),
    ],
)
def test_malformed_queries_are_clear_errors(runs: dict[str, Any], query: str, reason: str) -> None:
    with pytest.raises(NotebookExecutorError, match="malformed search query") as caught:
        _search(query)
    assert reason in str(caught.value)
    assert not isinstance(caught.value, sqlite3.Error)


@pytest.mark.parametrize("query", ["", "   ", "- + *", 3])
def test_empty_or_wrong_type_query(runs: dict[str, Any], query: Any) -> None:
    with pytest.raises(NotebookExecutorError):
        _search(query)


def test_query_translation() -> None:
    assert match_expression('read_cs* "a b"* x OR y') == '"read_cs"* "a b"* "x" OR "y"'
    assert match_expression("KX-7 - and") == '"KX-7" "and"'


def test_filters_and_limit(runs: dict[str, Any]) -> None:
    assert _ids(_search("turbine", status="error")) == {runs["failing"]["run_id"]}
    assert _ids(_search("turbine", notebook="other.py")) == set()
    assert len(_search("turbine", limit=1)) == 1
    assert _search("turbine", since="2999-01-01") == []
    with pytest.raises(NotebookExecutorError, match="limit"):
        _search("turbine", limit=0)
    with pytest.raises(NotebookExecutorError, match="status"):
        _search("turbine", status="nope")


def test_one_hit_per_run(runs: dict[str, Any]) -> None:
    hits = _search("turbine")
    assert len(hits) == len(_ids(hits))


def test_secrets_never_reach_the_index(runs: dict[str, Any]) -> None:
    assert _search(SECRET) == []
    assert _search("Zebra") == []
    assert runs["secret"]["run_id"] in _ids(_search("REDACTED OR turbine"))
    for path in Path("runs").glob("catalog.sqlite*"):
        assert SECRET.encode() not in path.read_bytes()
        assert b"Zebra" not in path.read_bytes()


def test_reindex_rebuilds_the_index(runs: dict[str, Any]) -> None:
    before = _search("turbine")
    conn = sqlite3.connect("runs/catalog.sqlite")
    conn.execute("DELETE FROM run_text")
    conn.commit()
    conn.close()
    assert _search("turbine") == []
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        assert ex.reindex() == 4
    assert _ids(_search("turbine")) == _ids(before)


def test_reindex_drops_the_text_of_runs_whose_files_are_gone(runs: dict[str, Any]) -> None:
    Path(runs["other"]["output_path"]).unlink()
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        ex.reindex()
    assert _search("astronomy") == []


def test_an_old_catalog_without_the_index_is_rebuilt(runs: dict[str, Any]) -> None:
    conn = sqlite3.connect("runs/catalog.sqlite")
    conn.execute("DROP TABLE run_text")
    conn.execute("DROP TABLE run_text_keys")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    assert runs["other"]["run_id"] in _ids(_search("astronomy"))


def test_a_damaged_index_is_rebuilt_like_the_catalog(runs: dict[str, Any]) -> None:
    conn = sqlite3.connect("runs/catalog.sqlite")
    conn.execute("UPDATE run_text_data SET block = x'deadbeefdeadbeefdeadbeef' WHERE id > 1")
    conn.commit()
    conn.close()
    assert runs["other"]["run_id"] in _ids(_search("astronomy"))
    assert len(list(Path("runs").glob("catalog.sqlite.corrupt-*"))) == 1


def test_cli_search(runs: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "ZeroDivisionError", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [hit["run_id"] for hit in hits] == [runs["failing"]["run_id"]]
    assert main(["search", "astronomy", "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert runs["other"]["run_id"] in out and "[output]" in out
    assert main(["search", "turbine", "--status", "error", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


@pytest.mark.parametrize("query", ['"open', "AND"])
def test_cli_malformed_query_exits_2(
    runs: dict[str, Any], query: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", query]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "malformed search query" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
