"""The report: a static site of the runs that opens from the file system.

``index.html`` lists the runs newest first (filters by notebook and status, sorting by any
column, one chart per numeric scrap) and links one page per run, rendered by nbconvert and headed
by the run's result. Nothing is loaded from the network: the style and the one script are inlined,
and charts are inline SVG. Every value that comes from a run is HTML-escaped (cell outputs are
sanitised by nbconvert), so a parameter ``<script>...</script>`` shows as text.

The site is rebuilt incrementally: a run page whose run has not changed since it was written is
kept as it is. Files the report did not write are never replaced: a folder holding another
``index.html`` is refused.
"""

from __future__ import annotations

import functools
import html
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._errors import NotebookExecutorError, NotebookSourceError, RunNotFoundError
from ..._run import records as _records
from ..._run.files import atomic_write_text
from ..._run.scraps import SCRAP_PREFIX
from .assets import INDEX_SCRIPT, PAGE_CSS, SITE_CSS
from .charts import charts_for, render_svg

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["ReportSummary", "build_report", "default_out", "export_run", "render_run_page"]

logger = logging.getLogger(__name__)

#: Marks every file the report writes; a file without it is never replaced.
GENERATOR = "notebook-executor report"
#: Longest text shown in one cell of the index (parameters, scraps, requests, errors).
MAX_CELL_CHARS = 120
#: At most this many parameter and scrap columns each; the rest are on the run pages.
MAX_COLUMNS = 12

_SCRIPT_EXTENSIONS = {"python": ".py", "r": ".r", "julia": ".jl", "bash": ".sh"}

_STAMP = re.compile(r'<meta name="notebook-executor-run" content="([^"]*)"')


@dataclass(frozen=True)
class ReportSummary:
    """What a build did."""

    index: Path
    runs: int
    pages_written: int
    pages_kept: int
    charts: int


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str, limit: int = MAX_CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "encoder" in value:
        return f"[{value.get('encoder')}]"
    return json.dumps(value, ensure_ascii=False, default=str)


