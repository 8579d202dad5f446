"""Pinned sdists downloaded from the package index and unpacked: the material of the ``peers``
and ``wild`` sessions (tests/peers/run_peers.py, tests/wild/run_wild.py), none of it kept in
this repository.

The archives are kept in the checkout's ``.nox/sdists`` (ignored by git): the session that
needs one first downloads it, and the next finds it there (``peers`` and ``wild`` both read
nbclient's, papermill's and jupytext's). :func:`prefetch` downloads several at once.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["prefetch", "sdist"]

#: The downloaded archives, shared by the sessions of this checkout.
CACHE = Path(__file__).resolve().parents[1] / ".nox" / "sdists"


def prefetch(pins: Iterable[tuple[str, str]]) -> None:
    """Download the archives of ``(name, version)`` pins not downloaded yet, at once: the
    wait is the longest download's, not their sum."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda pin: _archive(*pin), pins))


def sdist(name: str, version: str, work: Path) -> Path:
    """The unpacked sdist ``name==version`` under ``work``, downloaded when not there yet."""
    unpacked = work / f"{name}-{version}"
    if unpacked.is_dir():
        return unpacked
    with tarfile.open(_archive(name, version)) as tar:
        tar.extractall(work, filter="data")
    return unpacked


def _archive(name: str, version: str) -> Path:
    """The archive of ``name==version`` in :data:`CACHE`, downloaded when not there yet."""
    archive = CACHE / f"{name}-{version}.tar.gz"
    if archive.is_file():
        return archive
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE, prefix=".download-") as partial:
        # Without build isolation: the session has the build backends, and preparing the
        # metadata in a fresh build environment each time costs minutes.
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--no-build-isolation",
                "--dest",
                partial,
                f"{name}=={version}",
            ],
            check=True,
        )
        # Whole or not at all: a download cut short leaves nothing a later session would read.
        Path(partial, archive.name).replace(archive)
    return archive
