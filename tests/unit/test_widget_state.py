"""Widget state followed from comm messages, without a kernel (the real kernel's part is in
tests/integration/test_peer_parity.py)."""

from __future__ import annotations

import base64
from typing import Any

from notebook_executor._kernels.widgets import STATE_KEY, Widgets
from notebook_executor._notebook import new_notebook


def _msg(kind: str, content: dict[str, Any], parent: str = "run", **extra: Any) -> dict[str, Any]:
    return {
        "header": {"msg_type": kind},
        "parent_header": {"msg_id": parent},
        "content": content,
        **extra,
    }


def test_state_and_buffers_are_saved_by_model() -> None:
    widgets = Widgets()
    state = {
        "_model_name": "ImageModel",
        "_model_module": "@jupyter-widgets/controls",
        "_model_module_version": "2.0.0",
        "value": None,
    }
    widgets.handle(
        _msg(
            "comm_open",
            {
                "comm_id": "a",
                "target_name": "jupyter.widget",
                "data": {"state": state, "buffer_paths": [["value"]]},
            },
            buffers=[b"\x89PNG"],
        )
    )
    widgets.handle(
        _msg("comm_msg", {"comm_id": "a", "data": {"method": "update", "state": {"width": "10"}}})
    )
    widgets.handle(_msg("comm_msg", {"comm_id": "a", "data": {"method": "custom"}}))
    nb = new_notebook([])
    widgets.save(nb)
    saved = nb.metadata["widgets"][STATE_KEY]
    assert (saved["version_major"], saved["version_minor"]) == (2, 0)
    model = saved["state"]["a"]
    assert model["model_name"] == "ImageModel"
    assert model["state"]["width"] == "10"
    assert model["buffers"] == [
        {"data": base64.b64encode(b"\x89PNG").decode(), "encoding": "base64", "path": ["value"]}
    ]


def test_no_widgets_leave_the_notebook_metadata_alone() -> None:
    nb = new_notebook([], metadata={"widgets": {"kept": True}})
    Widgets().save(nb)
    assert nb.metadata["widgets"] == {"kept": True}


def test_an_output_widget_captures_only_while_the_kernel_says_so() -> None:
    widgets = Widgets()
    state = {
        "_model_name": "OutputModel",
        "_model_module": "@jupyter-widgets/output",
        "outputs": [],
        "msg_id": "",
    }
    widgets.handle(
        _msg(
            "comm_open", {"comm_id": "o", "target_name": "jupyter.widget", "data": {"state": state}}
        )
    )
    stream = _msg("stream", {"name": "stdout", "text": "x"})
    assert widgets.capturing(stream) is None
    widgets.handle(_msg("comm_msg", {"comm_id": "o", "data": {"state": {"msg_id": "run"}}}))
    capture = widgets.capturing(stream)
    assert capture is not None
    capture.output(stream)
    capture.output(stream)
    assert widgets.state["o"]["outputs"] == [
        {"output_type": "stream", "name": "stdout", "text": "xx"}
    ]
    capture.clear_output(_msg("clear_output", {"wait": False}))
    assert widgets.state["o"]["outputs"] == []
    widgets.handle(_msg("comm_msg", {"comm_id": "o", "data": {"state": {"msg_id": ""}}}))
    assert widgets.capturing(stream) is None
