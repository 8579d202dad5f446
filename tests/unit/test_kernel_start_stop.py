"""A kernel's start asks again soon when IOPub missed its status; a closing kernel does not
wait for what its sockets could not send. Without a kernel: fake channels, and the kernel
program's application class on fakes."""

from __future__ import annotations

import asyncio
from queue import Empty
from typing import Any

from notebook_executor._kernels import launch
from support import kernel_program


class _Channel:
    """A channel whose messages come from ``answer(timeout)``; records each wait's timeout."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.waits: list[float | None] = []

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        self.waits.append(timeout)
        message = self.answer()
        if message is None:
            raise Empty
        return message  # type: ignore[no-any-return]


class _Client:
    """A kernel's client: each ``kernel_info`` request is replied to at once; its idle status
    reaches IOPub only from the ``joins``-th request on (the subscription came late)."""

    def __init__(self, joins: int) -> None:
        self.asked: list[str] = []
        self.joins = joins
        self.replies: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.shell_channel = _Channel(lambda: self.replies.pop(0) if self.replies else None)
        self.iopub_channel = _Channel(lambda: self.statuses.pop(0) if self.statuses else None)

    def kernel_info(self) -> str:
        msg_id = f"info-{len(self.asked)}"
        self.asked.append(msg_id)
        parent = {"msg_id": msg_id}
        self.replies.append({"parent_header": parent, "content": {"status": "ok", "n": 1}})
        if len(self.asked) >= self.joins:
            state = {"execution_state": "idle"}
            self.statuses.append({"msg_type": "status", "parent_header": parent, "content": state})
        return msg_id


class _Manager:
    async def is_alive(self) -> bool:
        return True


def _ready(client: _Client) -> dict[str, Any]:
    manager: Any = _Manager()
    return asyncio.run(launch.wait_until_ready(client, manager, timeout=30))  # type: ignore[arg-type]


def test_a_kernel_whose_status_arrives_is_ready_after_one_request() -> None:
    client = _Client(joins=1)
    assert _ready(client) == {"status": "ok", "n": 1}
    assert client.asked == ["info-0"]


def test_a_missed_status_is_asked_for_again_soon_then_less_often() -> None:
    """A status lost to a late subscription: asked again after IOPUB_RETRY, then twice as
    long each time, up to IOPUB_RETRY_MAX (it was 0.25 s at once)."""
    client = _Client(joins=6)
    assert _ready(client)["status"] == "ok"
    assert len(client.asked) == 6
    waits = client.iopub_channel.waits
    firsts = [w for w in waits if w is not None]
    assert firsts[0] <= launch.IOPUB_RETRY
    rounds = [launch.IOPUB_RETRY * 2**n for n in range(5)]
    for wait, most in zip(firsts, rounds, strict=False):
        assert wait <= min(most, launch.IOPUB_RETRY_MAX)


def test_a_status_for_an_earlier_request_is_enough() -> None:
    """The idle status of any of our requests proves IOPub is connected."""
    client = _Client(joins=1)
    client.kernel_info()  # an earlier request, whose status is still on its way
    client.replies.clear()
    assert _ready(client)["status"] == "ok"


class _Context:
    def __init__(self) -> None:
        self.terms = 0

    def term(self) -> None:
        self.terms += 1


def test_a_closing_kernel_does_not_wait_for_what_its_sockets_hold() -> None:
    """ipykernel's exit handler closes the kernel's sockets, then terminates their zmq
    context, which waits for what they still hold (the shutdown's reply to a host that no
    longer reads), up to 1 s: the kernel's closes everything but that, and the process ends
    right after its exit handlers."""
    kernel: Any = kernel_program("kernel_main")
    app = kernel.kernel_app_class()()
    context = _Context()
    app.context = context
    for name in ("heartbeat", "iopub_thread", "control_thread", "shell_channel_thread"):
        setattr(app, name, None)
    for name in ("shell", "control", "stdin", "debugpy", "debug_shell"):
        setattr(app, f"{name}_socket", None)
    app.close()
    assert context.terms == 0
    assert app.context is context
