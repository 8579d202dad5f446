"""Holding one session in a child of the run server, for the ``session`` commands.

After ``session open`` answered its client, the child (:mod:`.child`) holds the session here:
it listens on ``<server files>/<key>-s/<session_id>.sock`` (the private folder, the peer's uid
checked) and answers one request at a time, in its main thread, so that a Ctrl-C relayed by the
client interrupts a step as it would in-process. A file beside the socket describes the session
for ``session list`` and ``server status``. The child ends when the session is closed (by
``session close``, or idle past its ``idle_timeout``), or when the server stops or dies
(SIGTERM): the session's run record is then finished, as the API finishes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

from . import served, wire

__all__ = ["hold", "listen"]

#: Seconds between two looks at whether the session closed by itself (idle).
_POLL_SECONDS = 0.5


def listen(session: Any) -> tuple[socket.socket, dict[str, Any]]:
    """The session's socket, listening, and its description (written beside it): done before
    ``session open`` answers, so that the client's next command finds the session."""
    files = served.FILES
    assert files is not None
    path = Path(files.session_socket(session.id))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(8)
    listener.settimeout(_POLL_SECONDS)
    entry = {
        "session_id": session.id,
        "run_id": session.run_id,
        "notebook": str(session_notebook(session)),
        "cwd": str(Path.cwd()),
        "pid": os.getpid(),
    }
    path.with_suffix(".json").write_text(json.dumps(entry))
    return listener, entry


def hold(ex: Any, session: Any, listening: tuple[socket.socket, dict[str, Any]]) -> None:
    """Answer the session's requests on ``listening`` (see :func:`listen`) until it closes;
    then close ``ex`` (finishing the record)."""
    files = served.FILES
    assert files is not None
    path = Path(files.session_socket(session.id))
    info = path.with_suffix(".json")
    listener, entry = listening
    signal.signal(signal.SIGTERM, served.on_server_gone)
    try:
        while not session.closed and not served.GONE.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except KeyboardInterrupt:
                break
            with conn:
                try:
                    _answer(conn, session, entry)
                except KeyboardInterrupt:
                    if served.GONE.is_set():
                        break
    finally:
        listener.close()
        for leftover in (path, info):
            with contextlib.suppress(OSError):
                leftover.unlink()
        # Closing the executor closes the session: its record is finished.
        with contextlib.suppress(BaseException):
            ex.close()


def session_notebook(session: Any) -> Any:
    plan = getattr(session, "_plan", None)
    return getattr(plan, "notebook", "")


def _answer(conn: socket.socket, session: Any, entry: dict[str, Any]) -> None:
    from ..._errors import NotebookExecutorError

    try:
        wire.check_peer(conn)
        conn.settimeout(10)
        request = wire.receive(conn)
        conn.settimeout(None)
    except OSError as exc:
        with contextlib.suppress(OSError):
            wire.send(conn, {"error": str(exc).splitlines()[0] if str(exc) else "refused"})
        return
    done = threading.Event()
    threading.Thread(target=_relay_interrupt, args=(conn, done), daemon=True).start()
    try:
        reply = _call(session, entry, request)
    except KeyboardInterrupt:
        if served.GONE.is_set():
            raise
        reply = {"interrupted": True}  # the client's Ctrl-C, relayed
    except NotebookExecutorError as exc:
        reply = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    except (TypeError, ValueError) as exc:
        reply = {"error": f"malformed request: {exc}"}
    finally:
        done.set()
    with contextlib.suppress(OSError):
        wire.send(conn, reply)


def _call(session: Any, entry: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    until = _index(request.get("until"), "until")
    if op == "run":
        return {"step": dict(session.run(until=until))}
    if op == "rerun":
        start = _index(request.get("from"), "from")
        if start is None:
            raise ValueError("rerun needs 'from'")
        return {"step": dict(session.rerun_from(start, until=until))}
    if op == "eval":
        code = request.get("code")
        if not isinstance(code, str):
            raise ValueError("eval needs 'code' (a string)")
        return {"answer": {"session_id": session.id, **session.evaluate(code)}}
    if op == "show":
        return {
            "session": {**entry, "checkpoints": session.checkpoints, "open": not session.closed}
        }
    if op == "close":
        session.close()
        return {"closed": {"session_id": session.id, "run_id": session.run_id, "closed": True}}
    raise ValueError(f"unknown request {str(op)[:40]!r}")


def _index(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a cell index (an integer >= 0)")
    return value


def _relay_interrupt(conn: socket.socket, done: threading.Event) -> None:
    """SIGINT here when the client asks, or goes away, before the answer is ready."""
    try:
        message = wire.receive(conn, limit=4096)
    except OSError:
        message = {"op": "gone"}
    if not done.is_set() and message.get("op") in ("interrupt", "gone"):
        os.kill(os.getpid(), signal.SIGINT)
