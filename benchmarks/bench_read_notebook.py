"""What the public ``read_notebook`` pays to hand back ``nbformat.NotebookNode``.

The run path reads sources as light nodes (``load_source``: no nbformat import); the public
``read_notebook`` converts them with ``nbformat.from_dict``. Prints, in milliseconds per call,
the read of a percent script and of an ``.ipynb`` of N cells, and the conversion.

Usage::

    python benchmarks/bench_read_notebook.py [--cells 200] [--rounds 200]
"""

from __future__ import annotations

import argparse
import tempfile
import timeit
from pathlib import Path

import nbformat

from notebook_executor import read_notebook
from notebook_executor._sources.formats import load_source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "n.py"
        script.write_text(
            "".join(f"# %%\nx{i} = {i}\nprint(x{i})\n\n" for i in range(args.cells)),
            encoding="utf-8",
        )
        ipynb = Path(folder) / "n.ipynb"
        nbformat.write(nbformat.from_dict(load_source(script).nb), ipynb)
        light = load_source(script).nb
        for name, call in (
            ("load_source(.py)", lambda: load_source(script)),
            ("load_source(.ipynb)", lambda: load_source(ipynb)),
            ("nbformat.from_dict", lambda: nbformat.from_dict(light)),
            ("read_notebook(.py)", lambda: read_notebook(script)),
        ):
            call()
            seconds = timeit.timeit(call, number=args.rounds) / args.rounds
            print(f"{name:22} {seconds * 1e3:8.3f} ms  ({args.cells} cells)")


if __name__ == "__main__":
    main()
