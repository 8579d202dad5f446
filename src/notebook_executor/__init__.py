"""notebook_executor: run Jupyter notebooks as reproducible, parameterized tasks.

>>> from notebook_executor import NotebookExecutor
>>> with NotebookExecutor(runs_dir="runs") as ex:  # doctest: +SKIP
...     result = ex.execute("notebooks/hello.py", parameters={"name": "Ada"})

Importing this package is cheap: kernels, nbformat, pandas and friends load when first used.
"""

from ._errors import (
    CatalogError,
    NotebookExecutorError,
    NotebookSourceError,
    OutputWriteError,
    ParameterError,
    RunNotFoundError,
    RunsDirError,
)
from ._executor import NotebookExecutor
from ._session.session import Session
from ._session.shapes import EvaluationResult, StepResult
from ._sources.formats import read_notebook, write_notebook
from .engine import Engine, EngineOutcome, RunJob

__version__ = "0.1.0"

__all__ = [
    "CatalogError",
    "Engine",
    "EngineOutcome",
    "EvaluationResult",
    "NotebookExecutor",
    "NotebookExecutorError",
    "NotebookSourceError",
    "OutputWriteError",
    "ParameterError",
    "RunJob",
    "RunNotFoundError",
    "RunsDirError",
    "Session",
    "StepResult",
    "__version__",
    "read_notebook",
    "write_notebook",
]
