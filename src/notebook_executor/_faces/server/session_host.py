"""Holding one session in a child of the run server, for the ``session`` commands.

After ``session open`` answered its client, the child (:mod:`.child`) holds the session here:
it listens on ``<server files>/<key>-s/<session_id>.sock`` (the private folder, the peer's uid
checked) and answers one request at a time, in its main thread, so that a Ctrl-C relayed by the
client interrupts a step as it would in-process. Requests are read as they arrive, from every
connected client at once (:class:`.wire.Arrivals`): one that sends nothing, or slowly, holds up
no other, and is refused in one line after :data:`REQUEST_SECONDS`. A file beside the socket
(mode 0600) describes the session for ``session list`` and ``server status``. The child ends
when the session is closed (by ``session close``, or idle past its ``idle_timeout``), or when
the server stops or dies (SIGTERM, its parent-death signal; also seen by a watch on its
parent), or the server's kernel template dies (watched through its pidfd; the session's kernel
dies with it): the session's run record is then finished, as the API finishes it, a step cut
short recorded as ``interrupted`` naming its cell (:class:`~.served.ServerStopped`), its
request answered with one line, and the kernel and checkpoints stopped (within bounded waits:
see ``CheckpointedKernel.close``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import threading
from pathlib import Path
from typing import Any

from . import served, wire
from .paths import ServerFiles, listen_private, write_private

__all__ = ["REQUEST_SECONDS", "hold", "listen"]

#: Seconds between two looks at whether the session closed by itself (idle).
_POLL_SECONDS = 0.5
#: Seconds a client has to send its whole request once connected.
REQUEST_SECONDS = 10.0
#: Requests arriving at once, at most (one more is refused).
_MAX_PENDING = 16

#: Seconds between two looks at whether the server or its template died.
_WATCH_SECONDS = 0.2

#: Why the session ends with the server (set by the watch; the server's SIGTERM otherwise).
_ENDED: list[str] = []
_SERVER_ENDED = "the run server stopped"
_TEMPLATE_ENDED = "the run server's kernel template died"


def listen(files: ServerFiles, session: Any) -> tuple[socket.socket, dict[str, Any]]:
    """The session's socket (among the server's ``files``), listening, and its description
    (written beside it): done before ``session open`` answers, so that the client's next
    command finds the session."""
    path = Path(files.session_socket(session.id))
    listener = listen_private(str(path), 8)
    entry = {
        "session_id": session.id,
        "run_id": session.run_id,
        "notebook": str(session_notebook(session)),
        "parameters": session_parameters(session),
        "cwd": str(Path.cwd()),
        "pid": os.getpid(),
    }
    write_private(str(path.with_suffix(".json")), json.dumps(entry))
    return listener, entry


def hold(
    here: served.Serving, ex: Any, session: Any, listening: tuple[socket.socket, dict[str, Any]]
) -> None:
    """Answer the session's requests on ``listening`` (see :func:`listen`) until it closes, or
    the server (``here``) goes; then close ``ex`` (finishing the record)."""
    path = Path(here.files.session_socket(session.id))
    info = path.with_suffix(".json")
    from ..._kernels.sharing import adopted

    listener, entry = listening
    arrivals = wire.Arrivals(REQUEST_SECONDS, _MAX_PENDING)
    signal.signal(signal.SIGTERM, here.on_server_gone)
    # The client's streams are let go of: a write to a socket whose reader died (a template,
    # a client) is an error to handle, not this process's death.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    held = threading.Event()
    watch = threading.Thread(target=_watch, args=(here, adopted(), held), daemon=True)
    watch.start()
    try:
        while not session.closed and not here.gone.is_set():
            try:
                whole = arrivals.expire()
                ready, _, _ = select.select(
                    [listener, *arrivals.incoming],
                    [],
                    [],
                    arrivals.timeout(0 if whole else _POLL_SECONDS),
                )
                for conn in ready:
                    if conn is listener:
                        try:
                            conn, _ = listener.accept()
                        except OSError:
                            continue
                        arrived = arrivals.add(conn)
                    else:
                        arrived = arrivals.read(conn)
                    if arrived is not None:
                        whole.append((conn, arrived))
                for conn, (request, _fds) in whole:
                    if session.closed:
                        wire.refuse(conn, "the session is closed")
                        continue
                    with conn:
                        _answer(here, conn, session, entry, request)
            except KeyboardInterrupt:
                if here.gone.is_set():
                    break
    finally:
        held.set()
        arrivals.close("the session is closed")
        listener.close()
        for leftover in (path, info):
            with contextlib.suppress(OSError):
                leftover.unlink()
        if here.gone.is_set():
            # Nothing may cut the end short now (a relayed Ctrl-C, the server's signal).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with contextlib.suppress(BaseException):
                session._close(_ended())
        # Closing the executor closes the session: its record is finished.
        with contextlib.suppress(BaseException):
            ex.close()


def _ended() -> str:
    return _ENDED[0] if _ENDED else _SERVER_ENDED


def _watch(here: served.Serving, template: Any, held: threading.Event) -> None:
    """Until the session is no longer held: when the server dies (this process's parent
    changes: its parent-death signal may be lost) or its kernel template (``template``, the
    one the session's kernel came from) dies, end the session as the server's SIGTERM does."""
    while not held.wait(_WATCH_SECONDS):
        if here.gone.is_set():
            return
        if here.server_gone():
            _ENDED.append(_SERVER_ENDED)
        elif template is not None and template.exited():
            _ENDED.append(_TEMPLATE_ENDED)
        else:
            continue
        os.kill(os.getpid(), signal.SIGTERM)
        return


def session_notebook(session: Any) -> Any:
    plan = getattr(session, "_plan", None)
    return getattr(plan, "notebook", "")


#: Most characters of one parameter's value, and of them all, in a session's description.
_VALUE_CHARS, _PARAMETERS_CHARS = 40, 160


def session_parameters(session: Any) -> str:
    """The parameters given to the session, as ``name=value, ...`` (each value's repr,
    secrets redacted before anything is cut; bounded): what tells two sessions of one
    notebook apart in ``session list``."""
    given = getattr(getattr(session, "_plan", None), "given", None) or {}
    redactor = getattr(session, "_redactor", None)
    parts = []
    for name, value in given.items():
        shown = repr(value)
        if redactor is not None:
            shown = redactor.text(shown)
        if len(shown) > _VALUE_CHARS:
            shown = shown[: _VALUE_CHARS - 3] + "..."
        parts.append(f"{name}={shown}")
    text = ", ".join(parts)
    return text if len(text) <= _PARAMETERS_CHARS else text[: _PARAMETERS_CHARS - 3] + "..."


def _answer(
    here: served.Serving,
    conn: socket.socket,
    session: Any,
    entry: dict[str, Any],
    request: dict[str, Any],
) -> None:
    from ..._errors import NotebookExecutorError

    done = threading.Event()
    threading.Thread(target=_relay_interrupt, args=(here, conn, done), daemon=True).start()
    gone: KeyboardInterrupt | None = None
    try:
        reply = _call(session, entry, request)
    except KeyboardInterrupt as exc:
        if here.gone.is_set():
            # The server's end (or its template's): said in one line, then the session ends.
            gone = exc
            message = getattr(exc, "message", None)
            if not isinstance(message, str):
                message = f"{_ended()}: the session is closed"
            reply = {"error": message}
        else:
            reply = {"interrupted": True}  # the client's Ctrl-C, relayed
    except NotebookExecutorError as exc:
        reply = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    except (TypeError, ValueError) as exc:
        reply = {"error": f"malformed request: {exc}"}
    finally:
        done.set()
    with contextlib.suppress(OSError):
        wire.send(conn, reply)
    if gone is not None:
        raise gone


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
    if op == "lock":  # a job's step: the run's liveness lock says the cell it is in
        from ..._catalog.liveness import RunLocks

        return {"lock": str(RunLocks(Path(session._record.runs_dir)).path(session.run_id))}
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


def _relay_interrupt(here: served.Serving, conn: socket.socket, done: threading.Event) -> None:
    """SIGINT here when the client asks, or goes away, before the answer is ready."""
    try:
        message = wire.receive(conn, limit=4096)
    except OSError:
        message = {"op": "gone"}
    if (
        not done.is_set()
        and not here.server_gone()  # the step ends with the server already
        and message.get("op") in ("interrupt", "gone")
    ):
        os.kill(os.getpid(), signal.SIGINT)
