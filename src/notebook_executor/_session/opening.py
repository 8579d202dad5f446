"""Opening a session: the checks of ``execute``, then a kernel, then the session's record."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import InvalidArgumentError
from .._records.store import RunStore
from .._run.checks import check_seconds

if TYPE_CHECKING:
    from .._run.plan import Plan
    from ..engine import Engine
    from .session import Session

__all__ = ["check_memory", "close_sessions", "open_session"]


def check_memory(value: object) -> int | None:
    """``checkpoint_memory`` checked: None (no limit) or a positive number of bytes."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgumentError(
            f"checkpoint_memory must be a positive number of bytes, got {value!r}",
            argument="checkpoint_memory",
        )
    return value


def open_session(
    plan: Callable[[], Plan],
    engine: Engine,
    *,
    runs_dir: Path,
    on_record: Callable[[str, Mapping[str, Any]], None],
    idle_timeout: float | None,
    checkpoint_memory: int | None,
    on_close: Callable[[Session], None],
) -> Session:
    """A session on the notebook ``plan()`` reads (it is called again at every step), on a
    kernel ``engine`` opens (for a job that asks for checkpoints).

    Every check (``plan()``'s, the limits) is made before any kernel starts.
    """
    from .session import Session

    idle = check_seconds("idle_timeout", idle_timeout)
    memory = check_memory(checkpoint_memory)
    first = plan()
    RunStore(runs_dir).prepare()
    return Session(
        first,
        plan,
        engine,
        checkpoint_memory=memory,
        runs_dir=runs_dir,
        on_record=on_record,
        idle_timeout=idle,
        on_close=on_close,
    )


def close_sessions(sessions: set[Session]) -> None:
    """Close every session of an executor that closes (each says so in its log)."""
    for session in list(sessions):
        session._close("shutdown")
