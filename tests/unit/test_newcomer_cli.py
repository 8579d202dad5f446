"""What a newcomer trips on at the command line (issue 46, item 4), without a kernel: the MCP
hint names the tool's own arguments, ``edit`` warns of a cell that does not compile, ``inspect``
says how a script without cell markers was read, and the report marks modified runs and keeps
them, and the order of runs, out of the charts of a parameter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notebook_executor._faces.cli import main
from notebook_executor._faces.report.charts import charts_for, render_svg
from notebook_executor._faces.report.index import group_runs, table_for
from unit.fake_engine import FakeEngine

pytest.importorskip("mcp")

from notebook_executor._faces.mcp.arguments import unknown_arguments

EXECUTE = ["path", "parameters", "timeout", "request", "secrets"]


def test_a_wrong_name_for_a_tool_argument_is_pointed_to_the_tool_argument() -> None:
    message = unknown_arguments("execute", EXECUTE, {"notebook": "a.py"})
    assert message is not None
    assert message.endswith("did you mean 'path'?"), message
    assert "parameters={'notebook'" not in message
    message = unknown_arguments("get_run", ["run_id"], {"id": "x"})
    assert message is not None and message.endswith("did you mean 'run_id'?"), message
    # A name that is no other word for an argument is still a notebook parameter.
    message = unknown_arguments("execute", EXECUTE, {"path": "a.py", "seed": 3})
    assert message is not None and message.endswith("did you mean parameters={'seed': ...}?")


def test_edit_warns_of_a_cell_that_does_not_compile_as_validate_reports_it(
    capsys: pytest.CaptureFixture[str], cli_engine: FakeEngine, tmp_path: Path
) -> None:
    (tmp_path / "nb.py").write_text("# %%\nx = 1\n\n# %%\ny = 2\n", encoding="utf-8")
    (tmp_path / "bad.txt").write_text("y = (2,\n", encoding="utf-8")
    (tmp_path / "good.txt").write_text("y = 3\n", encoding="utf-8")
    assert main(["edit", "nb.py", "1", "bad.txt"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("edited cell 1 of nb.py")
    [line] = err.strip().splitlines()
    assert main(["validate", "nb.py", "--json"]) == 1
    [problem] = json.loads(capsys.readouterr().out)["problems"]
    assert problem["cell"] == 1
    assert line.startswith("notebook-executor: warning: cell 1 of nb.py: ")
    assert problem["message"] in line, (line, problem)
    assert main(["insert", "nb.py", "0", "bad.txt"]) == 0
    assert "warning: cell 0 of nb.py: syntax error" in capsys.readouterr().err
    assert main(["edit", "nb.py", "0", "good.txt"]) == 0
    assert main(["insert", "nb.py", "0", "bad.txt", "--cell-type", "markdown"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x = 1\nprint(x)\n", "read as a script with no '# %%' cell markers"),
        ("", "read as an empty script: no cells"),
    ],
)
def test_inspect_says_how_a_script_without_cell_markers_was_read(
    capsys: pytest.CaptureFixture[str], cli_engine: FakeEngine, tmp_path: Path, text: str, said: str
) -> None:
    (tmp_path / "plain.py").write_text(text, encoding="utf-8")
    assert main(["inspect", "plain.py"]) == 0
    out = capsys.readouterr().out
    assert said in out, out
    if text:
        assert "one cell" in out
    (tmp_path / "marked.py").write_text("# %%\nx = 1\n", encoding="utf-8")
    assert main(["inspect", "marked.py"]) == 0
    assert "read as" not in capsys.readouterr().out


def _run(started: str, seed: int, slope: float, edited: list[int] | None = None) -> dict[str, Any]:
    return {
        "run_id": f"run-{started}",
        "notebook": "fit.py",
        "status": "success",
        "error_kind": None,
        "started_at": started,
        "parameters": {"seed": seed},
        "scraps": {"slope": slope},
        "edited_cells": edited or [],
    }


def test_modified_runs_are_marked_in_the_index_and_kept_out_of_the_charts() -> None:
    plain = [_run(f"2026-01-0{i}", seed=i, slope=float(i)) for i in range(1, 5)]
    modified = _run("2026-01-09", seed=2, slope=1000.0, edited=[2])
    runs = [modified, *reversed(plain)]
    for chart in charts_for(runs):
        assert 1000.0 not in [y for _, y in chart.points], chart
        assert len(chart.points) == len(plain)
    [group] = group_runs(runs)
    rows = {row.run_id: row for row in table_for(group, runs).rows}
    assert rows[modified["run_id"]].status_text == "success [modified: cell 2]"
    assert rows[plain[0]["run_id"]].status_text == "success"


def test_a_scrap_against_a_parameter_is_points_not_a_line_in_run_order() -> None:
    runs = [
        _run(f"2026-01-0{i}", seed=seed, slope=slope)
        for i, (seed, slope) in enumerate([(3, 1.0), (1, 5.0), (2, 2.0), (1, 4.0)], start=1)
    ]
    charts = {chart.x_label: chart for chart in charts_for(runs)}
    assert set(charts) == {"run (oldest first)", "seed"}
    assert "<polyline" in render_svg(charts["run (oldest first)"])
    by_seed = render_svg(charts["seed"])
    assert "<polyline" not in by_seed
    assert by_seed.count("<circle") == 4
