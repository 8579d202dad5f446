"""The report: a static site of the runs that opens from the file system.

``index.html`` has one section per notebook (see :mod:`.index`), each notebook has pages of all
its runs under ``notebooks/``, and each run a page under ``runs/``, rendered by nbconvert and
headed by the run's result. Pages come from the Jinja2 templates in ``templates/`` (autoescape
on); the style and the one script are package files inlined into the pages, so nothing is
loaded from the network. A notebook's HTML (outputs, markdown) is cleaned to an allow-list by
:mod:`.sanitize`, and every page carries a Content-Security-Policy that lets only the report's
own style and script apply (see :mod:`.assets`): nothing from a run runs when a page is opened.

The site is rebuilt incrementally: a run page whose run has not changed since it was written is
kept as it is. Files the report did not write are never replaced: a folder holding another
``index.html`` is refused.
"""

from __future__ import annotations

import base64
import functools
import html
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._errors import (
    InvalidArgumentError,
    NotebookExecutorError,
    NotebookSourceError,
    ReportError,
    RunNotFoundError,
)
from ..._records.results import RESULT_KEYS
from ..._records.run_markdown import RECORD_KEY
from ..._records.scraps import SCRAP_PREFIX
from ..._records.store import RunStore
from ..._records.text import hide_paths, trim_traceback
from ..._sources.files import atomic_write_text
from ..._sources.regular import regular_head
from .assets import content_policy, render, static_text
from .index import INDEX_ROWS, Group, chart_svgs, group_runs, page_name, table_for
from .sanitize import clean_html
from .values import Previews, cell_for, shown

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["ReportSummary", "build_report", "default_out", "export_run", "render_run_page"]

logger = logging.getLogger(__name__)

#: Marks every file the report writes; a file without it is never replaced.
GENERATOR = "notebook-executor report"

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


def _stamp(run: Mapping[str, Any]) -> str:
    return f"{run.get('status')}|{run.get('finished_at')}"


def _check_ours(path: Path) -> bool:
    """True when ``path`` is missing or was written by a report; False for anything else."""
    if not path.exists():
        return True
    if not path.is_file():
        return False
    try:
        head = regular_head(path, 2048).decode("utf-8", "replace")
    except OSError:
        return False
    return GENERATOR in head


@functools.cache
def _styles() -> tuple[str, str]:
    """The style of list pages, and of run pages (with the code highlighting nbconvert uses)."""
    from pygments.formatters import HtmlFormatter

    site = static_text("report.css")
    return site, site + str(HtmlFormatter(style="default").get_style_defs(".highlight"))


def _html(template: str, *, run_page: bool, **context: Any) -> str:
    """A page from ``template`` with the report's style, script (list pages only) and policy."""
    style = _styles()[1 if run_page else 0]
    script = None if run_page else static_text("report.js")
    return render(
        template,
        generator=GENERATOR,
        policy=content_policy(style, script),
        style=style,
        script=script,
        **context,
    )


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
        Where their run records are (run pages are rendered from the executed notebooks).
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
        raise ReportError(
            f"{index} exists and was not written by a report: choose another --out folder"
        )
    pages_dir = out_dir / "runs"
    try:
        pages_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create the report folder {out_dir}: {exc}") from None
    # One parse of each run record: a page and its previews share it; the index reuses the
    # previews its pages already read.
    previews = Previews(RunStore(runs_dir, cache=1))
    written = kept = 0
    for run in runs:
        run_id = str(run["run_id"])
        page = out_dir / page_name(run_id)
        if _page_is_current(page, run) and not _reproduced_since(page, runs_dir, run_id):
            kept += 1
        else:
            if not _check_ours(page):
                raise ReportError(f"{page} exists and was not written by a report")
            try:
                text = _run_page(run, previews, back_link="../index.html")
            except (NotebookSourceError, RunNotFoundError) as exc:
                logger.warning("run %s: no page (%s)", run_id, exc)
                text = _missing_page(run, str(exc))
            _write(page, text)
            written += 1
        if progress is not None:
            progress.update()
    groups = group_runs(runs)
    charts = _write_lists(groups, previews, out_dir, title)
    return ReportSummary(index, len(runs), written, kept, charts)


