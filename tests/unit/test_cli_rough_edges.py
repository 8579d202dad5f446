"""The command line's rough edges (issue 36, item 5), in-process on the fake engine."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from support import run_cli
from unit.fake_engine import FakeEngine

NOTEBOOK = """# %% [markdown]
# The narrative

# %% tags=["parameters"]
blob = "x"

# %%
import scrapbook as sb
sb.glue("blob", blob)
"""

LOGBOOK = """---
parameters:
  who: "Ada"
---

# A logbook

```python
print(f"hello {who}")
```
"""


@pytest.fixture(autouse=True)
def project(tmp_path: Path, cli_engine: FakeEngine) -> Path:
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    (tmp_path / "log.md").write_text(LOGBOOK)
    return tmp_path


def _one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def _run_id(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run_cli(capsys, "run", *argv, "--json")
    assert code in (0, 1), err
    return str(json.loads(out)["run_id"])


def test_diff_of_a_run_with_itself(capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _run_id(capsys, "nb.py")
    code, out, err = run_cli(capsys, "diff", run_id, run_id)
    assert (code, err) == (0, "")
    assert out == f"identical: runs {run_id} and {run_id}\n"


def test_show_of_a_run_whose_process_was_killed(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    run_id = _run_id(capsys, "nb.py")
    # As a killed host leaves it: the record as begun (no end, no counts), the process gone.
    (path,) = (project / "runs").glob(f"*/{run_id}.ipynb")
    doc = json.loads(path.read_text())
    record = doc["metadata"]["notebook_executor"]
    record.update(status="running", pid=2**22 + 12345, host=socket.gethostname())
    for key in ("finished_at", "duration_seconds", "cells_total", "cells_executed"):
        record.pop(key, None)
    path.write_text(json.dumps(doc))
    (project / "runs" / "catalog.sqlite").unlink()
    code, out, err = run_cli(capsys, "show", run_id)
    assert code == 0, err
    assert "Traceback" not in err
    assert out.startswith("error: nb.py (?/? code cells, unfinished, interrupted)\n"), out


def test_run_edit_of_a_markdown_cell_is_refused_unless_meant(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    (project / "code.py").write_text("print('replaced')\n")
    err = _one_line_error(*run_cli(capsys, "run", "nb.py", "--edit", "0", "code.py"))
    assert "cell 0 of nb.py is a markdown cell" in err and "--edit-markdown" in err
    assert "notebook-executor cells nb.py" in err
    code, out, err = run_cli(
        capsys, "run", "nb.py", "--edit", "0", "code.py", "--edit-markdown", "--json"
    )
    assert code == 0, err and json.loads(out)["edited_cells"] == [0]
    # A code cell needs no flag.
    assert run_cli(capsys, "run", "nb.py", "--edit", "2", "code.py")[0] == 0


def test_cells_lists_the_cells_and_their_indices(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "cells", "nb.py")
    assert code == 0, err
    assert out.splitlines() == [
        "  0  markdown     The narrative",
        '  1  code         [parameters] blob = "x"',
        "  2  code         import scrapbook as sb",
    ]
    code, out, err = run_cli(capsys, "cells", "log.md", "--json")
    cells = json.loads(out)["cells"]
    assert [(c["index"], c["cell_type"], c["front_matter"]) for c in cells] == [
        (0, "code", True), (1, "markdown", False), (2, "code", False)
    ]  # fmt: skip


def test_a_logbooks_front_matter_is_no_code_cell(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", "log.md")
    assert code == 0, err
    assert out.startswith("success: log.md (1/1 code cells, "), out


def test_the_run_summary_clips_scraps(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", "nb.py", "-p", "blob", "y" * 100_000)
    assert code == 0, err
    assert len(out) < 2_000, len(out)
    (line,) = [line for line in out.splitlines() if line.startswith("scrap blob = ")]
    assert "more characters; notebook-executor show" in line


def test_a_folder_given_as_a_notebook(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    (project / "folder").mkdir()
    (project / "looks.py").mkdir()
    for name in ("folder", "looks.py"):
        err = _one_line_error(*run_cli(capsys, "run", name))
        assert f"{name}: is a folder, not a notebook" in err


def test_validate_is_a_command(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    code, out, err = run_cli(capsys, "validate", "nb.py")
    assert (code, out) == (0, "valid: nb.py\n"), err
    (project / "bad.py").write_text("# %%\nx = (\n")
    code, out, err = run_cli(capsys, "validate", "bad.py", "--json")
    verdict = json.loads(out)
    assert code == 1 and verdict["valid"] is False
    assert verdict["problems"][0]["cell"] == 0
