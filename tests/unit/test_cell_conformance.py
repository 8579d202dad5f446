"""Message conformance of one cell's execution (``execute_cell``), as nbclient's own tests feed
its client: sequences of shell and IOPub messages, some of another request's, played by a
scripted kernel client; the outputs and the end are what nbclient keeps and reports.

The same rules on a real kernel, compared with nbclient itself, are in
tests/integration/test_cell_protocol.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from queue import Empty
from typing import Any

import pytest

from notebook_executor._kernels.cells import CellEnd, Displays, execute_cell
from notebook_executor._notebook import NotebookNode, new_code_cell, new_notebook

MINE = "request-1"
OTHER = "request-0"  # a request this cell did not send (an earlier cell's, another client's)


def iopub(kind: str, parent: str = MINE, **content: Any) -> dict[str, Any]:
    return {
        "msg_type": kind,  # jupyter_client's copy of the header's, which nbclient reads
        "header": {"msg_type": kind, "date": "2026-01-02T03:04:05.000006Z"},
        "parent_header": {"msg_id": parent},
        "content": content,
    }


def reply(status: str = "ok", parent: str = MINE, **content: Any) -> dict[str, Any]:
    message = iopub("execute_reply", parent, status=status, **content)
    message["header"]["date"] = "2026-01-02T03:04:06.000000Z"
    return message


BUSY = iopub("status", execution_state="busy")
IDLE = iopub("status", execution_state="idle")


def stream(text: str, name: str = "stdout", parent: str = MINE) -> dict[str, Any]:
    return iopub("stream", parent, name=name, text=text)


def display(
    text: str, display_id: str | None = None, kind: str = "display_data", **extra: Any
) -> dict[str, Any]:
    transient = {"display_id": display_id} if display_id else {}
    return iopub(kind, data={"text/plain": text}, metadata={}, transient=transient, **extra)


@dataclass
class _Channel:
    messages: list[dict[str, Any]]
    #: With ``block``, an empty channel waits (as a kernel that sends nothing more);
    #: else it raises ``Empty`` after the timeout, as jupyter_client's channels do.
    block: bool = False

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self.messages:
            return self.messages.pop(0)
        if self.block:
            await asyncio.sleep(3600)
        await asyncio.sleep(min(timeout or 0.0, 0.01))
        raise Empty


@dataclass
class ScriptedClient:
    """A kernel client that answers ``execute`` with the given messages, in order."""

    iopub_messages: Iterable[dict[str, Any]]
    shell_messages: Iterable[dict[str, Any]]
    executed: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.iopub_channel = _Channel(list(self.iopub_messages), block=True)
        self.shell_channel = _Channel(list(self.shell_messages))

    def execute(self, code: str, **options: Any) -> str:
        self.executed.append({"code": code, **options})
        return MINE


def run_cell(
    iopub_messages: Iterable[dict[str, Any]],
    shell_messages: Iterable[dict[str, Any]] = (reply(),),
    *,
    nb: NotebookNode | None = None,
    index: int = 0,
    displays: Displays | None = None,
    alive: bool = True,
    timeout: float | None = None,
    tags: list[str] | None = None,
) -> tuple[CellEnd, NotebookNode, ScriptedClient, list[Mapping[str, Any]]]:
    nb = nb if nb is not None else new_notebook([new_code_cell("x")])
    if tags:
        nb.cells[index].metadata["tags"] = tags
    client = ScriptedClient(iopub_messages, shell_messages)
    seen: list[Mapping[str, Any]] = []

    async def is_alive() -> bool:
        return alive

    end = asyncio.run(
        execute_cell(
            client,  # type: ignore[arg-type]
            nb,
            index,
            timeout=timeout,
            iopub_timeout=0.2,
            alive=is_alive,
            displays=displays if displays is not None else Displays(),
            on_output=lambda _, output: seen.append(output),
        )
    )
    return end, nb, client, seen


def kinds(nb: NotebookNode, index: int = 0) -> list[tuple[str, Any]]:
    """Each output as (type, its text or plain-text data)."""
    found = []
    for output in nb.cells[index].outputs:
        if output.output_type == "stream":
            found.append((output.output_type, output.text))
        elif output.output_type == "error":
            found.append((output.output_type, output.ename))
        else:
            found.append((output.output_type, output.data["text/plain"]))
    return found


# -- the table: messages in, outputs out --------------------------------------------------------

CASES: dict[str, tuple[list[dict[str, Any]], list[tuple[str, Any]]]] = {
    "streams are kept one output per message, in order (coalescing is for storage)": (
        [BUSY, stream("a"), stream("b"), stream("e", "stderr"), stream("c"), IDLE],
        [("stream", "a"), ("stream", "b"), ("stream", "e"), ("stream", "c")],
    ),
    "display_data and execute_result keep their place among streams": (
        [
            BUSY,
            stream("before"),
            display("shown"),
            iopub("execute_result", data={"text/plain": "3"}, metadata={}, execution_count=7),
            IDLE,
        ],
        [("stream", "before"), ("display_data", "shown"), ("execute_result", "3")],
    ),
    "update_display_data replaces the display in place and adds nothing": (
        [
            BUSY,
            display("v1", "d"),
            stream("between"),
            display("v2", "d", kind="update_display_data"),
            IDLE,
        ],
        [("display_data", "v2"), ("stream", "between")],
    ),
    "a second display with the same id is a new output, and both are updated": (
        [
            BUSY,
            display("v1", "d"),
            display("v1", "d"),
            display("v2", "d", kind="update_display_data"),
            IDLE,
        ],
        [("display_data", "v2"), ("display_data", "v2")],
    ),
    "an execute_result with a display_id can be updated": (
        [
            BUSY,
            display("r1", "r", kind="execute_result", execution_count=1),
            display("r2", "r", kind="update_display_data"),
            IDLE,
        ],
        [("execute_result", "r2")],
    ),
    "an update of an id never shown is ignored": (
        [BUSY, display("lost", "nope", kind="update_display_data"), IDLE],
        [],
    ),
    "clear_output clears at once": (
        [BUSY, stream("gone"), iopub("clear_output", wait=False), stream("kept"), IDLE],
        [("stream", "kept")],
    ),
    "clear_output(wait=True) clears just before the next output": (
        [BUSY, stream("old"), iopub("clear_output", wait=True), stream("new"), IDLE],
        [("stream", "new")],
    ),
    "clear_output(wait=True) with nothing after it keeps the output": (
        [BUSY, stream("frame"), iopub("clear_output", wait=True), IDLE],
        [("stream", "frame")],
    ),
    "clear_output(wait=True) is not applied by a display update": (
        [
            BUSY,
            display("v1", "d"),
            iopub("clear_output", wait=True),
            display("v2", "d", kind="update_display_data"),
            IDLE,
        ],
        [("display_data", "v2")],
    ),
    "an error is an output with its name": (
        [
            BUSY,
            stream("partial"),
            iopub("error", ename="ValueError", evalue="bad", traceback=["tb"]),
            IDLE,
        ],
        [("stream", "partial"), ("error", "ValueError")],
    ),
    "messages of another request are ignored, its idle too": (
        [
            stream("not mine", parent=OTHER),
            iopub("status", OTHER, execution_state="idle"),
            BUSY,
            stream("mine"),
            {**display("not mine either"), "parent_header": {"msg_id": OTHER}},
            IDLE,
            stream("after idle"),
        ],
        [("stream", "mine")],
    ),
    "comm messages and unknown message types produce no output": (
        [
            BUSY,
            iopub("comm_open", comm_id="c", target_name="t", data={}),
            iopub("comm_msg", comm_id="c", data={}),
            iopub("debug_event", event="x"),
            stream("out"),
            IDLE,
        ],
        [("stream", "out")],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_messages_become_the_outputs_nbclient_keeps(case: str) -> None:
    messages, expected = CASES[case]
    end, nb, _, seen = run_cell(messages)
    assert kinds(nb) == expected
    assert end.how == "ok"
    assert end.idle is True
    # Every output kept was handed to the live hook as it was appended.
    assert all(any(output is shown for shown in seen) for output in nb.cells[0].outputs)


@pytest.mark.parametrize("case", sorted(CASES))
def test_nbclient_keeps_the_same_outputs(case: str) -> None:
    """The table's expectations are nbclient's: its own message handler, fed the messages
    its poller would pass on (this request's, up to the idle status)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionComplete

    messages, expected = CASES[case]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])
    client = NotebookClient(nb)
    # What its execute() and execute_cell() set up before the first message.
    client.reset_execution_trackers()
    client.clear_before_next_output = False
    cell = nb.cells[0]
    cell.metadata["execution"] = {}
    for message in messages:
        if message["parent_header"]["msg_id"] != MINE:
            continue
        try:
            client.process_message(message, cell, 0)
        except CellExecutionComplete:
            break
    assert kinds(nb) == expected


