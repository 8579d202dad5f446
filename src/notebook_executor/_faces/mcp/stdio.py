"""The MCP server on stdio: the SDK's transport, with every request answered.

The SDK parses each line with pydantic, whose JSON parser refuses what Python's accepts: a
lone surrogate escape (``"\\ud800"``), which no UTF-8 text can hold. The SDK then drops the
line without an answer, and the client waits forever. Here such a line is read again with
:mod:`json`; when it is a request (it has an ``id``), the client is answered with a JSON-RPC
error that says what is wrong with it. Anything else goes on as the SDK reads it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..._sources.bounded import unencodable

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.shared.message import SessionMessage

__all__ = ["refusal", "run_stdio"]


async def run_stdio(server: MCPServer[Any]) -> None:
    """Serve ``server`` over this process's standard input and output until input ends."""
    import anyio
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # the SDK's run_stdio_async does the same
    async with stdio_server() as (read_stream, write_stream):
        sender, receiver = anyio.create_memory_object_stream[Any](0)

        async def relay() -> None:
            async with sender:
                async for item in read_stream:
                    answer = refusal(item) if isinstance(item, Exception) else None
                    if answer is not None:
                        await write_stream.send(answer)
                    else:
                        await sender.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            await lowlevel.run(receiver, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()


def refusal(error: Exception) -> SessionMessage | None:
    """The JSON-RPC error answering a line the SDK could not parse, when that line is a
    request that :mod:`json` reads (so its ``id`` is known); None otherwise."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return None
    try:
        line = errors()[0].get("input")
        message = json.loads(line) if isinstance(line, str) else None
    except (ValueError, IndexError, TypeError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return None  # a notification, or no id to answer to
    if isinstance(request_id, str) and unencodable(request_id):
        return None
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    reason = (
        "the request holds a lone surrogate escape (such as \\ud800), which is not valid "
        "Unicode text: send text as UTF-8"
        if "\\ud" in line.lower()
        else "the request cannot be read as JSON-RPC"
    )
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=types.ErrorData(code=types.INVALID_PARAMS, message=reason),
        )
    )
