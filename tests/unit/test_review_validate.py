"""validate (without running) and the check gate's discovery, report and command line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._faces.cli import main
from notebook_executor._review.check import CheckResult, find_notebooks, junit_xml

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"
FORMATS = ["unit_basic.ipynb", "unit_basic.py", "unit_basic.md", "unit_myst.md", "unit_logbook.md"]


def _errors(verdict: Mapping[str, Any]) -> list[tuple[int | None, str]]:
    return [(p["cell"], p["message"]) for p in verdict["problems"] if p["severity"] == "error"]


@pytest.mark.parametrize("name", FORMATS)
def test_good_notebooks_are_valid(ex: NotebookExecutor, name: str) -> None:
    assert ex.validate(DATA / name) == {"valid": True, "problems": []}


PERCENT_BAD_PARAMETERS = """\
# %% [markdown]
# Title

# %% tags=["parameters"]
x = (1,

# %%
print(x)
"""

PERCENT_BAD_CELL = """\
# %% tags=["parameters"]
x = 1

# %%
%matplotlib inline
!echo shell escapes are fine
print(x

# %%
def ok():
    return 1
"""


def test_a_parameters_cell_that_does_not_parse(ex: NotebookExecutor, tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text(PERCENT_BAD_PARAMETERS)
    verdict = ex.validate(path)
    assert verdict["valid"] is False
    [(cell, message)] = _errors(verdict)
    assert cell == 1 and message.startswith("the parameters cell is not valid Python")


def test_a_code_cell_that_does_not_compile(ex: NotebookExecutor, tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text(PERCENT_BAD_CELL)
    [(cell, message)] = _errors(ex.validate(path))
    assert cell == 1 and message.startswith("syntax error") and "line 3" in message


def test_markdown_formats_report_cell_indices(ex: NotebookExecutor, tmp_path: Path) -> None:
    for name in ("unit_basic.md", "unit_myst.md", "unit_logbook.md"):
        path = tmp_path / name
        shutil.copy(DATA / name, path)
        ex.edit_cell(path, 2, "print('unclosed'")
        [(cell, message)] = _errors(ex.validate(path))
        assert cell == 2 and "syntax error" in message


def _ipynb(tmp_path: Path, **metadata: Any) -> Path:
    nb = json.loads((DATA / "unit_basic.ipynb").read_text())
    nb["metadata"].update(metadata)
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    return path


def test_schema_errors_name_their_cell(ex: NotebookExecutor, tmp_path: Path) -> None:
    nb = json.loads((DATA / "unit_basic.ipynb").read_text())
    nb["cells"][3]["outputs"] = []  # a markdown cell has no outputs
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    verdict = ex.validate(path)
    assert verdict["valid"] is False
    assert [cell for cell, _ in _errors(verdict)] == [3]
    assert _errors(verdict)[0][1].startswith("schema:")


def test_an_unreadable_file_is_one_problem(ex: NotebookExecutor, tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert _errors(ex.validate(tmp_path / "broken.ipynb"))[0][0] is None
    assert ex.validate(tmp_path / "missing.py")["valid"] is False
    assert ex.validate(tmp_path / "notes.txt")["problems"][0]["message"].startswith("unsupported")


def test_a_kernel_that_is_not_installed(ex: NotebookExecutor, tmp_path: Path) -> None:
    path = _ipynb(
        tmp_path,
        kernelspec={"name": "no-such-kernel", "language": "julia", "display_name": "J"},
        language_info={"name": "julia"},
    )
    errors = _errors(ex.validate(path))
    assert any("'no-such-kernel' is not installed" in message for _, message in errors)


def test_two_languages(ex: NotebookExecutor, tmp_path: Path) -> None:
    path = _ipynb(tmp_path, language_info={"name": "R"})
    errors = _errors(ex.validate(path))
    assert errors == [(None, "the notebook names two languages (kernelspec says python, "
                       "language_info says r)")]  # fmt: skip


LOGBOOK_WITH_ENV = """\
---
parameters:
  n: 1
env: [NBX_REVIEW_TOKEN]
---

```python
print(n)
```
"""


def test_declared_environment(
    ex: NotebookExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NBX_REVIEW_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "book"
    folder.mkdir()
    path = folder / "log.md"
    path.write_text(LOGBOOK_WITH_ENV)
    [(cell, message)] = _errors(ex.validate(path))
    assert cell is None and "NBX_REVIEW_TOKEN" in message
    assert ex.validate(path, secrets={"NBX_REVIEW_TOKEN": "s3cret"})["valid"] is True
    (folder / ".env").write_text("# tokens\nexport NBX_REVIEW_TOKEN=abc\n")
    assert ex.validate(path)["valid"] is True
    (folder / ".env").unlink()
    monkeypatch.setenv("NBX_REVIEW_TOKEN", "x")
    assert ex.validate(path)["valid"] is True


def test_warnings_do_not_invalidate(ex: NotebookExecutor, tmp_path: Path) -> None:
    path = tmp_path / "two.py"
    path.write_text('# %% tags=["parameters"]\na = 1\n\n# %% tags=["parameters"]\nb = 2\n')
    verdict = ex.validate(path)
    assert verdict["valid"] is True
    assert [(p["cell"], p["severity"]) for p in verdict["problems"]] == [(1, "warning")]


# -- the check gate ---------------------------------------------------------------------------


def _tree(root: Path) -> None:
    (root / "sub").mkdir(parents=True)
    for name in FORMATS:
        shutil.copy(DATA / name, root / "sub" / name)
    (root / "plain.py").write_text("print('a module, not a notebook')\n")
    (root / "README.md").write_text("# Readme\n\n```python\nx = 1\n```\n")
    for skipped in (".hidden", "sub/.ipynb_checkpoints", "runs"):
        (root / skipped).mkdir(parents=True, exist_ok=True)
        shutil.copy(DATA / "unit_basic.ipynb", root / skipped / "copy.ipynb")
    (root / "runs" / "catalog.sqlite").write_bytes(b"")
    shutil.copy(DATA / "unit_basic.py", root / "top.py")


def test_folders_expand_to_their_notebooks(tmp_path: Path) -> None:
    _tree(tmp_path)
    found = find_notebooks([str(tmp_path)])
    assert [Path(p).relative_to(tmp_path).as_posix() for p in found] == [
        "top.py",
        "sub/unit_basic.ipynb",
        "sub/unit_basic.md",
        "sub/unit_basic.py",
        "sub/unit_logbook.md",
        "sub/unit_myst.md",
    ]
    # A file named explicitly is checked whatever it holds; repeats are dropped.
    assert find_notebooks([str(tmp_path / "plain.py"), str(tmp_path / "plain.py")]) == [
        str(tmp_path / "plain.py")
    ]
    with pytest.raises(FileNotFoundError):
        find_notebooks([str(tmp_path / "nowhere")])


def test_junit_xml_has_one_testcase_per_notebook() -> None:
    results = [
        CheckResult("notebooks/a.py", True, [], 0.5),
        CheckResult(
            "notebooks/b.ipynb",
            False,
            [{"cell": 2, "severity": "error", "message": "cell_error: ValueError: bad \x1b"}],
            1.25,
        ),
    ]
    root = ElementTree.fromstring(junit_xml(results))
    assert root.tag == "testsuites"
    [suite] = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["notebooks/a.py", "notebooks/b.ipynb"]
    assert [c.get("classname") for c in cases] == ["notebooks", "notebooks"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "cell 2: cell_error: ValueError: bad ?"
    assert "error: cell 2:" in (failure.text or "")


def test_check_command_without_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path / "notebooks")
    bad = tmp_path / "notebooks" / "sub" / "unit_basic.py"
    bad.write_text(bad.read_text().replace("print(f", "print(f("))
    code = main(["check", "notebooks", "--junit-xml", "report.xml"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[-1] == "5 passed, 1 failed"
    assert "FAIL  notebooks/sub/unit_basic.py: cell 2: syntax error" in "\n".join(out)
    assert sum(line.startswith("ok    ") for line in out) == 5
    suite = ElementTree.parse(tmp_path / "report.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and suite.get("tests") == "6"
    assert main(["check", "notebooks/sub/unit_myst.md", "--json"]) == 0
    [verdict] = json.loads(capsys.readouterr().out)
    assert verdict == {"path": "notebooks/sub/unit_myst.md", "valid": True, "problems": []}


@pytest.mark.parametrize(
    "argv",
    [["check", "nowhere"], ["check", "-j", "0", "."], ["check", "empty"], ["diff", "a.py"]],
)
def test_check_usage_errors_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("notebook-executor: error: ")


def test_import_loads_no_review_code() -> None:
    import subprocess
    import sys

    code = (
        "import sys, notebook_executor\n"
        "print([m for m in sys.modules if '_review' in m or m.startswith('nbdime')])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_validate_refuses_an_output_path(ex: NotebookExecutor) -> None:
    from notebook_executor import NotebookExecutorError

    with pytest.raises(NotebookExecutorError, match="output_path"):
        ex.validate(DATA / "unit_basic.py", execute=True, output_path="out.ipynb")
