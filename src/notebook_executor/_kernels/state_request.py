"""Durable checkpoints, host side of the wire: one request to a kernel's ``state_files``.

The kernel answers a shell message of its own (``inside/kernel_main.STATE_REQUEST``) between
two cells, on its main thread (no execution count, no event); see ``inside/state_files.py``
for what it does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..engine import StateUnusable

if TYPE_CHECKING:
    from .launch import RunningKernel

__all__ = ["STATE_REQUEST", "state_request"]

#: As ``inside/kernel_main.STATE_REQUEST``.
STATE_REQUEST = "nbx_state_request"


async def state_request(
    kernel: RunningKernel, content: Mapping[str, Any], timeout: float
) -> dict[str, Any]:
    """The kernel's reply to ``content``; :class:`StateUnusable` when it died or did not
    answer within ``timeout`` seconds."""
    from queue import Empty

    client = kernel.client
    request = client.session.msg(STATE_REQUEST, dict(content))
    client.shell_channel.send(request)
    msg_id = request["header"]["msg_id"]
    ends = time.monotonic() + timeout
    while (left := ends - time.monotonic()) > 0:
        try:
            msg = await client.shell_channel.get_msg(timeout=min(left, 1.0))
        except Empty:
            if not await kernel.manager.is_alive():
                raise StateUnusable("the kernel died while its state was written or read") from None
            continue
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            return dict(msg.get("content", {}))
    raise StateUnusable(f"the kernel did not answer a state request within {timeout:g} s")
