"""NotebookExecutor with the fake engine: the whole facade, no kernel."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import pytest

import notebook_executor
from notebook_executor import (
    NotebookExecutor,
    NotebookExecutorError,
    NotebookSourceError,
    ParameterError,
    RunNotFoundError,
    read_notebook,
)
from notebook_executor._run.cell_loop import run_job
from support import RESULT_KEYS, failed_cell
from unit.fake_engine import FakeEngine

DATA = Path(__file__).resolve().parents[1] / "data" / "notebooks"

NOTEBOOK = """# %% [markdown]
# # Title

# %% tags=["parameters"]
x: int = 1  # a number
label: str = "a"

# %%
import scrapbook as sb
print("x is", x)
sb.glue("double", x * 2)
sb.glue("label", label)

# %% [markdown]
# Middle.

# %%
if x < 0:
    raise ValueError(f"x must not be negative, got {x}")
y = x + 1
y
"""

SECRET = "s3cr3t-Zq9-tok3n-value"
ENV_VALUE = "visible-env-value-7731"

LEAKY = """# %% tags=["parameters"]
note: str = ""

# %%
import os
import scrapbook as sb
token = os.environ["API_TOKEN"]
print("token:", token)
sb.glue("token", token)
sb.glue("nested", {"deep": [token, "ok"]})
print("flag:", os.environ["MY_FLAG"])

