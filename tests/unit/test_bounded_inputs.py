"""Inputs that would cost unbounded memory or time, or that no file can hold, are refused
with a typed error (on the command line: one line, exit 2) before any kernel starts.

The memory-bomb cases run in a child process whose address space is capped
(``RLIMIT_AS``), so a regression fails with a MemoryError instead of eating the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import (
    NotebookExecutor,
    NotebookExecutorError,
    NotebookSourceError,
    ParameterError,
)
from notebook_executor._sources.bounded import MAX_ALIAS_NODES, MAX_PARAMETERS_CHARS, load_yaml
from support import run_cli
from unit.fake_engine import FakeEngine

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"

#: Address space of the child process: enough to import and run on the fake engine, far
#: below what a billion-laughs document grows to.
CHILD_MEMORY = 1 << 30


def billion_laughs(levels: int = 9) -> list[str]:
    """YAML lines ``a: &a [...]`` ... each level nine aliases of the one before: 9**levels
    strings once expanded, a few hundred bytes written."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    previous = "a"
    for name in "bcdefghijklm"[: levels - 1]:
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
        previous = name
    return lines


BOMB_MAPPING = "\n".join([*billion_laughs(), "x: *i"]) + "\n"
#: The same, in flow style: one line, as a ``-p`` value for a dict parameter.
BOMB_FLOW = "{" + ", ".join(billion_laughs()) + ", x: *i}"

NOTEBOOK = '# %% tags=["parameters"]\nx = None\n\n# %%\nprint(x)\n'
DICT_NOTEBOOK = '# %% tags=["parameters"]\nx: dict = {}\n\n# %%\nprint(x)\n'
LOGBOOK = "---\nparameters:\n" + textwrap.indent("\n".join(billion_laughs()), "  ")
LOGBOOK += "\n---\n\n# Bomb\n\n```python\nprint(a)\n```\n"

CHILD = """
import json, sys
from unit.fake_engine import FakeEngine
from notebook_executor import NotebookExecutor
from notebook_executor._faces.cli import common, main

engine = FakeEngine()
common.executor = lambda args, **options: NotebookExecutor(
    runs_dir=args.runs_dir, engine=engine, **options
)
mode, argv = sys.argv[1], sys.argv[2:]
if mode == "cli":
    code = main(argv)
    print(json.dumps({"code": code, "jobs": len(engine.jobs)}))
else:
    with NotebookExecutor(runs_dir="runs", engine=engine) as ex:
        try:
            getattr(ex, mode)(*argv)
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        else:
            print(json.dumps({"error": None}))
"""


