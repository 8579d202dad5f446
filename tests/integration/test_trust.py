"""What a run stores can be trusted: no secret in any form, no output silently lost, the
caller's copy whole and valid, the result small. Real kernels throughout."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import nbformat
import pytest

from leaks import scan_tree
from notebook_executor import NotebookExecutor, NotebookExecutorError, OutputWriteError
from support import failed_cell

pytestmark = pytest.mark.kernel

CLI = [sys.executable, "-m", "notebook_executor"]
DATA = Path(__file__).parent.parent / "data" / "old_notebooks"
TOKEN = "tok_live_9f8E7d6C5b4A3x2Y1z0-QwErTy"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("trust")


@pytest.fixture(scope="module")
def ex(workdir: Path) -> Iterator[NotebookExecutor]:
    with NotebookExecutor(runs_dir=workdir / "runs") as executor:
        yield executor


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _holding(folder: Path, value: str) -> list[str]:
    return sorted(scan_tree(folder, {"value": value}))


def _record(result: Mapping[str, Any]) -> nbformat.NotebookNode:
    record: nbformat.NotebookNode = nbformat.read(result["output_path"], as_version=4)
    return record


# -- secrets ----------------------------------------------------------------------------------


PIECES = """# %%
import os, sys
s = os.environ["API_TOKEN"]
sys.stdout.write(s[:9])
sys.stdout.flush()
sys.stdout.write(s[9:])
sys.stdout.flush()
sys.stdout.write(" <- the token\\n")
"""


def test_a_secret_written_in_pieces_is_redacted(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "pieces.py").write_text(PIECES)
    runs = workdir / "pieces-runs"
    with NotebookExecutor(runs_dir=runs) as own:
        result = own.execute(workdir / "pieces.py", secrets={"API_TOKEN": TOKEN})
    assert result["status"] == "success"
    assert _holding(runs, TOKEN) == []
    assert _holding(runs, TOKEN[:9]) == []
    [stream] = [o for o in _record(result).cells[0].outputs if o.output_type == "stream"]
    assert stream.text == "[secret API_TOKEN] <- the token\n"
    markdown = Path(result["output_path"]).with_suffix(".md").read_text()
    assert "```text\n[secret API_TOKEN] <- the token\n```" in markdown


SCRAPS = """# %%
import base64, os
import pandas as pd
import scrapbook as sb
from IPython.display import display

token = os.environ["API_TOKEN"]
sb.glue("leaky_frame", pd.DataFrame({"user": ["ada", "bob"], "key": [token, "none"]}))
sb.glue("clean_frame", pd.DataFrame({"user": ["ada", "bob"], "score": [1.5, 2.5]}))
from IPython.display import Image
raw = b"\\x89PNG\\r\\n\\x1a\\n" + token.encode() + b"\\x00" * 8
sb.glue("leaky_image", Image(data=raw, format="png"), encoder="display")
display({"image/png": base64.b64encode(raw).decode()}, raw=True)
display({"image/png": base64.b64encode(b"\\x89PNG harmless").decode()}, raw=True)
"""


def test_scraps_and_outputs_holding_a_secret_are_withheld(workdir: Path) -> None:
    (workdir / "scraps.py").write_text(SCRAPS)
    runs = workdir / "scrap-runs"
    with NotebookExecutor(runs_dir=runs) as own:
        result = own.execute(workdir / "scraps.py", secrets={"API_TOKEN": TOKEN})
        collected = own.collect_outputs(result["run_id"])
        frame = own.scraps()
        listed = own.runs()
    assert result["status"] == "success", result["failed_cell"]
    why = "it holds the value of secret API_TOKEN"
    assert result["scraps"]["leaky_frame"] == {"encoder": "pandas", "withheld": why}
    assert result["scraps"]["leaky_image"] == {"encoder": "display", "withheld": why}
    assert result["scraps"]["clean_frame"]["encoder"] == "pandas"
    assert collected["leaky_frame"] == {"encoder": "pandas", "withheld": why}
    assert collected["clean_frame"]["score"].tolist() == [1.5, 2.5]
    assert listed[0]["scraps"]["leaky_frame"] == {"encoder": "pandas", "withheld": why}
    assert "scraps.leaky_frame" not in frame.columns or TOKEN not in frame.to_json()
    outputs = _record(result).cells[0].outputs
    texts = [o.get("data", {}).get("text/plain", "") for o in outputs]
    assert f"[notebook-executor: output withheld: {why}]" in texts
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1  # the harmless one
    assert _holding(runs, TOKEN) == []
    # The parquet of the leaky frame is nowhere: no stored scrap decodes to the token.
    for name, data in _files(runs).items():
        assert TOKEN.encode() not in data, name


def test_a_short_secret_damages_no_output_and_the_record_says_it_was_not_searched(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (workdir / "version.py").write_text(
        '# %%\nimport os\nprint("version 1.10", os.environ["PIN"] == "1")\n'
    )
    with NotebookExecutor(runs_dir=workdir / "short-runs") as own:
        result = own.execute(workdir / "version.py", secrets={"PIN": "1", "API_TOKEN": TOKEN})
    [stream] = _record(result).cells[0].outputs
    assert stream.text == "version 1.10 True\n"
    record = _record(result).metadata["notebook_executor"]
    assert record["secret_names"] == ["API_TOKEN", "PIN"]
    assert record["secrets_not_searched"] == ["PIN"]
    assert any("PIN" in r.getMessage() and "not searched" in r.getMessage() for r in caplog.records)


PROBE = """# %% tags=["parameters"]
mark = ""

