"""Jupyter widgets during a run: their saved state, and Output widgets' captured outputs.

A notebook's widgets live in the kernel; the notebook keeps their models' last state in
``metadata.widgets`` (``application/vnd.jupyter.widget-state+json``), where a viewer finds the
models its ``widget-view`` outputs point at. :class:`Widgets` follows the comm messages of a run
the way nbclient does: every message carrying ``state`` updates that model's saved state (and
its binary buffers, by path), and an ``ipywidgets.Output`` widget is mimicked as a front end
would: while the kernel says it captures (its ``msg_id``), outputs and ``clear_output`` of that
execution go to the widget's ``outputs``, synced back to the kernel, not to the cell.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._notebook import output_from_msg

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient

    from .._notebook import NotebookNode

__all__ = ["OutputWidget", "Widgets"]

logger = logging.getLogger(__name__)

#: The comm target of Jupyter widgets, and the Output widget's model.
WIDGET_TARGET = "jupyter.widget"
OUTPUT_MODEL = ("@jupyter-widgets/output", "OutputModel")

#: Where the state goes in a notebook's metadata, and its schema's version.
STATE_KEY = "application/vnd.jupyter.widget-state+json"


class OutputWidget:
    """A front end's side of one ``ipywidgets.Output`` widget."""

    def __init__(self, comm_id: str, state: dict[str, Any], widgets: Widgets) -> None:
        self.comm_id = comm_id
        self.state = state
        self.widgets = widgets
        self.outputs: list[Any] = list(state.get("outputs", []))
        self.clear_pending = False
        self.msg_id = ""
        self.parent_header: Mapping[str, Any] = {}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """The kernel starts (a ``msg_id``) or stops (an empty one) capturing an execution."""
        if "msg_id" not in state:
            return
        msg_id = state.get("msg_id") or ""
        if msg_id:
            self.widgets.hooks.setdefault(msg_id, []).append(self)
        elif self.msg_id:
            stack = self.widgets.hooks.get(self.msg_id, [])
            if stack and stack[-1] is self:
                stack.pop()
        self.msg_id = msg_id

    def output(self, msg: Mapping[str, Any]) -> None:
        """Keep an output of the captured execution, streams of one name joined."""
        if self.clear_pending:
            self.outputs = []
            self.clear_pending = False
        self.parent_header = msg["parent_header"]
        try:
            output = output_from_msg(msg)
        except (ValueError, KeyError):
            return
        last = self.outputs[-1] if self.outputs else None
        if (
            last is not None
            and last["output_type"] == "stream"
            and output["output_type"] == "stream"
            and last["name"] == output["name"]
        ):
            last["text"] += output["text"]
        else:
            self.outputs.append(output)
        self._sync()

    def clear_output(self, msg: Mapping[str, Any]) -> None:
        """``clear_output()`` inside the widget clears the widget, not the cell."""
        self.parent_header = msg["parent_header"]
        if msg["content"].get("wait"):
            self.clear_pending = True
            return
        self.outputs = []
        self._sync()

    def _sync(self) -> None:
        # As a front end does: the kernel's widget learns its outputs, and so does the state
        # saved in the notebook.
        self.widgets.state.setdefault(self.comm_id, {})["outputs"] = self.outputs
        self.widgets.send(
            self.comm_id,
            {"method": "update", "state": {"outputs": self.outputs}, "buffer_paths": []},
            self.parent_header,
        )


class Widgets:
    """The widget models of one run (their state by comm id) and the Output widgets'
    captures in progress."""

    def __init__(self, client: AsyncKernelClient | None = None) -> None:
        self.client = client
        self.state: dict[str, dict[str, Any]] = {}
        self.buffers: dict[str, dict[tuple[str, ...], dict[str, str]]] = {}
        self.outputs: dict[str, OutputWidget] = {}
        #: Output widgets capturing each execution (by its msg_id), the innermost last.
        self.hooks: dict[str, list[OutputWidget]] = {}

    def capturing(self, msg: Mapping[str, Any]) -> OutputWidget | None:
        """The Output widget that captures ``msg``'s outputs, if one does."""
        stack = self.hooks.get(msg.get("parent_header", {}).get("msg_id", ""))
        return stack[-1] if stack else None

    def handle(self, msg: Mapping[str, Any]) -> None:
        """Apply a ``comm_open``, ``comm_msg`` or ``comm_close`` message."""
        content = msg.get("content", {})
        comm_id = content.get("comm_id")
        data = content.get("data") or {}
        if not isinstance(comm_id, str) or not isinstance(data, Mapping):
            return
        state = data.get("state")
        if isinstance(state, Mapping):
            self.state.setdefault(comm_id, {}).update(state)
            paths = data.get("buffer_paths") or []
            if paths:
                # Each buffer replaces the one at its path (a model's state may hold several).
                raws = msg.get("buffers") or []
                self.buffers.setdefault(comm_id, {}).update(
                    {
                        tuple(path): _buffer(path, raw)
                        for path, raw in zip(paths, raws, strict=False)
                    }
                )
        kind = msg["header"]["msg_type"]
        if kind == "comm_open" and content.get("target_name") == WIDGET_TARGET:
            if isinstance(state, Mapping) and _model(state) == OUTPUT_MODEL:
                self.outputs[comm_id] = OutputWidget(comm_id, dict(state), self)
        elif kind == "comm_msg" and comm_id in self.outputs and isinstance(state, Mapping):
            self.outputs[comm_id].set_state(state)

    def snapshot(self) -> Widgets:
        """A copy of the models' state and Output widgets (no client: set it to send)."""
        import copy

        client, self.client = self.client, None
        try:
            return copy.deepcopy(self)
        finally:
            self.client = client

    def send(self, comm_id: str, data: dict[str, Any], parent: Mapping[str, Any]) -> None:
        """Send a ``comm_msg`` to the kernel, as a front end would."""
        if self.client is None:
            return
        msg = self.client.session.msg(
            "comm_msg", content={"data": data, "comm_id": comm_id}, parent=dict(parent)
        )
        self.client.shell_channel.send(msg)

    def save(self, nb: NotebookNode) -> None:
        """Write the models' state into ``nb.metadata.widgets`` when the run had widgets
        (as nbclient: otherwise the notebook's own is left as it is)."""
        if not self.state:
            return
        from .._notebook import from_dict

        models: dict[str, Any] = {}
        for comm_id, state in self.state.items():
            if "_model_name" not in state:
                continue
            model: dict[str, Any] = {
                "model_name": state.get("_model_name"),
                "model_module": state.get("_model_module"),
                "model_module_version": state.get("_model_module_version"),
                "state": state,
            }
            buffers = self.buffers.get(comm_id)
            if buffers:
                model["buffers"] = list(buffers.values())
            models[comm_id] = model
        nb.metadata["widgets"] = from_dict(
            {STATE_KEY: {"state": models, "version_major": 2, "version_minor": 0}}
        )


def _model(state: Mapping[str, Any]) -> tuple[Any, Any]:
    return (state.get("_model_module"), state.get("_model_name"))


def _buffer(path: Any, raw: Any) -> dict[str, Any]:
    data = bytes(raw)
    return {"data": base64.b64encode(data).decode("ascii"), "encoding": "base64", "path": path}
