"""A notebook in a language this package cannot parse, on a real Bash kernel (``bash_kernel``).

Its parameters are injected by papermill's Bash translator, unchecked, and the run's record
says so. The kernelspec is installed into this interpreter's prefix (``--sys-prefix``), where
Jupyter looks first; nothing is written to the user's home.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel


#: Options of the tier's ``executor`` fixture: a kernel started per run, none kept warm.
EXECUTOR_OPTIONS = {"warm_kernels": 0}


def _bash_notebook(path: Path) -> Path:
    v4 = nbformat.v4
    params = v4.new_code_cell('name="world"\ncount=1')
    params.metadata["tags"] = ["parameters"]
    nb = v4.new_notebook(
        cells=[params, v4.new_code_cell('echo "hello $name x$count"'), v4.new_code_cell("false")]
    )
    nb.metadata["kernelspec"] = {"name": "bash", "language": "bash", "display_name": "Bash"}
    nbformat.write(nb, path)
    return path


def _texts(nb: nbformat.NotebookNode) -> str:
    return "".join("".join(o.get("text", "")) for c in nb.cells for o in c.get("outputs", []))


def test_bash_parameters_injected_unchecked(
    bash_kernel: str,
    executor: NotebookExecutor,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = _bash_notebook(tmp_path / "greet.ipynb")
    source_nb = nbformat.read(source, as_version=4)
    source_nb.cells.pop()  # no failing cell here
    nbformat.write(source_nb, source)
    with caplog.at_level(logging.WARNING, logger="notebook_executor"):
        result = executor.execute(source, parameters={"name": "Ada Lovelace", "extra": 3})
    assert result["status"] == "success", result
    assert result["parameters"] == {"name": "Ada Lovelace", "extra": 3}
    nb = nbformat.read(result["output_path"], as_version=4)
    assert nb.cells[1].metadata["tags"] == ["injected-parameters"]
    assert "name='Ada Lovelace'" in nb.cells[1].source
    assert "hello Ada Lovelace x1\n" in _texts(nb)
    assert nb.metadata["notebook_executor"]["parameters_checked"] is False
    kernel = nb.metadata["notebook_executor"]["kernel"]
    assert (kernel["name"], kernel["language"]) == ("bash", "bash")
    assert nb.metadata["papermill"]["parameters"] == {"name": "Ada Lovelace", "extra": 3}
    assert any("unchecked" in r.getMessage() for r in caplog.records)


def test_bash_failure_and_cli_warning(bash_kernel: str, tmp_path: Path) -> None:
    source = _bash_notebook(tmp_path / "fails.ipynb")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "notebook_executor",
            "run",
            source.name,
            "-p",
            "name",
            "Bo",
            "--runs-dir",
            "runs",
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["failed_cell"]["index"] == 2
    assert result["cells_executed"] == 2
    assert "unchecked" in done.stderr and "name" in done.stderr
    nb = nbformat.read(tmp_path / result["output_path"], as_version=4)
    assert "hello Bo x1\n" in _texts(nb)
    assert [c.metadata["papermill"]["status"] for c in nb.cells] == [
        "completed",
        "completed",
        "completed",
        "failed",
    ]
