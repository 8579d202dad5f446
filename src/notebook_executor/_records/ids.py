"""Run ids: unique, sortable, filesystem-safe, and the day folder each belongs in."""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from pathlib import Path

from .._errors import RunNotFoundError

__all__ = ["DAY_FOLDER", "RUN_ID", "is_run_id", "new_run_id", "run_day"]

#: A run id: its start in UTC, the notebook's name, a random part.
RUN_ID = re.compile(r"^(\d{4})(\d{2})(\d{2})T\d{6}Z-[A-Za-z0-9_.-]{1,80}$")
#: The name of a day folder of the runs folder.
DAY_FOLDER = re.compile(r"\d{4}-\d{2}-\d{2}")


def new_run_id(source: Path, started: datetime) -> str:
    """A unique, sortable, filesystem-safe id: ``20261122T172645Z-hello-3f2a1b9c``."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", source.stem).strip("-")[:40] or "notebook"
    return f"{started:%Y%m%dT%H%M%S}Z-{slug}-{secrets.token_hex(4)}"


def is_run_id(text: str) -> bool:
    """Whether ``text`` has the shape of a run id."""
    return RUN_ID.fullmatch(text) is not None


def run_day(run_id: str) -> str:
    """The day folder of ``run_id`` (``2026-11-22``).

    Raises
    ------
    RunNotFoundError
        ``run_id`` is not a run id (no path is ever made of it).
    """
    match = RUN_ID.fullmatch(run_id)
    if match is None:
        raise RunNotFoundError(run_id, "not a run id")
    return f"{match.group(1)}-{match.group(2)}-{match.group(3)}"
