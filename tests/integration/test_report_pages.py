"""A modified run's page and a failed run's page, on real kernels, in headless Chromium:
the edit shown, library frames collapsed with no installed package's path, parameters before
the traceback, a wide table scrolling inside its box, and filters dropping empty sections.

Set ``NOTEBOOK_EXECUTOR_SCREENS`` to a folder to keep the two pages' screenshots (1400x1000).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from chromium import Chromium, find_chromium
from notebook_executor import NotebookExecutor

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

GREET = """\
---
parameters:
  name: "Richard"
---

# Greeting

```python
print("Hello, {name}!")
```
"""

FAILING = """\
# %% tags=["parameters"]
column = "missing"
rows = 3

# %%
import pandas as pd

wide = pd.DataFrame({f"column_{i:02d}_with_a_long_name": range(rows) for i in range(25)})
wide

# %%
wide[column].sum()
"""

FRIENDLIER = 'print("Hey {name}! So great to see you, buddy!")'
NOTE = "Modified to be extra friendly and casual as requested"


def _browser(tmp: Path) -> Chromium:
    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed here (.ci/run installs it on CI)")
    if len(os.fsencode(tmp)) <= 60:
        return Chromium(tmp / f"profile-{time.monotonic_ns()}")
    short = Path(tempfile.mkdtemp(prefix="nx-", dir="/tmp"))
    try:
        return Chromium(short / "profile", remove_after=short)
    except BaseException:
        shutil.rmtree(short, ignore_errors=True)
        raise


def test_modified_and_failed_run_pages(tmp_path: Path) -> None:
    (tmp_path / "greet.md").write_text(GREET, encoding="utf-8")
    (tmp_path / "failing.py").write_text(FAILING, encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        modified = ex.execute(
            tmp_path / "greet.md",
            edits=[{"index": 2, "source": FRIENDLIER, "note": NOTE}],
            request="be friendlier",
        )
        failed = ex.execute(tmp_path / "failing.py")
    assert modified["status"] == "success", modified
    assert failed["status"] == "error" and failed["error_kind"] == "cell_error"
    assert failed["failed_cell"] is not None and failed["failed_cell"]["ename"] == "KeyError"
    done = subprocess.run(
        [sys.executable, "-m", "notebook_executor", "report", "--runs-dir",
         str(tmp_path / "runs"), "--out", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pages = tmp_path / "site" / "runs"
    modified_page = (pages / f"{modified['run_id']}.html").read_text(encoding="utf-8")
    failed_page = (pages / f"{failed['run_id']}.html").read_text(encoding="utf-8")

    # The edit: the template's code (placeholders filled), the note, the code as run.
    template = modified_page.index("print(&#34;Hello, Richard!&#34;)")
    note = modified_page.index(NOTE)
    as_run = modified_page.index("print(&#34;Hey Richard! So great to see you, buddy!&#34;)")
    assert modified_page.index("Modified run: 1 cell edited") < template < note < as_run

    # The failure: parameters first, library frames counted, no installed package's path.
    assert failed_page.index("<h2>Parameters</h2>") < failed_page.index("<h2>Failed cell 2</h2>")
    assert "frame(s) in library code omitted" in failed_page
    assert "site-packages/" not in failed_page.replace("&lt;site-packages&gt;/", "")
    assert sys.prefix not in failed_page and str(Path.home()) + "/" not in failed_page

    with _browser(tmp_path) as browser:
        screens = os.environ.get("NOTEBOOK_EXECUTOR_SCREENS")
        for run, name in ((modified, "modified-run"), (failed, "failed-run")):
            browser.open((pages / f"{run['run_id']}.html").as_uri())
            # The page never scrolls sideways: a wide table scrolls inside its own box.
            widths = browser.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
            )
            assert widths[0] <= widths[1], (name, widths)
            if screens:
                Path(screens).mkdir(parents=True, exist_ok=True)
                browser.screenshot(Path(screens) / f"{name}.png")
        browser.open((pages / f"{failed['run_id']}.html").as_uri())
        boxed = browser.evaluate(
            "(() => { const t = document.querySelector('.notebook table');"
            " let box = t.parentElement;"
            " while (box && getComputedStyle(box).overflowX !== 'auto') box = box.parentElement;"
            " return [t.scrollWidth > 1400, !!box && box.scrollWidth > box.clientWidth]; })()"
        )
        assert boxed == [True, True]

        # Filtered to failures, the index drops the notebook that has none.
        browser.open((tmp_path / "site" / "index.html").as_uri() + "#status=error")
        shown = browser.evaluate(
            "[...document.querySelectorAll('section.notebook-runs')]"
            ".filter(s => !s.hidden).map(s => s.dataset.notebook)"
        )
        assert shown == ["failing.py"], shown
