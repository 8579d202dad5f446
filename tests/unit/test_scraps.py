"""Scraps: outputs in scrapbook's exact format, checked against scrapbook's own reader."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest
import scrapbook

from notebook_executor._records.scraps import RawScrap, decode_scrap, find_scraps, summarize_scrap
from unit.fake_engine import scrap_output

FRAME = pd.DataFrame({"k": [1, 2, 3], "v": [0.5, 1.0, 1.5], "s": ["a", "b", "c"]})


def _cell(*outputs: Any) -> Any:
    cell = nbformat.v4.new_code_cell("glue")
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def _notebook(tmp_path: Path, *cells: Any) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    path = tmp_path / "scraps.ipynb"
    nbformat.write(nb, path)
    return path


def _scrapbook_view(path: Path) -> dict[str, Any]:
    return {name: scrap for name, scrap in scrapbook.read_notebook(str(path)).scraps.items()}


def test_scrapbook_encoded_values_decode_like_scrapbook(tmp_path: Path) -> None:
    cell = _cell(
        *scrap_output("number", 42),
        *scrap_output("ratio", 0.25),
        *scrap_output("flag", True),
        *scrap_output("items", [1, "a", None, {"k": [1.5]}]),
        *scrap_output("mapping", {"a": {"b": [1, 2]}}),
        *scrap_output("word", "hello"),  # scrapbook picks the text encoder for str
        *scrap_output("as_text", 12345, "text"),
        *scrap_output("frame", FRAME),
    )
    path = _notebook(tmp_path, nbformat.v4.new_markdown_cell("m"), cell)
    ours = find_scraps(nbformat.read(path, as_version=4).cells)
    theirs = _scrapbook_view(path)
    assert list(ours) == list(theirs)
    for name, scrap in theirs.items():
        decoded = decode_scrap(ours[name])
        assert ours[name].encoder == scrap.encoder, name
        if isinstance(scrap.data, pd.DataFrame):
            pd.testing.assert_frame_equal(decoded, scrap.data)
        else:
            assert decoded == scrap.data, name
            assert type(decoded) is type(scrap.data), name
    assert decode_scrap(ours["as_text"]) == "12345"


def test_summaries_are_json_for_json_scraps_and_small_objects_otherwise(tmp_path: Path) -> None:
    cell = _cell(
        *scrap_output("number", 42),
        *scrap_output("word", "hello"),
        *scrap_output("frame", FRAME),
        *scrap_output("shown", {"k": 1}, "display", display=True),
    )
    scraps = find_scraps([cell])
    assert summarize_scrap(scraps["number"]) == 42
    assert summarize_scrap(scraps["word"]) == "hello"
    assert summarize_scrap(scraps["frame"]) == {
        "encoder": "pandas",
        "type": "DataFrame",
        "shape": [3, 3],
        "columns": ["k", "v", "s"],
    }
    assert summarize_scrap(scraps["shown"]) == {"encoder": "display", "mime_types": ["text/plain"]}


def test_a_damaged_pandas_payload_still_gets_a_summary() -> None:
    scrap = RawScrap("frame", "pandas", base64.b64encode(b"not parquet").decode())
    assert summarize_scrap(scrap) == {"encoder": "pandas", "type": "DataFrame"}


def test_pandas_scraps_made_with_to_parquet_decode_to_the_frame() -> None:
    data = base64.b64encode(FRAME.to_parquet(engine="pyarrow")).decode()
    output = {
        "output_type": "display_data",
        "metadata": {"scrapbook": {"name": "t", "data": True, "display": False}},
        "data": {
            "application/scrapbook.scrap.pandas+json": {
                "name": "t",
                "data": data,
                "encoder": "pandas",
                "version": 1,
            }
        },
    }
    [scrap] = find_scraps([_cell(output)]).values()
    pd.testing.assert_frame_equal(decode_scrap(scrap), FRAME)


def test_the_summary_of_a_frame_with_a_named_index_has_the_frame_shape() -> None:
    frame = FRAME.set_index("s")
    data = base64.b64encode(frame.to_parquet()).decode()
    summary = summarize_scrap(RawScrap("t", "pandas", data))
    assert summary["shape"] == list(frame.shape)
    assert summary["columns"] == list(frame.columns)


def test_display_only_scraps_match_scrapbook_display(tmp_path: Path) -> None:
    cell = _cell(*scrap_output("shown", {"k": 1}, "display", display=True))
    path = _notebook(tmp_path, cell)
    ours = find_scraps(nbformat.read(path, as_version=4).cells)
    theirs = _scrapbook_view(path)
    assert theirs["shown"].encoder == ours["shown"].encoder == "display"
    assert decode_scrap(ours["shown"]) == dict(theirs["shown"].display["data"])


def test_data_with_a_display_keeps_the_data(tmp_path: Path) -> None:
    # scrapbook's reader loses the data of glue(..., display=True) (the display output of
    # the same name replaces it); the value is kept here, with the display bundle beside it.
    cell = _cell(*scrap_output("both", [1, 2], display=True))
    scrap = find_scraps([cell])["both"]
    assert scrap.encoder == "json"
    assert decode_scrap(scrap) == [1, 2]
    assert scrap.display == {"text/plain": "[1, 2]"}


def test_the_last_glue_of_a_name_wins_across_cells(tmp_path: Path) -> None:
    first = _cell(*scrap_output("x", 1), *scrap_output("y", "a"))
    second = _cell(*scrap_output("x", [2]), *scrap_output("x", {"three": 3}))
    path = _notebook(tmp_path, first, second)
    ours = find_scraps(nbformat.read(path, as_version=4).cells)
    theirs = _scrapbook_view(path)
    assert decode_scrap(ours["x"]) == theirs["x"].data == {"three": 3}
    assert decode_scrap(ours["y"]) == theirs["y"].data == "a"


def _papermill_record_notebook() -> Any:
    """A cell as papermill's old ``pm.record``/``pm.display`` wrote it (the shape of
    scrapbook's own ``tests/notebooks/record.ipynb``)."""
    records = [("hello", "world"), ("number", 123), ("some_list", [1, 3, 5])]
    outputs: list[dict[str, Any]] = [
        {"output_type": "stream", "name": "stderr", "text": "DeprecationWarning\n"}
    ]
    for name, value in records:
        outputs.append(
            {
                "output_type": "display_data",
                "metadata": {},
                "data": {"application/papermill.record+json": {name: value}},
            }
        )
    outputs.append(
        {
            "output_type": "display_data",
            "metadata": {"papermill": {"name": "some_display"}},
            "data": {"text/plain": "'Text'"},
        }
    )
    return _cell(*outputs)