def _sortable(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return repr(float(value))


def _page_name(run_id: str) -> str:
    return f"runs/{run_id}.html"


def _stamp(run: Mapping[str, Any]) -> str:
    return f"{run.get('status')}|{run.get('finished_at')}"


def _check_ours(path: Path) -> bool:
    """True when ``path`` is missing or was written by a report; False for anything else."""
    if not path.exists():
        return True
    if not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(2048)
    except OSError:
        return False
    return GENERATOR in head


def build_report(
    runs: Sequence[Mapping[str, Any]],
    runs_dir: Path,
    out_dir: Path,
    *,
    title: str = "Notebook runs",
    progress: Any = None,
) -> ReportSummary:
    """Write the site for ``runs`` (result dicts, newest first) into ``out_dir``.

    Parameters
    ----------
    runs
        The runs to list, as :meth:`NotebookExecutor.runs` returns them.
    runs_dir
        Where their run files are (run pages are rendered from the executed notebooks).
    out_dir
        The site's folder; created when missing.
    progress
        A tqdm-like object updated once per run, or None.

    Raises
    ------
    NotebookExecutorError
        ``out_dir`` holds an ``index.html`` (or a run page) that no report wrote, or cannot be
        written.
    """
    index = out_dir / "index.html"
    if not _check_ours(index):
        raise NotebookExecutorError(
            f"{index} exists and was not written by a report: choose another --out folder"
        )
    pages_dir = out_dir / "runs"
    try:
        pages_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NotebookExecutorError(f"cannot create the report folder {out_dir}: {exc}") from None
    written = kept = 0
    for run in runs:
        run_id = str(run["run_id"])
        page = out_dir / _page_name(run_id)
        if _page_is_current(page, run):
            kept += 1
        else:
            if not _check_ours(page):
                raise NotebookExecutorError(f"{page} exists and was not written by a report")
            try:
                text = render_run_page(run, runs_dir, back_link="../index.html")
            except (NotebookSourceError, RunNotFoundError) as exc:
                logger.warning("run %s: no page (%s)", run_id, exc)
                text = _missing_page(run, str(exc))
            _write(page, text)
            written += 1
        if progress is not None:
            progress.update()
    charts = charts_for(runs)
    _write(index, _index_html(runs, charts, title))
    return ReportSummary(index, len(runs), written, kept, len(charts))


def _write(path: Path, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except NotebookExecutorError:
        raise
    except OSError as exc:
        raise NotebookExecutorError(f"cannot write {path}: {exc}") from None


def _page_is_current(page: Path, run: Mapping[str, Any]) -> bool:
    try:
        with page.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(2048)
    except OSError:
        return False
    found = _STAMP.search(head)
    return found is not None and html.unescape(found.group(1)) == _stamp(run)


# -- index --------------------------------------------------------------------------------------


def _columns(runs: Sequence[Mapping[str, Any]], key: str) -> list[str]:
    seen: dict[str, None] = {}
    for run in runs:
        for name in run.get(key) or {}:
            seen.setdefault(str(name), None)
            if len(seen) >= MAX_COLUMNS:
                return list(seen)
    return list(seen)


def _value_cell(value: Any, present: bool) -> str:
    if not present:
        return "<td></td>"
    number = _sortable(value)
    text = _esc(_clip(_shown(value)))
    if number is not None:
        return f'<td class="num" data-v="{number}">{text}</td>'
    return f"<td>{text}</td>"


def _error_text(run: Mapping[str, Any]) -> str:
    failed = run.get("failed_cell")
    if not isinstance(failed, Mapping):
        return ""
    return f"cell {failed.get('index')}: {failed.get('ename')}: {failed.get('evalue')}"


def _row(run: Mapping[str, Any], parameters: list[str], scraps: list[str]) -> str:
    status = str(run.get("status") or "")
    kind = f" ({run['error_kind']})" if run.get("error_kind") else ""
    duration = run.get("duration_seconds")
    duration_cell = (
        f'<td class="num" data-v="{float(duration)!r}">{float(duration):.2f}</td>'
        if isinstance(duration, (int, float))
        else "<td></td>"
    )
    params = run.get("parameters") or {}
    values = run.get("scraps") or {}
    run_id = str(run["run_id"])
    cells = [
        f'<td class="status">{_esc(status + kind)}</td>',
        f'<td><a href="{_esc(_page_name(run_id))}">{_esc(run_id)}</a></td>',
        f"<td>{_esc(run.get('notebook') or '')}</td>",
        f"<td>{_esc(run.get('started_at') or '')}</td>",
        duration_cell,
        f"<td>{_esc(_clip(str(run.get('request') or '')))}</td>",
        *(_value_cell(params.get(name), name in params) for name in parameters),
        *(_value_cell(values.get(name), name in values) for name in scraps),
        f'<td class="err">{_esc(_clip(_error_text(run), 200))}</td>',
    ]
    return (
        f'<tr class="run {_esc(status)}" data-status="{_esc(status)}" '
        f'data-notebook="{_esc(run.get("notebook") or "")}">' + "".join(cells) + "</tr>"
    )


def _index_html(runs: Sequence[Mapping[str, Any]], charts: Sequence[Any], title: str) -> str:
    parameters = _columns(runs, "parameters")
    scraps = _columns(runs, "scraps")
    heads = [
        ("status", "status"),
        ("run_id", "run"),
        ("notebook", "notebook"),
        ("started_at", "started (UTC)"),
        ("duration", "seconds"),
        ("request", "request"),
        *((f"parameters.{name}", name) for name in parameters),
        *((f"scraps.{name}", name) for name in scraps),
        ("error", "error"),
    ]
    header = "".join(
        f'<th data-key="{_esc(key)}" title="{_esc(key)}">{_esc(label)}</th>' for key, label in heads
    )
    notebooks = sorted({str(run.get("notebook") or "") for run in runs})
    notebook_options = "".join(f'<option value="{_esc(n)}">{_esc(n)}</option>' for n in notebooks)
    failed = sum(1 for run in runs if run.get("status") == "error")
    chart_boxes = "".join(
        f'<div class="chart-box" data-notebook="{_esc(chart.notebook)}">'
        f'<p class="nb">{_esc(chart.notebook)}</p>{render_svg(chart)}</div>'
        for chart in charts
    )
    charts_section = (
        f'<h2>Scraps across runs</h2><div class="charts">{chart_boxes}</div>' if charts else ""
    )
    rows = "\n".join(_row(run, parameters, scraps) for run in runs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="generator" content="{GENERATOR}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_esc(title)}</title><style>{SITE_CSS}</style></head>
<body><header class="top"><h1>{_esc(title)}</h1>
<p class="muted">{len(runs)} runs, {failed} failed; newest first. Click a column to sort.</p>
</header><main>
<div class="controls">
<label for="filter-notebook">Notebook</label>
<select id="filter-notebook"><option value="">all</option>{notebook_options}</select>
<label for="filter-status">Status</label>
<select id="filter-status"><option value="">all</option><option value="success">success</option>
<option value="error">error</option><option value="running">running</option></select>
<span class="muted">showing <span id="shown-count">{len(runs)}</span></span>
</div>
{charts_section}
<div class="table-wrap"><table id="runs"><thead><tr>{header}</tr></thead>
<tbody>
{rows}
</tbody></table></div>
</main><script>{INDEX_SCRIPT}</script></body></html>
"""


# -- run pages --------------------------------------------------------------------------------


def _facts(pairs: Sequence[tuple[str, Any]]) -> str:
    items = "".join(
        f"<dt>{_esc(name)}</dt><dd>{_esc(value)}</dd>"
        for name, value in pairs
        if value not in (None, "")
    )
    return f'<dl class="facts">{items}</dl>' if items else '<p class="muted">none</p>'


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _result_header(run: Mapping[str, Any], record: Mapping[str, Any], back_link: str | None) -> str:
    status = str(run.get("status") or "")
    kind = f" ({run['error_kind']})" if run.get("error_kind") else ""
    source = _mapping(record.get("source"))
    kernel = _mapping(record.get("kernel"))
    environment = _mapping(record.get("environment"))
    packages = _mapping(environment.get("packages"))
    failed = run.get("failed_cell")
    failure = ""
    if isinstance(failed, Mapping):
        trace = "\n".join(str(line) for line in (failed.get("traceback") or [])[-20:])
        failure = (
            f"<h2>Failed cell {_esc(failed.get('index'))}</h2>"
            f'<pre class="failure">{_esc(failed.get("ename"))}: {_esc(failed.get("evalue"))}'
            f"{chr(10) + _esc(trace) if trace else ''}</pre>"
        )
    back = f'<p><a href="{_esc(back_link)}">\u2190 all runs</a></p>' if back_link else ""
    scraps = {name: _shown(value) for name, value in (run.get("scraps") or {}).items()}
    parameters = {name: _shown(value) for name, value in (run.get("parameters") or {}).items()}
    return (
        f'<section class="result">{back}'
        f'<h1>{_esc(run.get("run_id"))} <span class="badge {_esc(status)}">'
        f"{_esc(status + kind)}</span></h1>"
        + _facts(
            [
                ("notebook", run.get("notebook")),
                ("request", run.get("request")),
                ("started", run.get("started_at")),
                ("finished", run.get("finished_at")),
                (
                    "duration",
                    f"{run['duration_seconds']:.2f} s"
                    if isinstance(run.get("duration_seconds"), (int, float))
                    else None,
                ),
                (
                    "cells",
                    f"{run.get('cells_executed')} of {run.get('cells_total')} code cells ran",
                ),
            ]
        )
        + failure
        + "<h2>Parameters</h2>"
        + _facts(sorted(parameters.items()))
        + "<h2>Scraps</h2>"
        + _facts(sorted(scraps.items()))
        + "<h2>Provenance</h2>"
        + _facts(
            [
                ("source", source.get("path")),
                ("sha256", source.get("sha256")),
                ("format", source.get("format")),
                ("kernel", kernel.get("name")),
                ("python", environment.get("python")),
                *((f"{name}", version) for name, version in sorted(packages.items())),
            ]
        )
        + "</section>"
    )


def _show_scraps_as_text(nb: NotebookNode) -> None:
    """Scrapbook's outputs have no mime type a page can show: name the scrap instead."""
    import nbformat

    for cell in nb.cells:
        for at, output in enumerate(cell.get("outputs", [])):
            data = output.get("data") or {}
            if data and all(mime.startswith(SCRAP_PREFIX) for mime in data):
                name = (output.get("metadata") or {}).get("scrapbook", {}).get("name", "")
                cell.outputs[at] = nbformat.v4.new_output(
                    "display_data", data={"text/plain": f"[scrap {name!s} recorded]"}
                )


@functools.cache
def _html_exporter() -> Any:
    # Built once: an exporter compiles its templates on first use, which costs more than a page.
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="basic", sanitize_html=True)


def _notebook_body(nb: NotebookNode) -> str:
    _show_scraps_as_text(nb)
    body, _ = _html_exporter().from_notebook_node(nb)
    # The basic template writes no script, and sanitising drops those of outputs; a page of a
    # report must run nothing it was not written with, so any left is removed all the same.
    return re.sub(r"<script\b[^>]*>.*?</script\s*>", "", body, flags=re.S | re.I)


def _read_run(runs_dir: Path, run_id: str) -> tuple[NotebookNode, dict[str, Any]]:
    import nbformat

    path = _records.run_notebook_path(runs_dir, run_id)
    record = _records.read_record(path)
    try:
        nb = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise NotebookSourceError(str(path), f"unreadable run file: {exc}") from None
    return nb, record


def render_run_page(run: Mapping[str, Any], runs_dir: Path, *, back_link: str | None = None) -> str:
    """One run as a self-contained HTML page: its result, then the notebook by nbconvert."""
    nb, record = _read_run(runs_dir, str(run["run_id"]))
    return _page(
        run,
        _result_header(run, record, back_link)
        + '<div class="notebook">'
        + _notebook_body(nb)
        + "</div>",
    )


def _missing_page(run: Mapping[str, Any], why: str) -> str:
    return _page(
        run,
        _result_header(run, {}, "../index.html")
        + f'<p class="muted">The run file could not be read: {_esc(why)}</p>',
    )


@functools.cache
def _highlight_css() -> str:
    from pygments.formatters import HtmlFormatter

    return str(HtmlFormatter(style="default").get_style_defs(".highlight"))


def _page(run: Mapping[str, Any], body: str) -> str:
    highlight = _highlight_css()
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="generator" content="{GENERATOR}">
<meta name="notebook-executor-run" content="{_esc(_stamp(run))}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_esc(run.get("run_id"))}</title>
<style>{SITE_CSS}{PAGE_CSS}{highlight}</style></head>
<body>{body}</body></html>
"""


def default_out(runs_dir: Path) -> Path:
    """Where a report goes when no folder is named: ``<runs_dir>/report``."""
    return runs_dir / "report"


def export_run(run_id: str, runs_dir: Path, to: str) -> tuple[bytes, str, dict[str, bytes]]:
    """One run exported by nbconvert: ``(body, extension, extra files)``.

    ``to`` is ``html`` (a self-contained page, as in the report), ``markdown`` (images as
    extra files, named as the markdown links them) or ``script`` (the code, in the kernel's
    language).
    """
    nb, record = _read_run(runs_dir, run_id)
    if to == "html":
        run = {key: record.get(key) for key in _records.RESULT_KEYS}
        return render_run_page(run, runs_dir).encode("utf-8"), ".html", {}
    if to == "markdown":
        from nbconvert import MarkdownExporter

        _show_scraps_as_text(nb)
        body, resources = MarkdownExporter().from_notebook_node(
            nb, resources={"output_files_dir": f"{run_id}_files"}
        )
        outputs = {
            str(name): bytes(data) for name, data in (resources.get("outputs") or {}).items()
        }
        return body.encode("utf-8"), ".md", outputs
    if to == "script":
        from nbconvert import ScriptExporter

        body, resources = ScriptExporter().from_notebook_node(nb)
        extension = str(resources.get("output_extension") or ".txt")
        if extension == ".txt":
            # Run files of kernels that sent no language_info still name their language.
            language = str(_mapping(record.get("kernel")).get("language") or "").lower()
            extension = _SCRIPT_EXTENSIONS.get(language, extension)
        return body.encode("utf-8"), extension, {}
    raise NotebookExecutorError(f"cannot export to {to!r}: use html, markdown or script")
