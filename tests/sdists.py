"""Pinned sdists downloaded from the package index and unpacked: the material of the ``peers``
and ``wild`` sessions (tests/peers/run_peers.py, tests/wild/run_wild.py), none of it kept in
this repository."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

__all__ = ["sdist"]


def sdist(name: str, version: str, work: Path) -> Path:
    """The unpacked sdist ``name==version`` under ``work``, downloaded when not there yet."""
    unpacked = work / f"{name}-{version}"
    if unpacked.is_dir():
        return unpacked
    archive = work / f"{name}-{version}.tar.gz"
    if not archive.is_file():
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
                str(work),
                f"{name}=={version}",
            ],
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    return unpacked
