"""Logbook placeholders, declared environment and full-text search, on real kernels.

The canonical logbook template (``print("Hello, {name}!")``) runs verbatim through the API and
the command line; a value built to break out of its string literal runs nothing; a declared
variable reaches the kernel and nothing else; and search finds runs by request, output, error
name and parameter value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

from notebook_executor import NotebookExecutor, NotebookExecutorError, ParameterError
from notebook_executor._types import SearchHit

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
MODULE = [sys.executable, "-m", "notebook_executor"]

CANONICAL = """---
parameters:
  name: ...
---

# Greeting

```python
print("Hello, {name}!")
```
"""

INJECTION = '"); open("pwned","w").close(); print("'


def _stdout(result: Mapping[str, Any]) -> str:
    nb = nbformat.read(result["output_path"], as_version=4)
    return "".join(
        output.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.get("output_type") == "stream" and output.get("name") == "stdout"
    )


#: Options of the tier's ``executor`` fixture: a kernel started per run, none kept warm.
EXECUTOR_OPTIONS = {"warm_kernels": 0}


@pytest.fixture
def canonical(tmp_path: Path) -> Path:
    path = tmp_path / "greet.md"
    path.write_text(CANONICAL, encoding="utf-8")
    return path


def test_canonical_logbook_prints_the_value(executor: NotebookExecutor, canonical: Path) -> None:
    result = executor.execute(canonical, parameters={"name": "Richard"}, request="greet Richard")
    assert result["status"] == "success", result
    assert _stdout(result) == "Hello, Richard!\n"
    nb = nbformat.read(result["output_path"], as_version=4)
    assert any(cell.source == 'print("Hello, Richard!")' for cell in nb.cells)
    record = Path(result["output_path"]).with_suffix(".md").read_text(encoding="utf-8")
    assert 'print("Hello, Richard!")' in record
    assert "Hello, {name}" not in record
    front = yaml.safe_load(record.split("---\n")[1])
    assert front["parameters"] == {"name": "Richard"}
    assert front["user_request"] == "greet Richard"
    assert front["executed_at"] == result["started_at"]
    assert front["uuid"] == nb.metadata["notebook_executor"]["uuid"]


def test_canonical_logbook_from_the_command_line(canonical: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [*MODULE, "run", str(canonical), "-p", "name", "Richard", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["parameters"] == {"name": "Richard"}
    assert _stdout({"output_path": tmp_path / result["output_path"]}) == "Hello, Richard!\n"


def test_injection_through_a_placeholder_runs_nothing(
    executor: NotebookExecutor, canonical: Path
) -> None:
    result = executor.execute(canonical, parameters={"name": INJECTION}, cwd=canonical.parent)
    assert result["status"] == "success", result
    assert _stdout(result) == f"Hello, {INJECTION}!\n"
    assert not (canonical.parent / "pwned").exists()
    assert not Path("pwned").exists()


def test_declared_env_reaches_the_kernel_as_a_secret(
    executor: NotebookExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GREETING_TOKEN", raising=False)
    example = tmp_path / "logbook_placeholders.md"
    example.write_text((ROOT / "notebooks" / "logbook_placeholders.md").read_text())
    with pytest.raises(ParameterError, match="GREETING_TOKEN"):
        executor.execute(example, parameters={"name": "Ada"})
    token = "gt-Plk4-token-value-93"
    (tmp_path / ".env").write_text(f"GREETING_TOKEN={token}\n")
    result = executor.execute(example, parameters={"name": "Ada"})
    assert result["status"] == "success", result
    assert _stdout(result) == (
        "Hello, Ada!\nTopics: ['search', 'placeholders']\nAda has a token of 22 characters\n"
    )
    assert result["scraps"] == {"greeting": "Hello, Ada!"}
    run_file = Path(result["output_path"])
    for written in (run_file, run_file.with_suffix(".md"), *executor.runs_dir.glob("catalog*")):
        assert token.encode() not in written.read_bytes()


def test_search_finds_runs_on_real_kernels(tmp_path: Path) -> None:
    notebook = tmp_path / "probe.py"
    notebook.write_text(
        '# %% tags=["parameters"]\n'
        'sensor: str = "unset"\n'
        "divisor: int = 1\n"
        "\n"
        "# %%\n"
        "ratio = 1 / divisor\n"
        'print("calibration drift of", sensor, "is", 7 * 6 * ratio)\n',
        encoding="utf-8",
    )
    with NotebookExecutor(runs_dir=tmp_path / "runs", warm_kernels=0) as ex:
        good = ex.execute(
            notebook, parameters={"sensor": "KX-7"}, request="weekly check of the flux capacitor"
        )
        bad = ex.execute(notebook, parameters={"sensor": "QZ-9", "divisor": 0})
        assert (good["status"], bad["status"]) == ("success", "error")

        def found(query: str) -> dict[str, SearchHit]:
            return {hit["run_id"]: hit for hit in ex.search(query)}

        assert found("flux capacitor")[good["run_id"]]["where"] == "request"
        assert set(found("flux capacitor")) == {good["run_id"]}
        assert found("42.0")[good["run_id"]]["where"] == "output"  # computed, printed
        assert set(found("42.0")) == {good["run_id"]}  # the failing run never printed
        assert set(found("ZeroDivisionError")) == {bad["run_id"]}
        assert found("ZeroDivisionError")[bad["run_id"]]["where"] == "error"
        assert found("QZ-9")[bad["run_id"]]["where"] == "parameters"
        assert set(found("QZ-9")) == {bad["run_id"]}
        assert set(found("KX-7")) == {good["run_id"]}
        assert set(found("calib*")) == {good["run_id"], bad["run_id"]}
        assert [h["run_id"] for h in ex.search("calibration", status="error")] == [bad["run_id"]]
        with pytest.raises(NotebookExecutorError, match="malformed search query"):
            ex.search('"drift')

    done = subprocess.run(
        [*MODULE, "search", "ZeroDivisionError", "--runs-dir", str(tmp_path / "runs"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    assert [hit["run_id"] for hit in json.loads(done.stdout)] == [bad["run_id"]]
    bare = subprocess.run(
        [*MODULE, "search", "AND", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bare.returncode == 2
    assert bare.stdout == ""
    assert "malformed search query" in bare.stderr


def test_example_logbook_from_the_command_line(tmp_path: Path) -> None:
    example = ROOT / "notebooks" / "logbook_placeholders.md"
    environ = {k: v for k, v in os.environ.items() if k != "GREETING_TOKEN"}
    args = [*MODULE, "run", str(example), "-p", "name", "Ada", "--json", "--runs-dir", "runs"]
    missing = subprocess.run(args, cwd=tmp_path, env=environ, capture_output=True, text=True)
    assert missing.returncode == 2
    assert missing.stdout == ""
    assert "GREETING_TOKEN" in missing.stderr
    assert not (tmp_path / "runs").exists()
    token = "cli-token-Wd83-value"
    done = subprocess.run(
        args,
        cwd=tmp_path,
        env={**environ, "GREETING_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["scraps"] == {"greeting": "Hello, Ada!"}
    assert token not in done.stdout
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
