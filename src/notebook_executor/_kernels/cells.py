"""One code cell on one kernel: the execute request, its reply, and the outputs it produces.

The Jupyter messaging protocol, spoken directly with jupyter_client (nbclient would import
nbformat and its schema validator before any kernel could start: 0.76-0.83 s next to
JupyterLab, where a format checker builds a grammar on import; README, Speed). The outputs are
kept as nbformat stores them and as nbclient keeps them (tests/unit/test_cell_conformance.py
checks them against nbclient's own message handler): an ``execute_input`` sets the execution
count; outputs are appended in order; ``clear_output`` clears at once, or before the next
output with ``wait=True``; a display with a ``display_id`` can be updated later from any cell;
comm messages produce no output but keep the widgets' state, and what an ``ipywidgets.Output``
widget captures goes to the widget, not the cell (:mod:`.widgets`). The cell's
``metadata.execution`` gets the four timestamps nbclient records.

:func:`execute_cell` returns how the cell ended (:class:`CellEnd`); it never raises for what
the kernel did. Judging the end (an error, a time limit, a dead kernel) is the engine's job.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from queue import Empty
from typing import TYPE_CHECKING, Any

from .._notebook import output_from_msg
from .._types import TIMEOUTS
from ..engine import CellEnd

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient

    from .._notebook import NotebookNode
    from .widgets import Widgets

__all__ = [
    "IOPUB_DRAIN_SECONDS",
    "CellEnd",
    "Displays",
    "execute_cell",
    "iopub_seconds",
    "send_cell",
]

logger = logging.getLogger(__name__)

#: How often a cell waiting for its reply checks that its kernel is alive (seconds).
ALIVE_POLL = 1.0

#: Longest to wait for a cell's output after its reply, when the cell has no time limit.
IOPUB_DRAIN_SECONDS = TIMEOUTS.output_drain

#: Messages that carry an output, possibly with a ``display_id``.
_DISPLAY_TYPES = frozenset({"execute_result", "display_data", "update_display_data"})

OutputHook = Callable[[int, Mapping[str, Any]], None]


@dataclass
class Displays:
    """Where each ``display_id`` was shown: ``{display_id: {cell index: [output]}}``, for the
    whole run, so a later cell can update a display shown by an earlier one.

    The outputs themselves are kept, not their places: an update reaches the output wherever
    the cell that holds it has gone since (a session keeps each cell's execution in its record,
    apart from the notebook the next step reads).
    """

    shown: dict[str, dict[int, list[Any]]] = field(default_factory=dict)

    def add(self, display_id: str, cell_index: int, output: Any) -> None:
        self.shown.setdefault(display_id, {}).setdefault(cell_index, []).append(output)

    def forget_cell(self, cell_index: int) -> None:
        for cells in self.shown.values():
            if cell_index in cells:
                cells[cell_index] = []

    def update(self, display_id: str, output: Mapping[str, Any]) -> None:
        for outputs in self.shown.get(display_id, {}).values():
            for shown in outputs:
                shown["data"] = output["data"]
                shown["metadata"] = output["metadata"]


def iopub_seconds(limit: float | None) -> int:
    """How long to wait for a cell's output after its reply: the cell's limit (at least
    1 s), or :data:`IOPUB_DRAIN_SECONDS` without one."""
    return math.ceil(max(1.0, limit or IOPUB_DRAIN_SECONDS))


def timestamp(msg: Mapping[str, Any]) -> str:
    """A message's date as nbclient records it (UTC, microseconds, ``Z``)."""
    date = msg.get("header", {}).get("date")
    if isinstance(date, datetime):
        if date.tzinfo is not None:
            date = date.astimezone(timezone.utc)
        return date.strftime(_STAMP)
    if isinstance(date, str) and date:
        return date
    return datetime.now(timezone.utc).strftime(_STAMP)


_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"


class _CellOutput:
    """Collects one cell's IOPub messages into its outputs until the kernel goes idle."""

    def __init__(
        self,
        nb: NotebookNode,
        index: int,
        displays: Displays,
        on_output: OutputHook | None,
        widgets: Widgets | None = None,
    ) -> None:
        self.nb = nb
        self.index = index
        self.cell = nb.cells[index]
        self.displays = displays
        self.widgets = widgets
        self.on_output = on_output
        self.clear_pending = False

    def handle(self, msg: Mapping[str, Any]) -> bool:
        """Apply one message of the cell; True once the kernel is idle (the output is whole)."""
        kind = msg["header"]["msg_type"]
        content = msg["content"]
        timing = self.cell["metadata"]["execution"]
        transient = content.get("transient")
        display_id = transient.get("display_id") if transient else None
        if display_id and kind in _DISPLAY_TYPES:
            self._update_display(display_id, msg)
        if "execution_count" in content:
            self.cell["execution_count"] = content["execution_count"]
        if kind == "status":
            state = content.get("execution_state")
            if state == "idle":
                timing["iopub.status.idle"] = timestamp(msg)
                return True
            if state == "busy":
                timing["iopub.status.busy"] = timestamp(msg)
            return False
        if kind == "execute_input":
            timing["iopub.execute_input"] = timestamp(msg)
            return False
        capture = None if self.widgets is None else self.widgets.capturing(msg)
        if kind == "clear_output":
            if capture is not None:
                capture.clear_output(msg)
            elif content.get("wait"):
                self.clear_pending = True
            else:
                self._clear()
            return False
        if kind.startswith("comm"):
            if self.widgets is not None:
                self.widgets.handle(msg)
            return False
        if kind == "update_display_data":
            return False
        if capture is not None:
            capture.output(msg)
            return False
        self._append(msg, display_id)
        return False

    def _clear(self) -> None:
        self.cell.outputs[:] = []
        self.displays.forget_cell(self.index)

    def _update_display(self, display_id: str, msg: Mapping[str, Any]) -> None:
        if display_id not in self.displays.shown:
            return
        header = dict(msg["header"])
        if header["msg_type"] == "update_display_data":
            header["msg_type"] = "display_data"
        try:
            output = output_from_msg({**msg, "header": header})
        except (ValueError, KeyError):
            return
        self.displays.update(display_id, output)

    def _append(self, msg: Mapping[str, Any], display_id: str | None) -> None:
        try:
            output = output_from_msg(msg)
        except (ValueError, KeyError):
            logger.debug("ignored an IOPub message: %s", msg["header"].get("msg_type"))
            return
        if self.clear_pending:
            self._clear()
            self.clear_pending = False
        if display_id:
            self.displays.add(display_id, self.index, output)
        self.cell.outputs.append(output)
        if self.on_output is not None:
            try:
                self.on_output(self.index, output)
            except Exception as exc:
                logger.debug("the output callback failed: %s", exc)


