"""One notebook, one history: the name records give a notebook, and what counts as one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from notebook_executor._records.identity import notebook_identity, repaired_identity
from notebook_executor._review.check import find_notebooks
from notebook_executor._sources.discover import walk_notebooks
from notebook_executor._sources.formats import is_notebook, read_notebook

NOTEBOOK = '# %% tags=["parameters"]\nn = 1\n\n# %%\nprint(n)\n'

TEST_MODULE = '''"""A test module that holds a notebook's text in a string."""

HELLO = """\\
# %% tags=["parameters"]
name = "world"

# %%
print(name)
"""


def test_hello():
    assert "# %%" in HELLO
'''

DOC_PAGE = """# Writing MyST notebooks

A MyST notebook's code cell looks like this:

````markdown
```{code-cell} python
print("hello")
```
````

and inline, `{code-cell}` names the directive.
"""

MYST = """---
kernelspec:
  name: python3
  display_name: Python 3
---

# A MyST notebook

```{code-cell} python
print("hello")
```
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / "notebooks").mkdir(parents=True)
    (project / "notebooks" / "hello.py").write_text(NOTEBOOK)
    return project


def test_a_notebook_is_named_relative_to_the_runs_folders_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path)
    runs = project / "runs"
    names = set()
    for cwd, given in (
        (project, "notebooks/hello.py"),
        (project / "notebooks", "hello.py"),
        (tmp_path, "proj/notebooks/hello.py"),
        (Path("/"), str(project / "notebooks" / "hello.py")),
    ):
        monkeypatch.chdir(cwd)
        names.add(notebook_identity(given, runs))
    assert names == {"notebooks/hello.py"}
    # Outside the project: as before (relative to the working directory here).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere.py").write_text(NOTEBOOK)
    assert notebook_identity("elsewhere.py", runs) == "elsewhere.py"
    assert notebook_identity("https://example.org/a.ipynb", runs) == "https://example.org/a.ipynb"


def test_old_names_are_repaired_from_the_projects_files(tmp_path: Path) -> None:
    project = _project(tmp_path)
    runs = project / "runs"
    for old in (
        "tmp/x/proj/notebooks/hello.py",  # a server started from /
        "proj/notebooks/hello.py",  # a server started from the project's parent
        "../notebooks/hello.py",  # the CLI run from a subfolder
        "hello.py",  # the CLI run from notebooks/
        str(project / "notebooks" / "hello.py"),  # an absolute path
    ):
        assert repaired_identity(old, runs) == "notebooks/hello.py", old
    assert repaired_identity("gone/missing.py", runs) == "gone/missing.py"


def test_percent_markers_inside_strings_make_no_notebook(tmp_path: Path) -> None:
    (tmp_path / "test_hello.py").write_text(TEST_MODULE)
    (tmp_path / "real.py").write_text(NOTEBOOK)
    (tmp_path / "guide.md").write_text(DOC_PAGE)
    (tmp_path / "myst.md").write_text(MYST)
    skipped: list[tuple[str, str]] = []
    found = list(walk_notebooks(tmp_path, skipped=lambda p, why: skipped.append((p.name, why))))
    assert [p.name for p in found] == ["myst.md", "real.py"]
    assert not is_notebook(tmp_path / "test_hello.py")
    reasons = dict(skipped)
    assert set(reasons) == {"test_hello.py", "guide.md"}
    assert "inside strings" in reasons["test_hello.py"] and "lines 4, 7" in reasons["test_hello.py"]
    assert "{code-cell}" in reasons["guide.md"]
    assert [c.cell_type for c in read_notebook(tmp_path / "myst.md").cells] == ["markdown", "code"]


def test_check_says_what_it_skipped(tmp_path: Path) -> None:
    (tmp_path / "test_hello.py").write_text(TEST_MODULE)
    (tmp_path / "real.py").write_text(NOTEBOOK)
    told: list[str] = []
    assert find_notebooks([str(tmp_path)], lambda p, why: told.append(p.name)) == [
        str(tmp_path / "real.py")
    ]
    assert told == ["test_hello.py"]
    done = subprocess.run(
        [sys.executable, "-m", "notebook_executor", "check", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert [Path(r["path"]).name for r in json.loads(done.stdout)] == ["real.py"]
    assert "skipped" in done.stderr and "test_hello.py" in done.stderr, done.stderr


def test_the_repositorys_own_modules_are_not_notebooks() -> None:
    repo = Path(__file__).resolve().parents[2]
    found = {p.relative_to(repo).as_posix() for p in walk_notebooks(repo / "tests" / "unit")}
    assert found == set()
    assert not is_notebook(repo / "tests" / "unit" / "test_one_history.py")