def test_the_execution_count_comes_from_execute_input_and_the_result() -> None:
    _, nb, _, _ = run_cell([BUSY, iopub("execute_input", code="x", execution_count=5), IDLE])
    assert nb.cells[0].execution_count == 5
    _, nb, _, _ = run_cell(
        [
            BUSY,
            iopub("execute_input", code="x", execution_count=5),
            iopub("execute_result", data={"text/plain": "1"}, metadata={}, execution_count=5),
            IDLE,
        ]
    )
    assert nb.cells[0].execution_count == 5
    assert nb.cells[0].outputs[0].execution_count == 5


def test_the_four_timestamps_nbclient_records() -> None:
    _, nb, _, _ = run_cell(
        [BUSY, iopub("execute_input", code="x", execution_count=1), stream("s"), IDLE]
    )
    assert nb.cells[0].metadata.execution == {
        "iopub.status.busy": "2026-01-02T03:04:05.000006Z",
        "iopub.execute_input": "2026-01-02T03:04:05.000006Z",
        "iopub.status.idle": "2026-01-02T03:04:05.000006Z",
        "shell.execute_reply": "2026-01-02T03:04:06.000000Z",
    }


def test_an_error_reply_ends_the_cell_as_an_error() -> None:
    end, nb, client, _ = run_cell(
        [BUSY, iopub("error", ename="KeyError", evalue="'k'", traceback=["t"]), IDLE],
        [reply("error", ename="KeyError", evalue="'k'", traceback=["t"])],
    )
    assert end.how == "error"
    assert end.reply["content"]["ename"] == "KeyError"
    assert kinds(nb) == [("error", "KeyError")]
    # The kernel is asked to drop the queued cells on an error, as nbclient asks.
    assert client.executed[0]["stop_on_error"] is True
    assert client.executed[0]["allow_stdin"] is False


