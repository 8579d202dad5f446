"""The report in a real browser: real runs on real kernels, rendered by headless Chromium.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it). Each test drives one
browser over the DevTools protocol (``tests/chromium.py``), started with networking off and a
fresh profile on ``file://`` pages, and stopped after. Payloads that would rename the page or
write to its storage come in through markdown, outputs, parameters and requests; the tests click
the links and buttons they left and prove that none of them ran.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chromium import Chromium, find_chromium
from notebook_executor import NotebookExecutor

# Several processes (or a browser, or a cluster) and their kernels on a loaded machine.
pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

#: What every payload runs, if anything lets it: a changed title and a stored marker.
JS = "document.title='pwned';localStorage.setItem('pwned','1')"
PAYLOADS = (
    f"<script>{JS}</script>"
    f'<img src="x" onerror="{JS}">'
    f'<a href="javascript:{JS}">hostile link</a>'
    f'<iframe src="javascript:{JS}"></iframe>'
    f'<svg><image href="x" onerror="{JS}"/></svg>'
    f'<form action="javascript:{JS}"><button>hostile button</button></form>'
)

SWEEP = """\
# %% tags=["parameters"]
x: float = 1.0
label: str = "a"

# %%
import scrapbook as sb
print("label is", label)
sb.glue("loss", 16430 + (x - 3) ** 2)

# %%
if x > 5:
    raise ValueError("x too large")
"""

RICH = """\
# %% [markdown]
# # A table of squares
#
# Some *text*, and math: $e^{i\\pi} + 1 = 0$.
#
# PAYLOADS

# %%
import base64

import pandas as pd
import scrapbook as sb
from IPython.display import HTML, SVG, Image, Latex, display

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9a"
       "wAAAABJRU5ErkJggg==")
display(Image(base64.b64decode(PNG)))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20">'
            '<rect width="30" height="10"/></svg>'))