def _write(path: Path, text: str) -> None:
    try:
        atomic_write_text(path, text)
    except NotebookExecutorError:
        raise
    except OSError as exc:
        raise ReportError(f"cannot write {path}: {exc}") from None


def _reproduced_since(page: Path, runs_dir: Path, run_id: str) -> bool:
    """Whether the run was reproduced after its page was written (the page shows the last
    reproduction: docs/how-to/reproduce.md)."""
    from ..._review.reproduce import REPRODUCTIONS

    try:
        made = (runs_dir / REPRODUCTIONS / f"{run_id}.json").stat().st_mtime_ns
        return made >= page.stat().st_mtime_ns
    except OSError:
        return False


def _page_is_current(page: Path, run: Mapping[str, Any]) -> bool:
    try:
        head = regular_head(page, 2048).decode("utf-8", "replace")
    except OSError:
        return False
    found = _STAMP.search(head)
    return found is not None and html.unescape(found.group(1)) == _stamp(run)


def _write_lists(groups: list[Group], previews: Previews, out_dir: Path, title: str) -> int:
    """Writes the index and every notebook's pages; returns the number of charts drawn."""
    charts = 0
    for group in groups:
        group.charts = chart_svgs(group)
        charts += len(group.charts)
        group.table = table_for(group, group.runs[:INDEX_ROWS], previews=previews)
        for number in range(1, group.page_count + 1):
            page = out_dir / group.page_href(number)
            if not _check_ours(page):
                raise ReportError(f"{page} exists and was not written by a report")
            start = (number - 1) * group.per_page
            table = table_for(group, group.runs[start : start + group.per_page], prefix="../")
            text = _html(
                "notebook.html.j2",
                run_page=False,
                title=f"{group.notebook} ({number} of {group.page_count})",
                group=group,
                number=number,
                table=table,
                pages=group.pager(number, "../"),
            )
            page.parent.mkdir(parents=True, exist_ok=True)
            _write(page, text)
    _write(
        out_dir / "index.html",
        _html(
            "index.html.j2",
            run_page=False,
            title=title,
            groups=groups,
            total=sum(group.count for group in groups),
            failed=sum(group.failed for group in groups),
            shown=sum(len(group.table.rows) for group in groups if group.table is not None),
            shown_per_notebook=INDEX_ROWS,
        ),
    )
    return charts


# -- run pages --------------------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _present(pairs: Sequence[tuple[str, Any]]) -> list[tuple[str, str]]:
    return [(name, str(value)) for name, value in pairs if value not in (None, "")]