# %%
raise RuntimeError("failed with " + token)
"""


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test runs in ``tmp_path``, which holds ``nb.py`` (and the tier's ``ex`` writes
    to ``runs`` there)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nb.py").write_text(NOTEBOOK)
    return tmp_path


def _all_bytes(folder: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in sorted(folder.rglob("*")) if p.is_file()]


# -- results and run records -----------------------------------------------------------------------


def test_result_shape(ex: NotebookExecutor, workdir: Path) -> None:
    result = ex.execute("nb.py", parameters={"x": 3}, request="triple check")
    assert list(result) == RESULT_KEYS
    assert json.loads(json.dumps(result)) == result
    assert result["status"] == "success"
    assert result["error_kind"] is None
    assert result["notebook"] == "nb.py"
    assert result["parameters"] == {"x": 3, "label": "a"}
    assert result["request"] == "triple check"
    assert result["cells_total"] == 3
    assert result["cells_executed"] == 3
    assert result["failed_cell"] is None
    assert result["scraps"] == {"double": 6, "label": "a"}
    assert result["started_at"].endswith("Z") and result["finished_at"] >= result["started_at"]
    assert isinstance(result["duration_seconds"], float)


def test_run_files_are_written_under_the_start_date(ex: NotebookExecutor, workdir: Path) -> None:
    result = ex.execute("nb.py")
    day = result["started_at"][:10]
    folder = workdir / "runs" / day
    run_file = folder / f"{result['run_id']}.ipynb"
    assert Path(result["output_path"]) == run_file
    assert sorted(p.name for p in folder.iterdir()) == [
        f"{result['run_id']}.ipynb",
        f"{result['run_id']}.md",
    ]
    executed = nbformat.read(run_file, as_version=4)
    nbformat.validate(executed)
    record = executed.metadata["notebook_executor"]
    assert record["run_id"] == result["run_id"]
    assert record["source"]["path"] == "nb.py"
    assert record["source"]["sha256"] == hashlib.sha256(Path("nb.py").read_bytes()).hexdigest()
    assert record["kernel"]["name"] == "python3"
    assert "nbformat" in record["environment"]["packages"]
    stdout = executed.cells[2].outputs[0]
    assert stdout.output_type == "stream" and stdout.text == "x is 1\n"
    assert [c.metadata["notebook_executor"]["status"] for c in executed.cells if "id" in c and
            c.cell_type == "code"] == ["completed"] * 3  # fmt: skip
    markdown = run_file.with_suffix(".md").read_text()
    assert f"run_id: {result['run_id']}" in markdown
    assert "status: success" in markdown


def test_output_path_gets_a_copy(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "out").mkdir()  # an output_path's folder must exist: it is not created
    result = ex.execute("nb.py", output_path="out/copy.ipynb")
    assert result["output_path"] == "out/copy.ipynb"
    copy = nbformat.read(workdir / "out" / "copy.ipynb", as_version=4)
    assert copy.metadata["notebook_executor"]["run_id"] == result["run_id"]
    assert (workdir / "runs" / result["started_at"][:10] / f"{result['run_id']}.ipynb").exists()


def test_a_failing_cell_is_reported_with_its_source_index(ex: NotebookExecutor) -> None:
    result = ex.execute("nb.py", parameters={"x": -1})
    assert result["status"] == "error"
    assert result["error_kind"] == "cell_error"
    assert result["cells_executed"] == 2
    failed = failed_cell(result)
    source = read_notebook("nb.py")
    assert failed["index"] == 4
    assert source.cells[failed["index"]].source == failed["source"]
    assert failed["ename"] == "ValueError"
    assert failed["evalue"] == "x must not be negative, got -1"
    assert failed["traceback"][-1] == "ValueError: x must not be negative, got -1"
    assert not any("\x1b" in line for line in failed["traceback"])
    executed = nbformat.read(result["output_path"], as_version=4)
    assert executed.cells[5].outputs[-1].output_type == "error"


def test_failed_cell_index_without_injection(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "neg.py").write_text(NOTEBOOK.replace("x: int = 1", "x: int = -5"))
    result = ex.execute("neg.py")
    assert failed_cell(result)["index"] == 4


def test_failure_in_the_parameters_cell_is_the_parameters_cell(
    ex: NotebookExecutor, workdir: Path
) -> None:
    (workdir / "p.py").write_text('# %% tags=["parameters"]\nx = 1\nboom = 1 / 0\n\n# %%\nx\n')
    result = ex.execute("p.py", parameters={"x": 2})
    assert failed_cell(result)["index"] == 0
    assert failed_cell(result)["ename"] == "ZeroDivisionError"


@pytest.mark.parametrize(
    ("raise_line", "kind"),
    [("raise SimulatedTimeout()", "timeout"), ("raise SimulatedKernelDeath()", "kernel_died")],
)
def test_timeout_and_dead_kernel_name_the_running_cell(
    ex: NotebookExecutor, workdir: Path, raise_line: str, kind: str
) -> None:
    (workdir / "t.py").write_text(
        f'# %% tags=["parameters"]\nn = 1\n\n# %%\nprint(n)\n\n# %%\n{raise_line}\n\n# %%\nz = 3\n'
    )
    result = ex.execute("t.py", parameters={"n": 2})
    assert result["status"] == "error"
    assert result["error_kind"] == kind
    assert failed_cell(result)["index"] == 2
    assert result["cells_executed"] == 2
    executed = nbformat.read(result["output_path"], as_version=4)
    statuses = [c.metadata["notebook_executor"]["status"] for c in executed.cells]
    assert statuses == ["completed", "completed", "completed", "failed", "not_run"]
    assert executed.cells[4].execution_count is None
    assert executed.cells[4].outputs == []


def test_cell_timeout_is_handed_to_the_engine(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "slow.py").write_text("# %%\nimport time\ntime.sleep(0.05)\n\n# %%\nz = 1\n")
    result = ex.execute("slow.py", cell_timeout=0.01, timeout=100)
    assert result["error_kind"] == "timeout"
    assert failed_cell(result)["index"] == 0


def test_cancelling_keeps_what_ran(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "c.py").write_text("# %%\na = 1\n\n# %%\nb = 2\n\n# %%\nraise SimulatedInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        ex.execute("c.py")
    [run_file] = (workdir / "runs").rglob("*.ipynb")
    record = nbformat.read(run_file, as_version=4).metadata["notebook_executor"]
    assert record["status"] == "error"
    assert record["error_kind"] == "cancelled"
    assert record["failed_cell"]["index"] == 2
    assert record["cells_executed"] == 2


def test_a_non_json_literal_default_does_not_break_the_run(
    ex: NotebookExecutor, workdir: Path
) -> None:
    (workdir / "s.py").write_text(
        '# %% tags=["parameters"]\nwanted = {1, 2}\nraw = b"x"\nn = 1\n\n# %%\nprint(n)\n'
    )
    result = ex.execute("s.py", parameters={"n": 2})
    json.dumps(result)
    assert result["status"] == "success"
    assert result["parameters"]["n"] == 2


# -- secrets and environment ---------------------------------------------------------------------


def test_secrets_never_reach_the_result_or_any_run_file(
    ex: NotebookExecutor, workdir: Path, engine: FakeEngine
) -> None:
    (workdir / "leaky.py").write_text(LEAKY)
    result = ex.execute(
        "leaky.py",
        parameters={"note": f"see {SECRET}"},
        request=f"please use {SECRET}",
        env={"MY_FLAG": ENV_VALUE},
        secrets={"API_TOKEN": SECRET},
    )
    # The kernel did get the secret (the fake ran with it in os.environ).
    assert engine.jobs[0].env["API_TOKEN"] == SECRET
    assert result["status"] == "error"
    text = json.dumps(result)
    assert SECRET not in text
    assert "[secret API_TOKEN]" in failed_cell(result)["evalue"]
    assert result["scraps"]["token"] == "[secret API_TOKEN]"
    files = _all_bytes(workdir / "runs")
    assert any(p.suffix == ".ipynb" for p, _ in files)
    assert any(p.name == "catalog.sqlite" for p, _ in files)
    for path, data in files:
        assert SECRET.encode() not in data, path
        # The notebook prints ENV_VALUE: its outputs hold it, and so does the full-text index
        # of those outputs in the catalog; the record itself never does (checked below).
        assert (
            ENV_VALUE.encode() not in data
            or path.suffix in (".ipynb", ".md")
            or (path.name.startswith("catalog.sqlite"))
        ), path
    record = ex.get_run(result["run_id"])
    assert SECRET not in json.dumps(record)
    stored = nbformat.read(result["output_path"], as_version=4).metadata["notebook_executor"]
    assert stored["secret_names"] == ["API_TOKEN"]
    assert stored["env_names"] == ["MY_FLAG"]
    assert ENV_VALUE not in json.dumps(stored)
    assert SECRET not in json.dumps(ex.collect_outputs(result["run_id"]))


def test_environment_values_are_not_recorded(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "e.py").write_text(
        "# %%\nimport os\nassert os.environ['MY_FLAG'].startswith('hidden')\n"
    )
    result = ex.execute("e.py", env={"MY_FLAG": ENV_VALUE.replace("visible", "hidden")})
    assert result["status"] == "success"  # the kernel saw the variable
    for path, data in _all_bytes(workdir / "runs"):
        assert b"hidden-env-value" not in data, path


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"input_path": "missing.py"}, NotebookSourceError),
        ({"input_path": "nb.txt"}, NotebookSourceError),
        ({"parameters": {"nope": 1}}, ParameterError),
        ({"parameters": {"x": "1"}}, ParameterError),
        ({"parameters": {"x": True}}, ParameterError),
        ({"parameters": {"x": object()}}, ParameterError),
        ({"parameters": [("x", 1)]}, NotebookExecutorError),
        ({"output_path": "out.py"}, NotebookExecutorError),
        ({"output_path": {"x": 1}}, NotebookExecutorError),
        ({"input_path": 5}, NotebookExecutorError),
        ({"cwd": {"x": 1}}, NotebookExecutorError),
        ({"timeout": -1}, NotebookExecutorError),
        ({"timeout": 0}, NotebookExecutorError),
        ({"cell_timeout": "5"}, NotebookExecutorError),
        ({"cell_timeout": float("nan")}, NotebookExecutorError),
        ({"request": 5}, NotebookExecutorError),
        ({"cwd": "missing-dir"}, NotebookExecutorError),
        ({"env": {"A=B": "x"}}, NotebookExecutorError),
        ({"env": {"A": 1}}, NotebookExecutorError),
        ({"secrets": {"": "x"}}, NotebookExecutorError),
        ({"secrets": {"T": "a\x00b"}}, NotebookExecutorError),
        ({"secrets": "T=x"}, NotebookExecutorError),
    ],
)
def test_bad_input_raises_before_the_engine_runs(
    ex: NotebookExecutor,
    workdir: Path,
    engine: FakeEngine,
    arguments: dict[str, Any],
    error: type[Exception],
) -> None:
    (workdir / "nb.txt").write_text("x")
    call = {"input_path": "nb.py", **arguments}
    with pytest.raises(error) as info:
        ex.execute(**call)
    assert isinstance(info.value, NotebookExecutorError)
    assert engine.jobs == []
    assert not (workdir / "runs").exists()


def test_parameter_errors_list_the_notebook_parameters(ex: NotebookExecutor) -> None:
    with pytest.raises(ParameterError) as info:
        ex.execute("nb.py", parameters={"x": "three"})
    assert "'x'" in str(info.value)
    assert "x: int = 1" in str(info.value)
    assert "label: str = 'a'" in str(info.value)


# -- several runs, past runs ---------------------------------------------------------------------


def test_execute_many_keeps_the_order(ex: NotebookExecutor, engine: FakeEngine) -> None:
    results = ex.execute_many("nb.py", [{"x": 3}, {"x": 1}, None, {"x": -1}, {"x": 2}])
    assert [r["parameters"]["x"] for r in results] == [3, 1, 1, -1, 2]
    assert [r["status"] for r in results] == ["success"] * 3 + ["error", "success"]
    assert len({r["run_id"] for r in results}) == 5
    assert len(engine.jobs) == 5


def test_execute_many_checks_every_set_first(
    ex: NotebookExecutor, engine: FakeEngine, workdir: Path
) -> None:
    with pytest.raises(ParameterError):
        ex.execute_many("nb.py", [{"x": 1}, {"x": "bad"}])
    with pytest.raises(NotebookExecutorError):
        ex.execute_many("nb.py", [{"x": 1}], output_path="o.ipynb")
    with pytest.raises(NotebookExecutorError):
        ex.execute_many("nb.py", [{"x": 1}], max_workers=0)
    assert engine.jobs == []
    assert not (workdir / "runs").exists()


def test_none_lifts_the_executors_limits_for_one_run(tmp_path: Path, workdir: Path) -> None:
    engine = FakeEngine()
    with NotebookExecutor(
        runs_dir=tmp_path / "runs", timeout=5, cell_timeout=2, engine=engine
    ) as ex:
        ex.execute("nb.py")
        ex.execute("nb.py", timeout=None, cell_timeout=None)
        ex.execute("nb.py", timeout=notebook_executor.USE_DEFAULT, cell_timeout=7)
        ex.execute_many("nb.py", [{}], timeout=None)
    limits = [(job.timeout, job.cell_timeout) for job in engine.jobs]
    assert limits == [(5.0, 2.0), (None, None), (5.0, 7.0), (None, 2.0)]


def test_execute_many_passes_options(ex: NotebookExecutor, engine: FakeEngine) -> None:
    [result] = ex.execute_many("nb.py", [{"x": 2}], request="batch", cell_timeout=30)
    assert result["request"] == "batch"
    assert engine.jobs[0].cell_timeout == 30.0


def test_get_run_returns_the_result(ex: NotebookExecutor, workdir: Path) -> None:
    with NotebookExecutor(runs_dir="runs", engine=FakeEngine()) as relative:
        result = relative.execute("nb.py", parameters={"x": 5}, request="r")
        assert relative.get_run(result["run_id"]) == result
    # Another executor on the same runs folder sees the same run.
    assert ex.get_run(result["run_id"]) == result


def test_get_run_of_an_unknown_run(ex: NotebookExecutor) -> None:
    with pytest.raises(RunNotFoundError):
        ex.get_run("20240101T000000Z-nb-00000000")
    with pytest.raises(RunNotFoundError):
        ex.get_run("../../etc/passwd")


def test_collect_outputs_by_path_and_by_run_id(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "f.py").write_text(
        "# %%\nimport pandas as pd\nimport scrapbook as sb\n"
        "sb.glue('frame', pd.DataFrame({'a': [1, 2]}))\nsb.glue('n', 3)\n"
    )
    result = ex.execute("f.py")
    assert result["scraps"]["n"] == 3
    assert result["scraps"]["frame"]["encoder"] == "pandas"
    assert result["scraps"]["frame"]["shape"] == [2, 1]
    by_id = ex.collect_outputs(result["run_id"])
    by_path = ex.collect_outputs(result["output_path"])
    for outputs in (by_id, by_path):
        assert outputs["n"] == 3
        pd.testing.assert_frame_equal(outputs["frame"], pd.DataFrame({"a": [1, 2]}))


@pytest.mark.parametrize("what", ["20240101T000000Z-nb-00000000", "nope", "../x.ipynb"])
def test_collect_outputs_of_an_unknown_run(ex: NotebookExecutor, what: str) -> None:
    with pytest.raises(RunNotFoundError):
        ex.collect_outputs(what)


def test_inspect_parameters(ex: NotebookExecutor) -> None:
    assert ex.inspect_parameters("nb.py") == {
        "x": {"name": "x", "type": "int", "default": 1, "help": "a number", "required": False},
        "label": {"name": "label", "type": "str", "default": "a", "help": "", "required": False},
    }
    assert ex.inspect_parameters(DATA / "unit_logbook.md")["station"]["required"] is True


def test_logbook_runs_with_the_fake_engine(ex: NotebookExecutor) -> None:
    result = ex.execute(DATA / "unit_logbook.md", parameters={"station": "north"})
    assert result["status"] == "success"
    assert result["scraps"] == {"station": "north", "mean": 4.333}
    # Its two ```python blocks: the front matter is no code cell of the source.
    assert result["cells_total"] == result["cells_executed"] == 2


def test_read_and_write_notebook_are_static(workdir: Path) -> None:
    nb = NotebookExecutor.read_notebook("nb.py")
    assert NotebookExecutor.write_notebook(nb, "copy.md") == Path("copy.md")
    assert len(read_notebook("copy.md").cells) == len(nb.cells)


# -- lifecycle -----------------------------------------------------------------------------------


def test_close_closes_the_engine_once(workdir: Path) -> None:
    engine = FakeEngine()
    executor = NotebookExecutor(runs_dir="runs", engine=engine)
    with executor:
        pass
    executor.close()
    assert engine.closed == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda ex: ex.execute("nb.py"),
        lambda ex: ex.execute_many("nb.py", [{}]),
        lambda ex: ex.runs(),
        lambda ex: ex.scraps(),
        lambda ex: ex.reindex(),
    ],
    ids=["execute", "execute_many", "runs", "scraps", "reindex"],
)
def test_a_closed_executor_refuses_work(workdir: Path, call: Any) -> None:
    engine = FakeEngine()
    executor = NotebookExecutor(runs_dir="runs", engine=engine)
    executor.close()
    with pytest.raises(NotebookExecutorError, match="closed"):
        call(executor)
    assert engine.jobs == []


@pytest.mark.parametrize("value", [0, -1, "1", True, float("nan")])
def test_constructor_checks_timeouts(value: Any) -> None:
    with pytest.raises(NotebookExecutorError):
        NotebookExecutor(timeout=value, engine=FakeEngine())
    with pytest.raises(NotebookExecutorError):
        NotebookExecutor(cell_timeout=value, engine=FakeEngine())


# -- the public surface --------------------------------------------------------------------------


def test_public_names_are_pinned() -> None:
    assert notebook_executor.__all__ == [
        "USE_DEFAULT",
        "CatalogError",
        "CellChange",
        "CellEdit",
        "CellText",
        "ClusterError",
        "DependencyError",
        "Digest",
        "DigestFailure",
        "DigestNote",
        "DigestParameter",
        "DigestScraps",
        "DigestStatus",
        "DigestTrend",
        "DigestValue",
        "EditConflictError",
        "Engine",
        "EngineOutcome",
        "ErrorKind",
        "EvaluationFailure",
        "EvaluationResult",
        "ExecutorClosedError",
        "FailedCell",
        "InvalidArgumentError",
        "Job",
        "JobState",
        "JobStatus",
        "KernelStartError",
        "NotebookDiff",
        "NotebookExecutor",
        "NotebookExecutorError",
        "NotebookSourceError",
        "OutputCut",
        "OutputPathError",
        "OutputWriteError",
        "ParameterError",
        "ParameterInfo",
        "RecordWriteError",
        "ReportError",
        "RunCancelled",
        "RunDiff",
        "RunJob",
        "RunNotFoundError",
        "RunOptions",
        "RunResult",
        "RunsDirError",
        "SearchHit",
        "SearchQueryError",
        "Session",
        "StepResult",
        "ValidateAnswer",
        "ValidateProblem",
        "__version__",
        "read_notebook",
        "write_notebook",
    ]
    for name in notebook_executor.__all__:
        assert hasattr(notebook_executor, name)


def test_only_exceptions_are_named_like_exceptions() -> None:
    """``except notebook_executor.X`` must work for every public name ending in Error."""
    for name in notebook_executor.__all__:
        if name.endswith("Error"):
            assert issubclass(getattr(notebook_executor, name), BaseException), name


def test_every_public_shape_lives_in_one_module() -> None:
    from typing import is_typeddict

    shapes = [n for n in notebook_executor.__all__ if is_typeddict(getattr(notebook_executor, n))]
    assert {getattr(notebook_executor, n).__module__ for n in shapes} == {
        "notebook_executor._types"
    }
    # The shapes that public shapes name are public too.
    for name in shapes:
        for hint in getattr(notebook_executor, name).__annotations__.values():
            for word in str(hint).replace("[", " ").replace("]", " ").replace("|", " ").split():
                if word in notebook_executor._types.__all__:
                    assert word in notebook_executor.__all__, (name, word)


def test_errors_form_one_tree() -> None:
    for name in (
        "NotebookSourceError",
        "ParameterError",
        "RunNotFoundError",
        "CatalogError",
        "RunsDirError",
        "OutputWriteError",
        "InvalidArgumentError",
        "OutputPathError",
        "SearchQueryError",
        "EditConflictError",
        "ClusterError",
        "DependencyError",
        "ReportError",
        "KernelStartError",
        "ExecutorClosedError",
    ):
        assert issubclass(getattr(notebook_executor, name), NotebookExecutorError)
    # Errors about input are also ValueErrors (as httpx's are), for code that expects those.
    for name in (
        "NotebookSourceError",
        "ParameterError",
        "InvalidArgumentError",
        "OutputPathError",
        "SearchQueryError",
    ):
        assert issubclass(getattr(notebook_executor, name), ValueError)
    # A cancelled run is an interrupt, outside the tree: except Exception does not swallow it.
    assert issubclass(notebook_executor.RunCancelled, KeyboardInterrupt)


def test_importing_the_package_is_light() -> None:
    code = (
        "import sys, notebook_executor\n"
        "heavy = ['nbformat', 'nbclient', 'pandas', 'jupyter_client', 'papermill', 'jupytext',"
        " 'scrapbook', 'yaml', 'pyarrow', 'zmq', 'asyncio', 'ssl', 'subprocess', 'sqlite3']\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


# -- progress ------------------------------------------------------------------------------------

SLOW = """# %%
x = 1