# %%
import os
import scrapbook as sb
sb.glue("token", os.environ.get("API_TOKEN", "absent"))
sb.glue("pid", os.getpid())
"""


def test_a_warm_kernel_never_carries_a_secret_into_a_run_that_did_not_ask_for_it(
    workdir: Path,
) -> None:
    (workdir / "probe.py").write_text(PROBE)
    with NotebookExecutor(runs_dir=workdir / "warm-runs", warm_kernels=2) as own:
        seen = []
        for secrets in ({"API_TOKEN": TOKEN}, {"API_TOKEN": TOKEN}, None, None, {}, None):
            result = own.execute(workdir / "probe.py", secrets=secrets)
            assert result["status"] == "success", result["failed_cell"]
            seen.append((secrets, own.collect_outputs(result["run_id"])))
        pool = getattr(own._engine, "pool", None)
        assert pool is not None and pool.stats["taken_warm"] >= 1
    assert [s["token"] for given, s in seen if given] == ["[secret API_TOKEN]"] * 2
    assert [s["token"] for given, s in seen if not given] == ["absent"] * 4
    assert len({s["pid"] for _, s in seen}) == len(seen)


# -- output loss ------------------------------------------------------------------------------

LINES = 9_000
FLOOD = f"""# %%
import sys
for i in range({LINES}):
    print(f"line {{i:06d}} " + "x" * 100, flush=True)
