"""The report and export faces on runs made by the fake engine (no kernel, no browser).

What a browser shows is checked in tests/integration/test_report_browser.py; here: what the
files hold, escaping, charts, incremental rebuilds, and the commands' errors.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._faces.cli import main
from notebook_executor._faces.report import build_report
from notebook_executor._faces.report.charts import Chart, charts_for, render_svg
from notebook_executor._types import RunResult
from unit.fake_engine import FakeEngine

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
def runs(workdir: Path, ex: NotebookExecutor) -> list[RunResult]:
    sets: list[dict[str, Any]] = [{"x": float(x)} for x in range(6)]
    sets.append({"x": 1.5, "label": HOSTILE})
    for values in sets:
        ex.execute("sweep.py", parameters=values, request=f"try {values}")
    return ex.runs()


def _runs_of(workdir: Path) -> list[RunResult]:
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        return ex.runs()


def test_index_lists_every_run_newest_first_with_columns(
    workdir: Path, runs: list[dict[str, Any]]
) -> None:
    summary = build_report(runs, Path("runs"), Path("site"))
    text = (workdir / "site" / "index.html").read_text(encoding="utf-8")
    listed = re.findall(r'<td class="run-id"><a href="runs/([^"]+)\.html">', text)
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
    assert "1 runs of 1 notebook, 0 failed" in text
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


# -- run HTML: rendered, and safe ------------------------------------------------------------

PAYLOADS = (
    "<script>document.title='pwned'</script>"
    '<img src="x" onerror="document.title=\'pwned\'">'
    "<a href=\"javascript:document.title='pwned'\">hostile link</a>"
    "<iframe src=\"javascript:document.title='pwned'\"></iframe>"
    "<svg onload=\"document.title='pwned'\"></svg>"
)

MARKDOWN = """\
# %% [markdown]
# # A table of squares
#
# Some *text* and math: $e^{i\\\\pi} + 1 = 0$.
#
# PAYLOADS

