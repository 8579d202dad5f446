"""Bad input, end to end: refused before any kernel starts, in one line, leaving no record.

Every input generated here is bad by construction (random bytes, truncated or non-notebook JSON,
invalid nbformat 4, nbformat 3, wrong types in cells, UTF-16 / latin-1 / Shift-JIS bytes, broken
logbook front matter, MyST cells in two languages, unsupported extensions, parameters that do
not fit), under file names with spaces, accents and emoji. Through the API, ``execute`` raises
NotebookSourceError or ParameterError with a one-line message; through the installed command
line (a real subprocess), ``run`` exits 2 with exactly one line on stderr and no traceback.
Either way the runs directory gains no run record and the catalog no row.

``tests/unit/test_sources_fuzz.py`` fuzzes the readers alone; this module goes through
``NotebookExecutor.execute`` and the ``notebook-executor`` process. Subprocesses are slow, so
the command line gets a few dozen examples and the API several hundred; ``EXAMPLES`` counts
them and the module prints the counts at its end.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from notebook_executor import (
    NotebookExecutor,
    NotebookExecutorError,
    NotebookSourceError,
    ParameterError,
    read_notebook,
    write_notebook,
)
from notebook_executor._kernels.kernel_engine import KernelEngine
from notebook_executor._sources.bounded import MAX_SOURCE_BYTES
from notebook_executor._sources.formats import find_format
from support import report

pytestmark = pytest.mark.filterwarnings("ignore::Warning:nbformat.validator")

#: Examples run, by route and kind of input; printed at the end of the module.
EXAMPLES: Counter[str] = Counter()

_CONSOLE = Path(sys.executable).parent / "notebook-executor"
CONSOLE_SCRIPT = str(_CONSOLE) if _CONSOLE.exists() else shutil.which("notebook-executor")
COMMANDS = [[sys.executable, "-m", "notebook_executor"]] + (
    [[CONSOLE_SCRIPT]] if CONSOLE_SCRIPT else []
)

# -- valid sources, to be broken ------------------------------------------------------------------

VALID_NOTEBOOK: dict[str, Any] = {
    "nbformat": 4,
    "nbformat_minor": 4,
    "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
    },
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "# Caf\u00e9 \u65e5\u672c"},
        {
            "cell_type": "code",
            "metadata": {"tags": ["parameters"]},
            "execution_count": None,
            "outputs": [],
            "source": "n: int = 1\nname: str = 'caf\u00e9'",
        },
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": 1,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}],
            "source": ["print(n)\n", "print(name)"],
        },
    ],
}
VALID_TEXT = {
    ".ipynb": json.dumps(VALID_NOTEBOOK, ensure_ascii=False, indent=1),
    ".py": (
        '# %% tags=["parameters"]\nn: int = 1\nname = "caf\u00e9 \u65e5\u672c"\n\n# %%\nprint(n)\n'
    ),
    ".md": (
        "---\ntitle: caf\u00e9\nparameters:\n  n: 1  # a count\n"
        "  name: caf\u00e9 \u65e5\u672c\n---\n\n# Log\n\n```python\nprint(n, name)\n```\n"
    ),
}
SUFFIXES = sorted(VALID_TEXT)

PARAMETERS_NOTEBOOK = """# %% tags=["parameters"]
n: int = 1
ratio: float = 0.5
name: str = "x"
flag: bool = False
items: list = []
options: dict = {}
maybe: int | None = None
needed: str = ...

