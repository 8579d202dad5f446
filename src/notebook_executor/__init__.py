"""notebook_executor: run Jupyter notebooks as reproducible, parameterized tasks.

>>> from notebook_executor import NotebookExecutor
>>> with NotebookExecutor(runs_dir="runs") as ex:  # doctest: +SKIP
...     result = ex.execute("notebooks/hello.py", parameters={"name": "Ada"})

Importing this package is cheap: kernels, nbformat, pandas and friends load when first used.
"""

from ._catalog.digest import (
    Digest,
    DigestError,
    DigestNote,
    DigestParameter,
    DigestScraps,
    DigestStatus,
    DigestTrend,
    DigestValue,
)
from ._errors import (
    CatalogError,
    ClusterError,
    EditConflictError,
    ExecutorClosedError,
    InvalidArgumentError,
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
from ._run.edits import CellEdit
from ._session.session import Session
from ._session.shapes import EvaluationResult, StepResult
from ._sources.formats import read_notebook, write_notebook
from ._types import (
    CellChange,
    FailedCell,
    NotebookDiff,
    OutputCut,
    ParameterInfo,
    RunDiff,
    RunResult,
    SearchHit,
    ValidateAnswer,
    ValidateProblem,
)
from .engine import Engine, EngineOutcome, RunCancelled, RunJob

__version__ = "0.1.0"

__all__ = [
    "CatalogError",
    "CellChange",
    "CellEdit",
    "ClusterError",
    "Digest",
    "DigestError",
    "DigestNote",
    "DigestParameter",
    "DigestScraps",
    "DigestStatus",
    "DigestTrend",
    "DigestValue",
    "EditConflictError",
    "Engine",
    "EngineOutcome",
    "EvaluationResult",
    "ExecutorClosedError",
    "FailedCell",
    "InvalidArgumentError",
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
