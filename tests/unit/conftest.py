"""Fixtures of the unit tier: an executor and the command line on a test engine (no kernel)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor
from support import cli_on_engine, commands_in_process
from unit.fake_engine import FakeEngine


@pytest.fixture
def engine() -> FakeEngine:
    """The engine every executor of the test runs on; its ``jobs`` show what reached it."""
    return FakeEngine()


@pytest.fixture
def ex(tmp_path: Path, engine: FakeEngine) -> Iterator[NotebookExecutor]:
    """An executor on ``engine`` writing to ``tmp_path / "runs"``, closed after the test."""
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as executor:
        yield executor


@pytest.fixture
def cli_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: FakeEngine) -> FakeEngine:
    """The command line run in ``tmp_path`` (its working directory), every executor it opens
    on ``engine``."""
    monkeypatch.chdir(tmp_path)
    cli_on_engine(monkeypatch, engine)
    return engine


@pytest.fixture(scope="session", autouse=True)
def _commands_in_process() -> None:
    """The command line called in this process runs in-process (``support.commands_in_process``)."""
    commands_in_process()