"""


def test_every_line_is_kept_up_to_the_cap_and_the_copy_is_whole(workdir: Path) -> None:
    """Each print is flushed, so each is a message of its own: IOPub drops none of them. The
    run record keeps every line up to the stream cap's marker; the caller's copy keeps all."""
    (workdir / "flood.py").write_text(FLOOD)
    copy = workdir / "flood-copy.ipynb"
    with NotebookExecutor(runs_dir=workdir / "flood-runs") as own:
        result = own.execute(workdir / "flood.py", output_path=copy)
    assert result["status"] == "success"
    assert result["output_cut"] == [{"index": 0, "reason": "stream_cap"}]
    assert result["output_path"] == str(copy)
    [record] = list((workdir / "flood-runs").rglob("*.ipynb"))
    [stream] = nbformat.read(record, as_version=4).cells[0].outputs
    text, marker, after = stream.text.partition("\n[notebook-executor: output truncated, ")
    assert marker and after.endswith("more characters not kept]\n")
    numbers = [int(n) for n in re.findall(r"^line (\d+) ", text, re.MULTILINE)]
    assert len(numbers) > LINES // 2
    assert numbers == list(range(len(numbers)))
    [whole] = nbformat.read(copy, as_version=4).cells[0].outputs
    numbers = [int(n) for n in re.findall(r"^line (\d+) ", whole.text, re.MULTILINE)]
    assert numbers == list(range(LINES))


# -- output_path ------------------------------------------------------------------------------


def test_the_copy_gets_the_usual_file_mode(ex: NotebookExecutor, workdir: Path) -> None:
    (workdir / "small.py").write_text("# %%\nx = 1\n")
    previous = os.umask(0o022)
    try:
        ex.execute(workdir / "small.py", output_path=workdir / "small-copy.ipynb")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((workdir / "small-copy.ipynb").stat().st_mode) == 0o644
    nbformat.validate(nbformat.read(workdir / "small-copy.ipynb", as_version=4))


def test_the_source_as_output_path_is_refused_before_anything_starts(workdir: Path) -> None:
    source = workdir / "itself.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), source)
    before = source.read_bytes()
    runs = workdir / "itself-runs"
    with NotebookExecutor(runs_dir=runs) as own:
        for same in (source, workdir / "." / "itself.ipynb"):
            with pytest.raises(NotebookExecutorError, match="is the source notebook itself"):
                own.execute(source, output_path=same)
    assert source.read_bytes() == before
    assert not runs.exists()
    done = subprocess.run(
        [*CLI, "run", str(source), "--output", str(source), "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "is the source notebook itself" in done.stderr
    assert done.stderr.count("\n") == 1
    assert source.read_bytes() == before
    assert not runs.exists()


def test_a_copy_that_cannot_be_written_raises_a_typed_error_after_the_record(
    workdir: Path,
) -> None:
    # The copy's folder exists when the run starts; the notebook puts a file in its place.
    blocked = workdir / "blocked"
    blocked.mkdir()
    (workdir / "blocker.py").write_text(
        f"# %%\nfrom pathlib import Path\nPath({str(blocked)!r}).rmdir()\n"
        f"Path({str(blocked)!r}).write_text('a file')\n"
    )
    runs = workdir / "blocked-runs"
    with NotebookExecutor(runs_dir=runs) as own:
        with pytest.raises(OutputWriteError) as caught:
            own.execute(workdir / "blocker.py", output_path=blocked / "copy.ipynb")
        [row] = own.runs()
    error = caught.value
    assert isinstance(error, NotebookExecutorError)
    assert error.path == str(blocked / "copy.ipynb")
    assert error.result["status"] == "success"
    assert row["run_id"] == error.result["run_id"]
    assert row["status"] == "success"
    [record] = list(runs.rglob("*.ipynb"))
    assert record.with_suffix(".md").exists()
    assert nbformat.read(record, as_version=4).metadata["notebook_executor"]["status"] == "success"


# -- result size ------------------------------------------------------------------------------

RAISES = {
    "one huge message": 'raise ValueError("x" * 50_000)',
    "a huge multi-line message": 'raise ValueError("line of text\\n" * 20_000)',
    "a huge exception name": 'raise type("E" * 50_000, (Exception,), {})("boom")',
    "escapes that grow in JSON": 'raise ValueError("\\x01\\u00e9\\U0001f511" * 20_000)',
    "a deep traceback": "def f(n):\n    return f(n - 1) if n else 1 / 0\nf(900)",
    "a huge cell": "x = 1\n" + "# padding padding padding\n" * 3_000 + "1 / 0",
}


@pytest.mark.parametrize("shape", list(RAISES))
def test_the_result_stays_small_whatever_the_notebook_raises(
    ex: NotebookExecutor, workdir: Path, shape: str
) -> None:
    source = workdir / f"raises-{abs(hash(shape))}.py"
    source.write_text("# %%\n" + RAISES[shape] + "\n")
    result = ex.execute(source)
    assert result["error_kind"] == "cell_error"
    assert len(json.dumps(result)) < 20_000
    assert len(json.dumps(result, ensure_ascii=False)) < 20_000
    failed = failed_cell(result)
    assert failed["ename"] and failed["evalue"] and failed["traceback"]


# -- old notebooks ----------------------------------------------------------------------------

CORPUS = sorted(DATA.glob("*.ipynb"))


def _valid_file(path: Path) -> None:
    """``path`` (any format) validates; an ``.ipynb`` as written, not as repaired on read."""
    if path.suffix == ".ipynb":
        nbformat.validate(nbformat.from_dict(json.loads(path.read_text(encoding="utf-8"))))
    else:
        import jupytext

        nbformat.validate(jupytext.read(path))


def test_the_corpus_covers_every_minor_version() -> None:
    minors = sorted(json.loads(p.read_text())["nbformat_minor"] for p in CORPUS)
    assert minors == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("source", CORPUS, ids=[p.stem for p in CORPUS])
def test_old_notebooks_convert_and_run_into_valid_notebooks(
    ex: NotebookExecutor, workdir: Path, source: Path
) -> None:
    folder = workdir / source.stem
    folder.mkdir()
    written: list[Path] = []
    for ext in (".ipynb", ".py", ".md"):
        there = folder / f"converted{ext}"
        done = subprocess.run(
            [*CLI, "convert", str(source), str(there)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "rror" not in done.stderr, done.stderr
        back = folder / f"back-from{ext.replace('.', '-')}.ipynb"
        ex.write_notebook(ex.read_notebook(there), back)
        written += [there, back]
    copy = folder / "run-copy.ipynb"
    result = ex.execute(source, output_path=copy)
    assert result["status"] == "success", result["failed_cell"]
    assert result["scraps"]["mean"] == pytest.approx(4.266666666666667)
    rerun = ex.execute(folder / "converted.ipynb")
    assert rerun["status"] == "success", rerun["failed_cell"]
    for path in [*written, copy, Path(result["output_path"]), Path(rerun["output_path"])]:
        _valid_file(path)
    original = nbformat.read(source, as_version=4)
    assert [c.cell_type for c in ex.read_notebook(copy).cells] == [
        c.cell_type for c in original.cells
    ]
