"""notebook_executor: run Jupyter notebooks as reproducible, parameterized tasks.

>>> from notebook_executor import NotebookExecutor
>>> with NotebookExecutor(runs_dir="runs") as ex:  # doctest: +SKIP
...     result = ex.execute("notebooks/hello.py", parameters={"name": "Ada"})

Importing this package is cheap: kernels, nbformat, pandas and friends load when first used,
and the names below load their modules when first read (the command line's client, which
hands commands to the run server, imports next to nothing).
"""

from __future__ import annotations

# ``typing`` itself is not imported at run time: the command line's client starts faster.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from ._dispatch.jobs import Job
    from ._errors import (
        CatalogError,
        ClusterError,
        DependencyError,
        EditConflictError,
        ExecutorClosedError,
        InvalidArgumentError,
        KernelStartError,
        NotebookExecutorError,
        NotebookSourceError,
        OutputPathError,
        OutputWriteError,
        ParameterError,
        RecordWriteError,
        ReportError,
        RunNotFoundError,
        RunsDirError,
        SearchQueryError,
    )
    from ._executor import NotebookExecutor
    from ._run.options import RunOptions
    from ._session.session import Session
    from ._sources.formats import read_notebook, write_notebook
    from ._types import (
        USE_DEFAULT,
        CellChange,
        CellEdit,
        CellText,
        Digest,
        DigestFailure,
        DigestNote,
        DigestParameter,
        DigestScraps,
        DigestStatus,
        DigestTrend,
        DigestValue,
        ErrorKind,
        EvaluationFailure,
        EvaluationResult,
        FailedCell,
        JobState,
        JobStatus,
        NotebookDiff,
        OutputCut,
        ParameterInfo,
        RunDiff,
        RunResult,
        SearchHit,
        StepResult,
        ValidateAnswer,
        ValidateProblem,
    )
    from .engine import (
        Engine,
        EngineOutcome,
        RunCancelled,
        RunJob,
    )

#: The public names loaded when first read, and the module of each.
_LAZY = {
    "RecordWriteError": "._errors",
    "CatalogError": "._errors",
    "CellChange": "._types",
    "CellEdit": "._types",
    "CellText": "._types",
    "ClusterError": "._errors",
    "DependencyError": "._errors",
    "Digest": "._types",
    "DigestFailure": "._types",
    "DigestNote": "._types",
    "DigestParameter": "._types",
    "DigestScraps": "._types",
    "DigestStatus": "._types",
    "DigestTrend": "._types",
    "DigestValue": "._types",
    "EditConflictError": "._errors",
    "Engine": ".engine",
    "EngineOutcome": ".engine",
    "ErrorKind": "._types",
    "EvaluationFailure": "._types",
    "EvaluationResult": "._types",
    "ExecutorClosedError": "._errors",
    "FailedCell": "._types",
    "InvalidArgumentError": "._errors",
    "Job": "._dispatch.jobs",
    "JobState": "._types",
    "JobStatus": "._types",
    "KernelStartError": "._errors",
    "NotebookDiff": "._types",
    "NotebookExecutor": "._executor",
    "NotebookExecutorError": "._errors",
    "NotebookSourceError": "._errors",
    "OutputCut": "._types",
    "OutputPathError": "._errors",
    "OutputWriteError": "._errors",
    "ParameterError": "._errors",
    "ParameterInfo": "._types",
    "ReportError": "._errors",
    "RunCancelled": ".engine",
    "RunDiff": "._types",
    "RunJob": ".engine",
    "RunNotFoundError": "._errors",
    "RunOptions": "._run.options",
    "RunResult": "._types",
    "RunsDirError": "._errors",
    "SearchHit": "._types",
    "SearchQueryError": "._errors",
    "Session": "._session.session",
    "StepResult": "._types",
    "USE_DEFAULT": "._types",
    "ValidateAnswer": "._types",
    "ValidateProblem": "._types",
    "read_notebook": "._sources.formats",
    "write_notebook": "._sources.formats",
}

__version__ = "0.1.0"

__all__ = [
    "USE_DEFAULT",
    "CatalogError",
    "CellChange",
    "CellEdit",
    "CellText",
    "ClusterError",
    "DependencyError",
    "Digest",
    "DigestFailure",
    "DigestNote",
    "DigestParameter",
    "DigestScraps",
    "DigestStatus",
    "DigestTrend",
    "DigestValue",
    "EditConflictError",
    "Engine",
    "EngineOutcome",
    "ErrorKind",
    "EvaluationFailure",
    "EvaluationResult",
    "ExecutorClosedError",
    "FailedCell",
    "InvalidArgumentError",
    "Job",
    "JobState",
    "JobStatus",
    "KernelStartError",
    "NotebookDiff",
    "NotebookExecutor",
    "NotebookExecutorError",
    "NotebookSourceError",
    "OutputCut",
    "OutputPathError",
    "OutputWriteError",
    "ParameterError",
    "ParameterInfo",
    "RecordWriteError",
    "ReportError",
    "RunCancelled",
    "RunDiff",
    "RunJob",
    "RunNotFoundError",
    "RunOptions",
    "RunResult",
    "RunsDirError",
    "SearchHit",
    "SearchQueryError",
    "Session",
    "StepResult",
    "ValidateAnswer",
    "ValidateProblem",
    "__version__",
    "read_notebook",
    "write_notebook",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
