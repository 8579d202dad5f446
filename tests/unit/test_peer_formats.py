"""A ``.py`` source reads into the cells jupytext reads from it, whatever its format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jupytext
import pytest

from notebook_executor import NotebookSourceError, read_notebook

LIGHT = """\
# A script in jupytext's light format: comment blocks are markdown,
# code is split at blank lines.

import math

radius = 2.0

# +
area = math.pi * radius**2
print(area)
# -

# The end.
"""

SPHINX_GALLERY = '''\
"""
Plotting a line
===============

A sphinx-gallery example.
"""

import math

###############################################################################
# Compute some values
# -------------------

values = [math.sin(x) for x in range(10)]

###############################################################################
# Show them

print(values)
'''


def _cells(nb: Any) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c.cell_type, c.source, dict(c.metadata)) for c in nb.cells]


@pytest.mark.parametrize("text", [LIGHT, SPHINX_GALLERY], ids=["light", "sphinx"])
def test_a_script_reads_as_jupytext_reads_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "script.py"
    path.write_text(text)
    expected = _cells(jupytext.read(path))
    assert len(expected) > 3
    assert _cells(read_notebook(path)) == expected


def test_a_marimo_script_reads_as_jupytext_reads_it(tmp_path: Path) -> None:
    # jupytext reads marimo apps only with marimo installed; without it, both refuse.
    path = tmp_path / "app.py"
    path.write_text(
        "import marimo\n\napp = marimo.App()\n\n\n@app.cell\ndef _():\n    x = 1\n    return (x,)\n"
        '\n\nif __name__ == "__main__":\n    app.run()\n'
    )
    try:
        expected = _cells(jupytext.read(path))
    except Exception:
        with pytest.raises(NotebookSourceError, match="cannot parse"):
            read_notebook(path)
    else:
        assert _cells(read_notebook(path)) == expected
