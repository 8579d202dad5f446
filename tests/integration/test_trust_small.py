"""Issue 44 ("Trust, round 5"), two small findings: what a session's evaluation says it keeps,
and a golden file the pytest plugin cannot read.

- An evaluation's code is bounded (:data:`~notebook_executor._sources.bounded.MAX_CODE_CHARS`):
  longer code is refused before anything runs, by the API (``InvalidArgumentError``) and by
  ``session eval`` (one line, exit status 2). An evaluation's output is not part of the
  notebook: when its answer is cut, the marker says the rest is not kept, and so does the log.
- ``pytest --notebooks`` with a golden outputs file it cannot read (a folder in its place, not
  UTF-8, not JSON, not golden outputs), or cannot write: the item fails with a short report
  naming the file and the reason, not a traceback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import InvalidArgumentError, NotebookExecutor
from notebook_executor._records.store import RunStore
from notebook_executor._sources.bounded import MAX_CODE_CHARS

from .test_pytest_plugin import _outcomes, _pytest
from .test_run_server import Shell, shell

__all__ = ["shell"]  # the fixture, imported to be used here

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

CUT = re.compile(r"\[\.\.\. cut: ([\d,]+) more characters([^\]]*)\]")


def _record(runs_dir: Path, run_id: str) -> dict[str, Any]:
    """The session's run record (its ``.ipynb``), as JSON."""
    record: dict[str, Any] = json.loads(RunStore(runs_dir).path(run_id).read_text("utf-8"))
    return record


def _log(runs_dir: Path, run_id: str) -> list[dict[str, Any]]:
    log: list[dict[str, Any]] = _record(runs_dir, run_id)["metadata"]["notebook_executor"][
        "session"
    ]["log"]
    return log


def test_an_evaluation_over_the_bound_is_refused_and_a_cut_answer_says_what_is_kept(
    tmp_path: Path,
) -> None:
    (tmp_path / "nb.py").write_text("# %%\nx = 1\n")
    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs, warm_kernels=0) as ex:
        with ex.open_session(tmp_path / "nb.py") as session:
            code = "marker = 1  # " + "x" * MAX_CODE_CHARS
            with pytest.raises(InvalidArgumentError, match=f"over {MAX_CODE_CHARS:,} characters"):
                session.evaluate(code)
            # Nothing ran, nothing was logged.
            assert session.evaluate("'marker' in dir()")["output"] == "False\n"
            assert [e["kind"] for e in _log(runs, session.run_id)].count("evaluate") == 1
            # Code at the bound runs.
            code = "'" + "y" * (MAX_CODE_CHARS - 2) + "'"
            answer = session.evaluate(code)
            assert answer["status"] == "success"
            [(count, where)] = CUT.findall(answer["output"])
            assert int(count.replace(",", "")) > MAX_CODE_CHARS - 5_000
            # The answer's rest is nowhere: not in the notebook (an evaluation is not a cell).
            assert where == " not kept", answer["output"][-200:]
            assert "cell -1" not in answer["output"]
            # Nor is a long error's value.
            error = session.evaluate("raise ValueError('z' * 5000)")["error"]
            assert error is not None
            assert [w for _count, w in CUT.findall(error["evalue"])] == [" not kept"], error
            run_id = session.run_id
        entry = _log(runs, run_id)[-3]
        assert entry["kind"] == "evaluate"
        # The log keeps the start of the code and of the output, and says the rest is not kept.
        for text in (entry["code"], entry["output"]):
            assert isinstance(text, str) and len(text) < 2_200
            assert [where for _count, where in CUT.findall(text)][-1] == " not kept", text[-200:]
        assert "y" * 5_000 not in json.dumps(_record(runs, run_id))


def test_session_eval_refuses_a_huge_input_in_one_line(shell: Shell) -> None:
    code, out, err = shell.run("session", "open", "hello.py", "--json")
    assert code == 0, err
    sid = json.loads(out)["session_id"]
    for size in (MAX_CODE_CHARS + 1, 200 * 1024 * 1024):
        process = shell.start("session", "eval", sid, "-")
        out, err = process.communicate("marker = 1  # " + "x" * size, timeout=120)
        assert process.returncode == 2, err
        [line] = err.strip().splitlines()
        assert f"over {MAX_CODE_CHARS:,} characters" in line, line
    code, out, err = shell.run("session", "eval", sid, "'marker' in dir()")
    assert (code, out) == (0, "False\n"), err
    code, out, err = shell.run("session", "show", sid, "--json")
    assert code == 0, err
    assert shell.run("session", "close", sid)[0] == 0


GOLDEN_TEXT = "# %%\n# NBVAL_CHECK_OUTPUT\nprint('run', 7)\n"


def test_a_golden_file_that_cannot_be_read_fails_its_item_in_a_few_lines(tmp_path: Path) -> None:
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    broken = {
        "folder": None,
        "latin1": b'{"sets": {"": {"0": [{"text": "caf\xe9"}]}}}',
        "truncated": b'{"sets": {"": {"0": [',
        "shape": b'{"golden_version": 1, "sets": {"": {"zero": 3}}}',
        "sets": b'{"golden_version": 1, "sets": ["not", "a", "mapping"]}',
    }
    for name, content in broken.items():
        (nbs / f"{name}.py").write_text(GOLDEN_TEXT, encoding="utf-8")
        golden = nbs / f"{name}.py.golden.json"
        if content is None:
            golden.mkdir()
        else:
            golden.write_bytes(content)
    done = _pytest(tmp_path, "--notebooks", "notebooks")
    assert _outcomes(done.stdout) == {f"notebooks/{name}.py": "FAILED" for name in broken}, (
        done.stdout
    )
    failures = done.stdout.split("FAILURES", 1)[1].split("short test summary", 1)[0]
    assert "Traceback" not in failures and "InvalidArgumentError" not in failures, failures
    sections = re.split(r"_{3,} notebook notebooks/\S+ _{3,}\n", failures)[1:]
    assert len(sections) == len(broken), failures
    for section in sections:
        lines = [line for line in section.splitlines() if line.strip()]
        assert len(lines) <= 3, section
        assert re.search(r"golden outputs 'notebooks/\w+\.py\.golden\.json' cannot be", section)
    # Regenerated goldens replace a file that cannot be read; over a folder, they cannot be
    # written: said in the same few lines.
    done = _pytest(
        tmp_path,
        "--notebooks",
        "--notebook-update-golden",
        "notebooks/truncated.py",
        "notebooks/folder.py",
    )
    assert _outcomes(done.stdout) == {
        "notebooks/truncated.py": "PASSED",
        "notebooks/folder.py": "FAILED",
    }, done.stdout
    stored = json.loads((nbs / "truncated.py.golden.json").read_text(encoding="utf-8"))
    assert stored["sets"][""]["0"][0]["text"] == "run 7\n"
    failure = done.stdout.split("FAILURES", 1)[1].split("short test summary", 1)[0]
    assert "Traceback" not in failure, failure
    [line] = [line for line in failure.splitlines() if line.startswith("notebook:")]
    assert line.startswith(
        "notebook: golden outputs 'notebooks/folder.py.golden.json' cannot be written: "
    ), failure
