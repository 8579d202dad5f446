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
import base64
import copy
import json
import os
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
    new_markdown_cell,
    new_notebook,
    new_output,
)
from notebook_executor._run import records as _records
from notebook_executor._run.copying import copy_notebook
from notebook_executor._run.literals import to_literal
from notebook_executor._run.nbjson import dumps_indented
from notebook_executor._run.percent import read_plain_percent
from notebook_executor._run.scraps import find_scraps


def best_ms(function: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` timings of ``function``, in milliseconds (one warm-up call)."""
    function()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def notebook(cells: int, image_bytes: int, table_rows: int) -> NotebookNode:
    """An executed notebook: markdown, code with stdout, an HTML table and a PNG per cell."""
    png = base64.b64encode(os.urandom(image_bytes)).decode("ascii")
    table = "<table>" + "".join(
        f"<tr><td>{i}</td><td>{i * 0.5:.3f}</td><td>name {i}</td></tr>" for i in range(table_rows)
    )
    made = []
    for index in range(cells):
        if index % 4 == 0:
            made.append(new_markdown_cell(f"## Part {index}\n\nSome text about the step, é ü."))
            continue
        cell = new_code_cell(f"x{index} = compute({index})\nprint(x{index})\nplot(x{index})")
        cell.execution_count = index
        cell.outputs = [
            new_output("stream", name="stdout", text="".join(f"line {k}\n" for k in range(20))),
            new_output(
                "execute_result",
                data={"text/html": table, "text/plain": "<DataFrame>"},
                execution_count=index,
            ),
        ]
        if image_bytes:
            cell.outputs.append(
                new_output(
                    "display_data",
                    data={"image/png": png, "text/plain": "<Figure size 640x480>"},
                    metadata={"image/png": {"width": 640}},
                )
            )
        made.append(cell)
    nb = new_notebook(made, metadata={"kernelspec": {"name": "python3", "language": "python"}})
    return nb


def bench_json(label: str, nb: NotebookNode, repeat: int) -> None:
    import nbformat

    document = _records._split_lines(copy_notebook(nb))
    ours = dumps_indented(document)
    library = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False)
    assert ours == library
    as_nbformat = nbformat.from_dict(copy.deepcopy(dict(nb)))
    size = len(ours.encode("utf-8"))
    t_ours = best_ms(lambda: dumps_indented(document), repeat)
    t_json = best_ms(
        lambda: json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False), repeat
    )
    t_compact = best_ms(lambda: json.dumps(document, sort_keys=True, ensure_ascii=False), repeat)
    t_nbformat = best_ms(lambda: nbformat.writes(as_nbformat), repeat)
    print(
        f"json  {label:6} {size / 1e6:6.2f} MB  dumps_indented {t_ours:7.2f} ms  "
        f"json.dumps(indent=1) {t_json:7.2f} ms  nbformat.writes {t_nbformat:7.2f} ms  "
        f"(json.dumps without indent {t_compact:6.2f} ms)"
    )


def bench_copy(label: str, nb: NotebookNode, repeat: int) -> None:
    import nbformat

    assert copy_notebook(nb) == copy.deepcopy(nb)
    theirs = nbformat.from_dict(dict(nb))
    t_ours = best_ms(lambda: copy_notebook(nb), repeat)
    t_deep = best_ms(lambda: copy.deepcopy(nb), repeat)
    t_nbformat = best_ms(lambda: copy.deepcopy(theirs), repeat)
    print(
        f"copy  {label:6} copy_notebook {t_ours:7.2f} ms  copy.deepcopy (our node) {t_deep:7.2f} ms"
        f"  copy.deepcopy (nbformat's node) {t_nbformat:7.2f} ms"
    )


PERCENT = "\n\n".join(
    ["# %% tags=[\"parameters\"]\nname = 'world'\ncount = 3"]
    + [f"# %% [markdown]\n# Step {i}\n#\n# Some words." for i in range(3)]
    + [f"# %%\nvalue_{i} = count * {i}\nprint(name, value_{i})" for i in range(6)]
) + "\n"


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
        code = f"import time; s = time.perf_counter(); import {module}; print(time.perf_counter() - s)"
        runs = [
            float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout)
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
        print(f"         {value!r:40.40}  ours {ours!r:50.50}  papermill {PythonTranslator.translate(value)!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    small = notebook(cells=8, image_bytes=0, table_rows=3)
    large = notebook(cells=60, image_bytes=9000, table_rows=40)
    for label, nb in (("small", small), ("1 MB", large)):
        bench_json(label, nb, args.repeat)
    for label, nb in (("small", small), ("1 MB", large)):
        bench_copy(label, nb, args.repeat)
    bench_percent(args.repeat)
    bench_scraps(args.repeat)
    bench_literals(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