# %%
print("hello")
""".replace("PAYLOADS", PAYLOADS)

#: A PNG of one pixel.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="  # noqa: E501
SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20">'
    '<rect width="9" height="9"/></svg>'
)


def _add_outputs(workdir: Path, run_id: str) -> None:
    """Adds to a run record the outputs a kernel would have sent: a DataFrame, a PNG, an SVG,
    LaTeX, and HTML with every payload."""
    import json

    import pandas as pd

    from notebook_executor._records.store import RunStore

    path = RunStore(workdir / "runs").path(run_id)
    nb = json.loads(path.read_text(encoding="utf-8"))
    frame = pd.DataFrame({"x": [1, 2], "squares": [1, 4]})
    code = next(cell for cell in nb["cells"] if cell["cell_type"] == "code")
    code["outputs"] += [
        {"output_type": "display_data", "metadata": {},
         "data": {"text/html": frame._repr_html_(), "text/plain": repr(frame)}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/png": PNG}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": SVG}},
        {"output_type": "display_data", "metadata": {}, "data": {"text/latex": "$x^2$"}},
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": PAYLOADS}},
    ]  # fmt: skip
    path.write_text(json.dumps(nb), encoding="utf-8")


@pytest.fixture
def rich_run(workdir: Path, ex: NotebookExecutor) -> RunResult:
    (workdir / "rich.py").write_text(MARKDOWN, encoding="utf-8")
    result = ex.execute("rich.py")
    _add_outputs(workdir, result["run_id"])
    return result


def _assert_rendered_and_safe(page: str) -> None:
    # Rendered, not escaped: a heading, a DataFrame table with its header, images.
    assert re.search(r'<h1 id="[^"]*">A table of squares', page)
    assert "&lt;h1" not in page and "&lt;style" not in page and "&lt;table" not in page
    table = re.search(r'<table class="dataframe">.*?</table>', page, flags=re.S)
    assert table is not None and "<th>squares</th>" in table.group(0)
    assert re.search(rf'<img [^>]*src="data:image/png;base64,{re.escape(PNG)}"', page)
    assert re.search(r'<img [^>]*src="data:image/svg\+xml;base64,', page)
    assert "$x^2$" in page and "<em>text</em>" in page
    # Nothing that could run: no script element but the report's own, no handler, no
    # javascript: URL, no frame, no style element from the run.
    body = page.split("<body>", 1)[1]
    assert "<script" not in body and "<iframe" not in body and "<svg" not in body
    assert not re.search(r"\son\w+\s*=", body)
    assert "javascript:" not in body
    assert "hostile link" in body  # the link's text stays, without its href
    assert page.count("<style") == 1


def test_run_pages_render_run_html_safely(workdir: Path, rich_run: dict[str, Any]) -> None:
    build_report(_runs_of(workdir), Path("runs"), Path("site"))
    page = (workdir / "site" / "runs" / f"{rich_run['run_id']}.html").read_text(encoding="utf-8")
    _assert_rendered_and_safe(page)


def test_export_html_renders_run_html_safely(workdir: Path, rich_run: dict[str, Any]) -> None:
    assert main(["export", rich_run["run_id"], "--to", "html", "--out", "one.html"]) == 0
    _assert_rendered_and_safe((workdir / "one.html").read_text(encoding="utf-8"))


def _policy(page: str) -> dict[str, str]:
    import html as html_module

    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert found is not None
    head = page.split("<head>", 1)[1]
    assert head.index("Content-Security-Policy") < head.index("<title>")  # before anything else
    policy = html_module.unescape(found.group(1))
    return dict(part.strip().split(" ", 1) for part in policy.split(";"))  # type: ignore[misc]


def _digest(text: str) -> str:
    import base64
    import hashlib

    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_every_page_has_a_strict_content_security_policy(
    workdir: Path, rich_run: dict[str, Any], runs: list[dict[str, Any]]
) -> None:
    build_report(_runs_of(workdir), Path("runs"), Path("site"))
    site = workdir / "site"
    pages = sorted(site.rglob("*.html"))
    assert {p.parent.name for p in pages} == {"site", "runs", "notebooks"}
    for path in pages:
        page = path.read_text(encoding="utf-8")
        policy = _policy(page)
        assert policy["default-src"] == "'none'" and policy["img-src"] == "data:"
        assert policy["object-src"] == "'none'" and policy["base-uri"] == "'none'"
        style = re.search(r"<style>(.*?)</style>", page, flags=re.S)
        assert style is not None and policy["style-src"] == _digest(style.group(1))
        scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
        if path.parent.name == "runs":
            assert scripts == [] and policy["script-src"] == "'none'"
        else:  # the report's own script, and only it, by its digest
            assert len(scripts) == 1 and policy["script-src"] == _digest(scripts[0])


# -- the index: one section per notebook, paged ------------------------------------------------


def _synthetic(count: int, notebook: str, **extra: Any) -> list[dict[str, Any]]:
    """Result dicts as the catalog lists them (no run records: their pages say so)."""
    runs = []
    for i in range(count):
        runs.append(
            {
                "run_id": f"20260101T{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}Z-"
                f"{notebook.split('.')[0]}-{i:08x}",
                "notebook": notebook,
                "status": "error" if i % 10 == 3 else "success",
                "started_at": f"2026-01-01T00:00:{i:05d}Z",
                "finished_at": f"2026-01-01T00:00:{i:05d}Z",
                "duration_seconds": 0.5,
                "failed_cell": {"index": 2, "ename": "ValueError", "evalue": f"bad {i}"}
                if i % 10 == 3
                else None,
                **extra,
            }
        )
    return runs[::-1]


def test_each_notebook_has_its_own_section_and_columns(workdir: Path) -> None:
    runs = sorted(
        _synthetic(4, "a.py", parameters={"x": 1.5, "alpha": 2}, scraps={"x": 16430.123})
        + _synthetic(3, "b.py", parameters={"path": "data.csv"}, scraps={"rows": 10}),
        key=lambda r: r["started_at"],
        reverse=True,
    )
    build_report(runs, Path("runs"), Path("site"))
    text = (workdir / "site" / "index.html").read_text(encoding="utf-8")
    sections = re.findall(r'<section class="notebook-runs".*?</section>', text, flags=re.S)
    assert len(sections) == 2
    by_name = {re.search(r'data-notebook="([^"]+)"', s).group(1): s for s in sections}  # type: ignore[union-attr]
    a, b = by_name["a.py"], by_name["b.py"]
    assert re.findall(r'data-key="(parameters\.\w+|scraps\.\w+)"', a) == [
        "parameters.x", "parameters.alpha", "scraps.x"
    ]  # fmt: skip
    assert re.findall(r'data-key="(parameters\.\w+|scraps\.\w+)"', b) == [
        "parameters.path", "scraps.rows"
    ]  # fmt: skip
    # A parameter and a scrap of one name are told apart.
    assert '<th class="parameter" data-key="parameters.x" title="parameter x">x</th>' in a
    assert '<th class="scrap" data-key="scraps.x" title="scrap x">x</th>' in a
    assert ">parameters</th>" in a and ">scraps</th>" in a
    # The summary line: runs, failures, last run, last error.
    summary = re.search(r'<p class="summary">(.*?)</p>', a, flags=re.S).group(1)  # type: ignore[union-attr]
    assert "4 runs" in summary and "1 failed" in summary
    assert "last run 2026-01-01T00:00:00003Z" in summary
    assert "cell 2: ValueError: bad 3" in summary
    assert "16430.1" in a  # six significant digits, in one unbreakable cell
    assert re.search(r'<td class="num" data-v="16430.123">16430.1</td>', a)


def test_the_index_stays_small_and_notebooks_are_paged(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_executor._faces.report import index as index_module

    monkeypatch.setattr(index_module, "PER_PAGE", 10)
    runs = _synthetic(25, "a.py", parameters={"x": 1})
    build_report(runs, Path("runs"), Path("site"))
    site = workdir / "site"
    text = (site / "index.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<tr class="run ', text)) == index_module.INDEX_ROWS
    assert "All 25 runs, 10 a page:" in text
    pages = sorted((site / "notebooks").glob("a-py-*.html"))
    assert [p.name.rsplit("-", 1)[1] for p in pages] == ["1.html", "2.html", "3.html"]
    listed = []
    for page in pages:
        body = page.read_text(encoding="utf-8")
        listed += re.findall(r'<td class="run-id"><a href="\.\./runs/([^"]+)\.html">', body)
        assert 'href="../index.html"' in body
        assert 'href="runs/' not in body  # links from notebooks/ go up to runs/
        assert re.search(r'last error in <a href="\.\./runs/[^"]+\.html">', body)
    assert listed == [run["run_id"] for run in runs]  # every run once, newest first


def test_dataframe_scraps_show_a_bounded_preview(workdir: Path) -> None:
    (workdir / "frame.py").write_text(
        "# %%\nimport pandas as pd\nimport scrapbook as sb\n"
        "sb.glue('table', pd.DataFrame({f'c{j}': [i * j for i in range(50)] for j in range(9)}))\n",
        encoding="utf-8",
    )
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        run_id = ex.execute("frame.py")["run_id"]
    build_report(_runs_of(workdir), Path("runs"), Path("site"))
    for path, needle in (
        (workdir / "site" / "index.html", '<details class="frame"><summary>DataFrame 50 × 9'),
        (workdir / "site" / "runs" / f"{run_id}.html", "DataFrame 50 × 9"),
    ):
        text = path.read_text(encoding="utf-8")
        assert needle in text
        preview = re.search(r'<table class="preview">.*?</table>', text, flags=re.S)
        assert preview is not None
        assert preview.group(0).count("<tr>") == 1 + 5  # header and the first five rows
        assert "<th>c5</th>" in preview.group(0) and "<th>c6</th>" not in preview.group(0)
    assert "[pandas]" not in (workdir / "site" / "index.html").read_text(encoding="utf-8")


def test_the_report_parses_each_run_file_once(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, a run page parsed its run record twice (record, then notebook), its DataFrame
    # previews a third time, and the index a fourth.
    (workdir / "frame.py").write_text(
        "# %%\nimport pandas as pd\nimport scrapbook as sb\n"
        "sb.glue('table', pd.DataFrame({'a': [1, 2]}))\n",
        encoding="utf-8",
    )
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as ex:
        ids = [ex.execute("frame.py")["run_id"] for _ in range(2)]
    runs = _runs_of(workdir)
    parses: Counter[str] = Counter()
    loads = json.loads

    def counting(text: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(text, (str, bytes)) and b'"cells"' in (
            text if isinstance(text, bytes) else text.encode()
        ):
            parses.update(run_id for run_id in ids if run_id in str(text))
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    build_report(runs, Path("runs"), Path("site"))
    assert parses == dict.fromkeys(ids, 1)
    text = (workdir / "site" / "index.html").read_text(encoding="utf-8")
    assert text.count("DataFrame 2 × 1") == 2


def test_chart_axes_have_round_ticks_and_labels_that_fit() -> None:
    points = tuple((float(i), 16430 + (i - 7) ** 2 / 10) for i in range(15))
    svg = render_svg(Chart("nb.py", "loss", "run (oldest first)", points))
    labels = re.findall(
        r'<text class="tick[^"]*" x="([\d.]+)" y="[^"]*" text-anchor="end">([^<]+)</text>', svg
    )
    assert len(labels) >= 3
    values = [float(text.replace(",", "")) for _, text in labels]
    steps = {round(b - a, 6) for a, b in itertools.pairwise(values)}
    assert len(steps) == 1  # evenly spaced, round values
    for x, text in labels:  # right-aligned at x: about 6.5 px a character must fit before it
        assert float(x) - 6.5 * len(text) >= 0, (x, text)
    assert "e+" not in svg


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.0, 1.0, ["0", "0.25", "0.50", "0.75", "1.00"]),
    (16000.0, 17000.0, ["16.00k", "16.25k", "16.50k", "16.75k", "17.00k"]),
    (-5.0, 12_345_678.0, ["-5M", "0", "5M", "10M", "15M"]),
    (16430.0, 16440.0, ["16,430.0", "16,432.5", "16,435.0", "16,437.5", "16,440.0"]),
    (1e-7, 3e-7, ["1.0e-07", "1.5e-07", "2.0e-07", "2.5e-07", "3.0e-07"]),
])  # fmt: skip
def test_tick_values_and_labels(low: float, high: float, expected: list[str]) -> None:
    from notebook_executor._faces.report.charts import nice_ticks, tick_labels

    assert tick_labels(nice_ticks(low, high)) == expected


# -- templates and package data --------------------------------------------------------------


def test_pages_are_built_from_packaged_templates_and_assets(
    workdir: Path, runs: list[dict[str, Any]]
) -> None:
    from importlib import resources

    package = resources.files("notebook_executor._faces.report")
    for name in ("base.html.j2", "index.html.j2", "notebook.html.j2", "run.html.j2",
                 "macros.html.j2", "chart.svg.j2"):  # fmt: skip
        assert package.joinpath("templates").joinpath(name).is_file(), name
    css = package.joinpath("static").joinpath("report.css").read_text(encoding="utf-8")
    js = package.joinpath("static").joinpath("report.js").read_text(encoding="utf-8")
    build_report(runs, Path("runs"), Path("site"))
    index = (workdir / "site" / "index.html").read_text(encoding="utf-8")
    assert f"<style>{css}</style>" in index and f"<script>{js}</script>" in index
    # No markup is written by Python code: the report's modules hold no HTML or CSS strings.
    for module in package.iterdir():
        if module.name.endswith(".py"):
            source = module.read_text(encoding="utf-8")
            assert not re.search(r"<(?:table|tr|td|th|div|section|style|svg|dl)\b", source), (
                module.name
            )


def test_a_chart_of_many_points_draws_dots_without_a_line() -> None:
    many = tuple((float(i), float(i % 3)) for i in range(500))
    svg = render_svg(Chart("nb.py", "v", "run (oldest first)", many))
    assert "<polyline" not in svg and svg.count("<circle") == 400  # thinned, no scribble
    few = render_svg(Chart("nb.py", "v", "run (oldest first)", many[:20]))
    assert few.count("<polyline") == 1