# %%
print(n, ratio, name, flag, items, options, maybe, needed)
"""
PARAMETER_TYPES = {
    "n": "int",
    "ratio": "float",
    "name": "str",
    "flag": "bool",
    "items": "list",
    "options": "dict",
    "maybe": "int",
}


def _notebook_with(mutate: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(json.dumps(VALID_NOTEBOOK))
    mutate(document)
    return document


# -- strategies: every one yields (suffix, bytes, kind), bad by construction ----------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_not_a_string = st.none() | st.integers() | st.booleans() | st.dictionaries(st.text(), st.none())


def _random_bytes() -> st.SearchStrategy[tuple[str, bytes, str]]:
    any_ipynb = st.binary(max_size=400).map(lambda data: (".ipynb", data, "random-bytes"))
    # Text formats accept almost any text: the bytes hold something that is never text.
    never_text = st.tuples(
        st.sampled_from([".py", ".md"]),
        st.binary(max_size=200),
        st.sampled_from([b"\xff", b"\x00", b"\xc3(", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]),
        st.binary(max_size=200),
    ).map(lambda t: (t[0], t[1] + t[2] + t[3], "random-bytes"))
    return any_ipynb | never_text


def _truncated() -> st.SearchStrategy[tuple[str, bytes, str]]:
    text = VALID_TEXT[".ipynb"].rstrip()
    return st.integers(0, len(text) - 1).map(
        lambda cut: (".ipynb", text[:cut].encode(), "truncated-json")
    )


def _not_a_notebook() -> st.SearchStrategy[tuple[str, bytes, str]]:
    values = _json_values.filter(
        lambda v: not (isinstance(v, dict) and ("cells" in v or "worksheets" in v))
    )
    return values.map(lambda v: (".ipynb", json.dumps(v).encode(), "json-not-a-notebook"))


def _wrong_nbformat() -> st.SearchStrategy[tuple[str, bytes, str]]:
    versions = st.sampled_from([3, 2, 1, 5, 0, -4, "4", "4.4", None, [4], {"major": 4}, 4.5])

    def document(version: Any, drop: bool) -> tuple[str, bytes, str]:
        def mutate(nb: dict[str, Any]) -> None:
            if drop:
                del nb["nbformat"]
            else:
                nb["nbformat"] = version

        return ".ipynb", json.dumps(_notebook_with(mutate)).encode(), "wrong-nbformat"

    return st.builds(document, versions, st.booleans())


def _nbformat3() -> st.SearchStrategy[tuple[str, bytes, str]]:
    cell = st.sampled_from(
        [
            {"cell_type": "code", "input": "x = 1", "language": "python", "outputs": []},
            {"cell_type": "markdown", "source": "text"},
            {"cell_type": "heading", "level": 1, "source": "Title"},
            {"cell_type": "raw", "source": "raw"},
        ]
    )

    def document(cells: list[Any], minor: int) -> tuple[str, bytes, str]:
        nb = {
            "nbformat": 3,
            "nbformat_minor": minor,
            "metadata": {"name": "old"},
            "worksheets": [{"cells": cells, "metadata": {}}],
        }
        return ".ipynb", json.dumps(nb).encode(), "nbformat-3"

    return st.builds(document, st.lists(cell, max_size=4), st.integers(0, 2))


def _wrong_types() -> st.SearchStrategy[tuple[str, bytes, str]]:
    """A valid nbformat 4 notebook with one thing the schema forbids."""

    def set_in(path: tuple[Any, ...], value: Any) -> Any:
        def mutate(nb: dict[str, Any]) -> None:
            target: Any = nb
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value

        return mutate

    def delete(path: tuple[Any, ...]) -> Any:
        def mutate(nb: dict[str, Any]) -> None:
            target: Any = nb
            for key in path[:-1]:
                target = target[key]
            del target[path[-1]]

        return mutate

    unknown_type = st.text(max_size=10).filter(lambda t: t not in ("code", "markdown", "raw"))
    mutations = st.one_of(
        st.builds(set_in, st.just(("cells",)), _not_a_string | st.text(max_size=5)),
        st.builds(set_in, st.sampled_from([("cells", 1, "cell_type")]), unknown_type),
        st.builds(set_in, st.just(("cells", 2, "source")), _not_a_string),
        st.builds(
            set_in,
            st.just(("cells", 2, "outputs")),
            st.none() | st.integers() | st.text(max_size=5),
        ),
        st.builds(
            set_in,
            st.just(("cells", 2, "outputs", 0, "output_type")),
            st.text(max_size=10).filter(
                lambda t: t not in ("stream", "display_data", "execute_result", "error")
            ),
        ),
        st.builds(set_in, st.just(("cells", 2, "outputs", 0, "name")), _not_a_string),
        st.builds(
            set_in,
            st.just(("cells", 2, "execution_count")),
            st.text(max_size=3) | st.lists(st.integers(), max_size=2) | st.just(-1),
        ),
        st.builds(
            set_in,
            st.sampled_from([("cells", 0, "metadata"), ("cells", 2, "metadata"), ("metadata",)]),
            st.lists(st.integers(), max_size=2) | st.text(max_size=4) | st.integers(),
        ),
        st.builds(
            delete,
            st.sampled_from(
                [
                    ("cells", 0, "source"),
                    ("cells", 1, "metadata"),
                    ("cells", 2, "outputs"),
                    ("cells", 2, "cell_type"),
                    ("cells", 2, "execution_count"),
                    ("metadata",),
                ]
            ),
        ),
        st.builds(set_in, st.just(("cells", 0, "outputs")), st.just([])),
        st.builds(set_in, st.just(("nbformat_minor",)), st.text(max_size=3) | st.just(-1)),
        st.builds(set_in, st.just(("cells", 1, "metadata", "tags")), st.integers() | st.text()),
    )
    return mutations.map(
        lambda mutate: (".ipynb", json.dumps(_notebook_with(mutate)).encode(), "wrong-types")
    )


def _odd_encodings() -> st.SearchStrategy[tuple[str, bytes, str]]:
    def encoded(suffix: str, encoding: str) -> tuple[str, bytes, str]:
        # Characters the encoding lacks become "?"; the accents alone are not UTF-8.
        data = VALID_TEXT[suffix].encode(encoding, errors="replace")
        return suffix, data, f"encoding-{encoding}"

    return st.builds(
        encoded,
        st.sampled_from(SUFFIXES),
        st.sampled_from(["utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "shift_jis"]),
    )


def _bad_front_matter() -> st.SearchStrategy[tuple[str, bytes, str]]:
    keywords = st.sampled_from(["class", "import", "lambda", "None", "True", "def", "return"])
    names = (
        keywords
        | st.text(max_size=8).filter(lambda t: t.strip() and not t.isidentifier())
        | st.integers().map(str)
    )
    bad_name = names.map(lambda name: f"parameters:\n  {json.dumps(name)}: 1\n")
    not_a_mapping = st.sampled_from(
        ["parameters: [a, b]\n", "parameters: 3\n", "parameters: text\n", "parameters:\n- a\n"]
    )
    not_a_literal = st.sampled_from(
        [
            "parameters:\n  day: 2024-01-02\n",
            "parameters:\n  when: 2024-01-02T10:00:00\n",
            "parameters:\n  raw: !!binary aGVsbG8=\n",
            "parameters:\n  things: !!set {a, b}\n",
        ]
    )
    not_yaml = st.sampled_from(
        [
            "parameters:\n  a: [1, 2\n",
            "parameters:\n  a: {b: 1\n",
            "parameters:\n  a: 1\n b: 2\n",
            "parameters:\n  a: 'unterminated\n",
            "parameters:\n\ta: 1\n",
        ]
    )
    return st.builds(
        lambda front, title: (
            ".md",
            f"---\n{title}{front}---\n\n```python\nprint(1)\n```\n".encode(),
            "bad-front-matter",
        ),
        bad_name | not_a_mapping | not_a_literal | not_yaml,
        st.sampled_from(["", "title: t\n"]),
    )


def _mixed_languages() -> st.SearchStrategy[tuple[str, bytes, str]]:
    """MyST notebooks whose code cells name two languages: one kernel could not run them."""
    pythons = st.sampled_from(["ipython3", "python", "python3", "ipython"])
    others = st.sampled_from(["bash", "r", "julia", "javascript", "sql", "ir"])

    def build(first: str, other: str, before: int, other_first: bool) -> tuple[str, bytes, str]:
        languages = [first] * before + [other] if not other_first else [other, first]
        cells = "".join(f"```{{code-cell}} {lang}\nx = 1\n```\n\ntext\n\n" for lang in languages)
        return ".md", f"# Mixed\n\n{cells}".encode(), "mixed-languages"

    return st.builds(build, pythons, others, st.integers(1, 3), st.booleans())


def _unsupported_suffix() -> st.SearchStrategy[tuple[str, bytes, str]]:
    return st.builds(
        lambda suffix, text: (suffix, text.encode(), "unsupported-format"),
        st.sampled_from([".txt", ".json", ".ipynb~", ".r", ".Rmd", ".pyc", ".html", ".yaml", ""]),
        st.sampled_from(list(VALID_TEXT.values())),
    )


#: Every kind of bad source; each test below runs on each kind, so none goes untried.
BAD_SOURCES = {
    "random-bytes": _random_bytes(),
    "truncated-json": _truncated(),
    "json-not-a-notebook": _not_a_notebook(),
    "wrong-nbformat": _wrong_nbformat(),
    "nbformat-3": _nbformat3(),
    "wrong-types": _wrong_types(),
    "odd-encoding": _odd_encodings(),
    "bad-front-matter": _bad_front_matter(),
    "mixed-languages": _mixed_languages(),
    "unsupported-format": _unsupported_suffix(),
}

#: File name stems: spaces, accents, scripts, emoji; never a leading dash (an option) or a slash.
STEMS = st.text(
    st.characters(whitelist_categories=["L", "N", "Zs", "So"], blacklist_characters="/\\")
    | st.sampled_from([" ", "-", "_", ".", "'", '"', "\U0001f680", "\u00e9"]),
    min_size=1,
    max_size=16,
).map(lambda stem: f"nb {stem}")


# -- fixtures and checks --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad input \u00e9 \U0001f680")


@pytest.fixture
def ex(scratch: Path) -> Iterator[NotebookExecutor]:
    """An executor for one test; after the test, proof that no kernel was ever started."""
    executor = NotebookExecutor(runs_dir=scratch / "api-runs")
    yield executor
    engine = executor._engine
    executor.close()
    assert isinstance(engine, KernelEngine)
    assert engine.pool is None, "bad input reached the kernels"


@pytest.fixture(scope="module", autouse=True)
def report_examples(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    api = sum(n for kind, n in EXAMPLES.items() if kind.startswith("api"))
    cli = sum(n for kind, n in EXAMPLES.items() if kind.startswith("cli"))
    if EXAMPLES:
        report(
            request.config,
            f"\nbad-input examples run: api {api}, cli {cli}; by kind: "
            f"{dict(sorted(EXAMPLES.items()))}",
        )


def _write(folder: Path, stem: str, suffix: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}{suffix}"
    path.write_bytes(data)
    return path


def _no_record(runs_dir: Path) -> None:
    """No run record under ``runs_dir`` and no row in its catalog."""
    if not runs_dir.exists():
        return
    files = [p for p in runs_dir.rglob("*") if p.suffix in (".ipynb", ".md")]
    assert files == []
    catalog = runs_dir / "catalog.sqlite"
    if catalog.exists():
        with closing(sqlite3.connect(catalog)) as conn:
            assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def _one_line(message: str) -> None:
    assert message.strip(), "an empty message"
    assert "\n" not in message and "\r" not in message, repr(message)
    assert "Traceback" not in message
    assert len(message) < 2000


def _check_api(ex: NotebookExecutor, path: Path, kind: str, **options: Any) -> None:
    EXAMPLES[f"api:{kind}"] += 1
    output = path.with_name("out.ipynb")
    with pytest.raises((NotebookSourceError, ParameterError)) as caught:
        ex.execute(path, output_path=output, timeout=60, **options)
    _one_line(str(caught.value))
    if isinstance(caught.value, NotebookSourceError):
        shown = str(path) if str(path).isprintable() else repr(str(path))
        assert str(caught.value).startswith(f"{shown}: "), str(caught.value)
    assert not output.exists()
    _no_record(ex.runs_dir)


def _check_cli(
    command: list[str], args: list[str], cwd: Path, runs_dir: Path, kind: str, subcommand: str
) -> str:
    """Run the command line on bad input; return its one line of error."""
    EXAMPLES[f"cli:{kind}"] += 1
    done = subprocess.run(
        [*command, subcommand, *args, "--json"]
        + (["--runs-dir", str(runs_dir)] if subcommand == "run" else []),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("notebook-executor: error: "), lines[0]
    assert "Traceback" not in done.stderr
    _no_record(runs_dir)
    return lines[0]


# -- the API, in process: hundreds of examples ----------------------------------------------------

API = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)


@API
@pytest.mark.parametrize("kind", sorted(BAD_SOURCES))
@given(drawn=st.data(), stem=STEMS)
def test_api_refuses_bad_sources(
    ex: NotebookExecutor, scratch: Path, kind: str, drawn: st.DataObject, stem: str
) -> None:
    suffix, data, label = drawn.draw(BAD_SOURCES[kind])
    # No suffix: the stem's own may name a format ("nb .MD"), and the source is then good.
    assume(suffix or find_format(Path(stem)) is None)
    path = _write(scratch / "api", stem, suffix, data)
    try:
        _check_api(ex, path, label)
        with pytest.raises(NotebookSourceError) as caught:
            ex.inspect_parameters(path)
        _one_line(str(caught.value))
    finally:
        path.unlink()


def _bad_parameters() -> st.SearchStrategy[tuple[dict[Any, Any], str]]:
    wrong = {
        "int": st.floats() | st.text(max_size=5) | st.booleans() | st.none() | st.lists(st.none()),
        "float": st.text(max_size=5)
        | st.booleans()
        | st.none()
        | st.dictionaries(st.text(), st.none()),
        "str": st.integers()
        | st.floats()
        | st.none()
        | st.binary(max_size=3)
        | st.lists(st.text()),
        "bool": st.integers() | st.text(max_size=5) | st.none() | st.floats(),
        "list": st.text(max_size=5) | st.integers() | st.dictionaries(st.text(), st.integers()),
        "dict": st.text(max_size=5) | st.lists(st.integers()) | st.integers(),
    }
    not_literal = st.sampled_from(
        [object(), {1, 2}, frozenset(), 1j, b"bytes", print, range(3), [object()], {"k": {2}}]
    )

    def wrong_value(name: str, data: Any) -> tuple[dict[Any, Any], str]:
        kind = PARAMETER_TYPES[name]
        if kind == "int" and name == "maybe":
            value = data.draw(wrong["int"].filter(lambda v: v is not None))
        else:
            value = data.draw(wrong[kind])
        return {"needed": "x", name: value}, "wrong-type"

    def unknown(name: Any, value: Any) -> tuple[dict[Any, Any], str]:
        return {"needed": "x", name: value}, "unknown-name"

    def missing(others: dict[str, Any]) -> tuple[dict[Any, Any], str]:
        return others, "missing-required"

    return st.one_of(
        st.builds(wrong_value, st.sampled_from(sorted(PARAMETER_TYPES)), st.data()),
        st.builds(
            unknown,
            st.text(max_size=20).filter(lambda t: t not in PARAMETER_TYPES and t != "needed")
            | st.integers()
            | st.none(),
            _json_values,
        ),
        st.builds(
            lambda name, value: ({"needed": "x", name: value}, "not-a-literal"),
            st.sampled_from(sorted(PARAMETER_TYPES)),
            not_literal,
        ),
        st.builds(missing, st.fixed_dictionaries({}, optional={"n": st.integers()})),
    )


@settings(API, max_examples=300)
@given(case=_bad_parameters())
def test_api_refuses_bad_parameters(
    ex: NotebookExecutor, scratch: Path, case: tuple[dict[Any, Any], str]
) -> None:
    parameters, kind = case
    path = scratch / "params.py"
    if not path.exists():
        path.write_text(PARAMETERS_NOTEBOOK)
    EXAMPLES[f"api:{kind}"] += 1
    with pytest.raises(ParameterError) as caught:
        ex.execute(path, parameters=parameters, timeout=60)
    message = str(caught.value)
    _one_line(message)
    assert "The notebook's parameters: n: int = 1, ratio: float = 0.5" in message
    _no_record(ex.runs_dir)


def test_api_refuses_files_that_are_not_notebook_files(ex: NotebookExecutor, scratch: Path) -> None:
    folder = scratch / "odd files"
    folder.mkdir()
    (folder / "a folder.ipynb").mkdir()
    (folder / "loop.py").symlink_to(folder / "loop.py")
    (folder / "dangling.md").symlink_to(folder / "nowhere.md")
    huge = folder / "huge \u00e9.ipynb"
    with huge.open("wb") as handle:  # sparse: nothing is written, nothing need be read
        handle.truncate(MAX_SOURCE_BYTES + 1)
    reasons = {
        "missing \u00e9 \U0001f680.ipynb": "no such file",
        "a folder.ipynb": "is a folder, not a notebook",
        "loop.py": "cannot read",
        "dangling.md": "no such file",
        huge.name: "too large",
    }
    for name, reason in reasons.items():
        EXAMPLES["api:not-a-file"] += 1
        with pytest.raises(NotebookSourceError, match=reason) as caught:
            ex.execute(folder / name)
        _one_line(str(caught.value))
    _no_record(ex.runs_dir)


def test_api_refuses_a_name_with_a_line_break_in_one_line(
    ex: NotebookExecutor, scratch: Path
) -> None:
    path = _write(scratch / "api", "two\nlines", ".ipynb", b"{")
    _check_api(ex, path, "line-break-in-name")


# -- the command line, in a subprocess: a few dozen examples --------------------------------------

CLI = settings(
    max_examples=3,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.parametrize("kind", sorted(BAD_SOURCES))
@CLI
@given(
    drawn=st.data(),
    stem=STEMS,
    command=st.sampled_from(COMMANDS),
    subcommand=st.sampled_from(["run", "run", "run", "inspect"]),
)
def test_cli_refuses_bad_sources(
    scratch: Path,
    kind: str,
    drawn: st.DataObject,
    stem: str,
    command: list[str],
    subcommand: str,
) -> None:
    suffix, data, label = drawn.draw(BAD_SOURCES[kind])
    # No suffix: the stem's own may name a format ("nb .MD"), and the source is then good.
    assume(suffix or find_format(Path(stem)) is None)
    path = _write(scratch / "cli", stem, suffix, data)
    try:
        _check_cli(command, [path.name], path.parent, scratch / "cli-runs", label, subcommand)
    finally:
        path.unlink()


@pytest.mark.parametrize(
    ("args", "kind", "named"),
    [
        (["params.py", "-p", "n", "three", "-r", "needed", "x"], "wrong-type", "'n' expects int"),
        (["params.py", "-p", "zz", "1", "-r", "needed", "x"], "unknown-name", "unknown parameter"),
        (["params.py"], "missing-required", "missing required parameter 'needed'"),
        (
            ["params.py", "-r", "needed", "x", "-p", "items", "{not: [a list"],
            "wrong-type",
            "'items' expects list",
        ),
        (["params.py", "-r", "needed", "x", "-y", "n: [1, 2]"], "wrong-type", "'n' expects int"),
        (
            ["params.py", "-r", "needed", "x", "-f", "params \u00e9.yaml"],
            "wrong-type",
            "'n' expects int",
        ),
        (["missing \u00e9 \U0001f680.ipynb"], "not-a-file", "no such file"),
        (["huge.ipynb"], "not-a-file", "too large"),
        (["two\nlines.ipynb"], "line-break-in-name", "'two\\nlines.ipynb': not valid JSON"),
    ],
    ids=[
        "int-gets-text",
        "unknown-name",
        "missing-required",
        "list-gets-broken-yaml",
        "yaml-wrong-type",
        "file-wrong-type",
        "missing-file",
        "too-large",
        "line-break-in-name",
    ],
)
def test_cli_refuses_bad_files_and_parameters(
    scratch: Path, args: list[str], kind: str, named: str
) -> None:
    folder = scratch / "cli-cases"
    if not folder.exists():
        folder.mkdir()
        (folder / "params.py").write_text(PARAMETERS_NOTEBOOK)
        (folder / "params \u00e9.yaml").write_text("n: 1.5\nratio: 2\n")
        (folder / "two\nlines.ipynb").write_text("{")
        with (folder / "huge.ipynb").open("wb") as handle:
            handle.truncate(MAX_SOURCE_BYTES + 1)
    line = _check_cli(COMMANDS[-1], args, folder, scratch / "cli-runs", kind, "run")
    assert named in line


# -- a bad environment or odd arguments: refused in one line through every public entry ---------


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _fifo(folder: Path, stem: str) -> Path:
    path = folder / f"{stem}.py"
    if not path.exists():
        os.mkfifo(path)
    return path


def _environment_case(
    folder: Path, drawn: st.DataObject
) -> tuple[str, Callable[[NotebookExecutor], Any]]:
    """One bad call, drawn: a file where a folder should be, a FIFO, a kernel that is not
    installed, odd values for limits, parameters, environment and paths."""
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / "params.py"
    if not good.exists():
        good.write_text(PARAMETERS_NOTEBOOK)
    blocker = folder / "a file"
    if not blocker.exists():
        blocker.write_text("not a folder")
    stem = drawn.draw(STEMS)
    valid = {"needed": "x"}
    odd_seconds = (
        st.integers(max_value=0)
        | st.floats(max_value=0)
        | st.just(float("nan"))
        | st.text(max_size=5)
        | st.booleans()
        | st.lists(st.integers(), max_size=2)
    )
    odd_mapping = (
        st.dictionaries(
            st.text(max_size=5), st.integers() | st.none() | st.binary(max_size=3), min_size=1
        )
        | st.dictionaries(st.integers() | st.none(), st.text(max_size=5), min_size=1)
        | st.dictionaries(
            st.text(max_size=5).map(lambda t: t + "\0")
            | st.text(max_size=5).map(lambda t: t + "="),
            st.text(max_size=5),
            min_size=1,
        )
        | st.builds(lambda value: {"A": value + "\0"}, st.text(max_size=5))
        | st.lists(st.text(max_size=3), max_size=2)
        | st.integers()
    )
    kind = drawn.draw(
        st.sampled_from(
            [
                "runs-dir-is-a-file",
                "runs-dir-under-a-file",
                "cwd-is-a-file",
                "cwd-missing",
                "source-is-a-fifo",
                "source-is-not-a-path",
                "kernel-not-installed",
                "odd-timeout",
                "odd-cell-timeout",
                "odd-env",
                "odd-secrets",
                "parameters-not-a-mapping",
                "huge-int-parameter",
                "deeply-nested-parameter",
                "parameter-sets-not-iterable",
                "odd-max-workers",
                "write-under-a-file",
                "write-not-a-notebook",
                "read-not-a-path",
                "lookup-not-a-path",
            ]
        )
    )

    def odd(strategy: st.SearchStrategy[Any]) -> Any:
        """A drawn value of the wrong type, for the call that must refuse it."""
        return drawn.draw(strategy)

    def execute(ex: NotebookExecutor, **options: Any) -> Any:
        options.setdefault("parameters", valid)
        return ex.execute(good, **options)

    def with_runs_dir(runs_dir: Path) -> Callable[[NotebookExecutor], Any]:
        def call(ex: NotebookExecutor) -> Any:
            with NotebookExecutor(runs_dir=runs_dir) as other:
                return execute(other)

        return call

    cases: dict[str, Callable[[], Callable[[NotebookExecutor], Any]]] = {
        "runs-dir-is-a-file": lambda: with_runs_dir(blocker),
        "runs-dir-under-a-file": lambda: with_runs_dir(blocker / stem),
        "cwd-is-a-file": lambda: lambda ex: execute(ex, cwd=blocker),
        "cwd-missing": lambda: lambda ex: execute(ex, cwd=folder / f"missing {stem}"),
        "source-is-a-fifo": lambda: lambda ex: ex.execute(_fifo(folder, stem)),
        "source-is-not-a-path": lambda: (
            lambda ex: ex.execute(
                odd(st.integers() | st.none() | st.lists(st.text(max_size=3), max_size=2))
            )
        ),
        "kernel-not-installed": lambda: _with_kernel(good, drawn.draw(KERNEL_NAMES), valid),
        "odd-timeout": lambda: lambda ex: execute(ex, timeout=drawn.draw(odd_seconds)),
        "odd-cell-timeout": lambda: lambda ex: execute(ex, cell_timeout=drawn.draw(odd_seconds)),
        "odd-env": lambda: lambda ex: execute(ex, env=drawn.draw(odd_mapping)),
        "odd-secrets": lambda: lambda ex: execute(ex, secrets=drawn.draw(odd_mapping)),
        "parameters-not-a-mapping": lambda: (
            lambda ex: execute(
                ex, parameters=drawn.draw(st.lists(st.integers(), max_size=2) | st.integers())
            )
        ),
        "huge-int-parameter": lambda: (
            lambda ex: execute(
                ex, parameters={**valid, "n": 10 ** drawn.draw(st.integers(5000, 20000))}
            )
        ),
        "deeply-nested-parameter": lambda: (
            lambda ex: execute(
                ex, parameters={**valid, "items": _nested(drawn.draw(st.integers(150, 3000)))}
            )
        ),
        "parameter-sets-not-iterable": lambda: (
            lambda ex: ex.execute_many(good, odd(st.one_of(st.integers(), st.none(), st.floats())))
        ),
        "odd-max-workers": lambda: (
            lambda ex: ex.execute_many(
                good, [valid], max_workers=drawn.draw(st.booleans() | st.integers(max_value=0))
            )
        ),
        "write-under-a-file": lambda: (
            lambda ex: write_notebook(read_notebook(good), blocker / f"{stem}.ipynb")
        ),
        "write-not-a-notebook": lambda: (
            lambda ex: write_notebook(
                odd(st.dictionaries(st.text(max_size=3), st.integers()) | st.none()),
                folder / f"{stem}.ipynb",
            )
        ),
        "read-not-a-path": lambda: (
            lambda ex: read_notebook(
                odd(st.integers() | st.none() | st.binary(max_size=3).map(bytearray))
            )
        ),
        # The lookups and reviews: a value that is neither a path nor a run id.
        "lookup-not-a-path": lambda: _lookup_call(
            drawn.draw(st.sampled_from(sorted(LOOKUPS))),
            odd(st.integers() | st.lists(st.integers(), max_size=2) | st.binary(max_size=3)),
            good,
        ),
    }
    return kind, cases[kind]()


#: Calls that take a notebook path or a run id, each given ``value`` where that goes.
LOOKUPS: dict[str, Callable[[NotebookExecutor, Any, Path], Any]] = {
    "runs": lambda ex, value, good: ex.runs(notebook=value),
    "search": lambda ex, value, good: ex.search("x", notebook=value),
    "scraps": lambda ex, value, good: ex.scraps(notebook=value),
    "get_run": lambda ex, value, good: ex.get_run(value),
    "collect_outputs": lambda ex, value, good: ex.collect_outputs(value),
    "diff_notebooks": lambda ex, value, good: ex.diff_notebooks(value, good),
    "validate": lambda ex, value, good: ex.validate(value),
}


def _lookup_call(name: str, value: Any, good: Path) -> Callable[[NotebookExecutor], Any]:
    return lambda ex: LOOKUPS[name](ex, value, good)


#: Kernel names no one has installed: text of every kind, path-like names, python-ish names.
KERNEL_NAMES = st.text(min_size=1, max_size=20).filter(
    lambda t: t.lower() != "python3"
) | st.sampled_from(["python3.99", "Python 3 (venv)", "conda-env-nowhere-py", "../python3"])


def _with_kernel(
    good: Path, name: str, parameters: dict[str, Any]
) -> Callable[[NotebookExecutor], Any]:
    def call(ex: NotebookExecutor) -> Any:
        with NotebookExecutor(runs_dir=ex.runs_dir, kernel_name=name) as other:
            return other.execute(good, parameters=parameters)

    return call


@settings(API, max_examples=250)
@given(drawn=st.data())
def test_api_refuses_a_bad_environment_in_one_line(
    ex: NotebookExecutor, scratch: Path, drawn: st.DataObject
) -> None:
    kind, call = _environment_case(scratch / "environment", drawn)
    EXAMPLES[f"api:env:{kind}"] += 1
    with pytest.raises(NotebookExecutorError) as caught:
        call(ex)
    _one_line(str(caught.value))
    _no_record(ex.runs_dir)
    for folder in (scratch / "environment" / "a file").parents:
        assert not (folder / "a file").is_dir()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["params.py", "-r", "needed", "x", "--runs-dir", "a file"], "cannot hold run records"),
        (["params.py", "-r", "needed", "x", "--runs-dir", "a file/runs"], "cannot hold run"),
        (["params.py", "-r", "needed", "x", "--cwd", "a file"], "not a directory"),
        (["params.py", "-r", "needed", "x", "--kernel", "python3.99"], "is not installed"),
        (["pipe.py"], "not a regular file"),
    ],
    ids=["runs-dir-is-a-file", "runs-dir-under-a-file", "cwd-is-a-file", "kernel", "fifo"],
)
def test_cli_refuses_a_bad_environment_in_one_line(
    scratch: Path, args: list[str], named: str
) -> None:
    folder = scratch / "cli-environment"
    if not folder.exists():
        folder.mkdir()
        (folder / "params.py").write_text(PARAMETERS_NOTEBOOK)
        (folder / "a file").write_text("not a folder")
        os.mkfifo(folder / "pipe.py")
    command = [*COMMANDS[-1], "run", *args, "--json"]
    EXAMPLES["cli:env"] += 1
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("notebook-executor: error: ") and named in line, line
    assert (folder / "a file").read_text() == "not a folder"
