"""The fast percent reader gives jupytext's notebook, or declines and leaves it to jupytext."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jupytext
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notebook_executor._sources.percent import read_plain_percent

#: Pieces of percent scripts: plain ones and every kind jupytext reads specially.
MARKERS = [
    "# %%",
    '# %% tags=["parameters"]',
    '# %% tags=["a", "b"]',
    "# %% tags=[]",
    "# %% [markdown]",
    "# %% Title",
    "# %%  ",
    "#%%",
    '# %% active="py"',
]
LINES = [
    "",
    "   ",
    "x = 1",
    "print(x)",
    "    y = x + 1",
    "def f():",
    "    return 2",
    "# a comment",
    "x = 1  # the default",
    "# ls of the files",
    "#",
    "catalog = 3",
    "cat = 3",
    "ls",
    "ls -l",
    "# cd data",
    "# %time",
    "%time x = 1",
    "%%bash",
    "!ls",
    "# !pip install x",
    "x = !ls",
    "# x = %time 1",
    "obj?",
    "# +",
    "# -",
    "'''",
    "# ---",
    "s = 'a ? b'",
    "\tz = 3",
    "class A:",
    "@decorator",
    'doc = """text',
    'x = "a" \\',
]


def _without_ids(nb: Any) -> Any:
    for cell in nb.cells:
        cell.pop("id", None)
    return nb


def _script(parts: list[list[str]], trailing_newline: bool) -> str:
    text = "\n".join(line for part in parts for line in part)
    return text + "\n" if trailing_newline else text


@settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    parts=st.lists(
        st.tuples(st.sampled_from(MARKERS), st.lists(st.sampled_from(LINES), max_size=5)),
        min_size=1,
        max_size=4,
    ),
    prefix=st.lists(st.sampled_from(LINES), max_size=2),
    trailing_newline=st.booleans(),
)
def test_the_fast_reader_agrees_with_jupytext_or_declines(
    parts: list[tuple[str, list[str]]], prefix: list[str], trailing_newline: bool
) -> None:
    text = _script([prefix] + [[marker, *body] for marker, body in parts], trailing_newline)
    fast = read_plain_percent(text)
    if fast is not None:
        assert _without_ids(fast) == _without_ids(jupytext.reads(text, fmt="py:percent"))


PLAIN = [
    '# %% tags=["parameters"]\nx = 1\n\n# %%\ny = x + 1\nprint(y)\n',
    '# %% tags=["parameters"]\nx = 1\n\n# %%\nimport scrapbook as sb\n\nsb.glue("y", x + 1)\n',
    "# %%\n# load the data\ndata = [1, 2]\n\n# %%\nfor item in data:\n    print(item)",
    "# %% [markdown]\n# # Title\n\n# %%\nx = 1\n",  # a markdown cell
    '# %% [markdown]\n# Some *text*,\n#\n#  indented.\n\n# %% tags=["parameters"]\nx = 1\n',
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_scripts_are_read_without_jupytext_as_jupytext_reads_them(text: str) -> None:
    fast = read_plain_percent(text)
    assert fast is not None
    expected = jupytext.reads(text, fmt="py:percent")
    assert len(fast.cells) == len(expected.cells) >= 2
    assert _without_ids(fast) == _without_ids(expected)


@pytest.mark.parametrize(
    "text",
    [
        "# %% [markdown]\n#text\n\n# %%\nx = 1\n",  # a comment without its space
        "# %% [markdown]\n# a\nb = 1\n\n# %%\nx = 1\n",  # an uncommented line in markdown
        "# %% [markdown]\n# a\n\n# b\n\n# %%\nx = 1\n",  # a blank line in markdown
        "# ---\n# jupyter:\n#   kernelspec: {}\n# ---\n\n# %%\nx = 1\n",  # a header
        "# %%\nx = 1\n\n\n# %%\ny = 2\n",  # two blank lines between cells
        "# %%\n%time x = 1\n",  # a magic
        "# %%\n# !pip install x\n",  # a commented command
        "x = 0\n# %%\nx = 1\n",  # code before the first marker
        "# %%\r\nx = 1\r\n",  # Windows line ends
    ],
)
def test_anything_else_is_left_to_jupytext(text: str) -> None:
    assert read_plain_percent(text) is None


def test_the_example_notebooks_percent_script_is_read_without_jupytext() -> None:
    text = (Path(__file__).resolve().parents[2] / "notebooks" / "hello.py").read_text()
    fast = read_plain_percent(text)
    assert fast is not None
    assert [cell.cell_type for cell in fast.cells] == ["markdown", "code", "code", "code"]
    assert _without_ids(fast) == _without_ids(jupytext.reads(text, fmt="py:percent"))