def _run_context(
    run: Mapping[str, Any],
    record: Mapping[str, Any],
    previews: Previews | None,
    cells: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """What ``run.html.j2`` shows above the notebook: the run's result and provenance."""
    status = str(run.get("status") or "")
    kind = f" ({run['error_kind']})" if run.get("error_kind") else ""
    source = _mapping(record.get("source"))
    kernel = _mapping(record.get("kernel"))
    environment = _mapping(record.get("environment"))
    packages = _mapping(environment.get("packages"))
    failed = run.get("failed_cell")
    failure = None
    if isinstance(failed, Mapping):
        # As the MCP server shows it: the cells' frames, library frames counted, no
        # installed package's or home folder's absolute path.
        trace = trim_traceback([str(line) for line in (failed.get("traceback") or [])])
        failure = {
            "index": failed.get("index"),
            "ename": failed.get("ename"),
            "evalue": _readable(str(failed.get("evalue") or "")),
            "trace": _readable("\n".join(trace[-20:])),
        }
    duration = run.get("duration_seconds")
    scraps = run.get("scraps") or {}
    frames = previews(run) if previews is not None else {}
    return {
        "run_id": str(run.get("run_id")),
        "title": str(run.get("run_id")),
        "stamp": _stamp(run),
        "status": status,
        "status_text": status + kind,
        "failed": failure,
        "about": _present(
            [
                ("notebook", run.get("notebook")),
                ("request", run.get("request")),
                ("started", run.get("started_at")),
                ("finished", run.get("finished_at")),
                ("duration", f"{duration:.2f} s" if isinstance(duration, (int, float)) else None),
                (
                    "cells",
                    f"{run.get('cells_executed')} of {run.get('cells_total')} code cells completed",
                ),
            ]
        ),
        "parameters": _present(
            sorted((n, shown(v)) for n, v in (run.get("parameters") or {}).items())
        ),
        "scraps": [(name, cell_for(scraps, name, frames.get(name))) for name in sorted(scraps)],
        "edits": _edits_shown(run, record, cells or []),
        "reproduction": None,
        "provenance": _present(
            [
                ("source", source.get("path")),
                ("sha256", source.get("sha256")),
                ("format", source.get("format")),
                ("kernel", kernel.get("name")),
                ("python", environment.get("python")),
                ("git commit", _mapping(record.get("git")).get("commit")),
                ("git branch", _mapping(record.get("git")).get("branch")),
                ("git dirty", _mapping(record.get("git")).get("dirty")),
                ("machine", _machine_text(_mapping(record.get("machine")))),
                ("environment lock", environment.get("lock_sha256")),
                *(
                    (f"file {entry.get('path')}", _file_text(entry))
                    for entry in _mapping(record.get("files")).get("files") or ()
                    if isinstance(entry, Mapping)
                ),
                *((f"{name}", version) for name, version in sorted(packages.items())),
            ]
        ),
    }


def _machine_text(machine: Mapping[str, Any]) -> str | None:
    if not machine:
        return None
    gpus = ", ".join(str(gpu.get("name")) for gpu in machine.get("gpus") or ())
    return f"{machine.get('cpu')} x{machine.get('cpu_count')}" + (f", {gpus}" if gpus else "")


def _file_text(entry: Mapping[str, Any]) -> str:
    access = (
        "read and written"
        if entry.get("read") and entry.get("written")
        else ("read" if entry.get("read") else "written")
    )
    return f"{access}, {entry.get('size')} bytes, sha256 {entry.get('sha256') or 'not hashed'}"


def _readable(text: str) -> str:
    """``text`` with installed packages' folders and the home folder shortened."""
    return hide_paths(text, str(Path.home()))


def _cell_text(cell: Mapping[str, Any], key: str = "source") -> str:
    value = cell.get(key)
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return str(value or "")


def _edits_shown(
    run: Mapping[str, Any], record: Mapping[str, Any], cells: Sequence[Any]
) -> list[dict[str, Any]]:
    """A modified run's edits as its ``.md`` shows them: for each edited cell (by source
    index), the template's code, the note (else the request), the code as run."""
    notes = sorted(
        (edit for edit in record.get("edits") or [] if isinstance(edit, Mapping)),
        key=lambda edit: edit.get("index", 0),
    )
    edited = [
        cell
        for cell in cells
        if isinstance(cell, Mapping)
        and isinstance(_mapping(cell.get("metadata")).get(RECORD_KEY), Mapping)
        and "original_source" in cell["metadata"][RECORD_KEY]
    ]
    shown: list[dict[str, Any]] = []
    for edit, cell in zip(notes, edited, strict=False):
        info = cell["metadata"][RECORD_KEY]
        shown.append(
            {
                "index": edit.get("index"),
                "note": edit.get("note") or info.get("edit_note") or run.get("request") or "",
                "template": _cell_text(info, "original_source"),
                "as_run": _cell_text(cell),
                "cell_type": cell.get("cell_type", "code"),
            }
        )
    return shown


def _trim_error_outputs(nb: NotebookNode) -> None:
    """Error outputs as the page heads them: library frames counted, paths shortened (the
    run's ``.ipynb`` keeps them whole)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [
                    _readable(line) for line in trim_traceback(list(output.get("traceback", [])))
                ]


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


def _svg_as_images(nb: NotebookNode) -> None:
    """An SVG output becomes an ``<img>`` of a ``data:`` URI: drawn the same, but as an image,
    which never runs script, instead of markup the sanitiser would have to take apart."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            svg = data.get("image/svg+xml")
            if isinstance(svg, str) and "text/html" not in data:
                uri = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
                data["text/html"] = f'<img src="{uri}" alt="SVG image">'
                del data["image/svg+xml"]


@functools.cache
def _html_exporter() -> Any:
    # Built once: an exporter compiles its templates on first use, which costs more than a page.
    # Not nbconvert's sanitize_html: it escapes every tag of the bleach now found with it; the
    # body is cleaned to an allow-list by clean_html instead.
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="basic")