# %%
import time
time.sleep(1.3)

# %%
y = 2
"""


def test_a_cell_progress_bar_shows_for_a_slow_run_when_asked(
    workdir: Path, engine: FakeEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "slow.py").write_text(SLOW)
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine, progress=True) as ex:
        assert ex.execute("slow.py")["status"] == "success"
        shown = capsys.readouterr()
        assert "slow.py" in shown.err
        assert "2/3" in shown.err
        assert shown.out == ""
        # A quick run shows nothing: the bar waits a second before it appears.
        ex.execute("nb.py")
        assert capsys.readouterr().err == ""


def test_the_cell_bar_shows_while_one_long_cell_runs(
    workdir: Path, engine: FakeEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cells report only when they complete: the bar is redrawn meanwhile, so a single long
    cell shows a bar (still at 0 of 1) instead of nothing."""
    (workdir / "long.py").write_text("# %%\nimport time\ntime.sleep(1.6)\n")
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine, progress=True) as ex:
        assert ex.execute("long.py")["status"] == "success"
    shown = capsys.readouterr()
    assert "long.py:   0%" in shown.err
    assert "0/1" in shown.err
    assert shown.out == ""


@pytest.mark.parametrize("progress", [False, None])
def test_no_cell_progress_bar_unless_asked_or_on_a_terminal(
    workdir: Path,
    engine: FakeEngine,
    capsys: pytest.CaptureFixture[str],
    progress: bool | None,
) -> None:
    (workdir / "slow.py").write_text(SLOW)
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine, progress=progress) as ex:
        assert ex.execute("slow.py")["status"] == "success"
    assert capsys.readouterr().err == ""


