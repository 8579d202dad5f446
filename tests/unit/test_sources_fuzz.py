"""Fuzzing the source readers: any file gives a notebook or a NotebookSourceError, nothing else.

Each format gets random bytes, random JSON, random text built from the format's own markers,
and truncated or corrupted copies of real sources. The number of examples each test ran is
counted, so a run reports how much was tried (see ``EXAMPLES``).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notebook_executor import NotebookSourceError, read_notebook
from support import report

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"
SEEDS = {
    ".ipynb": [(DATA / "unit_basic.ipynb").read_bytes()],
    ".py": [(DATA / "unit_basic.py").read_bytes()],
    ".md": [
        (DATA / name).read_bytes() for name in ("unit_basic.md", "unit_myst.md", "unit_logbook.md")
    ],
}
EXTENSIONS = sorted(SEEDS)
pytestmark = pytest.mark.filterwarnings("ignore::Warning:nbformat.validator")
FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

#: Examples tried per (test, extension); printed at the end of the session with -s or -rA.
EXAMPLES: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def enough_examples(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each fuzz test must have tried its full count of examples (whatever else runs)."""
    before = sum(EXAMPLES.values())
    yield
    if getattr(request.function, "is_hypothesis_test", False):
        tried = sum(EXAMPLES.values()) - before
        assert tried >= FUZZ.max_examples, f"only {tried} examples tried"


@pytest.fixture(scope="module", autouse=True)
def report_examples(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if EXAMPLES:
        report(
            request.config,
            f"\nfuzz examples: {dict(sorted(EXAMPLES.items()))} total {sum(EXAMPLES.values())}",
        )


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="nbx-fuzz-") as folder:
        yield Path(folder)


def _check(scratch: Path, extension: str, data: bytes, label: str) -> None:
    EXAMPLES[f"{label}{extension}"] += 1
    path = scratch / f"fuzz{extension}"
    path.write_bytes(data)
    try:
        nb = read_notebook(path)
    except NotebookSourceError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: ")
        assert "\n" not in message, message
        assert len(message) < 600, message
        assert "Traceback" not in message
        return
    assert nb.nbformat == 4
    assert all(cell.cell_type in ("code", "markdown", "raw") for cell in nb.cells)
    assert all(isinstance(cell.source, str) for cell in nb.cells)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "cells",
                    "nbformat",
                    "nbformat_minor",
                    "metadata",
                    "cell_type",
                    "source",
                    "outputs",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)

_cell_type = st.sampled_from(["code", "markdown", "raw", "heading", 3, None])
_cells = st.lists(
    st.fixed_dictionaries(
        {"cell_type": _cell_type, "source": st.text(max_size=20) | st.lists(st.text(max_size=5))},
        optional={
            "metadata": st.dictionaries(st.text(max_size=5), _json, max_size=2) | _json,
            "outputs": st.lists(_json, max_size=2) | _json,
            "execution_count": st.none() | st.integers() | st.text(max_size=3),
            "id": st.text(max_size=10) | st.integers(),
        },
    ),
    max_size=4,
)
_notebooks = st.fixed_dictionaries(
    {
        "nbformat": st.sampled_from([4, 4, 4, 3, "4", None]),
        "nbformat_minor": st.sampled_from([0, 4, 5, -1, "x"]),
        "metadata": st.dictionaries(st.text(max_size=5), _json, max_size=2) | _json,
        "cells": _cells | _json,
    }
)

_markers = {
    ".py": [
        "# %%\n",
        '# %% tags=["parameters"]\n',
        "# %% [markdown]\n",
        "# %% [raw]\n",
        "# ---\n",
        "# jupyter:\n#   kernelspec:\n",
        "x = 1\n",
        "#   name: [\n",
        "# %% {bad json\n",
        "%matplotlib\n",
        '"""\n',
    ],
    ".md": [
        "---\n",
        "parameters:\n",
        "  a: 1  # help\n",
        "  b: ...\n",
        "  c: [1, {\n",
        "  2024-01-01: x\n",
        "title: t\n",
        "```python\n",
        "```{code-cell} ipython3\n",
        ":tags: [parameters]\n",
        "```\n",
        "<!-- #raw -->\n",
        "<!-- #endraw -->\n",
        "<!-- #region -->\n",
        "text\n",
        "jupyter:\n  jupytext:\n",
    ],
}


@FUZZ
@given(extension=st.sampled_from(EXTENSIONS), data=st.binary(max_size=400))
def test_random_bytes(scratch: Path, extension: str, data: bytes) -> None:
    _check(scratch, extension, data, "bytes")


@FUZZ
@given(extension=st.sampled_from(EXTENSIONS), document=_json | _notebooks)
def test_random_json(scratch: Path, extension: str, document: Any) -> None:
    _check(scratch, extension, json.dumps(document).encode(), "json")


@FUZZ
@given(document=_notebooks)
def test_random_notebook_shaped_json(scratch: Path, document: Any) -> None:
    _check(scratch, ".ipynb", json.dumps(document).encode(), "notebook-json")


@FUZZ
@given(
    extension=st.sampled_from([".py", ".md"]),
    pieces=st.data(),
)
def test_random_text_from_format_markers(scratch: Path, extension: str, pieces: Any) -> None:
    lines = pieces.draw(
        st.lists(st.sampled_from(_markers[extension]) | st.text(max_size=15), max_size=25)
    )
    _check(scratch, extension, "".join(lines).encode(), "markers")


@FUZZ
@given(
    extension=st.sampled_from(EXTENSIONS),
    which=st.integers(min_value=0, max_value=2),
    cut=st.floats(min_value=0, max_value=1),
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), max_size=3),
)
def test_truncated_and_corrupted_real_sources(
    scratch: Path, extension: str, which: int, cut: float, flips: list[tuple[float, int]]
) -> None:
    seeds = SEEDS[extension]
    data = bytearray(seeds[which % len(seeds)])
    for where, byte in flips:
        data[int(where * (len(data) - 1))] = byte
    _check(scratch, extension, bytes(data[: int(cut * len(data))]), "truncated")