def _capped(cwd: Path, *argv: str) -> tuple[dict[str, Any], str]:
    """Run CHILD in a process capped at CHILD_MEMORY: (its JSON line, its stderr)."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS / "unit"), str(TESTS)])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        cwd=cwd,
        env=env,
        preexec_fn=cap,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.stdout.strip(), done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    (tmp_path / "dict.py").write_text(DICT_NOTEBOOK, encoding="utf-8")
    (tmp_path / "bomb.yaml").write_text(BOMB_MAPPING, encoding="utf-8")
    (tmp_path / "bomb.md").write_text(LOGBOOK, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["run", "nb.py", "-f", "bomb.yaml"], id="run -f"),
        pytest.param(["run", "nb.py", "-y", BOMB_MAPPING], id="run -y"),
        pytest.param(["run", "dict.py", "-p", "x", BOMB_FLOW], id="run -p dict"),
        pytest.param(["run", "nb.py", "-p", "x", BOMB_FLOW], id="run -p any"),
        pytest.param(["run", "bomb.md"], id="run logbook"),
        pytest.param(["inspect", "bomb.md"], id="inspect logbook"),
        pytest.param(["sweep", "nb.py", "-f", "bomb.yaml"], id="sweep -f"),
    ],
)
def test_a_billion_laughs_is_refused_on_the_command_line(folder: Path, argv: list[str]) -> None:
    outcome, err = _capped(folder, "cli", *argv)
    assert outcome == {"code": 2, "jobs": 0}, err[-2000:]
    assert len(err.strip().splitlines()) == 1, err[-2000:]
    assert "aliases" in err
    assert not (folder / "runs").exists()


@pytest.mark.parametrize("method", ["inspect_parameters", "execute", "read_notebook", "validate"])
def test_a_billion_laughs_front_matter_is_refused_by_the_api(folder: Path, method: str) -> None:
    outcome, err = _capped(folder, method, "bomb.md")
    if method == "validate":  # validate reports problems rather than raising
        assert outcome["error"] is None, err[-2000:]
    else:
        assert outcome["error"] == "NotebookSourceError", err[-2000:]
        assert "aliases" in outcome["message"]


def test_load_yaml_keeps_ordinary_anchors_and_refuses_what_multiplies() -> None:
    shared = load_yaml("base: &b {lr: 0.1, layers: [1, 2]}\nrun1: *b\nrun2: *b\n")
    assert shared["run1"] == shared["run2"] == {"lr": 0.1, "layers": [1, 2]}
    with pytest.raises(ValueError, match="aliases"):
        load_yaml(BOMB_MAPPING)
    with pytest.raises(ValueError, match="recursive"):
        load_yaml("a: &a [1, *a]")
    with pytest.raises(ValueError, match="longer than"):
        load_yaml("x: 1\n" + " " * MAX_PARAMETERS_CHARS)
    # Within the limit: an alias repeated, adding just under MAX_ALIAS_NODES nodes.
    many = (
        "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: ["
        + ", ".join(["*a"] * (MAX_ALIAS_NODES // 11))
        + "]"
    )
    assert len(load_yaml(many)["b"]) == MAX_ALIAS_NODES // 11


@pytest.fixture
def fake_cli(tmp_path: Path, cli_engine: FakeEngine) -> FakeEngine:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    (tmp_path / "dict.py").write_text(DICT_NOTEBOOK, encoding="utf-8")
    return cli_engine


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_a_huge_parameters_file_is_refused_without_reading_it_all(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine, tmp_path: Path
) -> None:
    with (tmp_path / "big.yaml").open("w", encoding="utf-8") as stream:
        stream.write("x: '")
        chunk = "y" * (1 << 20)
        for _ in range(100):
            stream.write(chunk)
        stream.write("'\n")
    err = _refused(capsys, "run", "nb.py", "-f", "big.yaml")
    assert "longer than" in err
    assert fake_cli.jobs == []


def test_a_huge_p_value_is_refused(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine
) -> None:
    err = _refused(capsys, "run", "dict.py", "-p", "x", "[" + "1," * MAX_PARAMETERS_CHARS + "1]")
    assert "longer than" in err and "x: dict" in err
    assert fake_cli.jobs == []


def test_a_deeply_nested_p_value_is_refused(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine
) -> None:
    err = _refused(capsys, "run", "dict.py", "-p", "x", "[" * 100_000 + "]" * 100_000)
    assert "Recursion" not in err and "x: dict" in err
    assert fake_cli.jobs == []


def test_a_billion_laughs_front_matter_raises_before_the_engine(tmp_path: Path) -> None:
    (tmp_path / "bomb.md").write_text(LOGBOOK, encoding="utf-8")
    engine = FakeEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(NotebookSourceError, match="aliases"),
    ):
        ex.inspect_parameters(tmp_path / "bomb.md")
    assert engine.jobs == []


def test_parameter_error_names_the_declared_parameters(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine
) -> None:
    err = _refused(capsys, "run", "dict.py", "-p", "x", BOMB_FLOW)
    assert ParameterError.__name__ not in err
    assert "x: dict" in err


# Lone surrogates: text no UTF-8 file can hold. Refused naming the problem, before the engine.

SURROGATE = "\ud800"
IPYNB_WITH_SURROGATE = (
    '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"id": "a", '
    '"cell_type": "code", "source": "print(\'\\ud800\')", "metadata": {}, "outputs": [], '
    '"execution_count": null}]}'
)


@pytest.fixture
def api(
    tmp_path: Path, ex: NotebookExecutor, engine: FakeEngine
) -> tuple[NotebookExecutor, FakeEngine]:
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    (tmp_path / "s.ipynb").write_text(IPYNB_WITH_SURROGATE, encoding="utf-8")
    return ex, engine


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda ex, d: ex.execute(d / "nb.py", parameters={"x": SURROGATE}), ParameterError, "'x'"),
        (
            lambda ex, d: ex.execute(d / "nb.py", parameters={"x": {"k": [SURROGATE]}}),
            ParameterError,
            "surrogate",
        ),
        (
            lambda ex, d: ex.execute(d / "nb.py", request=SURROGATE),
            NotebookExecutorError,
            "request",
        ),
        (
            lambda ex, d: ex.execute(d / "nb.py", secrets={"TOKEN": "abcdefgh" + SURROGATE}),
            NotebookExecutorError,
            "TOKEN",
        ),
        (lambda ex, d: ex.execute(d / "s.ipynb"), NotebookSourceError, "surrogate"),
        (lambda ex, d: ex.read_notebook(d / "s.ipynb"), NotebookSourceError, "surrogate"),
        (
            lambda ex, d: ex.execute(d / "nb.py", output_path=d / "o\udce9.ipynb"),
            NotebookExecutorError,
            "not UTF-8",
        ),
        (
            lambda ex, d: ex.edit_cell(d / "nb.py", 1, f"print('{SURROGATE}')"),
            NotebookExecutorError,
            "surrogate",
        ),
        (
            lambda ex, d: ex.insert_cell(d / "nb.py", 1, f"print('{SURROGATE}')"),
            NotebookExecutorError,
            "surrogate",
        ),
    ],
    ids=[
        "parameter",
        "nested parameter",
        "request",
        "secret",
        "ipynb cell",
        "read ipynb",
        "output name",
        "edit",
        "insert",
    ],
)
def test_a_lone_surrogate_is_a_typed_error(
    api: tuple[NotebookExecutor, FakeEngine], tmp_path: Path, call: Any, error: type, words: str
) -> None:
    ex, engine = api
    before = (tmp_path / "nb.py").read_bytes()
    with ex, pytest.raises(error, match=words) as caught:
        call(ex, tmp_path)
    assert "\\u" in str(caught.value) or "0x" in str(caught.value) or words in str(caught.value)
    str(caught.value).encode("utf-8")  # the message itself can be printed and written
    assert engine.jobs == []
    assert (tmp_path / "nb.py").read_bytes() == before
    assert not (tmp_path / "runs").exists()


def test_a_file_name_that_is_not_utf8_is_refused_by_name(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine, tmp_path: Path
) -> None:
    """Kept losslessly would mean a record naming another file; it is refused instead."""
    name = os.fsdecode(b"caf\xe9.py")
    (tmp_path / name).write_text(NOTEBOOK, encoding="utf-8")
    err = _refused(capsys, "run", name)
    assert "not UTF-8" in err and "0xe9" in err and "rename" in err
    assert fake_cli.jobs == []
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "nb.py", "-p", "x", os.fsdecode(b"\xed\xa0\x80")],
        ["run", "nb.py", "-y", os.fsdecode(b"x: caf\xe9")],
        ["run", "nb.py", "--request", os.fsdecode(b"\xff")],
    ],
    ids=["-p", "-y", "--request"],
)
def test_bytes_that_are_not_utf8_on_the_command_line_are_refused(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine, tmp_path: Path, argv: list[str]
) -> None:
    err = _refused(capsys, *argv)
    assert "not UTF-8" in err
    assert fake_cli.jobs == []
    assert not (tmp_path / "runs").exists()


# .env files: one reader (python-dotenv), a byte order mark is not part of the first name.


def test_a_dotenv_starting_with_a_bom_keeps_its_first_key(tmp_path: Path) -> None:
    from notebook_executor._parameters.environment import read_dotenv

    path = tmp_path / ".env"
    path.write_bytes(b"\xef\xbb\xbfNBX_FIRST=one\nNBX_SECOND=two\n")
    assert read_dotenv(path) == {"NBX_FIRST": "one", "NBX_SECOND": "two"}


def test_execute_and_validate_find_a_declared_name_in_a_dotenv_with_a_bom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NBX_BOM_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "log.md").write_text(
        "---\nenv: [NBX_BOM_TOKEN]\nparameters:\n  x: 1\n---\n\n```python\nprint(x)\n```\n",
        encoding="utf-8",
    )
    (tmp_path / ".env").write_bytes(b"\xef\xbb\xbfNBX_BOM_TOKEN=secret-value-1\n")
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        assert ex.validate(tmp_path / "log.md")["valid"]
        result = ex.execute(tmp_path / "log.md")
    assert result["status"] == "success"
    assert engine.jobs[0].env["NBX_BOM_TOKEN"] == "secret-value-1"


def test_validate_reports_what_execute_refuses_about_env(tmp_path: Path) -> None:
    """One reading of ``env:``: a string is refused by both (validate once took it as a
    one-name list while execute refused it)."""
    (tmp_path / "log.md").write_text(
        "---\nenv: NBX_ONE\nparameters:\n  x: 1\n---\n\n```python\nprint(x)\n```\n",
        encoding="utf-8",
    )
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        report = ex.validate(tmp_path / "log.md")
        with pytest.raises(NotebookSourceError, match="list of environment variable names"):
            ex.execute(tmp_path / "log.md")
    assert not report["valid"]
    assert any("list of environment variable names" in p["message"] for p in report["problems"])


# Malformed inputs: a typed error in the user's terms, never the name of a Python internal.

_FRONT = "---\n{}\n---\n\n```python\nprint(1)\n```\n"
_IPYNB = '{{"nbformat": 4, "nbformat_minor": 5, "metadata": {metadata}, "cells": {cells}}}'
_CELL = (
    '{"id": "a", "cell_type": "code", "source": "x = 1", "metadata": "s", "outputs": [], '
    '"execution_count": null}'
)
MALFORMED = {
    "front_parameters_string.md": (_FRONT.format("parameters: hello"), "must be a mapping"),
    "front_parameters_list.md": (_FRONT.format("parameters: [a, b]"), "must be a mapping"),
    "front_env_string.md": (_FRONT.format("env: NBX_A\nparameters:\n  x: 1"), "'env' must be"),
    "front_not_yaml.md": (_FRONT.format("- a\n- b"), "not valid YAML"),
    "front_deep.md": (_FRONT.format("parameters:\n  d: " + "[" * 900 + "]" * 900), "too deep"),
    "jupytext_header.md": (
        "---\njupyter:\n  kernelspec: 3\n---\n\n```python\nx = 1\n```\n",
        "wrong type",
    ),
    "cells_dict.ipynb": (_IPYNB.format(metadata="{}", cells='{"a": 1}'), "'cells' must be a list"),
    "cells_strings.ipynb": (_IPYNB.format(metadata="{}", cells='["x"]'), "cell 0 is a str"),
    "metadata_string.ipynb": (_IPYNB.format(metadata='"hello"', cells="[]"), "metadata"),
    "cell_metadata_string.ipynb": (_IPYNB.format(metadata="{}", cells=f"[{_CELL}]"), "cell 0"),
    "json_deep.ipynb": (
        _IPYNB.format(metadata='{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", cells="[]"),
        "too deep",
    ),
    "schema_deep.ipynb": (
        _IPYNB.format(metadata='{"a": ' + "[" * 900 + "]" * 900 + "}", cells="[]"),
        "too deep",
    ),
    "tags_string.py": ('# %% tags="parameters"\nx = 1\n', "'parameters' is not of type"),
}
#: Declarations only a run reads (reading the notebook or its parameters ignores them).
_ONLY_WHEN_RUN = {"front_env_string.md"}
_INTERNALS = ("Error:", "Error(", "object has no attribute", "recursion", "Traceback")


def _user_level(message: str) -> None:
    for word in _INTERNALS:
        assert word not in message, message


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("method", ["execute", "inspect_parameters", "read_notebook", "validate"])
def test_a_malformed_source_is_a_typed_error_in_user_terms(
    tmp_path: Path, name: str, method: str
) -> None:
    text, words = MALFORMED[name]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        if method in ("inspect_parameters", "read_notebook") and name in _ONLY_WHEN_RUN:
            getattr(ex, method)(path)  # what only a run uses is not looked at
            return
        if method == "validate":
            report = ex.validate(path)
            assert not report["valid"]
            messages = " | ".join(p["message"] for p in report["problems"])
            # The schema check words some of these its own way ("schema: ...").
            assert words in messages or "schema: " in messages
        else:
            with pytest.raises(NotebookSourceError) as caught:
                getattr(ex, method)(path)
            messages = str(caught.value)
            assert words in messages
    _user_level(messages)
    assert engine.jobs == []


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_source_is_one_line_on_the_command_line(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine, tmp_path: Path, name: str
) -> None:
    text, words = MALFORMED[name]
    (tmp_path / name).write_text(text, encoding="utf-8")
    err = _refused(capsys, "run", name)
    assert words in err
    _user_level(err)
    assert fake_cli.jobs == []


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (None, "nested more than 100 deep"),
        ({1, 2}, "set values cannot"),
        (b"x", "bytes values cannot"),
    ],
    ids=["nested 100,000 deep", "set", "bytes"],
)
def test_a_parameter_value_that_cannot_be_injected_says_why(
    tmp_path: Path, value: Any, words: str
) -> None:
    if value is None:
        value = []
        for _ in range(100_000):
            value = [value]
    (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
    engine = FakeEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(ParameterError, match=words) as caught,
    ):
        ex.execute(tmp_path / "nb.py", parameters={"x": value})
    assert "<list>" not in str(caught.value)
    assert engine.jobs == []


def test_a_text_source_over_the_limit_is_refused_before_jupytext_reads_it(
    tmp_path: Path,
) -> None:
    from notebook_executor._sources.bounded import MAX_TEXT_SOURCE_BYTES

    path = tmp_path / "big.py"
    path.write_text('# %%\ns = "' + "a" * (50 * 1024 * 1024) + '"\n', encoding="utf-8")
    engine = FakeEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(NotebookSourceError, match="too large") as caught,
    ):
        ex.inspect_parameters(path)
    assert str(MAX_TEXT_SOURCE_BYTES) in str(caught.value)


# One rule for every output file a caller names: its folder must exist, and is not created.


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "nb.py", "missing/deeper/out.ipynb"],
        ["convert", "nb.py", "missing/out.md"],
        ["run", "nb.py", "missing/out.ipynb"],
        ["run", "nb.py", "--output", "missing/out.ipynb"],
    ],
    ids=["convert ipynb", "convert md", "run OUT", "run --output"],
)
def test_an_output_in_a_missing_folder_is_refused_and_no_folder_is_made(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine, tmp_path: Path, argv: list[str]
) -> None:
    err = _refused(capsys, *argv)
    assert "does not exist" in err
    assert not (tmp_path / "missing").exists()
    assert fake_cli.jobs == []


def test_export_out_in_a_missing_folder_is_refused_and_no_folder_is_made(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine, tmp_path: Path
) -> None:
    code, out, err = run_cli(capsys, "run", "nb.py", "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    err = _refused(capsys, "export", run_id, "--to", "script", "--out", "missing/run.py")
    assert "does not exist" in err
    assert not (tmp_path / "missing").exists()


def test_write_notebook_refuses_a_missing_folder(tmp_path: Path) -> None:
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        (tmp_path / "nb.py").write_text(NOTEBOOK, encoding="utf-8")
        nb = ex.read_notebook(tmp_path / "nb.py")
        with pytest.raises(NotebookSourceError, match="does not exist"):
            ex.write_notebook(nb, tmp_path / "missing" / "nb.ipynb")
    assert not (tmp_path / "missing").exists()


# A parameters cell that is not valid Python: run as papermill runs it (the run fails at that
# cell, and is recorded), reported by validate at that cell; inspect_parameters refuses it.

BROKEN = '# %% [markdown]\n# Title\n\n# %% tags=["parameters"]\nx = 1\ny = (2\n\n# %%\nprint(x)\n'


def test_a_syntax_error_in_the_parameters_cell_is_run_and_recorded(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(BROKEN, encoding="utf-8")
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        report = ex.validate(tmp_path / "broken.py")
        with pytest.raises(NotebookSourceError, match=r"parameters cell \(cell 1\)") as caught:
            ex.inspect_parameters(tmp_path / "broken.py")
        # Given values are injected as they are: the cell declares nothing to check them by.
        result = ex.execute(tmp_path / "broken.py", parameters={"x": 5})
        assert ex.get_run(result["run_id"])["run_id"] == result["run_id"]
    assert "line 2" in str(caught.value)
    assert len(engine.jobs) == 1
    [problem] = [p for p in report["problems"] if p["severity"] == "error"]
    assert problem["cell"] == 1 and "line 2" in problem["message"]


def test_a_syntax_error_in_the_parameters_cell_on_the_command_line(
    capsys: pytest.CaptureFixture[str], fake_cli: FakeEngine, tmp_path: Path
) -> None:
    (tmp_path / "broken.py").write_text(BROKEN, encoding="utf-8")
    err = _refused(capsys, "inspect", "broken.py")
    assert "parameters cell (cell 1) is not valid Python" in err
    code, _, err = run_cli(capsys, "run", "broken.py", "--json")
    assert code in (0, 1), err
    assert len(fake_cli.jobs) == 1


def test_magics_in_the_parameters_cell_are_not_syntax_errors(tmp_path: Path) -> None:
    (tmp_path / "magic.ipynb").write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [
                    {
                        "id": "p",
                        "cell_type": "code",
                        "metadata": {"tags": ["parameters"]},
                        "source": "%config Completer.use_jedi = False\nif True:\n    !true\nx = 1",
                        "outputs": [],
                        "execution_count": None,
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    engine = FakeEngine()
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
        assert ex.validate(tmp_path / "magic.ipynb")["valid"]
        assert ex.inspect_parameters(tmp_path / "magic.ipynb")["x"]["default"] == 1
