"""The core execution path on real kernels, through the Python API.

Every test runs real Jupyter kernels through one module-wide :class:`NotebookExecutor`, so warm
kernels are reused from test to test. Most notebooks live in one shared folder: the kernel's
working directory is the notebook's folder, and a warm kernel only serves runs with the same one.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest
import yaml

from leaks import scan_tree
from notebook_executor import (
    NotebookExecutor,
    NotebookExecutorError,
    ParameterError,
    read_notebook,
)
from notebook_executor._kernels.kernel_engine import KernelEngine
from support import RESULT_KEYS, failed_cell

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "notebooks"

RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9_.-]+$")
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$")
ANSI = "\x1b"


# -- fixtures and helpers ------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def nbdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for most notebooks, so their runs share a kernel environment."""
    return tmp_path_factory.mktemp("notebooks")


@pytest.fixture(scope="module")
def ex(runs_dir: Path) -> Iterator[NotebookExecutor]:
    executor = NotebookExecutor(runs_dir=runs_dir)
    try:
        yield executor
    finally:
        executor.close()


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def run_files(runs_dir: Path) -> set[Path]:
    """Every run record (``.ipynb`` and ``.md``) under ``runs_dir``."""
    return {p for p in runs_dir.rglob("*") if p.suffix in (".ipynb", ".md")}


def saved_cells(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cells of a run's executed notebook, as stored on disk."""
    cells: list[dict[str, Any]] = nbformat.read(result["output_path"], as_version=4).cells
    return cells


def cell_with(cells: list[dict[str, Any]], marker: str) -> dict[str, Any]:
    """The one cell whose source contains ``marker``."""
    found = [c for c in cells if marker in "".join(c["source"])]
    assert len(found) == 1, f"{len(found)} cells contain {marker!r}"
    return found[0]


def cell_status(cell: dict[str, Any]) -> str:
    status: str = cell["metadata"]["notebook_executor"]["status"]
    return status


def assert_not_run(cell: dict[str, Any]) -> None:
    assert cell_status(cell) == "not_run"
    assert cell["outputs"] == []
    assert cell["execution_count"] is None


def assert_completed(cell: dict[str, Any]) -> None:
    assert cell_status(cell) == "completed"
    assert isinstance(cell["execution_count"], int)


def assert_result_shape(result: Mapping[str, Any]) -> None:
    assert list(result) == RESULT_KEYS
    assert json.loads(json.dumps(result)) == result
    assert ANSI not in json.dumps(result)
    assert RUN_ID.fullmatch(result["run_id"])
    assert ISO_UTC.fullmatch(result["started_at"])
    assert ISO_UTC.fullmatch(result["finished_at"])
    assert result["started_at"] <= result["finished_at"]
    assert isinstance(result["duration_seconds"], float)
    assert result["duration_seconds"] > 0
    assert Path(result["output_path"]).is_file()


def assert_works(ex: NotebookExecutor, nbdir: Path) -> None:
    """The executor still runs a notebook after a failure."""
    path = write(nbdir, "still_works.py", '# %%\nimport scrapbook as sb\nsb.glue("ok", 6 * 7)\n')
    result = ex.execute(path)
    assert result["status"] == "success", result
    assert result["scraps"] == {"ok": 42}


# -- 1. every source format ------------------------------------------------------------------

GLUE = """import os
import scrapbook as sb

greeting = f"Hello, {name}!"
for _ in range(count):
    print(greeting)"""
GLUE_2 = """sb.glue("greeting", greeting)
sb.glue("count", count)
sb.glue("cwd", os.getcwd())"""

PERCENT = f"""# %% [markdown]
# # Greeter

# %% tags=["parameters"]
name: str = ...  # who to greet
count: int = 2  # how many times

# %%
{GLUE}

# %%
{GLUE_2}
"""

JUPYTEXT_MD = f"""---
jupyter:
  jupytext:
    text_representation:
      extension: .md
      format_name: markdown
---

# Greeter

```python tags=["parameters"]
name: str = ...  # who to greet
count: int = 2  # how many times
```

```python
{GLUE}
```

```python
{GLUE_2}
```
"""

MYST_MD = f"""---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
---

# Greeter

```{{code-cell}} ipython3
:tags: [parameters]

name: str = ...  # who to greet
count: int = 2  # how many times
```

```{{code-cell}} ipython3
{GLUE}
```

```{{code-cell}} ipython3
{GLUE_2}
```
"""

LOGBOOK_MD = f"""---
title: Greeter log
parameters:
  name: ...   # who to greet
  count: 2    # how many times
---

# Greeter

Narrative between the cells.

```python
{GLUE}
```

More narrative.

```python
{GLUE_2}
```
"""


def _ipynb() -> str:
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("# Greeter"),
        v4.new_code_cell(
            "name: str = ...  # who to greet\ncount: int = 2  # how many times",
            metadata={"tags": ["parameters"]},
        ),
        v4.new_code_cell(GLUE),
        v4.new_code_cell(GLUE_2),
    ]
    return str(nbformat.writes(nb))


