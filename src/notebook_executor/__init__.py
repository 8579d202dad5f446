"""notebook_executor: run Jupyter notebooks as reproducible, parameterized tasks.

>>> from notebook_executor import NotebookExecutor
>>> with NotebookExecutor(runs_dir="runs") as ex:  # doctest: +SKIP
...     result = ex.execute("notebooks/hello.py", parameters={"name": "Ada"})

Importing this package is cheap: kernels, nbformat, pandas and friends load when first used.
"""

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
from .engine import Engine, EngineOutcome, RunCancelled, RunJob

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
