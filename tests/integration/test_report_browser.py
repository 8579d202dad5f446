"""The report in a real browser: real runs on real kernels, rendered by headless Chromium.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it). Each test starts the
browser on a file it reads from disk, with networking off and a fresh profile, and the browser
exits by itself once it has printed the DOM or written the screenshot.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
import sys
import urllib.parse
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

HOSTILE = "<script>document.title='pwned'</script>"

SWEEP = """\
# %% tags=["parameters"]
x: float = 1.0
label: str = "a"

# %%
import scrapbook as sb
print("label is", label)
sb.glue("loss", (x - 3) ** 2 + 1)

# %%
if x > 5:
    raise ValueError("x too large")
"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
    pytest.skip("chromium is not installed here (.ci/run installs it on CI)")


def _browse(tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=3000",
        *extra,
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _dom(tmp: Path, page: Path, fragment: str = "") -> str:
    return _browse(tmp, page.as_uri() + fragment, "--dump-dom").stdout


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
    sets: list[dict[str, Any]] = [{"x": x / 2} for x in range(0, 13)]
    sets.append({"x": 2.0, "label": HOSTILE})
    (root / "other.py").write_text("# %%\nprint('another notebook')\n", encoding="utf-8")
    with NotebookExecutor(runs_dir=root / "runs") as ex:
        results = ex.execute_many(root / "sweep.py", sets)
        other = ex.execute(root / "other.py")
    done = subprocess.run(
        [sys.executable, "-m", "notebook_executor", "report", "--runs-dir", str(root / "runs"),
         "--out", str(root / "site")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    yield {
        "root": root,
        "results": results,
        "other": other,
        "index": root / "site" / "index.html",
    }


def _rows(dom: str) -> list[str]:
    return re.findall(r'<tr class="run [^"]*"[^>]*>.*?</tr>', dom, flags=re.S)


def test_index_shows_every_run_a_chart_and_marks_failures(site: dict[str, Any]) -> None:
    results = site["results"]
    failed = [r for r in results if r["status"] == "error"]
    assert len(results) == 14 and len(failed) == 2  # x = 5.5 and 6.0
    dom = _dom(site["root"], site["index"])
    assert 'data-ready="1"' in dom  # the page's script ran
    rows = _rows(dom)
    assert len(rows) == 15
    listed = sorted(re.findall(r'<a href="runs/([^"]+)\.html">', "".join(rows)))
    assert listed == sorted([r["run_id"] for r in results] + [site["other"]["run_id"]])
    assert not any(" hidden" in row.split(">", 1)[0] for row in rows)
    marked = [row for row in rows if row.startswith('<tr class="run error"')]
    assert len(marked) == 2
    assert all("ValueError: x too large" in row for row in marked)
    charts = re.findall(r'<svg class="chart"[^>]*data-points="(\d+)"', dom)
    assert len(charts) == 2 and all(int(points) == 14 for points in charts)  # sweep.py only


def test_filters_and_sorting_work_in_the_browser(site: dict[str, Any]) -> None:
    dom = _dom(site["root"], site["index"], "#status=error")
    rows = _rows(dom)
    shown = [row for row in rows if " hidden" not in row.split(">", 1)[0]]
    assert len(rows) == 15 and len(shown) == 2
    assert all('data-status="error"' in row for row in shown)
    assert '<span id="shown-count">2</span>' in dom

    other = site["other"]["notebook"]
    dom = _dom(site["root"], site["index"], "#notebook=" + urllib.parse.quote(other, safe=""))
    shown = [row for row in _rows(dom) if " hidden" not in row.split(">", 1)[0]]
    assert [row.count(site["other"]["run_id"]) for row in shown] == [2]  # link text and href
    assert '<span id="shown-count">1</span>' in dom
    # The sweep's charts are hidden with its runs.
    assert re.findall(r'<div class="chart-box"[^>]*?( hidden="")?>', dom) == [' hidden=""'] * 2

    dom = _dom(site["root"], site["index"], "#sort=parameters.x&dir=desc")
    xs = [
        float(re.findall(r'<td class="num" data-v="([^"]+)"', row)[1])
        for row in _rows(dom)
        if 'data-notebook="' + html.escape(site["other"]["notebook"]) not in row
    ]  # columns: seconds, then x
    assert len(xs) == 14 and xs == sorted(xs, reverse=True) and xs[0] == 6.0


def test_run_values_show_as_text_and_never_run(site: dict[str, Any]) -> None:
    dom = _dom(site["root"], site["index"])
    assert "<title>Notebook runs</title>" in dom  # the hostile script did not rename the page
    assert html.escape(HOSTILE, quote=False) in dom
    hostile = next(r for r in site["results"] if r["parameters"]["label"] == HOSTILE)
    page = site["root"] / "site" / "runs" / f"{hostile['run_id']}.html"
    dom = _dom(site["root"], page)
    assert f"<title>{hostile['run_id']}</title>" in dom
    assert "label is " + html.escape(HOSTILE, quote=False) in dom


def test_run_page_is_headed_by_its_result(site: dict[str, Any]) -> None:
    failed = next(r for r in site["results"] if r["status"] == "error")
    page = site["root"] / "site" / "runs" / f"{failed['run_id']}.html"
    dom = _dom(site["root"], page)
    assert re.search(r'<span class="badge error">error \(cell_error\)</span>', dom)
    assert "Failed cell 2" in dom and "ValueError" in dom
    assert "sweep.py" in dom and "python3" in dom  # provenance: source and kernel
    assert "label is a" in dom  # the notebook's own output, rendered by nbconvert
    assert "[scrap loss recorded]" in dom


def test_screenshots_are_not_blank(site: dict[str, Any]) -> None:
    root = site["root"]
    shots = {"index": site["index"]}
    first = site["results"][0]["run_id"]
    shots["page"] = root / "site" / "runs" / f"{first}.html"
    for name, page in shots.items():
        shot = root / f"{name}.png"
        _browse(root, page.as_uri(), f"--screenshot={shot}", "--window-size=1280,900")
        _assert_not_blank(shot)
