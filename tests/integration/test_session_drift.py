"""A session's record is what ``execute()`` makes of the same cells (issue 33, item 4): Output
widgets' captures, the widgets' state, ``sys.exit(0)`` and ``update_display`` from a later
cell, on real kernels with real ipywidgets, the session's ``.ipynb`` set beside the run's."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, read_notebook, write_notebook
from notebook_executor._review.diff import normalised_outputs

pytestmark = pytest.mark.kernel

WIDGETS = """\
# %%
import ipywidgets as w
out = w.Output()
out

# %%
with out:
    print("captured")

# %%
with out:
    raise ValueError("inside the widget")

# %%
slider = w.IntSlider(value=3)
print("after")
"""


def saved(result: Mapping[str, Any]) -> dict[str, Any]:
    notebook: dict[str, Any] = json.loads(Path(result["output_path"]).read_text("utf-8"))
    return notebook


def outputs(notebook: dict[str, Any]) -> list[Any]:
    return [
        normalised_outputs(cell.get("outputs", []))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
    ]


def models(notebook: dict[str, Any]) -> dict[str, Any]:
    state = notebook["metadata"].get("widgets", {})
    found: dict[str, Any] = state.get("application/vnd.jupyter.widget-state+json", {})
    return dict(found.get("state", {}))


def model_names(notebook: dict[str, Any]) -> list[str]:
    return sorted(str(model["model_name"]) for model in models(notebook).values())


def test_output_widget_captures_and_errors_stay_in_the_widget(tmp_path: Path) -> None:
    path = tmp_path / "widgets.py"
    path.write_text(WIDGETS, encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        run = ex.execute(path)
        with ex.open_session(path) as session:
            step = session.run()
    assert run["status"] == step["status"] == "success"
    ran, stepped = saved(run), saved(step)
    assert outputs(stepped) == outputs(ran)
    # Nothing of what the widget captured reached a cell: no error output, no "captured".
    texts = json.dumps(outputs(stepped))
    assert "captured" not in texts and "inside the widget" not in texts
    assert model_names(stepped) == model_names(ran)
    captured = [
        model["state"]["outputs"]
        for model in models(stepped).values()
        if model["model_name"] == "OutputModel"
    ]
    assert "captured" in json.dumps(captured) and "ValueError" in json.dumps(captured)


def test_a_session_saves_its_kernels_widget_state_not_the_sources(tmp_path: Path) -> None:
    nb = read_notebook_text(tmp_path, WIDGETS)
    stale = {
        f"stale{i}": {
            "model_name": "IntSliderModel",
            "model_module": "@jupyter-widgets/controls",
            "model_module_version": "2.0.0",
            "state": {"value": i},
        }
        for i in range(12)
    }
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "state": stale,
            "version_major": 2,
            "version_minor": 0,
        }
    }
    path = tmp_path / "stale.ipynb"
    write_notebook(nb, path)
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        run = ex.execute(path)
        with ex.open_session(path) as session:
            step = session.run()
    ran, stepped = models(saved(run)), models(saved(step))
    assert not set(stale) & set(ran)
    assert not set(stale) & set(stepped)
    assert len(stepped) == len(ran)


def read_notebook_text(tmp_path: Path, text: str) -> Any:
    source = tmp_path / "source.py"
    source.write_text(text, encoding="utf-8")
    return read_notebook(source)


EXIT = """\
# %%
print("before")

# %%
import sys
sys.exit(0)

# %%
print("never")
"""


def test_cells_after_sys_exit_0_do_not_run_in_a_session(tmp_path: Path) -> None:
    path = tmp_path / "exit.py"
    path.write_text(EXIT, encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        run = ex.execute(path)
        with ex.open_session(path) as session:
            step = session.run()
            assert step["cells_run"] == [0, 1]
            assert step["status"] == "success"
            assert session.evaluate("print('still here')")["output"].strip() == "still here"
    assert outputs(saved(step)) == outputs(saved(run))
    assert saved(step)["cells"][2].get("outputs") == []
    assert saved(step)["cells"][2].get("execution_count") is None


DISPLAY = """\
# %%
handle = display("first", display_id=True)

# %%
x = 1

# %%
handle.update("second")

# %%
handle.update("third")
"""


def shown(result: Mapping[str, Any]) -> Any:
    text = saved(result)["cells"][0]["outputs"][0]["data"]["text/plain"]
    return "".join(text) if isinstance(text, list) else text


def test_update_display_from_a_later_cell_reaches_the_earlier_cell(tmp_path: Path) -> None:
    path = tmp_path / "display.py"
    path.write_text(DISPLAY, encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        run = ex.execute(path)
        with ex.open_session(path) as session:
            # In one step, as a run.
            assert shown(session.run()) == shown(run) == "'third'"
            # From a later step, and after a restore of the state before cell 2.
            assert shown(session.rerun_from(2, until=2)) == "'second'"
            assert shown(session.run()) == "'third'"
        with ex.open_session(path) as session:
            session.run(until=1)
            assert shown(session.run(until=2)) == "'second'"
