"""The HTTP server's bounds on its clients: how long a request may take to arrive, and how
many connections may be open at once.

uvicorn times out only an idle keep-alive connection (after a response); a client that opens a
connection and sends nothing, or a header a byte at a time, is held forever, each holding a
file descriptor (a thousand such connections held a thousand). As nginx
(``client_header_timeout``, ``client_body_timeout``, ``worker_connections``) and Apache
(``mod_reqtimeout``) do, this protocol closes a connection whose request line and headers have
not all arrived within :data:`HEADER_SECONDS` of its opening (or of its previous response), or
whose body has not all arrived within :data:`BODY_SECONDS` of its headers, and closes at once
a connection beyond the :data:`MAX_CONNECTIONS` already open. A request that has arrived in
full is never cut: a response may stream as long as it needs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["BODY_SECONDS", "HEADER_SECONDS", "MAX_CONNECTIONS", "BoundedH11Protocol"]

logger = logging.getLogger(__name__)

#: Seconds for a request's line and headers to arrive.
HEADER_SECONDS = 10.0
#: Seconds for a request's body to arrive, once its headers have (MCP requests are small).
BODY_SECONDS = 30.0
#: Connections open at once; one more is closed as soon as it is accepted.
MAX_CONNECTIONS = 100


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with the bounds of this module."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None
        self._reading_body = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > MAX_CONNECTIONS:
            logger.warning("HTTP: %d connections open; one more refused", MAX_CONNECTIONS)
            transport.abort()
            return
        self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is h11.SEND_BODY and not self._reading_body:
            self._reading_body = True
            self._set_deadline(BODY_SECONDS, "body")
        elif state is not h11.IDLE and state is not h11.SEND_BODY:
            self._cancel_deadline()  # the request has arrived (or the connection is over)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_request()

    def _await_request(self) -> None:
        self._reading_body = False
        self._set_deadline(HEADER_SECONDS, "headers")

    def _set_deadline(self, seconds: float, what: str) -> None:
        self._cancel_deadline()
        self._read_deadline = self.loop.call_later(seconds, self._too_slow, what, seconds)

    def _cancel_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _too_slow(self, what: str, seconds: float) -> None:
        self._read_deadline = None
        state = self.conn.their_state
        if self.transport.is_closing() or (state is not h11.IDLE and state is not h11.SEND_BODY):
            return
        logger.info("HTTP: a request's %s took over %g s; connection closed", what, seconds)
        self.transport.abort()