display(Latex(r"$$\\frac{1}{3}$$"))
display(HTML(PAYLOAD_TEXT))
frame = pd.DataFrame({"x": range(4), "squares": [i * i for i in range(4)]})
sb.glue("table", frame)
frame
""".replace("PAYLOADS", PAYLOADS).replace("PAYLOAD_TEXT", repr(PAYLOADS))


def _browser(tmp: Path) -> Chromium:
    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed here (.ci/run installs it on CI)")
    # Chromium keeps a socket in its profile: a long $TMPDIR must not push it past its limit.
    if len(os.fsencode(tmp)) <= 60:
        return Chromium(tmp / f"profile-{time.monotonic_ns()}")
    short = Path(tempfile.mkdtemp(prefix="nx-", dir="/tmp"))
    try:
        return Chromium(short / "profile", remove_after=short)
    except BaseException:
        shutil.rmtree(short, ignore_errors=True)
        raise


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and the rows of pixels of an 8-bit RGB or RGBA PNG (Chromium's kind)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    step = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * step
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up = previous[i]
            corner = previous[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        rows.append(
            bytes(line) if step == 3 else bytes(b for j, b in enumerate(line) if j % 4 != 3)
        )
        previous = line
    return width, height, rows


def _assert_not_blank(path: Path) -> None:
    width, height, rows = _png_pixels(path)
    assert width >= 800 and height >= 600
    colours: dict[bytes, int] = {}
    for row in rows[::4]:
        for x in range(0, len(row) - 2, 12):
            colour = row[x : x + 3]
            colours[colour] = colours.get(colour, 0) + 1
    background = max(colours.values())
    drawn = sum(colours.values()) - background
    assert len(colours) > 20, f"only {len(colours)} colours: a blank page"
    assert drawn / sum(colours.values()) > 0.03, "almost every pixel is the background"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("report")
    (root / "sweep.py").write_text(SWEEP, encoding="utf-8")
    (root / "rich.py").write_text(RICH, encoding="utf-8")
    (root / "other.py").write_text("# %%\nprint('another notebook')\n", encoding="utf-8")
    sets: list[dict[str, Any]] = [{"x": x / 2} for x in range(0, 13)]
    sets.append({"x": 2.0, "label": PAYLOADS})
    with NotebookExecutor(runs_dir=root / "runs") as ex:
        results = ex.execute_many(root / "sweep.py", sets)
        rich = ex.execute(root / "rich.py", request=PAYLOADS)
        other = ex.execute(root / "other.py")
    assert rich["status"] == "success", rich
    cli = [sys.executable, "-m", "notebook_executor"]
    runs = ["--runs-dir", str(root / "runs")]
    for command in (
        [*cli, "report", *runs, "--out", str(root / "site")],
        [*cli, "export", rich["run_id"], "--to", "html", "--out", str(root / "export.html"), *runs],
    ):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
    with _browser(root) as browser:
        yield {
            "root": root,
            "browser": browser,
            "results": results,
            "rich": rich,
            "other": other,
            "index": root / "site" / "index.html",
        }


def _open(site: dict[str, Any], page: Path, fragment: str = "") -> Chromium:
    browser: Chromium = site["browser"]
    browser.open(page.as_uri() + fragment)
    return browser


def _run_page(site: dict[str, Any], run: dict[str, Any]) -> Path:
    return Path(site["root"]) / "site" / "runs" / f"{run['run_id']}.html"


SHOWN_ROWS = "[...document.querySelectorAll('tr.run')].filter(r => !r.hidden"


def test_index_has_a_section_per_notebook_and_marks_failures(site: dict[str, Any]) -> None:
    browser = _open(site, site["index"])
    assert browser.evaluate("document.body.dataset.ready") == "1"  # the page's script ran
    sections = browser.evaluate(
        "[...document.querySelectorAll('section.notebook-runs')].map(s => [s.dataset.notebook,"
        " s.querySelectorAll('tr.run').length,"
        " [...s.querySelectorAll('thead tr:last-child th')].map(th => th.dataset.key)])"
    )
    by_name = {Path(name).name: (rows, keys) for name, rows, keys in sections}
    assert set(by_name) == {"sweep.py", "rich.py", "other.py"}
    assert by_name["sweep.py"][0] == 14 and by_name["other.py"][0] == 1
    sweep_keys = by_name["sweep.py"][1]
    assert sorted(k for k in sweep_keys if "." in k) == [
        "parameters.label", "parameters.x", "scraps.loss"
    ]  # fmt: skip
    assert [k for k in by_name["other.py"][1] if "." in k] == []
    failed = browser.evaluate(
        "[...document.querySelectorAll('tr.run.error')].map(r => r.textContent)"
    )
    assert len(failed) == 2 and all("ValueError: x too large" in row for row in failed)
    summary = browser.evaluate(
        "document.querySelector('section[data-notebook$=\"sweep.py\"] p.summary').textContent"
    )
    assert "14 runs" in summary and "2 failed" in summary and "ValueError" in summary
    charts = browser.evaluate(
        "[...document.querySelectorAll('svg.chart')].map(s => [s.dataset.scrap, s.dataset.points,"
        " [...s.querySelectorAll('text.tick.y')].map(t => t.textContent)])"
    )
    loss = [c for c in charts if c[0] == "loss"]
    assert len(loss) == 2 and all(points == "14" for _, points, _ in loss)
    assert all("e+" not in label for _, _, labels in loss for label in labels)
    # Every y label is drawn inside the picture, none cut at the left edge.
    assert browser.evaluate(
        "[...document.querySelectorAll('svg.chart text.tick.y')].every(t => t.getBBox().x >= 0)"
    )
    preview = browser.evaluate("document.querySelector('details.frame table.preview').outerHTML")
    assert "<th>squares</th>" in preview


def test_filters_and_sorting_work_in_the_browser(site: dict[str, Any]) -> None:
    browser = _open(site, site["index"], "#status=error")
    assert browser.evaluate(SHOWN_ROWS + ").length") == 2
    assert browser.evaluate(SHOWN_ROWS + " && r.dataset.status !== 'error').length") == 0
    assert browser.evaluate("document.getElementById('shown-count').textContent") == "2"

    # The records name a notebook relative to the runs folder's parent (the site's root).
    other = "other.py"
    browser = _open(site, site["index"], "#notebook=" + urllib.parse.quote(other, safe=""))
    shown = browser.evaluate(
        "[...document.querySelectorAll('section.notebook-runs')].filter(s => !s.hidden)"
        ".map(s => s.dataset.notebook)"
    )
    assert shown == [other]
    assert browser.evaluate("document.getElementById('shown-count').textContent") == "1"

    browser = _open(site, site["index"], "#sort=parameters.x&dir=desc")
    xs = browser.evaluate(
        "(() => { const s = document.querySelector('section[data-notebook$=\"sweep.py\"]');"
        " const at = [...s.querySelectorAll('thead tr:last-child th')]"
        ".findIndex(th => th.dataset.key === 'parameters.x');"
        " return [...s.querySelectorAll('tr.run')]"
        ".map(r => parseFloat(r.cells[at].dataset.v)); })()"
    )
    assert len(xs) == 14 and xs == sorted(xs, reverse=True) and xs[0] == 6.0


def _assert_rendered(browser: Chromium) -> None:
    heading = browser.evaluate("document.querySelector('.notebook h1').textContent")
    assert heading.startswith("A table of squares")
    assert browser.evaluate("document.querySelectorAll('.notebook em').length") >= 1
    heads = browser.evaluate(
        "[...document.querySelectorAll('.notebook table.dataframe thead th')]"
        ".map(th => th.textContent)"
    )
    assert heads == ["", "x", "squares"]
    drawn = browser.evaluate(
        "[...document.querySelectorAll('.notebook img')]"
        ".filter(i => i.complete && i.naturalWidth > 0).map(i => i.src.slice(0, 20))"
    )
    assert "data:image/png;base6" in drawn and "data:image/svg+xml;b" in drawn
    assert "\\frac{1}{3}" in browser.evaluate("document.body.innerText")


def _assert_nothing_ran(browser: Chromium, title: str) -> int:
    """Clicks every hostile link and button, then checks that no payload ran; returns how many
    it clicked."""
    clicked = browser.evaluate(
        "[...document.querySelectorAll('a, button')]"
        ".filter(e => /hostile/.test(e.textContent)).map(e => (e.click(), 1)).length"
    )
    time.sleep(0.5)
    assert browser.evaluate("document.title") == title
    assert browser.evaluate("localStorage.getItem('pwned')") is None
    return int(clicked)


def test_run_page_renders_headings_tables_and_images(site: dict[str, Any]) -> None:
    browser = _open(site, _run_page(site, site["rich"]))
    _assert_rendered(browser)
    assert browser.evaluate("document.querySelector('.result h1').textContent").startswith(
        site["rich"]["run_id"]
    )


def test_export_html_renders_headings_tables_and_images(site: dict[str, Any]) -> None:
    browser = _open(site, Path(site["root"]) / "export.html")
    _assert_rendered(browser)


def test_nothing_from_a_run_runs(site: dict[str, Any]) -> None:
    hostile = next(r for r in site["results"] if r["parameters"]["label"] == PAYLOADS)
    pages = [  # (page, its title, whether the payloads left links or buttons to click)
        (site["index"], "Notebook runs", False),  # parameters and requests show as text
        (_run_page(site, site["rich"]), site["rich"]["run_id"], True),  # markdown, outputs
        (_run_page(site, hostile), hostile["run_id"], False),  # a parameter, and its output
        (Path(site["root"]) / "export.html", site["rich"]["run_id"], True),
        *(
            (page, None, False)
            for page in sorted((Path(site["root"]) / "site" / "notebooks").iterdir())
        ),
    ]
    for page, title, links in pages:
        browser = _open(site, page)
        clicked = _assert_nothing_ran(browser, title or browser.evaluate("document.title"))
        assert "pwned" not in browser.evaluate("document.title")
        assert (clicked >= 2) == links, page
    # The payloads are on the pages, as text or inert markup.
    browser = _open(site, _run_page(site, hostile))
    assert "label is <script>" in browser.evaluate("document.body.innerText")


def test_the_content_policy_alone_stops_what_a_sanitiser_would_miss(
    site: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the sanitiser switched off, the payloads reach the page, and the policy still lets
    none of them run: the two defences each hold on their own."""
    from notebook_executor._faces.report import site as site_module

    monkeypatch.setattr(site_module, "clean_html", lambda fragment: fragment)
    run = dict(site["rich"])
    page = Path(site["root"]) / "unsanitised.html"
    page.write_text(site_module.render_run_page(run, Path(site["root"]) / "runs"), "utf-8")
    browser = _open(site, page)
    assert browser.evaluate("document.querySelectorAll('.notebook script').length") >= 2
    assert browser.evaluate("document.querySelectorAll('.notebook iframe').length") >= 2
    assert _assert_nothing_ran(browser, run["run_id"]) >= 2


def test_screenshots_are_not_blank(site: dict[str, Any]) -> None:
    root = Path(site["root"])
    for name, page in {"index": site["index"], "page": _run_page(site, site["rich"])}.items():
        shot = root / f"{name}.png"
        _open(site, page).screenshot(shot)
        _assert_not_blank(shot)
