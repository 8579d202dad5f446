"""What a run stores: streams coalesced, secrets found in pieces, in bytes and in DataFrames,
short secrets left alone, failed cells clipped to a small result."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import pandas as pd
import pytest

from notebook_executor._notebook import NotebookNode, new_code_cell, new_notebook, new_output
from notebook_executor._run.results import CellMap, build_result
from notebook_executor._run.scrub import (
    MIN_SECRET_CHARS,
    Redactor,
    coalesce_streams,
    redact,
    scrub_notebook,
)
from notebook_executor.engine import CellFailure, EngineOutcome

TOKEN = "tok_live_9f8E7d6C5b4A3x2Y1z0"


def _stream(text: str, name: str = "stdout") -> Any:
    return new_output("stream", name=name, text=text)


def _notebook(*outputs: Any) -> NotebookNode:
    cell = new_code_cell("x")
    cell.outputs = list(outputs)
    return new_notebook(cells=[cell])


def test_consecutive_streams_of_one_name_are_merged_in_order() -> None:
    nb = _notebook(
        _stream("a"),
        _stream("b"),
        _stream("e", "stderr"),
        _stream("c"),
        new_output("display_data", data={"text/plain": "d"}),
        _stream("f"),
    )
    coalesce_streams(nb)
    assert [(o.output_type, o.get("name"), o.get("text")) for o in nb.cells[0].outputs] == [
        ("stream", "stdout", "ab"),
        ("stream", "stderr", "e"),
        ("stream", "stdout", "c"),
        ("display_data", None, None),
        ("stream", "stdout", "f"),
    ]


@pytest.mark.parametrize("cut", [1, 9, len(TOKEN) - 1])
def test_a_secret_in_pieces_is_found_across_outputs(cut: int) -> None:
    nb = _notebook(
        _stream("key: " + TOKEN[:cut]),
        new_output("display_data", data={"text/plain": "between"}),
        _stream(TOKEN[cut:] + " end\n"),
    )
    scrubbed = scrub_notebook(nb, {"T": TOKEN})
    texts = [o.get("text") for o in scrubbed.cells[0].outputs]
    assert texts == ["key: [secret T]", None, " end\n"]
    assert nb.cells[0].outputs[0].text == "key: " + TOKEN[:cut]  # the input is not changed


def test_pieces_keep_their_parts_apart() -> None:
    redactor = Redactor({"T": TOKEN})
    assert redactor.pieces(["a" + TOKEN[:4], TOKEN[4:10], TOKEN[10:] + "b", "c"]) == [
        "a[secret T]",
        "",
        "b",
        "c",
    ]


def test_short_secrets_are_not_searched_and_damage_nothing() -> None:
    short = "1" * (MIN_SECRET_CHARS - 1)
    redactor = Redactor({"PIN": "1", "CODE": short, "T": TOKEN})
    assert redactor.unsearched == ["CODE", "PIN"]
    assert redactor.text(f"version 1.10 {short} {TOKEN}") == f"version 1.10 {short} [secret T]"
    assert redact("version 1.10", {"PIN": "1"}) == "version 1.10"


def test_binary_outputs_holding_a_secret_are_withheld() -> None:
    leaky = base64.b64encode(b"\x89PNG" + TOKEN.encode("utf-16-le")).decode()
    clean = base64.b64encode(b"\x89PNG clean").decode()
    nb = _notebook(
        new_output("display_data", data={"image/png": leaky}),
        new_output("display_data", data={"image/png": clean}),
    )
    outputs = scrub_notebook(nb, {"T": TOKEN}).cells[0].outputs
    assert outputs[0].data == {
        "text/plain": "[notebook-executor: output withheld: it holds the value of secret T]"
    }
    assert outputs[1].data == {"image/png": clean}


def _pandas_scrap(name: str, frame: pd.DataFrame) -> Any:
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    payload = {
        "name": name,
        "data": base64.b64encode(buffer.getvalue()).decode(),
        "encoder": "pandas",
        "version": 1,
    }
    return new_output(
        "display_data",
        data={"application/scrapbook.scrap.pandas+json": payload},
        metadata={"scrapbook": {"name": name, "data": True, "display": False}},
    )


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame({"key": ["x", TOKEN]}),
        pd.DataFrame({TOKEN: [1, 2]}),
        pd.DataFrame({"n": [1, 2]}, index=pd.Index(["a", TOKEN], name="who")),
        pd.DataFrame({"k": pd.Categorical([TOKEN, "x"])}),
    ],
    ids=["value", "column", "index", "categorical"],
)
def test_dataframe_scraps_holding_a_secret_are_withheld(frame: pd.DataFrame) -> None:
    nb = _notebook(_pandas_scrap("leaky", frame), _pandas_scrap("clean", pd.DataFrame({"a": [1]})))
    outputs = scrub_notebook(nb, {"T": TOKEN}).cells[0].outputs
    marker = outputs[0].data["application/scrapbook.scrap.json+json"]
    assert marker["name"] == "leaky"
    assert marker["data"] == {"encoder": "pandas", "withheld": "it holds the value of secret T"}
    assert "application/scrapbook.scrap.pandas+json" in outputs[1].data
    assert TOKEN not in json.dumps(outputs)


def test_an_unreadable_dataframe_scrap_is_withheld_in_a_run_with_secrets() -> None:
    scrap = _pandas_scrap("broken", pd.DataFrame({"a": [1]}))
    scrap.data["application/scrapbook.scrap.pandas+json"]["data"] = "bm90IHBhcnF1ZXQ="
    outputs = scrub_notebook(_notebook(scrap), {"T": TOKEN}).cells[0].outputs
    reason = outputs[0].data["application/scrapbook.scrap.json+json"]["data"]["withheld"]
    assert reason.startswith("it could not be read back to check it for secrets")
    # Without secrets nothing is withheld.
    kept = scrub_notebook(_notebook(scrap), {}).cells[0].outputs
    assert "application/scrapbook.scrap.pandas+json" in kept[0].data


def _failed(failure: CellFailure, secrets: dict[str, str] | None = None) -> dict[str, Any]:
    nb = new_notebook(cells=[new_code_cell("1 / 0")])
    return build_result(
        run_id="r",
        notebook_path="n.py",
        output_path="o.ipynb",
        parameters={},
        request=None,
        started_at="s",
        finished_at="f",
        duration_seconds=1.0,
        executed=nb,
        outcome=EngineOutcome(failure=failure),
        cell_map=CellMap(None),
        secrets=secrets,
    )


@pytest.mark.parametrize(
    ("ename", "evalue", "traceback"),
    [
        ("ValueError", "x" * 50_000, ["---", "ValueError: " + "x" * 50_000]),
        ("E" * 50_000, "boom", ["E: boom"]),
        ("ValueError", "\x01\u00e9\U0001f511" * 20_000, []),
        ("ValueError", "v", ["line\n" * 10] * 100_000),
        ("ValueError", "line\n" * 50_000, ["\x1b[31m" + "y" * 100_000 + "\x1b[0m"] * 20),
    ],
    ids=["huge-message", "huge-name", "escapes", "many-lines", "huge-lines"],
)
def test_a_failed_cell_keeps_the_result_small(
    ename: str, evalue: str, traceback: list[str]
) -> None:
    result = _failed(CellFailure(0, "cell_error", ename, evalue, traceback))
    assert len(json.dumps(result)) < 20_000
    assert result["failed_cell"]["ename"]


def test_a_secret_across_the_clip_leaves_no_piece() -> None:
    evalue = "x" * (4_000 - 70) + TOKEN + "y" * 10_000
    result = _failed(CellFailure(0, "cell_error", "E", evalue, []), {"T": TOKEN})
    assert TOKEN[:5] not in result["failed_cell"]["evalue"]
    assert "[secret T]" in result["failed_cell"]["evalue"]