def test_a_cell_tagged_raises_exception_goes_on_after_its_error() -> None:
    end, nb, client, _ = run_cell(
        [BUSY, iopub("error", ename="E", evalue="", traceback=[]), IDLE],
        [reply("error", ename="E", evalue="", traceback=[])],
        tags=["raises-exception"],
    )
    assert end.how == "ok"
    assert client.executed[0]["stop_on_error"] is False
    assert kinds(nb) == [("error", "E")]


def test_replies_to_other_requests_are_skipped() -> None:
    end, _, _, _ = run_cell(
        [BUSY, IDLE], [reply("error", parent=OTHER, ename="Old", evalue="", traceback=[]), reply()]
    )
    assert end.how == "ok"
    assert end.reply["parent_header"]["msg_id"] == MINE


def test_output_after_the_reply_is_kept_until_idle() -> None:
    # The reply is read first; the IOPub output of the cell may still be on its way.
    end, nb, _, _ = run_cell([BUSY, stream("late 1"), stream("late 2"), IDLE], [reply()])
    assert end.idle is True
    assert kinds(nb) == [("stream", "late 1"), ("stream", "late 2")]


def test_no_idle_keeps_what_arrived_and_says_the_output_may_be_partial() -> None:
    end, nb, _, _ = run_cell([BUSY, stream("only this")])
    assert end.how == "ok"
    assert end.idle is False
    assert kinds(nb) == [("stream", "only this")]


def test_no_reply_and_a_dead_kernel_is_dead() -> None:
    end, _, _, _ = run_cell([BUSY], [], alive=False)
    assert end.how == "dead"


def test_no_reply_within_the_limit_is_a_timeout() -> None:
    end, _, _, _ = run_cell([BUSY], [], timeout=0.05)
    assert end.how == "timeout"


def test_a_display_shown_by_an_earlier_cell_is_updated_from_a_later_one() -> None:
    nb = new_notebook([new_code_cell("a"), new_code_cell("b")])
    displays = Displays()
    run_cell([BUSY, display("v1", "d"), IDLE], nb=nb, index=0, displays=displays)
    run_cell(
        [BUSY, display("v2", "d", kind="update_display_data"), stream("b"), IDLE],
        nb=nb,
        index=1,
        displays=displays,
    )
    assert kinds(nb, 0) == [("display_data", "v2")]
    assert kinds(nb, 1) == [("stream", "b")]


def test_the_outputs_a_cell_had_before_are_replaced() -> None:
    nb = new_notebook([new_code_cell("x")])
    nb.cells[0].outputs = [{"output_type": "stream", "name": "stdout", "text": "stale"}]
    _, nb, _, _ = run_cell([BUSY, stream("fresh"), IDLE], nb=nb)
    assert kinds(nb) == [("stream", "fresh")]