def test_the_engine_reports_each_completed_code_cell(workdir: Path, engine: FakeEngine) -> None:
    """What the progress bar counts: completed code cells, up to a failing one."""
    (workdir / "fails.py").write_text("# %%\nx = 1\n\n# %% [markdown]\n# note\n\n# %%\n1 / 0\n")
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        ex.execute("fails.py")
    job = engine.jobs[-1]
    assert job.hooks.on_cell_executed == []
    seen: list[int] = []
    job.hooks.on_cell_executed.append(lambda ran: seen.append(ran.index) if ran.completed else None)
    run_job(engine, job)
    assert seen == [0]


@pytest.mark.parametrize("progress", [True, False])
def test_execute_many_shows_a_bar_of_runs_when_asked(
    workdir: Path, engine: FakeEngine, capsys: pytest.CaptureFixture[str], progress: bool
) -> None:
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine, progress=progress) as ex:
        results = ex.execute_many("nb.py", [{"x": i} for i in range(3)], max_workers=1)
    assert [r["status"] for r in results] == ["success"] * 3
    shown = capsys.readouterr()
    assert ("3/3" in shown.err) is progress
    assert shown.out == ""


# -- the fake behaves as a kernel where tests rely on it --------------------------------------

SPLIT_WRITES = """# %% tags=["parameters"]
mark = ""

# %%
import os, sys, time
value = os.environ["MARK_VALUE"]
for _ in range(20):
    sys.stdout.write(value[:3])
    sys.stdout.flush()
    time.sleep(0.001)
    sys.stdout.write(value[3:] + "\\n")
    sys.stdout.flush()
print("done", mark, flush=True)
"""


