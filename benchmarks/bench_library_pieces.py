"""Each hand-written piece that stands in for a library, timed against that library.

The project keeps its own code in place of a library only where a measured figure says it pays
(the figure is written in the piece's docstring). This script gives those figures, in one
process, on two notebooks built here: a small one (8 cells, a few short outputs) and a large
one (about 1 MB: 60 cells with text, HTML tables and PNG images, as a plotting notebook gives).

- ``nbjson.dumps_indented`` (the final run file) against ``json.dumps(indent=1, ...)`` and
  ``nbformat.writes``;
- ``copying.copy_notebook`` (twice per run) against ``copy.deepcopy``;
- ``percent.read_plain_percent`` against ``jupytext.reads`` (and jupytext's import, timed in a
  fresh interpreter);
- ``scraps.find_scraps`` against ``scrapbook.read_notebook(...).scraps``;
- ``literals.to_literal`` against papermill's ``PythonTranslator``.

Usage::

    python benchmarks/bench_library_pieces.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from notebook_executor._notebook import (
    NotebookNode,
    new_code_cell,
    new_notebook,
    new_output,
)
from notebook_executor._records.scraps import find_scraps
from notebook_executor._sources.literals import to_literal
from notebook_executor._sources.percent import read_plain_percent


def best_ms(function: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` timings of ``function``, in milliseconds (one warm-up call)."""
    function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


PERCENT = (
    "\n\n".join(
        ["# %% tags=[\"parameters\"]\nname = 'world'\ncount = 3"]
        + [f"# %% [markdown]\n# Step {i}\n#\n# Some words." for i in range(3)]
        + [f"# %%\nvalue_{i} = count * {i}\nprint(name, value_{i})" for i in range(6)]
    )
    + "\n"
)


def bench_percent(repeat: int) -> None:
    import jupytext

    ours = read_plain_percent(PERCENT)
    assert ours is not None
    theirs = jupytext.reads(PERCENT, fmt="py:percent")
    assert [(c.cell_type, c.source, c.metadata) for c in ours.cells] == [
        (c.cell_type, c.source, c.metadata) for c in theirs.cells
    ]
    t_ours = best_ms(lambda: read_plain_percent(PERCENT), repeat)
    t_jupytext = best_ms(lambda: jupytext.reads(PERCENT, fmt="py:percent"), repeat)
    imports = []
    for module in ("jupytext", "json"):
        code = (
            f"import time; s = time.perf_counter(); import {module}; print(time.perf_counter() - s)"
        )
        runs = [
            float(
                subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, check=True
                ).stdout
            )
            for _ in range(3)
        ]
        imports.append(min(runs) * 1000)
    print(
        f"percent  read_plain_percent {t_ours:6.3f} ms  jupytext.reads {t_jupytext:6.2f} ms  "
        f"import jupytext (fresh interpreter) {imports[0]:6.0f} ms"
    )


def scrap_notebook(count: int) -> NotebookNode:
    import scrapbook

    del scrapbook  # the payloads below are the ones ``scrapbook.glue`` displays
    cells = []
    for index in range(count):
        cell = new_code_cell(f"sb.glue('value_{index}', {index})")
        cell.outputs = [
            new_output(
                "display_data",
                data={
                    "application/scrapbook.scrap.json+json": {
                        "name": f"value_{index}",
                        "data": {"n": index, "items": list(range(10))},
                        "encoder": "json",
                        "version": 1,
                    }
                },
                metadata={"scrapbook": {"name": f"value_{index}", "data": True, "display": False}},
            )
        ]
        cells.append(cell)
    return new_notebook(cells)


def bench_scraps(repeat: int) -> None:
    import nbformat
    import scrapbook

    nb = scrap_notebook(20)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scraps.ipynb"
        path.write_text(nbformat.writes(nbformat.from_dict(dict(nb))), encoding="utf-8")
        theirs = scrapbook.read_notebook(str(path)).scraps
        assert sorted(theirs) == sorted(find_scraps(nb.cells))
        loaded = nbformat.read(str(path), as_version=4)
        t_ours = best_ms(lambda: find_scraps(loaded.cells), repeat)
        t_theirs = best_ms(lambda: scrapbook.models.Notebook(loaded).scraps, repeat)
    print(
        f"scraps 20 glued values  find_scraps {t_ours:6.3f} ms  "
        f"scrapbook Notebook(nb).scraps {t_theirs:6.2f} ms"
    )


def bench_literals(repeat: int) -> None:
    from papermill.translators import PythonTranslator

    values: dict[str, Any] = {
        "name": "Ada",
        "alpha": 0.5,
        "count": 3,
        "flags": [True, False],
        "grid": {"a": [1, 2, 3], "b": {"c": None}},
    }
    t_ours = best_ms(lambda: [to_literal(v) for v in values.values()], repeat)
    t_theirs = best_ms(lambda: [PythonTranslator.translate(v) for v in values.values()], repeat)
    print(
        f"literals 5 parameters  to_literal {t_ours * 1000:6.1f} µs  "
        f"PythonTranslator.translate {t_theirs * 1000:6.1f} µs"
    )
    for value in (float("nan"), (1,), object(), b"x"):
        try:
            ours = to_literal(value)
        except TypeError as error:
            ours = f"TypeError({error})"
        theirs = PythonTranslator.translate(value)
        print(f"         {value!r:40.40}  ours {ours!r:50.50}  papermill {theirs!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    bench_percent(args.repeat)
    bench_scraps(args.repeat)
    bench_literals(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
