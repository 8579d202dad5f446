"""Messages between the command line and the run server: framed JSON on a Unix socket.

A message is a 4-byte big-endian length, then that many bytes of UTF-8 JSON (an object). A
request is refused when longer than :data:`MAX_REQUEST_BYTES` or not a JSON object, with a
one-line error. Every connection's peer is checked with ``SO_PEERCRED``: a process of another
user is refused, whatever the socket file's mode. File descriptors (the client's standard
streams) travel beside a message as ``SCM_RIGHTS``.

Imports only the standard library's small modules: every served command imports this. Sockets
are ``_socket``'s, which ``socket`` wraps: importing ``socket`` (its enums, ``selectors``) took
8-40 ms of a served command's start-up on a loaded 2-CPU machine, ``_socket`` 0.5 ms
(``python -X importtime``). ``socket.socket`` objects (the server's) are ``_socket.socket``
objects too.
"""

from __future__ import annotations

import _socket
import json
import os
import struct

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MAX_REQUEST_BYTES",
    "WireError",
    "check_peer",
    "connect",
    "receive",
    "receive_with_fds",
    "send",
    "send_with_fds",
]

#: Longest request the server reads (the client's environment and arguments, a cell's code).
MAX_REQUEST_BYTES = 4 * 1024 * 1024
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
    data = json.dumps(message, ensure_ascii=False, default=str).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def send_with_fds(sock: _socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    data = json.dumps(message, ensure_ascii=False).encode()
    frame = _HEADER.pack(len(data)) + data
    # What socket.send_fds does.
    rights = b"".join(_FD.pack(fd) for fd in fds)
    ancillary = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)] if fds else []
    sent = sock.sendmsg([frame], ancillary)
    if sent < len(frame):
        sock.sendall(frame[sent:])


def receive(sock: _socket.socket, limit: int = MAX_REQUEST_BYTES) -> dict[str, Any]:
    """The next message; :class:`WireError` when the connection closed or the message is bad."""
    message, _fds = _receive(sock, limit, 0)
    return message


def receive_with_fds(
    sock: _socket.socket, limit: int = MAX_REQUEST_BYTES, max_fds: int = 3
) -> tuple[dict[str, Any], list[int]]:
    """The next message and the descriptors sent with it (the caller closes them)."""
    return _receive(sock, limit, max_fds)


def _receive(sock: _socket.socket, limit: int, max_fds: int) -> tuple[dict[str, Any], list[int]]:
    fds: list[int] = []
    if max_fds:
        # What socket.recv_fds does.
        head, ancillary, _flags, _addr = sock.recvmsg(
            _HEADER.size, _socket.CMSG_LEN(max_fds * _FD.size)
        )
        for level, kind, data in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                usable = len(data) - len(data) % _FD.size
                fds += [fd for (fd,) in _FD.iter_unpack(data[:usable])]
    else:
        head = sock.recv(_HEADER.size)
    try:
        head += _exactly(sock, _HEADER.size - len(head)) if head else b""
        if not head:
            raise WireError("the connection closed")
        (size,) = _HEADER.unpack(head)
        if size > limit:
            raise WireError(f"message of {size:,} bytes refused (limit {limit:,})")
        try:
            message = json.loads(_exactly(sock, size))
        except (UnicodeDecodeError, ValueError):
            raise WireError("malformed message: not JSON") from None
        if not isinstance(message, dict):
            raise WireError("malformed message: not a JSON object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


def _exactly(sock: _socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise WireError("the connection closed mid-message")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