# (file name, text, code cells of read_notebook(source))
FORMATS = {
    "ipynb": ("greeter_nb.ipynb", _ipynb(), 3),
    "percent": ("greeter_percent.py", PERCENT, 3),
    "jupytext-md": ("greeter_jupytext.md", JUPYTEXT_MD, 3),
    "myst": ("greeter_myst.md", MYST_MD, 3),
    "logbook": ("greeter_logbook.md", LOGBOOK_MD, 3),
}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_runs_and_records(
    ex: NotebookExecutor, nbdir: Path, runs_dir: Path, fmt: str
) -> None:
    name, text, code_cells = FORMATS[fmt]
    source = write(nbdir, name, text)
    assert sum(c.cell_type == "code" for c in read_notebook(source).cells) == code_cells

    result = ex.execute(source, parameters={"name": "Ada"}, request=f"greet Ada ({fmt})")

    assert_result_shape(result)
    assert result["status"] == "success", result["failed_cell"]
    assert result["error_kind"] is None
    assert result["failed_cell"] is None
    assert result["notebook"] == os.fspath(source)
    assert result["parameters"] == {"name": "Ada", "count": 2}
    assert result["request"] == f"greet Ada ({fmt})"
    # A logbook's front matter reads as a code cell, but it is no cell of the run's: its
    # parameters are injected, and the counts are of the template's code blocks.
    ran = code_cells - 1 if fmt == "logbook" else code_cells
    assert result["cells_total"] == ran
    assert result["cells_executed"] == ran
    assert result["scraps"] == {
        "greeting": "Hello, Ada!",
        "count": 2,
        "cwd": os.fspath(nbdir.resolve()),
    }

    # The run records: runs/YYYY-MM-DD/<run_id>.ipynb and .md, dated by the UTC start.
    day = result["started_at"][:10]
    ipynb = runs_dir / day / f"{result['run_id']}.ipynb"
    markdown = ipynb.with_suffix(".md")
    assert Path(result["output_path"]).resolve() == ipynb.resolve()
    assert markdown.is_file()

    executed = nbformat.read(ipynb, as_version=4)
    nbformat.validate(executed)
    record = executed.metadata["notebook_executor"]
    assert record["run_id"] == result["run_id"]
    assert record["status"] == "success"
    assert record["parameters"] == {"name": "Ada", "count": 2}
    assert record["request"] == f"greet Ada ({fmt})"
    assert record["scraps"] == result["scraps"]
    assert record["source"]["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert Path(record["source"]["path"]).name == name
    assert record["kernel"]["name"]
    assert record["environment"]["python"] == platform.python_version()
    printed = [
        o["text"]
        for c in executed.cells
        for o in c.get("outputs", [])
        if o["output_type"] == "stream"
    ]
    assert printed == ["Hello, Ada!\nHello, Ada!\n"]
    # The injected cell follows the parameters cell and holds a literal.
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert "name = 'Ada'" in injected[0].source

    text = markdown.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["run_id"] == result["run_id"]
    assert front["parameters"] == {"name": "Ada", "count": 2}
    assert front["status"] == "success"
    assert front["user_request"] == f"greet Ada ({fmt})"
    assert "Hello, Ada!" in text


def test_run_files_never_hold_the_home_path(
    ex: NotebookExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Home is where the notebook and the runs live; the process works elsewhere.
    home = tmp_path / "home"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("HOME", os.fspath(home))
    monkeypatch.chdir(elsewhere)
    source = write(home / "work", "greeter.py", (EXAMPLES / "hello.py").read_text())
    with NotebookExecutor(runs_dir=home / "runs", warm_kernels=0) as own:
        result = own.execute(source.resolve(), parameters={"name": "Ada"}, request="at home")
    assert result["status"] == "success", result["failed_cell"]
    assert result["scraps"] == {"greeting": "Hello, Ada!", "length": 11}
    ipynb = Path(result["output_path"])
    record = json.loads(ipynb.read_text(encoding="utf-8"))["metadata"]["notebook_executor"]
    # Named relative to its project (the runs folder's parent), not to the home folder.
    assert record["source"]["path"] == "work/greeter.py"
    for path in (ipynb, ipynb.with_suffix(".md")):
        assert os.fspath(home) not in path.read_text(encoding="utf-8"), path.name


# -- 2. parameters -----------------------------------------------------------------------------

TYPED = """# %% tags=["parameters"]
text: str = "plain"  # some text
count = 1  # a count
ratio: float = 0.5
flag: bool = False
items: list = []
options: dict = {}
anything = None  # any type
needed: int = ...  # required

# %%
import scrapbook as sb

for key in ("text", "count", "ratio", "flag", "items", "options", "anything", "needed"):
    sb.glue(key, globals()[key])
    sb.glue(key + "_type", type(globals()[key]).__name__)
"""


def test_parameters_reach_the_kernel_as_literals(ex: NotebookExecutor, nbdir: Path) -> None:
    source = write(nbdir, "typed.py", TYPED)
    sneaky = '\'); import os; os._exit(1)  # """ {needed} \\n'
    given = {
        "text": sneaky,
        "ratio": 2,  # an int fits a float parameter and arrives as a float
        "flag": True,
        "items": [1, "two", None],
        "options": {"a": [1, 2], "b": {"c": None}},
        "anything": {"x": 1.5},
        "needed": 7,
    }
    result = ex.execute(source, parameters=given)
    assert result["status"] == "success", result["failed_cell"]
    expected = {
        "text": sneaky,
        "count": 1,
        "ratio": 2.0,
        "flag": True,
        "items": [1, "two", None],
        "options": {"a": [1, 2], "b": {"c": None}},
        "anything": {"x": 1.5},
        "needed": 7,
    }
    assert result["parameters"] == expected
    types = {
        "text": "str",
        "count": "int",
        "ratio": "float",
        "flag": "bool",
        "items": "list",
        "options": "dict",
        "anything": "dict",
        "needed": "int",
    }
    scraps = result["scraps"]
    assert {k: scraps[k] for k in expected} == expected
    assert {k: scraps[k + "_type"] for k in types} == types


def test_inspect_parameters(ex: NotebookExecutor, nbdir: Path) -> None:
    source = write(nbdir, "typed.py", TYPED)
    assert ex.inspect_parameters(source) == {
        "text": {"name": "text", "type": "str", "default": "plain", "help": "some text",
                 "required": False},
        "count": {"name": "count", "type": "int", "default": 1, "help": "a count",
                  "required": False},
        "ratio": {"name": "ratio", "type": "float", "default": 0.5, "help": "", "required": False},
        "flag": {"name": "flag", "type": "bool", "default": False, "help": "", "required": False},
        "items": {"name": "items", "type": "list", "default": [], "help": "", "required": False},
        "options": {"name": "options", "type": "dict", "default": {}, "help": "",
                    "required": False},
        "anything": {"name": "anything", "type": "any", "default": None, "help": "any type",
                     "required": False},
        "needed": {"name": "needed", "type": "int", "default": None, "help": "required",
                   "required": True},
    }  # fmt: skip
    assert ex.inspect_parameters(EXAMPLES / "logbook.md") == {
        "station": {"name": "station", "type": "any", "default": None,
                    "help": "station id to summarise (required)", "required": True},
        "readings": {"name": "readings", "type": "list", "default": [3.1, 4.7, 5.2],
                     "help": "raw readings for the day", "required": False},
        "unit": {"name": "unit", "type": "str", "default": "mm", "help": "unit of the readings",
                 "required": False},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("given", "offender", "problem"),
    [
        ({"needed": 1, "colour": "red"}, "colour", "unknown parameter 'colour'"),
        ({"text": "x"}, "needed", "missing required parameter 'needed'"),
        ({"needed": "7"}, "needed", "parameter 'needed' expects int"),
        ({"needed": 1, "ratio": "0.5"}, "ratio", "parameter 'ratio' expects float"),
        ({"needed": 1, "flag": 1}, "flag", "parameter 'flag' expects bool"),
        ({"needed": 1.5}, "needed", "parameter 'needed' expects int"),
    ],
    ids=["unknown", "missing-required", "str-for-int", "str-for-float", "int-for-bool",
         "float-for-int"],
)  # fmt: skip
def test_parameter_errors_come_before_any_kernel(
    nbdir: Path, tmp_path: Path, given: dict[str, Any], offender: str, problem: str
) -> None:
    source = write(nbdir, "typed.py", TYPED)
    runs = tmp_path / "runs"
    executor = NotebookExecutor(runs_dir=runs)
    try:
        with pytest.raises(ParameterError) as caught:
            executor.execute(source, parameters=given)
        engine = executor._engine
        assert isinstance(engine, KernelEngine)
        assert engine.pool is None, "a kernel pool was started for bad input"
    finally:
        executor.close()
    error = caught.value
    assert error.parameter == offender
    message = str(error)
    assert problem in message
    # The message lists the notebook's parameters with their types.
    for listed in ("text: str", "count: int", "ratio: float", "items: list", "needed: int"):
        assert listed in message
    assert not runs.exists() or run_files(runs) == set()


def test_bad_input_leaves_no_run_files(ex: NotebookExecutor, nbdir: Path, runs_dir: Path) -> None:
    source = write(nbdir, "typed.py", TYPED)
    before = run_files(runs_dir)
    with pytest.raises(ParameterError):
        ex.execute(source, parameters={"needed": 1, "nope": 2})
    with pytest.raises(ParameterError):
        ex.execute_many(source, [{"needed": 1}, {"needed": "two"}])
    with pytest.raises(NotebookExecutorError):
        ex.execute(nbdir / "missing.py")
    with pytest.raises(NotebookExecutorError):
        ex.execute(source, output_path=nbdir / "out.txt", parameters={"needed": 1})
    assert run_files(runs_dir) == before


# -- 3. a cell error ----------------------------------------------------------------------------

FAILING = """# %% [markdown]
# # Fails in the middle

# %% tags=["parameters"]
limit: int = 3

# %%
import scrapbook as sb

print("first cell ran")
sb.glue("before", limit)

# %% [markdown]
# The next cell raises.

# %%
def check(value):
    raise ValueError(f"boom {value}")

check(limit * 14)

# %%
sb.glue("after", "never")
print("never printed")

# %% [markdown]
# The end.
"""


@pytest.mark.parametrize("with_parameters", [False, True], ids=["defaults", "injected"])
def test_cell_error_names_the_source_cell(
    ex: NotebookExecutor, nbdir: Path, with_parameters: bool
) -> None:
    source = write(nbdir, "failing.py", FAILING)
    cells = read_notebook(source).cells
    assert "check(limit * 14)" in cells[4].source

    result = ex.execute(source, parameters={"limit": 3} if with_parameters else None)

    assert_result_shape(result)
    assert result["status"] == "error"
    assert result["error_kind"] == "cell_error"
    failed = failed_cell(result)
    assert failed["index"] == 4
    assert failed["source"] == cells[4].source
    assert failed["ename"] == "ValueError"
    assert failed["evalue"] == "boom 42"
    assert isinstance(failed["traceback"], list)
    assert failed["traceback"]
    assert all(isinstance(line, str) and ANSI not in line for line in failed["traceback"])
    assert "ValueError" in failed["traceback"][-1]
    assert any("check" in line for line in failed["traceback"])
    assert result["cells_total"] == 4
    assert result["cells_executed"] == 2
    assert result["scraps"] == {"before": 3}

    saved = saved_cells(result)
    assert len(saved) == len(cells) + (1 if with_parameters else 0)
    first = cell_with(saved, 'print("first cell ran")')
    assert_completed(first)
    assert [o.get("text") for o in first["outputs"] if o["output_type"] == "stream"] == [
        "first cell ran\n"
    ]
    raising = cell_with(saved, "check(limit * 14)")
    assert cell_status(raising) == "failed"
    assert [o["ename"] for o in raising["outputs"] if o["output_type"] == "error"] == ["ValueError"]
    assert_not_run(cell_with(saved, 'sb.glue("after", "never")'))


FAILING_LOGBOOK = """---
parameters:
  who: ...  # required
  n: 2
---

# Fails

Narrative.

```python
print(who)
```

More narrative.

```python
raise ValueError(f"bad {n}")
```

```python
print("never")
```
"""

FAILING_MYST = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
---

# Fails

```{code-cell} ipython3
:tags: [parameters]

who: str = ...
n: int = 2
```

Narrative.

```{code-cell} ipython3
print(who)
```

```{code-cell} ipython3
raise ValueError(f"bad {n}")
```

```{code-cell} ipython3
print("never")
```
"""


@pytest.mark.parametrize(
    ("name", "text", "index", "total"),
    [("failing_logbook.md", FAILING_LOGBOOK, 4, 3), ("failing_myst.md", FAILING_MYST, 4, 4)],
    ids=["logbook", "myst"],
)
def test_cell_error_index_in_markdown_sources(
    ex: NotebookExecutor, nbdir: Path, name: str, text: str, index: int, total: int
) -> None:
    source = write(nbdir, name, text)
    cells = read_notebook(source).cells
    assert cells[index].source == 'raise ValueError(f"bad {n}")'
    result = ex.execute(source, parameters={"who": "Ada", "n": 5})
    assert result["error_kind"] == "cell_error"
    assert failed_cell(result)["index"] == index
    assert failed_cell(result)["source"] == cells[index].source
    assert failed_cell(result)["evalue"] == "bad 5"
    # A logbook's front matter is no code cell of the run: one fewer in both counts.
    assert result["cells_total"] == total
    assert result["cells_executed"] == total - 2
    assert_not_run(cell_with(saved_cells(result), 'print("never")'))


def test_an_executed_ipynb_source_runs_afresh(ex: NotebookExecutor, nbdir: Path) -> None:
    # Outputs saved in the source must not pass for this run's, scraps included.
    v4 = nbformat.v4
    stale_scrap = v4.new_output(
        "display_data",
        data={
            "application/scrapbook.scrap.json+json": {
                "name": "stale", "data": 1, "encoder": "json", "version": 1,
            }
        },
        metadata={"scrapbook": {"name": "stale", "data": True, "display": False}},
    )  # fmt: skip
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_code_cell("x = 1", execution_count=7),
        v4.new_code_cell("raise KeyError('fresh')", execution_count=8),
        v4.new_code_cell("print('later')", execution_count=9),
    ]
    for cell in nb.cells:
        cell.outputs = [v4.new_output("stream", name="stdout", text="stale output\n")]
    nb.cells[2].outputs.append(stale_scrap)
    source = nbdir / "stale.ipynb"
    nbformat.write(nb, source)

    result = ex.execute(source)
    assert result["error_kind"] == "cell_error"
    assert failed_cell(result)["index"] == 1
    assert failed_cell(result)["ename"] == "KeyError"
    assert result["cells_executed"] == 1
    assert result["scraps"] == {}
    assert ex.collect_outputs(result["run_id"]) == {}
    saved = saved_cells(result)
    assert_completed(saved[0])
    assert saved[0]["outputs"] == []
    assert_not_run(saved[2])
    assert "stale output" not in Path(result["output_path"]).read_text(encoding="utf-8")


def test_rerunning_a_run_applies_the_new_parameters(ex: NotebookExecutor) -> None:
    first = ex.execute(EXAMPLES / "hello.py", parameters={"name": "First"})
    assert first["scraps"]["greeting"] == "Hello, First!"
    again = ex.execute(first["output_path"], parameters={"name": "Second"})
    assert again["status"] == "success", again["failed_cell"]
    assert again["parameters"] == {"name": "Second", "times": 1}
    assert again["scraps"] == {"greeting": "Hello, Second!", "length": 14}
    defaults = ex.execute(first["output_path"])
    assert defaults["parameters"] == {"name": "world", "times": 1}
    assert defaults["scraps"] == {"greeting": "Hello, world!", "length": 13}


# -- 4. timeouts ---------------------------------------------------------------------------------

SLOW_CELL = """# %% [markdown]
# # One slow cell

# %% tags=["parameters"]
pause: float = 60

# %%
import time
import scrapbook as sb

sb.glue("before", 1)

# %%
print("sleeping", flush=True)
time.sleep(pause)

# %%
sb.glue("after", 2)
"""


def test_cell_timeout(ex: NotebookExecutor, nbdir: Path) -> None:
    source = write(nbdir, "slow_cell.py", SLOW_CELL)
    # Injected parameters shift the job's cells, not the index reported.
    result = ex.execute(source, parameters={"pause": 30}, cell_timeout=1.5)

    assert_result_shape(result)
    assert result["status"] == "error"
    assert result["error_kind"] == "timeout"
    failed = failed_cell(result)
    assert failed["index"] == 3
    assert "time.sleep(pause)" in failed["source"]
    assert "cell_timeout" in failed["evalue"]
    assert ANSI not in json.dumps(failed)
    assert 1.5 <= result["duration_seconds"] < 20
    assert result["cells_executed"] == 2
    assert result["scraps"] == {"before": 1}

    saved = saved_cells(result)
    assert_completed(cell_with(saved, 'sb.glue("before", 1)'))
    sleeping = cell_with(saved, "time.sleep(pause)")
    assert cell_status(sleeping) == "failed"
    # What the cell printed before it was stopped is kept.
    assert any(o.get("text") == "sleeping\n" for o in sleeping["outputs"])
    assert_not_run(cell_with(saved, 'sb.glue("after", 2)'))

    assert_works(ex, nbdir)


SLOW_RUN = """# %%
import time
import scrapbook as sb

# %%
time.sleep(0.8)
sb.glue("one", 1)

# %%
time.sleep(0.8)
sb.glue("two", 2)

# %%
time.sleep(0.8)
sb.glue("three", 3)

# %%
time.sleep(0.8)
sb.glue("four", 4)

# %%
time.sleep(0.8)
sb.glue("five", 5)

# %%
time.sleep(0.8)
sb.glue("six", 6)
"""


def test_whole_run_timeout(ex: NotebookExecutor, nbdir: Path) -> None:
    # Every cell stays well under cell_timeout; together they overrun the run's timeout.
    source = write(nbdir, "slow_run.py", SLOW_RUN)
    result = ex.execute(source, timeout=3.0, cell_timeout=10)

    assert_result_shape(result)
    assert result["status"] == "error"
    assert result["error_kind"] == "timeout"
    assert 3.0 <= result["duration_seconds"] < 20
    failed = failed_cell(result)
    assert "cell_timeout" not in failed["evalue"]
    executed = result["cells_executed"]
    assert 1 <= executed <= 4
    # The cell named is the one that was running: the first that did not complete.
    assert failed["index"] == executed
    assert "time.sleep(0.8)" in failed["source"]
    names = ["one", "two", "three", "four", "five", "six"]
    assert result["scraps"] == {n: i + 1 for i, n in enumerate(names[: executed - 1])}

    saved = saved_cells(result)
    code = [c for c in saved if c["cell_type"] == "code"]
    for cell in code[:executed]:
        assert_completed(cell)
    assert cell_status(code[executed]) == "failed"
    for cell in code[executed + 1 :]:
        assert_not_run(cell)

    assert_works(ex, nbdir)


def test_executor_default_cell_timeout(runs_dir: Path, nbdir: Path) -> None:
    source = write(nbdir, "sleepy.py", "# %%\nx = 1\n\n# %%\nimport time\ntime.sleep(60)\n")
    with NotebookExecutor(runs_dir=runs_dir, cell_timeout=2.0, warm_kernels=0) as own:
        result = own.execute(source)
    assert result["error_kind"] == "timeout"
    assert failed_cell(result)["index"] == 1
    assert result["cells_executed"] == 1
    assert result["duration_seconds"] < 20


# -- 5. a dead kernel ---------------------------------------------------------------------------

DYING = """# %% [markdown]
# # The kernel dies

# %% tags=["parameters"]
label: str = "x"

# %%
import scrapbook as sb

sb.glue("alive", True)

# %%
print("about to die", flush=True)
{death}

# %%
sb.glue("after", 1)
"""


@pytest.mark.parametrize(
    ("death", "status"),
    [("import os; os._exit(3)", "3"), ("import ctypes; ctypes.string_at(0)", "-11")],
    ids=["exit", "segfault"],
)
def test_kernel_death_names_the_cell(
    ex: NotebookExecutor, nbdir: Path, death: str, status: str
) -> None:
    source = write(nbdir, "dying.py", DYING.format(death=death))
    result = ex.execute(source, parameters={"label": "y"}, cell_timeout=60)

    assert_result_shape(result)
    assert result["status"] == "error"
    assert result["error_kind"] == "kernel_died"
    failed = failed_cell(result)
    assert failed["index"] == 3
    assert death in failed["source"]
    # The kernel's exit status (a negative signal number for a crash) is reported.
    assert re.search(rf"(?<![\d-]){status}\b", failed["evalue"]), failed["evalue"]
    assert result["cells_executed"] == 2
    assert result["scraps"] == {"alive": True}
    assert result["duration_seconds"] < 30

    saved = saved_cells(result)
    assert_completed(cell_with(saved, 'sb.glue("alive", True)'))
    assert_not_run(cell_with(saved, 'sb.glue("after", 1)'))

    assert_works(ex, nbdir)


# -- 6. scraps ----------------------------------------------------------------------------------

SCRAPS = """# %%
import pandas as pd
import scrapbook as sb
from IPython.display import HTML

sb.glue("an_int", 42)
sb.glue("a_float", 2.5)
sb.glue("a_str", "text with 'quotes' and \\u00e9")
sb.glue("a_list", [1, "two", [3.0]])
sb.glue("a_dict", {"k": {"nested": [1, 2]}, "none": None})
sb.glue("a_bool", False)
sb.glue("replaced", "first")

# %%
frame = pd.DataFrame({"x": [1, 2, 3], "name": ["a", "b", "c"]})
sb.glue("frame", frame)
sb.glue("page", HTML("<b>bold</b>\\n<i>two lines</i>"), encoder="display")
sb.glue("replaced", "second")
"""


def test_scraps_of_every_kind(ex: NotebookExecutor, nbdir: Path) -> None:
    source = write(nbdir, "scraps.py", SCRAPS)
    result = ex.execute(source)
    assert result["status"] == "success", result["failed_cell"]
    scraps = result["scraps"]
    assert {k: v for k, v in scraps.items() if k not in ("frame", "page")} == {
        "an_int": 42,
        "a_float": 2.5,
        "a_str": "text with 'quotes' and \u00e9",
        "a_list": [1, "two", [3.0]],
        "a_dict": {"k": {"nested": [1, 2]}, "none": None},
        "a_bool": False,
        "replaced": "second",
    }
    assert scraps["frame"] == {
        "encoder": "pandas",
        "type": "DataFrame",
        "shape": [3, 2],
        "columns": ["x", "name"],
    }
    assert scraps["page"]["encoder"] == "display"
    assert "text/html" in scraps["page"]["mime_types"]
    assert json.loads(json.dumps(result)) == result

    expected = pd.DataFrame({"x": [1, 2, 3], "name": ["a", "b", "c"]})
    by_id = ex.collect_outputs(result["run_id"])
    by_path = ex.collect_outputs(result["output_path"])
    for collected in (by_id, by_path):
        assert set(collected) == set(scraps)
        assert isinstance(collected["frame"], pd.DataFrame)
        pd.testing.assert_frame_equal(
            collected["frame"].reset_index(drop=True), expected, check_dtype=False
        )
        assert collected["frame"]["name"].tolist() == ["a", "b", "c"]
        assert collected["page"]["text/html"] == "<b>bold</b>\n<i>two lines</i>"
        assert collected["an_int"] == 42
        assert collected["a_dict"] == {"k": {"nested": [1, 2]}, "none": None}
        assert collected["replaced"] == "second"


def test_dataframe_example(ex: NotebookExecutor) -> None:
    result = ex.execute(EXAMPLES / "dataframe.py", parameters={"n": 4, "label": "sq"})
    assert result["status"] == "success", result["failed_cell"]
    assert result["scraps"]["total"] == 0 + 1 + 4 + 9
    assert result["scraps"]["table"]["shape"] == [4, 2]
    assert result["scraps"]["table"]["columns"] == ["x", "sq"]
    table = ex.collect_outputs(result["run_id"])["table"]
    assert table["sq"].tolist() == [0, 1, 4, 9]
    assert table["x"].tolist() == [0, 1, 2, 3]


def test_example_notebooks(ex: NotebookExecutor) -> None:
    hello = ex.execute(EXAMPLES / "hello.py", parameters={"name": "Ada", "times": 2})
    assert hello["status"] == "success", hello["failed_cell"]
    assert hello["scraps"] == {"greeting": "Hello, Ada!", "length": 11}
    logbook = ex.execute(
        EXAMPLES / "logbook.md", parameters={"station": "X1", "readings": [1, 2, 4.5]}
    )
    assert logbook["status"] == "success", logbook["failed_cell"]
    assert logbook["parameters"] == {"station": "X1", "readings": [1, 2, 4.5], "unit": "mm"}
    assert logbook["scraps"] == {"station": "X1", "mean": 2.5, "total": 7.5}
    with pytest.raises(ParameterError, match="station"):
        ex.execute(EXAMPLES / "logbook.md")


# -- 7. working directory, environment, output path, many runs ----------------------------------

WHERE = """# %%
import os
import scrapbook as sb
from pathlib import Path

sb.glue("cwd", os.getcwd())
sb.glue("data", Path("data.txt").read_text() if Path("data.txt").exists() else "")
sb.glue("value", os.environ.get("NBX_TEST_VALUE", ""))
sb.glue("secret_length", len(os.environ.get("NBX_TEST_SECRET", "")))
print("the secret is", os.environ.get("NBX_TEST_SECRET"))
"""


def test_kernel_cwd_env_and_secrets(ex: NotebookExecutor, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    source = write(folder, "where.py", WHERE)
    write(folder, "data.txt", "next to the notebook")
    other = tmp_path / "other"
    write(other, "data.txt", "in the other folder")

    result = ex.execute(source)
    assert result["status"] == "success", result["failed_cell"]
    assert result["scraps"]["cwd"] == os.fspath(folder.resolve())
    assert result["scraps"]["data"] == "next to the notebook"
    assert result["scraps"]["value"] == ""
    assert result["scraps"]["secret_length"] == 0

    secret = "s3cr3t-v4lue-xyz"
    result = ex.execute(
        source,
        cwd=other,
        env={"NBX_TEST_VALUE": "v-123"},
        secrets={"NBX_TEST_SECRET": secret},
    )
    assert result["status"] == "success", result["failed_cell"]
    assert result["scraps"]["cwd"] == os.fspath(other.resolve())
    assert result["scraps"]["data"] == "in the other folder"
    assert result["scraps"]["value"] == "v-123"
    assert result["scraps"]["secret_length"] == len(secret)

    ipynb = Path(result["output_path"])
    record = json.loads(ipynb.read_text(encoding="utf-8"))["metadata"]["notebook_executor"]
    assert record["env_names"] == ["NBX_TEST_VALUE"]
    assert record["secret_names"] == ["NBX_TEST_SECRET"]
    provenance = {key: value for key, value in record.items() if key != "scraps"}
    assert "v-123" not in json.dumps(provenance)
    assert secret not in json.dumps(result)
    assert "[secret NBX_TEST_SECRET]" in ipynb.read_text(encoding="utf-8")
    assert scan_tree(ipynb.parent.parent, {"NBX_TEST_SECRET": secret}) == {}


def test_output_path(ex: NotebookExecutor, nbdir: Path, tmp_path: Path, runs_dir: Path) -> None:
    source = write(nbdir, "greeter_percent.py", PERCENT)
    target = tmp_path / "out" / "executed.ipynb"
    target.parent.mkdir()
    result = ex.execute(source, output_path=target, parameters={"name": "Bo", "count": 1})
    assert result["status"] == "success", result["failed_cell"]
    assert Path(result["output_path"]) == target
    executed = nbformat.read(target, as_version=4)
    nbformat.validate(executed)
    assert executed.metadata["notebook_executor"]["run_id"] == result["run_id"]
    streams = [o["text"] for c in executed.cells for o in c.get("outputs", []) if "text" in o]
    assert streams == ["Hello, Bo!\n"]
    assert ex.collect_outputs(target)["greeting"] == "Hello, Bo!"
    # The run record is kept under runs_dir all the same.
    day = result["started_at"][:10]
    assert (runs_dir / day / f"{result['run_id']}.ipynb").is_file()
    assert (runs_dir / day / f"{result['run_id']}.md").is_file()


ODD_FAILS = """# %% tags=["parameters"]
x: int = 0

# %%
import scrapbook as sb

if x % 2:
    raise RuntimeError(f"odd {x}")
sb.glue("half", x // 2)
"""


def test_execute_many_keeps_order(ex: NotebookExecutor, nbdir: Path) -> None:
    source = write(nbdir, "odd_fails.py", ODD_FAILS)
    sets = [{"x": 4}, {"x": 1}, None, {"x": 3}, {"x": 10}]
    results = ex.execute_many(source, sets, max_workers=2)
    assert [r["status"] for r in results] == ["success", "error", "success", "error", "success"]
    assert [r["parameters"]["x"] for r in results] == [4, 1, 0, 3, 10]
    assert [r["scraps"] for r in results] == [{"half": 2}, {}, {"half": 0}, {}, {"half": 5}]
    assert [r["failed_cell"]["evalue"] for r in results if r["failed_cell"]] == ["odd 1", "odd 3"]
    assert all(r["failed_cell"]["index"] == 1 for r in results if r["failed_cell"])
    assert len({r["run_id"] for r in results}) == len(sets)


def test_cell_progress_on_a_real_kernel(
    tmp_path: Path, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kernel engine reports each completed cell: the bar counts them on stderr."""
    (tmp_path / "slow.py").write_text(
        "# %%\nx = 1\n\n# %%\nimport time\ntime.sleep(1.3)\n\n# %%\ny = 2\n\n# %%\n1 / 0\n"
    )
    with NotebookExecutor(runs_dir=runs_dir, progress=True) as executor:
        result = executor.execute(tmp_path / "slow.py")
    assert (result["status"], failed_cell(result)["index"]) == ("error", 3)
    shown = capsys.readouterr()
    assert "slow.py" in shown.err
    assert "2/4" in shown.err
    assert "4/4" not in shown.err
    assert shown.out == ""
