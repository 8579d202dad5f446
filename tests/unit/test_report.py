"""The report and export faces on runs made by the fake engine (no kernel, no browser).

What a browser shows is checked in tests/integration/test_report_browser.py; here: what the
files hold, escaping, charts, incremental rebuilds, and the commands' errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_engine import FakeEngine

from notebook_executor import NotebookExecutor
from notebook_executor._faces.cli import main
from notebook_executor._faces.report import build_report
from notebook_executor._faces.report.charts import Chart, charts_for, render_svg

HOSTILE = "<script>alert(1)</script>"

SWEEP = """\
# %% tags=["parameters"]
x: float = 1.0
label: str = "a"

# %%
import scrapbook as sb
print("label is", label)
sb.glue("loss", (x - 3) ** 2 + 1)

# %%
if x > 4:
    raise ValueError("x too large: " + label)
"""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.py").write_text(SWEEP, encoding="utf-8")
    return tmp_path


@pytest.fixture
def runs(workdir: Path) -> Iterator[list[dict[str, Any]]]:
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        sets: list[dict[str, Any]] = [{"x": float(x)} for x in range(6)]
        sets.append({"x": 1.5, "label": HOSTILE})
        for values in sets:
            ex.execute("sweep.py", parameters=values, request=f"try {values}")
        yield ex.runs()


def _runs_of(workdir: Path) -> list[dict[str, Any]]:
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        return ex.runs()


def test_index_lists_every_run_newest_first_with_columns(
    workdir: Path, runs: list[dict[str, Any]]
) -> None:
    summary = build_report(runs, Path("runs"), Path("site"))
    text = (workdir / "site" / "index.html").read_text(encoding="utf-8")
    listed = re.findall(r'<a href="runs/([^"]+)\.html">', text)
    assert len(runs) == 7
    assert listed == [run["run_id"] for run in runs]
    assert [r["started_at"] for r in runs] == sorted((r["started_at"] for r in runs), reverse=True)
    for column in ("x", "label", "loss", "status", "seconds"):
        assert f">{column}</th>" in text
    assert summary.runs == 7 and summary.pages_written == 7 and summary.pages_kept == 0


def test_failed_runs_are_marked_with_their_error(workdir: Path, runs: list[dict[str, Any]]) -> None:
    build_report(runs, Path("runs"), Path("site"))
    text = (workdir / "site" / "index.html").read_text(encoding="utf-8")
    failed = [r for r in runs if r["status"] == "error"]
    assert len(failed) == 1
    row = re.search(rf'<tr class="run error"[^>]*>.*?{failed[0]["run_id"]}.*?</tr>', text)
    assert row is not None
    assert "cell 2: ValueError: x too large: a" in row.group(0)


def test_everything_from_a_run_is_escaped(workdir: Path, runs: list[dict[str, Any]]) -> None:
    build_report(runs, Path("runs"), Path("site"))
    site = workdir / "site"
    index = (site / "index.html").read_text(encoding="utf-8")
    hostile = next(r for r in runs if r["parameters"]["label"] == HOSTILE)
    page = (site / "runs" / f"{hostile['run_id']}.html").read_text(encoding="utf-8")
    for text in (index, page):
        assert HOSTILE not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert index.count("<script") == 1  # the report's own filter script
    assert "<script" not in page


def test_nothing_is_loaded_from_the_network(workdir: Path, runs: list[dict[str, Any]]) -> None:
    build_report(runs, Path("runs"), Path("site"))
    for path in (workdir / "site").rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', text), path
        assert "<link" not in text, path


def test_a_chart_per_numeric_scrap_and_against_the_swept_parameter(
    runs: list[dict[str, Any]],
) -> None:
    charts = charts_for(runs)
    titles = sorted(chart.title for chart in charts)
    assert titles == ["loss by run (oldest first)", "loss by x"]
    by_x = next(chart for chart in charts if chart.x_label == "x")
    assert [x for x, _ in by_x.points] == sorted(x for x, _ in by_x.points)
    # Every run glued its loss, the failed one too (before its failing cell).
    assert len(by_x.points) == 7


def test_a_chart_escapes_its_labels_and_draws_every_point() -> None:
    chart = Chart("nb<1>.py", "a<b", "x&y", ((1.0, 2.0), (2.0, 3.0), (3.0, 1.0)))
    svg = render_svg(chart)
    assert "a&lt;b by x&amp;y" in svg and "<b" not in svg.replace("<svg", "")
    assert svg.count("<circle") == 3


def test_charts_need_two_values(workdir: Path) -> None:
    one = [{"notebook": "n", "started_at": "1", "scraps": {"v": 1.0}, "parameters": {}}]
    assert charts_for(one) == []
    text = [{"notebook": "n", "started_at": str(i), "scraps": {"v": "a"}} for i in range(3)]
    assert charts_for(text) == []


def test_a_rebuild_renders_only_new_or_changed_runs(
    workdir: Path, runs: list[dict[str, Any]]
) -> None:
    site = Path("site")
    build_report(runs, Path("runs"), site)
    page = workdir / "site" / "runs" / f"{runs[-1]['run_id']}.html"
    before = page.stat().st_mtime_ns
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        ex.execute("sweep.py", parameters={"x": 2.5})
        again = ex.runs()
    summary = build_report(again, Path("runs"), site)
    assert (summary.pages_written, summary.pages_kept) == (1, 7)
    assert page.stat().st_mtime_ns == before
    changed = [dict(run) for run in again]
    changed[-1]["status"] = "error"  # as when a run found running finishes
    summary = build_report(changed, Path("runs"), site)
    assert (summary.pages_written, summary.pages_kept) == (1, 7)


def test_a_folder_with_another_index_is_refused(workdir: Path, runs: list[dict[str, Any]]) -> None:
    theirs = workdir / "site" / "index.html"
    theirs.parent.mkdir()
    theirs.write_text("<html>my own page</html>", encoding="utf-8")
    assert main(["report", "--out", "site"]) == 2
    assert theirs.read_text(encoding="utf-8") == "<html>my own page</html>"
    assert not (workdir / "site" / "runs").exists() or not any(
        (workdir / "site" / "runs").iterdir()
    )


def test_report_command_filters_by_notebook(
    workdir: Path, runs: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "other.py").write_text("# %%\nprint(1)\n", encoding="utf-8")
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        ex.execute("other.py")
    assert main(["report", "--notebook", "other.py", "--out", "only-other"]) == 0
    text = (workdir / "only-other" / "index.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<tr class="run ', text)) == 1
    assert "1 runs, 0 failed" in text
    assert "wrote only-other/index.html" in capsys.readouterr().err
    assert main(["report"]) == 0
    assert (workdir / "runs" / "report" / "index.html").is_file()


@pytest.mark.parametrize(("to", "suffix", "needle"), [
    ("html", ".html", "label is a"),
    ("markdown", ".md", "label is a"),
    ("script", ".py", 'sb.glue("loss"'),
])  # fmt: skip
def test_export_writes_one_run_in_each_format(
    workdir: Path, runs: list[dict[str, Any]], to: str, suffix: str, needle: str
) -> None:
    run_id = runs[-1]["run_id"]
    assert main(["export", run_id, "--to", to]) == 0
    written = workdir / f"{run_id}{suffix}"
    assert needle in written.read_text(encoding="utf-8")
    # An existing file is not replaced unless asked.
    written.write_text("mine", encoding="utf-8")
    assert main(["export", run_id, "--to", to]) == 2
    assert written.read_text(encoding="utf-8") == "mine"
    assert main(["export", run_id, "--to", to, "--force", "--out", str(written)]) == 0
    assert needle in written.read_text(encoding="utf-8")


def test_export_of_an_unknown_run_is_a_usage_error(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "20260101T000000Z-nothing-00000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err