def test_each_flushed_write_is_an_output_of_its_own(
    ex: NotebookExecutor, engine: FakeEngine, workdir: Path
) -> None:
    (workdir / "split.py").write_text(
        "# %%\nimport sys\nsys.stdout.write('abc')\nsys.stdout.flush()\n"
        "sys.stdout.write('def')\nprint('!', 1)\n_ = sys.stderr.write('e')\n"
    )
    result = ex.execute("split.py")
    # As a kernel sends them: one output per flush (the engine's own notebook) ...
    cell = engine.jobs[-1].nb.cells[0]
    texts = [(o.get("name"), o.get("text", o.get("evalue"))) for o in cell.outputs]
    assert texts == [("stdout", "abc"), ("stdout", "def! 1\n"), ("stderr", "e")]
    # ... and the run records hold each stream coalesced, as they are redacted.
    cell = nbformat.read(result["output_path"], as_version=4).cells[0]
    texts = [(o.get("name"), o.get("text", o.get("evalue"))) for o in cell.outputs]
    assert texts == [("stdout", "abcdef! 1\n"), ("stderr", "e")]


def test_threads_of_execute_many_keep_their_output_and_environment_apart(
    workdir: Path,
) -> None:
    (workdir / "split.py").write_text(SPLIT_WRITES)
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=workdir / "runs", engine=engine) as ex:
        plans = [{"mark": str(i)} for i in range(8)]
        results = [
            ex.execute_many("split.py", plans, max_workers=8, env={"MARK_VALUE": f"<{i}-value>"})
            for i in range(2)
        ]
    assert "MARK_VALUE" not in __import__("os").environ
    for i, batch in enumerate(results):
        for mark, result in enumerate(batch):
            assert result["status"] == "success", result
            cell = nbformat.read(result["output_path"], as_version=4).cells[-1]
            texts = [o["text"] for o in cell.outputs]
            # The run record holds the stream coalesced: every piece of this run's, none other's.
            assert texts == [f"<{i}-value>\n" * 20 + f"done {mark}\n"]


@pytest.mark.parametrize(("code", "status"), [("0", "success"), ("", "success"), ("2", "error")])
def test_an_exit_ends_the_run_and_only_a_clean_one_succeeds(
    ex: NotebookExecutor, workdir: Path, code: str, status: str
) -> None:
    (workdir / "exits.py").write_text(
        f'# %%\nimport sys\nsys.exit({code})\n\n# %% tags=["skip-execution"]\nx = 1\n\n'
        "# %%\nprint('never')\n"
    )
    result = ex.execute("exits.py")
    assert result["status"] == status, result
    assert (result["cells_total"], result["cells_executed"]) == (3, 1 if status == "success" else 0)
    cells = nbformat.read(result["output_path"], as_version=4).cells
    statuses = [c.metadata["notebook_executor"]["status"] for c in cells]
    first = "completed" if status == "success" else "failed"
    assert statuses == [first, "skipped", "not_run"]
    assert cells[0].metadata["notebook_executor"].get("exited", False) is (status == "success")
