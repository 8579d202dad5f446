"""The package's own notebook nodes build what nbformat builds, and nbformat takes them."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import nbformat
import pytest
from nbformat import v4

from notebook_executor._notebook import (
    NotebookNode,
    from_dict,
    new_code_cell,
    new_markdown_cell,
    new_notebook,
    new_output,
    output_from_msg,
    strip_transient,
)


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data, ids left out (they are random)."""
    data = json.loads(json.dumps(value))
    for cell in data.get("cells", [data]):
        if isinstance(cell, dict):
            cell.pop("id", None)
    return data


def test_keys_read_and_write_as_attributes_and_mappings_become_nodes() -> None:
    node = NotebookNode()
    node.metadata = {"tags": ["parameters"], "papermill": {"x": 1}}
    assert node["metadata"]["tags"] == ["parameters"]
    assert node.metadata.papermill.x == 1
    assert isinstance(node.metadata, NotebookNode)
    node.update({"a": {"b": 2}}, c={"d": 3})
    assert node.a.b == 2 and node.c.d == 3
    assert node.setdefault("e", {"f": 4}).f == 4
    del node.e
    assert "e" not in node
    with pytest.raises(AttributeError):
        _ = node.missing
    with pytest.raises(AttributeError):
        del node.missing
    assert isinstance(node.copy(), NotebookNode)


def test_from_dict_converts_every_dict_at_any_depth() -> None:
    node = from_dict({"cells": [{"metadata": {"tags": []}}], "t": ({"x": 1},)})
    assert isinstance(node.cells[0].metadata, NotebookNode)
    assert isinstance(node.t, list) and node.t[0].x == 1


def test_deep_copies_and_pickles_are_independent_nodes() -> None:
    nb = new_notebook([new_code_cell("x = 1", metadata={"tags": ["a"]})])
    for twin in (copy.deepcopy(nb), pickle.loads(pickle.dumps(nb))):
        assert twin == nb
        assert isinstance(twin.cells[0].metadata, NotebookNode)
        twin.cells[0].metadata.tags.append("b")
        assert nb.cells[0].metadata.tags == ["a"]


def test_constructors_build_what_nbformat_builds_and_it_validates() -> None:
    ours = new_notebook(
        [
            new_markdown_cell("# Title"),
            new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    theirs = v4.new_notebook(
        cells=[
            v4.new_markdown_cell("# Title"),
            v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    assert _plain(ours) == _plain(theirs)
    assert len({cell.id for cell in ours.cells}) == 2
    nbformat.validate(ours)
    # nbformat writes our nodes as its own.
    assert nbformat.reads(nbformat.writes(ours), as_version=4) == ours


@pytest.mark.parametrize(
    ("output_type", "fields"),
    [
        ("stream", {"name": "stderr", "text": "oops\n"}),
        ("display_data", {"data": {"text/plain": "x"}, "metadata": {"a": 1}}),
        ("execute_result", {"data": {"text/plain": "2"}, "execution_count": 3}),
        ("error", {"ename": "ValueError", "evalue": "bad", "traceback": ["t"]}),
        ("stream", {}),
        ("error", {}),
    ],
)
def test_outputs_are_nbformats_outputs(output_type: str, fields: dict[str, Any]) -> None:
    ours = new_output(output_type, **fields)
    assert ours == v4.new_output(output_type, **fields)
    nbformat.validate(ours, ref=output_type, version=4, version_minor=5)


MESSAGES = [
    ("stream", {"name": "stdout", "text": "hi\n"}),
    ("display_data", {"data": {"text/html": "<b>x</b>"}, "metadata": {}, "transient": {}}),
    ("execute_result", {"data": {"text/plain": "2"}, "metadata": {}, "execution_count": 7}),
    ("error", {"ename": "KeyError", "evalue": "'k'", "traceback": ["line"]}),
]


@pytest.mark.parametrize(("kind", "content"), MESSAGES)
def test_outputs_from_kernel_messages_are_nbformats(kind: str, content: dict[str, Any]) -> None:
    msg = {"header": {"msg_type": kind}, "msg_type": kind, "content": content}
    assert output_from_msg(msg) == v4.output_from_msg(msg)


def test_a_message_that_is_no_output_is_refused() -> None:
    with pytest.raises(ValueError, match="status"):
        output_from_msg({"header": {"msg_type": "status"}, "content": {}})
    with pytest.raises(ValueError, match="output type"):
        new_output("status")


def test_transient_values_are_stripped_as_nbformat_strips_them() -> None:
    nb = new_notebook([new_code_cell("x")], metadata={"signature": "s", "orig_nbformat": 3})
    nb.cells[0].metadata.trusted = True
    theirs = nbformat.from_dict(copy.deepcopy(nb))
    v4.rwbase.strip_transient(theirs)
    assert strip_transient(nb) == theirs
    assert nb.metadata == {} and nb.cells[0].metadata == {}
