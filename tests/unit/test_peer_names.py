"""Kernel names as jupyter_client, nbclient and papermill read them, without a kernel."""

from __future__ import annotations

import json
from pathlib import Path

from notebook_executor import read_notebook
from notebook_executor._kernels.launch import choose_kernel


def test_python_is_the_native_python3_kernel() -> None:
    # jupyter_client's KernelManager, nbclient and papermill all run ``python`` as ``python3``.
    for requested, spec in (("python", None), (None, {"name": "python", "language": "python"})):
        choice = choose_kernel("nb.ipynb", requested, spec)
        assert (choice.name, choice.native) == ("python3", True)


def test_a_kernelspec_naming_only_its_language_reads(tmp_path: Path) -> None:
    # nbclient runs a notebook whose kernelspec is ``{"language": "python"}`` (its own
    # Output.ipynb is one); so do we, on the native kernel, keeping the metadata as it is.
    path = tmp_path / "nb.ipynb"
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"language": "python"}},
        "cells": [
            {
                "cell_type": "code",
                "id": "a",
                "metadata": {},
                "source": "1",
                "outputs": [],
                "execution_count": None,
            }
        ],
    }
    path.write_text(json.dumps(nb))
    read = read_notebook(path)
    assert read.metadata["kernelspec"] == {"language": "python"}
    choice = choose_kernel(str(path), None, read.metadata["kernelspec"])
    assert (choice.name, choice.native) == ("python3", True)
