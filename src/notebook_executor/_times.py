"""Times as the package writes and reads them: UTC, ISO-8601 with milliseconds and a ``Z``."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["epoch", "iso", "now_utc", "parse_time"]


def now_utc() -> datetime:
    """The current time in UTC."""
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a ``Z``."""
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime | None:
    """An ISO-8601 date or datetime (a trailing ``Z`` allowed); None when unparsable."""
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def epoch(value: Any) -> float | None:
    """An ISO time string as epoch seconds (naive taken as UTC); None when not one."""
    parsed = parse_time(value) if isinstance(value, str) else None
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()
