"""Messages between the command line and the run server: framed JSON on a Unix socket.

A message is a 4-byte big-endian length, then that many bytes of UTF-8 JSON (an object). A
request is refused when longer than :data:`MAX_REQUEST_BYTES`, not a JSON object, or nested too
deeply to read, with a one-line error: reading a message raises :class:`WireError` and nothing
else, whatever its bytes. :class:`Incoming` reads one as it arrives, whole within a deadline
(however slowly its bytes come), and on a non-blocking socket without waiting: the server reads
many clients' requests at once that way (:class:`Arrivals`), none waiting behind another.
Every connection's peer is checked with ``SO_PEERCRED``: a process of another user is refused,
whatever the socket file's mode. File descriptors (the client's standard streams) travel beside
a message as ``SCM_RIGHTS``.

Imports only the standard library's small modules: every served command imports this. Sockets
are ``_socket``'s, which ``socket`` wraps: importing ``socket`` (its enums, ``selectors``) took
8-40 ms of a served command's start-up on a loaded 2-CPU machine, ``_socket`` 0.5 ms
(``python -X importtime``). ``socket.socket`` objects (the server's) are ``_socket.socket``
objects too. JSON is written and read by ``_json``, the C code ``json.dumps`` and ``json.loads``
call, without the ``json`` package: importing it (with ``re`` and ``enum``, which it imports)
took 8.7 ms of the client's 11 ms of imports, idle, 2026-11-29 (:func:`encode`, :func:`decode`).
"""

from __future__ import annotations

import _json
import _socket
import os
import struct
import time

# No contextlib either (see .client): try/except/pass where it would suppress.
# ruff: noqa: SIM105
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "ANSWER_SECONDS",
    "MAX_REQUEST_BYTES",
    "Arrivals",
    "Incoming",
    "WireError",
    "check_peer",
    "connect",
    "decode",
    "encode",
    "receive",
    "receive_with_fds",
    "refuse",
    "send",
    "send_with_fds",
]

#: Longest request the server reads (the client's environment and arguments, a cell's code).
MAX_REQUEST_BYTES = 4 * 1024 * 1024
#: Seconds a peer has to take a short answer (a refusal, the server's status) once sent.
ANSWER_SECONDS = 2.0
_HEADER = struct.Struct(">I")
_CRED = struct.Struct("3i")
_FD = struct.Struct("i")


class WireError(OSError):
    """A message that cannot be read (closed connection, too long, not a JSON object)."""


def connect(path: str) -> _socket.socket:
    """A stream connection to the Unix socket at ``path`` (its peer not checked yet)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def check_peer(sock: _socket.socket) -> int:
    """The pid of the process at the other end of ``sock``; refused when of another user.

    Raises
    ------
    WireError
        The peer runs as another user (or its credentials cannot be read).
    """
    try:
        pid, uid, _gid = _CRED.unpack(
            sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, _CRED.size)
        )
    except OSError as exc:
        raise WireError(f"cannot read the peer's credentials: {exc}") from None
    if uid != os.getuid():
        raise WireError(f"refused a process of user {uid}")
    return int(pid)


def send(sock: _socket.socket, message: dict[str, Any]) -> None:
    data = encode(message, default=str)
    sock.sendall(_HEADER.pack(len(data)) + data)


def send_with_fds(sock: _socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    data = encode(message)
    frame = _HEADER.pack(len(data)) + data
    # What socket.send_fds does.
    rights = b"".join(_FD.pack(fd) for fd in fds)
    ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)] if fds else []
    sent = sock.sendmsg([frame], ancillary)
    if sent < len(frame):
        sock.sendall(frame[sent:])


def receive(
    sock: _socket.socket, limit: int = MAX_REQUEST_BYTES, seconds: float | None = None
) -> dict[str, Any]:
    """The next message; :class:`WireError` when the connection closed, the message is bad, or
    (``seconds`` given) it did not arrive whole within ``seconds`` (the socket's timeout is
    then changed)."""
    message, _fds = _receive(sock, limit, 0, seconds)
    return message


def receive_with_fds(
    sock: _socket.socket,
    limit: int = MAX_REQUEST_BYTES,
    max_fds: int = 3,
    seconds: float | None = None,
) -> tuple[dict[str, Any], list[int]]:
    """The next message and the descriptors sent with it (the caller closes them)."""
    return _receive(sock, limit, max_fds, seconds)


def _receive(
    sock: _socket.socket, limit: int, max_fds: int, seconds: float | None
) -> tuple[dict[str, Any], list[int]]:
    incoming = Incoming(sock, seconds, limit, max_fds)
    message = incoming.read()
    if message is None:  # a non-blocking socket, with nothing (more) to read yet
        incoming.discard()
        raise WireError("no whole message to read")
    return message, incoming.fds


def encode(message: dict[str, Any], default: Callable[[Any], Any] | None = None) -> bytes:
    """``message`` as compact UTF-8 JSON: what ``json.dumps(message, ensure_ascii=False,
    separators=(",", ":"), default=default)`` writes, by the same C encoder (``_json``);
    without ``default``, a value JSON cannot hold raises ``TypeError``, as there."""
    encoder = _json.make_encoder(
        {}, default or _unwritable, _json.encode_basestring, None, ":", ",", False, False, True
    )
    return "".join(encoder(message, 0)).encode()


def _unwritable(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class _Reading:
    """What ``json.loads`` gives its C scanner (``_json.make_scanner``): its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name.replace("Infinity", "inf"))


