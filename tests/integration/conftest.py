"""Fixtures of the integration tier: an executor on real kernels, shared by a module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from notebook_executor import NotebookExecutor


@pytest.fixture(scope="module")
def executor(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NotebookExecutor]:
    """One executor for the module's tests (its warm kernels are reused), with its own runs
    folder; a module's ``EXECUTOR_OPTIONS`` (a dict) are passed to it. Closed after them."""
    options: dict[str, Any] = getattr(request.module, "EXECUTOR_OPTIONS", {})
    with NotebookExecutor(runs_dir=tmp_path_factory.mktemp("runs"), **options) as ex:
        yield ex