def _notebook_body(nb: NotebookNode) -> str:
    _show_scraps_as_text(nb)
    _trim_error_outputs(nb)
    _svg_as_images(nb)
    body, _ = _html_exporter().from_notebook_node(nb)
    return clean_html(body)


def render_run_page(run: Mapping[str, Any], runs_dir: Path, *, back_link: str | None = None) -> str:
    """One run as a self-contained HTML page: its result, then the notebook by nbconvert."""
    return _run_page(run, Previews(RunStore(runs_dir, cache=1)), back_link=back_link)


def _run_page(run: Mapping[str, Any], previews: Previews, *, back_link: str | None) -> str:
    run_file = previews.store.read(str(run["run_id"]))
    context = _run_context(run, run_file.record, previews, run_file.cells)
    context["reproduction"] = _reproduction_shown(previews.store.runs_dir, str(run["run_id"]))
    return _html(
        "run.html.j2",
        run_page=True,
        back_link=back_link,
        body=_notebook_body(run_file.notebook()),
        **context,
    )


def _reproduction_shown(runs_dir: Path, run_id: str) -> dict[str, Any] | None:
    """The run's last reproduction as its page shows it, or None."""
    from ..._review.reproduce import last_reproduction

    found = last_reproduction(runs_dir, run_id)
    if found is None:
        return None
    difference = _mapping(found.get("first_difference"))
    return {
        "verdict": "reproduced" if found.get("reproduced") else "not reproduced",
        "facts": _present(
            [
                ("when", found.get("reproduced_at")),
                ("run again as", found.get("run_id")),
                ("first difference", f"cell {difference['cell']}" if difference else None),
                ("inputs changed", ", ".join(map(str, found.get("inputs_changed") or ()))),
            ]
        ),
        "diff": _readable(str(difference.get("diff") or "")),
    }


def _missing_page(run: Mapping[str, Any], why: str) -> str:
    context = _run_context(run, {}, None)
    return _html(
        "run.html.j2", run_page=True, back_link="../index.html", body=None, missing=why, **context
    )


def default_out(runs_dir: Path) -> Path:
    """Where a report goes when no folder is named: ``<runs_dir>/report``."""
    return runs_dir / "report"


def export_run(run_id: str, runs_dir: Path, to: str) -> tuple[bytes, str, dict[str, bytes]]:
    """One run exported by nbconvert: ``(body, extension, extra files)``.

    ``to`` is ``html`` (a self-contained page, as in the report), ``markdown`` (images as
    extra files, named as the markdown links them) or ``script`` (the code, in the kernel's
    language).
    """
    previews = Previews(RunStore(runs_dir, cache=1))
    run_file = previews.store.read(run_id)
    nb, record = run_file.notebook(), run_file.record
    if to == "html":
        run = {key: record.get(key) for key in RESULT_KEYS}
        return _run_page(run, previews, back_link=None).encode("utf-8"), ".html", {}
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
            # Run records of kernels that sent no language_info still name their language.
            language = str(_mapping(record.get("kernel")).get("language") or "").lower()
            extension = _SCRIPT_EXTENSIONS.get(language, extension)
        return body.encode("utf-8"), extension, {}
    raise InvalidArgumentError(f"cannot export to {to!r}: use html, markdown or script")
