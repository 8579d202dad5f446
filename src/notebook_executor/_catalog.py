"""Placeholder: replaced by the SQLite catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class Catalog:
    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir

    def begin(self, record: Any) -> None:
        pass

    def finish(self, record: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def runs(self, **filters: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def scraps(self, **filters: Any) -> Any:
        raise NotImplementedError

    def reindex(self) -> int:
        raise NotImplementedError
