"""A pytest plugin for papermill's own tests: notebook_executor's engine as papermill's
default engine, and in place of ``NBClientEngine`` (tests that call that class directly then
run this package's engine). Loaded with ``-p papermill_default_engine`` by ``run_peers.py``.

The tests in :data:`EXCEPTIONS` mock papermill's own nbclient client class
(``PapermillNotebookClient``) and assert how papermill builds it, which no other engine can
pass: they are skipped, by their exact ids (``--deselect`` would match prefixes too).
"""

from __future__ import annotations

from typing import Any

import pytest

EXCEPTIONS = (
    "papermill/tests/test_execute.py::TestNotebookHelpers::test_start_timeout",
    "papermill/tests/test_execute.py::TestNotebookHelpers::test_default_start_timeout",
    "papermill/tests/test_engines.py::TestNBClientEngine::test_nb_convert_engine",
)

REASON = "mocks papermill's own client class (PapermillNotebookClient)"


def pytest_configure(config: Any) -> None:
    from papermill import engines

    from notebook_executor._faces.papermill_engine import NotebookExecutorEngine

    engines.papermill_engines.register(None, NotebookExecutorEngine)
    engines.papermill_engines.register("nbclient", NotebookExecutorEngine)
    engines.NBClientEngine = NotebookExecutorEngine


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        if item.nodeid in EXCEPTIONS:
            item.add_marker(pytest.mark.skip(reason=REASON))
