"""The MCP server's context budget and root confinement, as plain functions (no server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from notebook_executor._faces.mcp.budget import (
    MAX_PAYLOAD_CHARS,
    MIN_LIMIT,
    clip,
    fit,
    serialized_size,
    trim_traceback,
)
from notebook_executor._faces.mcp.paths import OutsideRoot, Root


def test_clip_keeps_short_text_and_marks_a_cut() -> None:
    assert clip("short", 10) == "short"
    cut = clip("a" * 100, 10, "read on with start=10")
    assert cut.startswith("a" * 10)
    assert "90 more characters cut; read on with start=10" in cut


def test_fit_cuts_the_longest_strings_first_and_leaves_short_ones() -> None:
    document = {"run_id": "r1", "huge": "x" * 1_000_000, "list": ["y" * 50_000] * 3}
    fitted = fit(document)
    assert serialized_size(fitted) <= MAX_PAYLOAD_CHARS
    assert fitted["run_id"] == "r1"
    assert "more characters cut" in fitted["huge"]
    assert len(fitted["list"]) == 3


def test_fit_halves_long_lists_when_cutting_strings_is_not_enough() -> None:
    document = {"runs": [{"run_id": f"run-{i}", "status": "success"} for i in range(2_000)]}
    fitted = fit(document)
    assert serialized_size(fitted) <= MAX_PAYLOAD_CHARS
    assert fitted["runs"][0] == {"run_id": "run-0", "status": "success"}
    assert fitted["runs"][-1].endswith("more items cut]")


def test_fit_leaves_a_small_document_as_it_is() -> None:
    document = {"a": [1, 2, 3], "b": {"c": "d"}}
    assert fit(document) is document


def test_trim_traceback_keeps_cell_frames_and_drops_ansi_and_library_frames() -> None:
    lines = [
        "\x1b[0;31m----------------------------------------\x1b[0m",
        "\x1b[0;31mValueError\x1b[0m          Traceback (most recent call last)",
        "Cell \x1b[0;32mIn[3], line 2\x1b[0m\n      1 x = 1\n----> 2 f(x)",
        "File /usr/lib/python3/site-packages/lib.py:10, in f(x)\n---> 10 g(x)",
        "File /usr/lib/python3/site-packages/lib.py:20, in g(x)\n---> 20 raise ValueError",
        "\x1b[0;31mValueError\x1b[0m: bad",
    ]
    trimmed = trim_traceback(lines)
    assert all("\x1b" not in line for line in trimmed)
    assert trimmed[0].startswith("----")
    assert trimmed[1].startswith("ValueError")
    assert trimmed[2].startswith("Cell In[3], line 2")
    assert trimmed[3] == "[... 2 frame(s) in library code omitted]"
    assert trimmed[-1] == "ValueError: bad"


def test_root_confines_relative_absolute_and_symlinked_paths(tmp_path: Path) -> None:
    root_dir = tmp_path / "root"
    (root_dir / "sub").mkdir(parents=True)
    (root_dir / "sub" / "a.py").write_text("# %%\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("no", encoding="utf-8")
    (root_dir / "link.txt").symlink_to(tmp_path / "secret.txt")
    root = Root(root_dir)
    assert root.resolve("sub/a.py") == (root_dir / "sub" / "a.py").resolve()
    assert root.resolve(str(root_dir / "sub" / "a.py")) == (root_dir / "sub" / "a.py").resolve()
    assert root.resolve("sub/../sub/a.py") == (root_dir / "sub" / "a.py").resolve()
    for escape in ["../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "~", "", "a\0b"]:
        with pytest.raises(OutsideRoot):
            root.resolve(escape)
    assert root.relative(root_dir / "sub" / "a.py") == "sub/a.py"


@pytest.mark.parametrize(
    "payload",
    [
        {"text": "é" * 100_000},
        {"quotes": ['"\\"' * 40 for _ in range(400)]},
        {"runs": [{"k": '"'} for _ in range(5_000)]},
    ],
    ids=["accents", "quotes-and-backslashes", "many-small-items"],
)
def test_a_tool_result_on_the_wire_stays_within_the_budget(payload: dict[str, object]) -> None:
    from notebook_executor._faces.mcp.budget import MAX_RESPONSE_CHARS
    from notebook_executor._faces.mcp.workspace import tool_result

    result = tool_result(payload)
    assert len(result.model_dump_json(by_alias=True, exclude_none=True)) < MAX_RESPONSE_CHARS
    assert result.structured_content == json.loads(result.content[0].text)  # type: ignore[union-attr]


def test_fit_ends_on_a_large_mapping_beside_a_pair() -> None:
    # Halving a list of two items used to give a list of two items (one kept, one marker):
    # fitting never ended.
    document = {"big": {f"k{i}": i for i in range(20_000)}, "pair": [1, 2]}
    fitted = fit(document)
    assert serialized_size(fitted) <= MAX_PAYLOAD_CHARS
    assert fitted["pair"] == [1, 2]
    assert fitted["big"]["k0"] == 0
    assert fitted["big"]["..."].endswith("more keys cut]")


def test_fit_refuses_a_limit_too_small_to_hold_a_marker() -> None:
    with pytest.raises(ValueError, match="at least"):
        fit({"a": "b" * 1_000}, 10)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50)
    | st.text(min_size=2_000, max_size=30_000).map(lambda text: text * 3)
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(children, max_size=8)
        | st.dictionaries(st.text(max_size=20), children, max_size=8)
        # Many small lists, and large flat mappings and lists.
        | st.lists(st.lists(children, min_size=2, max_size=2), min_size=50, max_size=400)
        | st.integers(500, 5_000).map(lambda n: {f"k{i}": i for i in range(n)})
        | st.integers(500, 5_000).map(lambda n: list(range(n)))
    )


def _deeply_nested(depth: int) -> Any:
    document: Any = ["x" * 100]
    for level in range(depth):
        document = {f"level{level}": document, "pad": "y" * 40} if level % 2 else [document]
    return document


JSON_VALUES = st.recursive(_SCALARS, _containers, max_leaves=60)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@example(document="0" * 3000, limit=MIN_LIMIT)  # one string, too long even when clipped
@given(
    document=JSON_VALUES | st.integers(1, 400).map(_deeply_nested),
    limit=st.integers(MIN_LIMIT, 12_000),
)
def test_fit_always_ends_with_valid_json_within_the_limit(document: Any, limit: int) -> None:
    fitted = fit(document, limit)
    text = json.dumps(fitted, ensure_ascii=False, separators=(",", ":"))
    assert len(text) <= limit
    assert json.loads(text) == fitted
