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


@pytest.fixture(scope="module", autouse=True)
def _close_plugin_kernels() -> Iterator[None]:
    """The papermill engine's kernels live for the process: stop them with this module."""
    yield
    plugin = sys.modules.get("notebook_executor._faces.papermill_engine")
    if plugin is not None:  # (imported by papermill: importing it here first would be circular)
        plugin.NotebookExecutorEngine.close()


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
    nb: nbformat.NotebookNode = nbformat.read(out, as_version=4)
    return nb


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
    old: dict[str, Any] = {"application/vnd.jupyter.widget-state+json": {"state": {"stale": {}}}}
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


# -- papermill's notebook manager, driven as papermill's own engine drives it -----------------


def _pm_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    nb = v4.new_notebook(
        cells=[
            v4.new_markdown_cell(text) if kind == "md" else v4.new_code_cell(text)
            for kind, text in cells
        ]
    )
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)
    return path


def _papermill(source: Path, out: Path, **kwargs: Any) -> nbformat.NotebookNode:
    import papermill as pm

    pm.execute_notebook(
        str(source), str(out), engine_name="notebook_executor", progress_bar=False, **kwargs
    )
    nb: nbformat.NotebookNode = nbformat.read(out, as_version=4)
    return nb


def test_papermill_manager_marks_cells_as_papermill_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = _pm_notebook(
        tmp_path / "exit.ipynb",
        [
            ("md", "# title"),
            ("code", "print('one')"),
            ("code", "raise SystemExit"),
            ("code", "never = 1"),
            ("md", "after"),
        ],
    )
    caplog.set_level("INFO", logger="papermill")
    nb = _papermill(source, tmp_path / "out.ipynb", log_output=True)
    meta = [cell.metadata["papermill"] for cell in nb.cells]
    # Papermill's own engine: the exit cell ends the run as failed (without an error raised),
    # what never ran stays pending; markdown cells that were reached have their times.
    assert [m["status"] for m in meta] == ["completed", "completed", "failed", "pending", "pending"]
    assert meta[0]["start_time"] and meta[0]["end_time"] and meta[0]["duration"] is not None
    assert meta[3]["start_time"] is None and nb.cells[3].execution_count is None
    assert nb.metadata["papermill"]["exception"] is True
    messages = [record.getMessage() for record in caplog.records]
    assert "Executing notebook with kernel: python3" in messages
    assert f"Executing Cell {2:-<40}" in messages
    assert f"Ending Cell {2:-<43}" in messages
    assert "one\n" in messages


def test_papermill_manager_saves_per_cell_and_autosaves(tmp_path: Path) -> None:
    from unittest.mock import patch

    from papermill import engines

    source = _pm_notebook(
        tmp_path / "slow.ipynb",
        [
            ("code", "x = 1"),
            ("code", "import time\nfor i in range(25):\n    time.sleep(0.1)\n    print(i)"),
        ],
    )
    writes = []
    for every in (0, 0.5):
        with patch.object(engines, "write_ipynb", wraps=engines.write_ipynb) as write:
            _papermill(source, tmp_path / "out.ipynb", autosave_cell_every=every)
            writes.append(write.call_count)
    # Start, each cell's start and end, the end: as papermill's own engine saves.
    assert writes[0] == 2 + 2 * 2
    # The slow cell prints for 2.5 s: saved again while it runs.
    assert writes[1] > writes[0]


def test_papermill_start_timeout_is_honoured(tmp_path: Path) -> None:
    from papermill.exceptions import PapermillExecutionError

    source = _pm_notebook(tmp_path / "s.ipynb", [("code", "x = 1")])
    with pytest.raises(PapermillExecutionError) as caught:
        _papermill(source, tmp_path / "out.ipynb", start_timeout=0.001)
    assert caught.value.ename == "KernelStartError"
    assert "did not start" in caught.value.evalue


#: A papermill run in an environment without boto3 (papermill's s3 extra): there nothing has
#: loaded ``concurrent.futures.thread`` before the engine's first run.
_WITHOUT_S3 = """
import sys

class NoS3:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("boto3", "botocore", "s3transfer"):
            raise ImportError(name)
        return None

sys.meta_path.insert(0, NoS3())
import papermill as pm
pm.execute_notebook(sys.argv[1], sys.argv[2], engine_name="notebook_executor",
                    progress_bar=False)
"""


def test_papermill_run_ends_without_a_traceback(tmp_path: Path) -> None:
    import subprocess

    source = _pm_notebook(tmp_path / "ok.ipynb", [("code", "x = 1")])
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_S3, str(source), str(tmp_path / "out.ipynb")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot schedule new futures" not in done.stderr


# -- streams ----------------------------------------------------------------------------------


def test_carriage_returns_keep_the_last_frame(executor: NotebookExecutor, tmp_path: Path) -> None:
    # nbclient's coalesce_streams and nbconvert's coalesce_streams preprocessor: the text a
    # \r overwrites (and the character a \b erases) is gone, as a terminal would show it.
    path = _notebook(
        tmp_path / "bar.ipynb",
        [
            "import sys, time\nfor i in range(5):\n"
            "    print(f'\\r{i * 25}%', end='', flush=True)\n    time.sleep(0.01)\nprint()",
            "from tqdm import tqdm\nfor _ in tqdm(range(3), mininterval=0):\n    pass",
            "print('ab\\bc')\nprint('kept\\r\\nline')",
        ],
    )
    nb = _run(executor, path)
    assert [o["text"] for o in nb.cells[0].outputs] == ["100%\n"]
    (bar,) = nb.cells[1].outputs
    assert bar["name"] == "stderr" and "\r" not in bar["text"]
    assert bar["text"].startswith("100%|") and bar["text"].count("\n") == 1
    assert [o["text"] for o in nb.cells[2].outputs] == ["ac\nkept\r\nline\n"]


def test_output_path_ends_as_nbformat_writes_it(executor: NotebookExecutor, tmp_path: Path) -> None:
    path = _notebook(tmp_path / "nl.ipynb", ["1"])
    out = tmp_path / "copy.ipynb"
    executor.execute(path, output_path=out)
    text = out.read_text()
    assert text.endswith("}\n")
    again = tmp_path / "again.ipynb"
    nbformat.write(nbformat.reads(text, as_version=4), again)
    assert again.read_text() == text