def _allows_errors(cell: NotebookNode) -> bool:
    """Whether a cell is tagged ``raises-exception``: its error does not end the run."""
    tags = cell.get("metadata", {}).get("tags", [])
    return isinstance(tags, list) and "raises-exception" in tags


def send_cell(client: AsyncKernelClient, nb: NotebookNode, index: int) -> str:
    """Send code cell ``index``'s execute request to ``client``'s kernel; its message id.

    A cell tagged ``raises-exception`` does not stop the kernel's queue on error (as with
    nbclient); prompts (``input()``) fail at once in the kernel.
    """
    cell = nb.cells[index]
    return str(
        client.execute(
            cell.source,
            store_history=True,
            stop_on_error=not _allows_errors(cell),
            allow_stdin=False,
        )
    )


async def execute_cell(
    client: AsyncKernelClient,
    nb: NotebookNode,
    index: int,
    *,
    timeout: float | None,
    iopub_timeout: float,
    alive: Callable[[], Awaitable[bool]],
    displays: Displays,
    on_output: OutputHook | None = None,
    widgets: Widgets | None = None,
    sent: str | None = None,
    then: Callable[[], None] | None = None,
) -> CellEnd:
    """Run code cell ``index`` of ``nb`` on ``client``'s kernel and keep its outputs in it.

    Waits ``timeout`` seconds at most for the reply (None: as long as the kernel lives,
    checked every :data:`ALIVE_POLL` seconds), then ``iopub_timeout`` seconds at most for the
    rest of the output. ``sent``: the id of the cell's request, already sent
    (:func:`send_cell`); else it is sent now. ``then`` is called as soon as the reply says the
    cell completed (or failed where failing is allowed), before the rest of its output is read:
    the caller sends the next cell's request there, so the kernel starts it without waiting for
    the host (see :meth:`.kernel_engine.KernelEngine.run_cell`).
    """
    cell = nb.cells[index]
    cell["metadata"]["execution"] = {}
    allows_errors = _allows_errors(cell)
    msg_id = sent if sent is not None else send_cell(client, nb, index)
    cell.outputs = []
    collector = _CellOutput(nb, index, displays, on_output, widgets)
    reading = asyncio.ensure_future(_read_output(client, msg_id, collector))
    try:
        end = await _wait_for_reply(client, msg_id, timeout, alive)
        if end.how in ("timeout", "dead"):
            return end
        if then is not None and (end.how == "ok" or allows_errors):
            then()
        cell["metadata"]["execution"]["shell.execute_reply"] = timestamp(end.reply)
        try:
            await asyncio.wait_for(asyncio.shield(reading), iopub_timeout)
            end.idle = True
        except asyncio.TimeoutError:
            end.idle = False
        if end.how == "error" and allows_errors:
            end.how = "ok"
        return end
    except asyncio.CancelledError:
        # The run was cancelled (Ctrl-C, or its cancel event): the engine stops the kernel.
        return CellEnd("cancelled")
    finally:
        reading.cancel()


async def _read_output(client: AsyncKernelClient, msg_id: str, collector: _CellOutput) -> None:
    while True:
        msg = await client.iopub_channel.get_msg(timeout=None)
        if msg.get("parent_header", {}).get("msg_id") == msg_id and collector.handle(msg):
            return


async def _wait_for_reply(
    client: AsyncKernelClient,
    msg_id: str,
    timeout: float | None,
    alive: Callable[[], Awaitable[bool]],
) -> CellEnd:
    ends = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = ALIVE_POLL if ends is None else max(0.0, min(ALIVE_POLL, ends - time.monotonic()))
        try:
            msg = await client.shell_channel.get_msg(timeout=wait)
        except Empty:
            if not await alive():
                return CellEnd("dead")
            if ends is not None and time.monotonic() >= ends:
                return CellEnd("timeout")
            continue
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        status = msg.get("content", {}).get("status")
        return CellEnd("error" if status == "error" else "ok", msg)
