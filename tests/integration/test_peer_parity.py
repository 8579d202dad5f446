"""What nbclient and papermill do to an executed notebook, done by our engine on real kernels:
the kernel's ``language_info``, widget state, an Output widget's captures, papermill's
manager driven cell by cell, and streams."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat import v4

from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotebookExecutor]:
    with NotebookExecutor(tmp_path_factory.mktemp("runs")) as ex:
        yield ex


def _notebook(path: Path, sources: list[str], metadata: dict[str, Any] | None = None) -> Path:
    nb = v4.new_notebook(cells=[v4.new_code_cell(source) for source in sources])
    nb.metadata.update(
        metadata
        if metadata is not None
        else {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nbformat.write(nb, path)
    return path


def _run(executor: NotebookExecutor, path: Path, **kwargs: Any) -> nbformat.NotebookNode:
    out = path.with_name(path.stem + ".out.ipynb")
    result = executor.execute(path, output_path=out, **kwargs)
    assert result["status"] == "success", result
    return nbformat.read(out, as_version=4)


def test_language_info_comes_from_the_kernel(executor: NotebookExecutor, tmp_path: Path) -> None:
    stale = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python", "version": "3.6.7", "pygments_lexer": "ipython2"},
    }
    version = ".".join(map(str, sys.version_info[:3]))
    for metadata in (stale, {}):
        path = _notebook(tmp_path / f"li{len(metadata)}.ipynb", ["1 + 1"], metadata)
        info = _run(executor, path).metadata["language_info"]
        assert info["version"] == version
        assert info["pygments_lexer"] == "ipython3"
        assert info["file_extension"] == ".py"
        assert info["mimetype"] == "text/x-python"


def test_python_and_a_nameless_kernelspec_run(tmp_path: Path) -> None:
    path = _notebook(tmp_path / "p.ipynb", ["print('ran')"], {"kernelspec": {"language": "python"}})
    with NotebookExecutor(tmp_path / "runs", kernel_name="python") as named:
        nb = _run(named, path)
    assert nb.cells[0].outputs[0]["text"] == "ran\n"
    assert nb.metadata["kernelspec"] == {"language": "python"}


def _views(nb: nbformat.NotebookNode) -> list[str]:
    return [
        output["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in output.get("data", {})
    ]


def test_widget_state_is_saved_and_output_widgets_capture(
    executor: NotebookExecutor, tmp_path: Path
) -> None:
    pytest.importorskip("ipywidgets", reason="the widget tests need ipywidgets (test extra)")
    old = {"application/vnd.jupyter.widget-state+json": {"state": {"stale": {}}}}
    path = _notebook(
        tmp_path / "w.ipynb",
        [
            "import ipywidgets as widgets\nfrom IPython.display import clear_output\n"
            "label = widgets.Label('Hello')\nlabel",
            "out = widgets.Output()\nout",
            'print("hi4")\nwith out:\n    print("hello world")\n    clear_output()',
            'with out:\n    print("captured")\nprint("after")',
        ],
        {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "widgets": old,
        },
    )
    nb = _run(executor, path)
    # clear_output() inside the widget clears the widget, never the cell's own outputs.
    assert [o.get("text") for o in nb.cells[2].outputs] == ["hi4\n"]
    assert [o.get("text") for o in nb.cells[3].outputs] == ["after\n"]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]
    assert (state["version_major"], state["version_minor"]) == (2, 0)
    models = state["state"]
    assert "stale" not in models
    views = _views(nb)
    assert len(views) == 2 and all(view in models for view in views)
    label, out = (models[view] for view in views)
    assert (label["model_name"], label["state"]["value"]) == ("LabelModel", "Hello")
    assert out["model_name"] == "OutputModel"
    assert out["state"]["outputs"] == [
        {"output_type": "stream", "name": "stdout", "text": "captured\n"}
    ]
