"""Which template a pool's kernels fork from: the one with the data modules only for
notebooks that import beyond the standard library (:func:`template_hints`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from notebook_executor._kernels.kernel_engine import template_hints
from notebook_executor._notebook import new_code_cell, new_markdown_cell, new_notebook
from notebook_executor.engine import KernelChoice, RunJob


def _job(*sources: str, markdown: str = "") -> RunJob:
    cells = [new_markdown_cell(markdown)] if markdown else []
    cells += [new_code_cell(source) for source in sources]
    choice = KernelChoice("python3", "python", native=True, interpreter=sys.executable)
    return RunJob(nb=new_notebook(cells=cells), kernel=choice, cwd=Path(), env={})


@pytest.mark.parametrize(
    "source",
    [
        "import pandas as pd",
        "import json, numpy",
        "import os.path, scrapbook.api as sb",
        "from sklearn.linear_model import LinearRegression",
        "if True:\n    import requests",
        "x = 1\nimport matplotlib.pyplot as plt  # a figure",
        "import json; import yaml",
    ],
)
def test_a_module_outside_the_standard_library_wants_the_data_modules(source: str) -> None:
    assert template_hints(_job("x = 1", source))["data"]


@pytest.mark.parametrize(
    "source",
    [
        "import math\nimport json",
        "from collections import Counter",
        "import os.path as p, sys",
        "from . import sibling",
        "print('import pandas')",
        "# import pandas\nx = 1",
        "%matplotlib inline\nimport re",
        "",
    ],
)
def test_the_standard_library_alone_does_not(source: str) -> None:
    assert not template_hints(_job(source, markdown="```python\nimport pandas\n```"))["data"]


def test_a_notebook_without_code_does_not() -> None:
    assert template_hints(_job(markdown="import pandas")) == {"data": False, "data_modules": False}


@pytest.mark.parametrize(
    ("source", "wanted"),
    [
        ("import scrapbook as sb", True),
        ("import os, pandas as pd", True),
        ("from numpy.random import default_rng", True),
        ("import pyarrow.parquet as pq", True),
        ("import requests", False),
        ("import matplotlib.pyplot as plt", False),
        ("import json", False),
        ("print('import pandas')", False),
    ],
)
def test_the_first_kernel_forks_from_the_full_template_when_it_saves_imports(
    source: str, wanted: bool
) -> None:
    """The full template is spawned for a pool's first kernel only when the notebook imports
    one of the packages it preloads (a third-party package alone does not)."""
    assert template_hints(_job("x = 1", source))["data_modules"] is wanted
