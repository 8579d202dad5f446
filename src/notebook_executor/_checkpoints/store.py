"""Where durable checkpoints live: ``runs/.checkpoints/``, bounded, oldest evicted first.

Layout (docs/how-to/incremental.md)::

    runs/.checkpoints/objects/<sha256>.pkl        one pickle each (a variable, or variables
                                                  that share objects), written once, shared
    runs/.checkpoints/notebooks/<key>/<run id>.<cell>.json
                                                  one manifest per checkpoint: what it holds,
                                                  what it could not keep, what the cells read

A manifest is written last (atomically): an object without one is not used, and is removed by
:meth:`CheckpointStore.collect` once older than :data:`ORPHAN_SECONDS`. Disk is bounded per
notebook and in all (:class:`Limits`); the oldest manifests go first, then the objects no
manifest names.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ORPHAN_SECONDS", "CheckpointStore", "Limits", "Usage"]

#: An object no manifest names is kept this long (a run may be writing its manifest).
ORPHAN_SECONDS = 600.0

#: The folder under the runs folder.
FOLDER = ".checkpoints"


@dataclass(frozen=True)
class Limits:
    """Most bytes the checkpoints may take: of one notebook, and in all."""

    per_notebook: int = 512 * 1024**2
    total: int = 2 * 1024**3


@dataclass(frozen=True)
class Usage:
    """What the checkpoints hold: manifests, objects and their bytes."""

    checkpoints: int
    objects: int
    bytes: int
    notebooks: int


class CheckpointStore:
    """The checkpoints of one runs folder."""

    def __init__(self, runs_dir: Path) -> None:
        # Absolute: the kernel, whose working folder is the notebook's, writes the objects.
        self.root = Path(os.path.abspath(runs_dir)) / FOLDER  # noqa: PTH100
        self.objects = self.root / "objects"
        self.notebooks = self.root / "notebooks"

    @staticmethod
    def notebook_key(identity: str) -> str:
        return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:20]

    def prepare(self) -> None:
        """Make the folders (private to the user: state may be sensitive)."""
        for folder in (self.root, self.objects, self.notebooks):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def write(self, identity: str, manifest: Mapping[str, Any]) -> Path:
        """Write one manifest, atomically; its path."""
        folder = self.notebooks / self.notebook_key(identity)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"{manifest['run_id']}.{manifest['cell']}.json"
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
        temporary.replace(path)
        return path

    def manifests(self, identity: str) -> list[dict[str, Any]]:
        """The manifests of one notebook (those that cannot be read are left out)."""
        folder = self.notebooks / self.notebook_key(identity)
        return [manifest for _, manifest in self._read(folder)]

    def _read(self, folder: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
        try:
            paths = sorted(folder.glob("*.json"))
        except OSError:
            return
        for path in paths:
            try:
                manifest = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(manifest, dict):
                yield path, manifest

    def usage(self) -> Usage:
        """What is held now."""
        checkpoints = 0
        folders = list(self._folders())
        for folder in folders:
            checkpoints += sum(1 for _ in folder.glob("*.json"))
        objects = total = 0
        for path in self._objects():
            with contextlib.suppress(OSError):
                total += path.stat().st_size
                objects += 1
        return Usage(checkpoints, objects, total, len(folders))

    def _folders(self) -> Iterator[Path]:
        try:
            yield from (p for p in self.notebooks.iterdir() if p.is_dir())
        except OSError:
            return

    def _objects(self) -> Iterator[Path]:
        try:
            yield from self.objects.glob("*.pkl")
        except OSError:
            return

    def collect(self, limits: Limits, *, keep: int | None = None) -> int:
        """Evict the oldest manifests until each notebook and the whole fit ``limits``
        (``keep`` bytes: a smaller whole, as ``gc --max-bytes`` asks), then remove the objects
        no manifest names; the bytes freed."""
        sizes: dict[str, int] = {}
        for path in self._objects():
            with contextlib.suppress(OSError):
                sizes[path.stem] = path.stat().st_size
        entries: list[tuple[float, Path, str, set[str]]] = []
        for folder in self._folders():
            for path, manifest in self._read(folder):
                names = _objects_of(manifest)
                entries.append((float(manifest.get("saved", 0.0)), path, folder.name, names))
        entries.sort()

        def used(selected: list[tuple[float, Path, str, set[str]]]) -> int:
            names: set[str] = set().union(*(e[3] for e in selected)) if selected else set()
            return sum(sizes.get(name, 0) for name in names)

        total_limit = limits.total if keep is None else min(limits.total, keep)
        kept = list(entries)
        for notebook in {entry[2] for entry in entries}:
            mine = [e for e in kept if e[2] == notebook]
            while mine and used(mine) > limits.per_notebook:
                oldest = mine.pop(0)
                kept.remove(oldest)
        while kept and used(kept) > total_limit:
            kept.pop(0)
        freed = 0
        for entry in entries:
            if entry not in kept:
                with contextlib.suppress(OSError):
                    entry[1].unlink()
        named: set[str] = set().union(*(e[3] for e in kept)) if kept else set()
        now = time.time()
        for path in self._objects():
            if path.stem in named:
                continue
            with contextlib.suppress(OSError):
                recent = now - path.stat().st_mtime < ORPHAN_SECONDS
                if recent and any(path.stem in e[3] for e in entries):
                    recent = False  # named by an evicted manifest: not being written
                if not recent:
                    freed += path.stat().st_size
                    path.unlink()
        with contextlib.suppress(OSError):
            for path in self.objects.glob("*.tmp"):
                if now - path.stat().st_mtime > ORPHAN_SECONDS:
                    path.unlink()
        for folder in list(self._folders()):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty: no checkpoint of that notebook is left
        return freed


def _objects_of(manifest: Mapping[str, Any]) -> set[str]:
    names = {str(ref).partition("#")[0] for ref in (manifest.get("variables") or {}).values()}
    blob = (manifest.get("process") or {}).get("blob")
    if blob:
        names.add(str(blob))
    return names