#: The C scanner ``json.loads`` uses, made on first use (:func:`decode`).
_SCAN: list[Callable[[str, int], tuple[Any, int]]] = []

#: JSON's whitespace, allowed around the value.
_BLANKS = " \t\n\r"


def decode(data: bytes) -> dict[str, Any]:
    """The message of a frame's body: :class:`WireError`, never another exception, when it is
    not one (not UTF-8 JSON, nested too deeply to read, not an object). Read by the C scanner
    ``json.loads`` uses, as it does (see the module's docstring)."""
    if not _SCAN:
        _SCAN.append(_json.make_scanner(_Reading()))  # type: ignore[arg-type]
    try:
        text = data.decode("utf-8").strip(_BLANKS)
        message, end = _SCAN[0](text, 0)
        if end != len(text):
            raise ValueError("extra data")
    except RecursionError:
        raise WireError("malformed message: nested too deeply") from None
    except (ValueError, StopIteration):  # UnicodeDecodeError and JSONDecodeError among them
        raise WireError("malformed message: not JSON") from None
    except Exception as exc:  # MemoryError, say: a message is never a reason to fail
        raise WireError(f"malformed message: {type(exc).__name__}") from None
    if not isinstance(message, dict):
        raise WireError("malformed message: not a JSON object")
    return message


class Incoming:
    """One message arriving on ``sock``, read as it comes, whole within ``seconds`` (None: no
    bound).

    On a non-blocking socket, :meth:`read` takes what has arrived and returns None until the
    message is whole: a server reads many clients at once this way, none waiting for another,
    and drops those past their :attr:`deadline`. On a blocking socket, :meth:`read` waits for
    the whole message, no longer than the deadline (a total, however slowly the bytes come).
    Never reads past the message: what follows it on the connection stays there.
    """

    def __init__(
        self,
        sock: _socket.socket,
        seconds: float | None,
        limit: int = MAX_REQUEST_BYTES,
        max_fds: int = 0,
    ) -> None:
        self.sock = sock
        self.seconds = seconds
        #: When its time is up (``time.monotonic``).
        self.deadline = time.monotonic() + (float("inf") if seconds is None else seconds)
        self.limit = limit
        self.max_fds = max_fds
        #: The descriptors received with the message (the caller closes them).
        self.fds: list[int] = []
        self._size: int | None = None  # the body's, once the header is read
        self._data = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def discard(self) -> None:
        """Close the descriptors received so far."""
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def read(self) -> dict[str, Any] | None:
        """The message once whole, else None (a non-blocking socket with nothing more yet).

        Raises
        ------
        WireError
            The connection closed, the message is too long or bad, or its time is up. The
            descriptors received are closed.
        """
        try:
            return self._read()
        except BaseException:
            self.discard()
            raise

    def _read(self) -> dict[str, Any] | None:
        while True:
            want = (_HEADER.size if self._size is None else self._size) - len(self._data)
            if want:
                try:
                    chunk = self._recv(min(want, 1 << 20))
                except BlockingIOError:
                    return None
                except TimeoutError:
                    if self.seconds is None:
                        raise  # the caller's own timeout on the socket
                    raise WireError(f"no whole message within {self.seconds:g} s") from None
                if not chunk:
                    closed = self._size is None and not self._data
                    raise WireError(
                        "the connection closed" if closed else "the connection closed mid-message"
                    )
                self._data += chunk
                continue
            if self._size is not None:
                return decode(bytes(self._data))
            (self._size,) = _HEADER.unpack(self._data)
            self._data = bytearray()
            if self._size > self.limit:
                raise WireError(f"message of {self._size:,} bytes refused (limit {self.limit:,})")

    def _recv(self, size: int) -> bytes:
        if self.seconds is not None and self.sock.gettimeout() != 0.0:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
        if not self.max_fds:
            return self.sock.recv(size)
        # What socket.recv_fds does.
        data, ancillary, _flags, _addr = self.sock.recvmsg(
            size, _socket.CMSG_LEN(self.max_fds * _FD.size)
        )
        for level, kind, rights in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                usable = len(rights) - len(rights) % _FD.size
                self.fds += [fd for (fd,) in _FD.iter_unpack(rights[:usable])]
        if len(self.fds) > self.max_fds:
            raise WireError(f"more than {self.max_fds} descriptors sent")
        return data