def test_papermill_record_outputs_are_read_like_scrapbook(tmp_path: Path) -> None:
    path = _notebook(tmp_path, _papermill_record_notebook())
    theirs = _scrapbook_view(path)
    assert {n: s.data for n, s in theirs.items() if s.encoder == "json"} == {
        "hello": "world",
        "number": 123,
        "some_list": [1, 3, 5],
    }
    ours = find_scraps(nbformat.read(path, as_version=4).cells)
    assert {n: decode_scrap(s) for n, s in ours.items() if s.encoder == "json"} == {
        "hello": "world",
        "number": 123,
        "some_list": [1, 3, 5],
    }


def test_papermill_display_outputs_are_display_scraps(tmp_path: Path) -> None:
    path = _notebook(tmp_path, _papermill_record_notebook())
    assert _scrapbook_view(path)["some_display"].encoder == "display"
    ours = find_scraps(nbformat.read(path, as_version=4).cells)
    assert "some_display" in ours
    assert decode_scrap(ours["some_display"]) == {"text/plain": "'Text'"}


@pytest.mark.parametrize(
    "output",
    [
        {"output_type": "display_data", "data": {"application/scrapbook.scrap.json+json": "x"}},
        {"output_type": "display_data", "data": {"application/scrapbook.scrap.json+json": {}}},
        {
            "output_type": "display_data",
            "data": {"application/scrapbook.scrap.json+json": {"name": 3, "data": 1}},
        },
        {"output_type": "display_data", "data": {"application/papermill.record+json": {}}},
        {"output_type": "display_data", "data": {"application/papermill.record+json": [1]}},
        {"output_type": "display_data", "metadata": {"scrapbook": "nope"}, "data": {}},
        {"output_type": "display_data", "metadata": {"scrapbook": {"display": True}}, "data": {}},
        {"output_type": "display_data"},
        {"output_type": "display_data", "data": None},
        {"output_type": "stream", "name": "stdout", "text": "x"},
        {
            "output_type": "execute_result",
            "data": {
                "application/scrapbook.scrap.json+json": {"name": "n", "data": 1, "version": 1}
            },
        },
    ],
)
def test_malformed_payloads_are_skipped(output: dict[str, Any]) -> None:
    good = scrap_output("good", 1)
    cell = {"cell_type": "code", "outputs": [output, *good]}
    scraps = find_scraps([cell, {"cell_type": "markdown"}, {"cell_type": "code", "outputs": None}])
    assert list(scraps) == ["good"]
    assert decode_scrap(scraps["good"]) == 1


def test_json_encoder_with_a_json_string_is_parsed() -> None:
    assert decode_scrap(RawScrap("x", "json", '{"a": 1}')) == {"a": 1}
    assert decode_scrap(RawScrap("x", "json", "plain")) == "plain"
    assert decode_scrap(RawScrap("x", "unknown", {"raw": 1})) == {"raw": 1}


def test_encoder_comes_from_the_mime_type_when_the_payload_has_none() -> None:
    output = {
        "output_type": "display_data",
        "data": {"application/scrapbook.scrap.text+json": {"name": "t", "data": 5}},
    }
    scrap = find_scraps([{"outputs": [output]}])["t"]
    assert scrap.encoder == "text"
    assert decode_scrap(scrap) == "5"


def test_frame_round_trip_through_parquet_bytes() -> None:
    buffer = io.BytesIO()
    FRAME.to_parquet(buffer)
    scrap = RawScrap("f", "pandas", base64.b64encode(buffer.getvalue()).decode())
    pd.testing.assert_frame_equal(decode_scrap(scrap), FRAME)