class Arrivals:
    """The requests arriving on the connections a listener accepts, read as they come: many
    at once, none waiting behind another (see :class:`Incoming`). A request not whole within
    ``seconds``, or beyond ``max_pending`` arriving at once, is refused in one line.

    The owner selects its listener and :attr:`incoming` for reading, hands a connection it
    accepted to :meth:`add` and a ready one to :meth:`read`, and calls :meth:`expire` at least
    every :meth:`timeout`.
    """

    def __init__(self, seconds: float, max_pending: int, max_fds: int = 0) -> None:
        self.seconds = seconds
        self.max_pending = max_pending
        self.max_fds = max_fds
        #: The connections whose request is still arriving (the owner's socket objects, of
        #: whatever class derived from ``_socket.socket``: those it selects and reads).
        self.incoming: dict[Any, Incoming] = {}

    def timeout(self, longest: float) -> float:
        """Seconds to wait for the next event: ``longest``, or less when a request's time is up
        sooner."""
        now = time.monotonic()
        return max(0.0, min([longest, *(i.deadline - now for i in self.incoming.values())]))

    def add(self, conn: _socket.socket) -> tuple[dict[str, Any], list[int]] | None:
        """Take a connection just accepted (its peer checked): its request and descriptors if
        whole already, else None (and when refused: then closed)."""
        try:
            check_peer(conn)
            if len(self.incoming) >= self.max_pending:
                raise WireError(f"busy: {self.max_pending} requests are arriving already")
        except OSError as exc:
            refuse(conn, exc)
            return None
        conn.setblocking(False)
        self.incoming[conn] = Incoming(conn, self.seconds, max_fds=self.max_fds)
        return self.read(conn)

    def read(self, conn: _socket.socket) -> tuple[dict[str, Any], list[int]] | None:
        """What arrived of ``conn``'s request: the request and its descriptors once whole (the
        connection is then blocking again, and no longer in :attr:`incoming`); None meanwhile,
        or when refused (and closed)."""
        incoming = self.incoming[conn]
        try:
            message = incoming.read()
        except OSError as exc:
            del self.incoming[conn]
            refuse(conn, exc)
            return None
        if message is None:
            return None
        del self.incoming[conn]
        conn.setblocking(True)
        return message, incoming.fds

    def expire(self) -> list[tuple[Any, tuple[dict[str, Any], list[int]]]]:
        """Refuse the connections whose request did not come whole in time; each is read once
        more first (a server busy meanwhile, e.g. replacing its template under load, may not
        have read what came in time): those whole then are returned, to be answered."""
        whole: list[tuple[Any, tuple[dict[str, Any], list[int]]]] = []
        for conn, incoming in list(self.incoming.items()):
            if not incoming.expired():
                continue
            arrived = self.read(conn)
            if arrived is not None:
                whole.append((conn, arrived))
            elif conn in self.incoming:
                del self.incoming[conn]
                incoming.discard()
                refuse(conn, f"no whole request within {self.seconds:g} s")
        return whole

    def close(self, reason: str | None = None) -> None:
        """Drop every connection still arriving (told ``reason``, when given)."""
        for conn, incoming in self.incoming.items():
            incoming.discard()
            if reason is None:
                conn.close()
            else:
                refuse(conn, reason)
        self.incoming.clear()


def refuse(conn: _socket.socket, reason: object) -> None:
    """Answer ``conn`` one line of error (if it takes it within a moment), and close it."""
    text = str(reason).strip()
    try:
        conn.settimeout(ANSWER_SECONDS)
        send(conn, {"error": text.splitlines()[0] if text else "refused"})
    except OSError:
        pass
    finally:
        conn.close()
