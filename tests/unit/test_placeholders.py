"""Logbook placeholders and declared environment variables, with the fake engine."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookSourceError, ParameterError
from notebook_executor._parameters.environment import read_dotenv
from notebook_executor._parameters.placeholders import substitute_in_code
from unit.fake_engine import FakeEngine

INJECTION = '"); open("pwned","w").close(); print("'
NASTY = [
    INJECTION,
    "a\\b",
    "it's",
    'say "hi"',
    "line\nbreak\r\n",
    "'''",
    '"""',
    "tab\tnul\x00bell\x07",
    "trailing backslash \\",
    "é ☃ \U0001f600",
    "{name}",
]
TEMPLATES = [
    'print("{v}")',
    "print('{v}')",
    'print("""{v}""")',
    "print('''{v}''')",
    'print(u"{v}")',
    "print(b'{v}'.decode())",
    'print(B"""x{v}y""".decode())',
    'print("a" "{v}" \'b\')',
]


def _evaluate(source: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<cell>", "exec"), {})
    return out.getvalue()


@pytest.mark.parametrize("value", NASTY)
@pytest.mark.parametrize("template", TEMPLATES)
def test_value_lands_as_text_in_any_literal(
    template: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    source = substitute_in_code(template, {"v": value})
    tree = ast.parse(source)
    # One call with constant arguments: nothing but the literal changed.
    assert len(tree.body) == 1
    expected = _evaluate(template.replace("{v}", "PLACEHOLDER")).replace("PLACEHOLDER", value)
    assert _evaluate(source) == expected
    assert not (tmp_path / "pwned").exists()


def test_fstrings_code_and_doubled_braces_are_left_alone() -> None:
    source = 'x = {name}\nprint(f"{name}", "{{name}}", F"{name!r}", "{other}")  # {name}\n'
    assert substitute_in_code(source, {"name": "Ada"}) == source


def test_plain_literal_next_to_fstring() -> None:
    source = 'print(f"{name}" "{name}")'
    assert substitute_in_code(source, {"name": "Ada"}) == 'print(f"{name}" "Ada")'


def test_magics_are_skipped_and_the_rest_substituted() -> None:
    source = '%time x = 1\nprint("{name}")\n!echo "{name}"'
    assert (
        substitute_in_code(source, {"name": "Ada"}) == '%time x = 1\nprint("Ada")\n!echo "{name}"'
    )


@pytest.mark.parametrize(
    "source",
    [
        'files = !echo "{name}"',
        '%%bash\necho "{name}"',
        '\n%%script sh\necho "{name}"',
        '%sx echo "{name}"',
    ],
)
def test_shell_text_is_never_substituted(source: str) -> None:
    # Python escaping cannot make a value safe in a shell command: such literals stay as written.
    assert substitute_in_code(source, {"name": "$(touch pwned)"}) == source


def test_a_string_holding_a_percent_line_is_still_python() -> None:
    source = 'print("""\n%d {name}\n""")'
    assert substitute_in_code(source, {"name": "x"}) == 'print("""\n%d x\n""")'


def test_named_unicode_escape_is_not_a_placeholder() -> None:
    source = 'print("\\N{DASH}", "\\\\N{DASH}")'
    assert substitute_in_code(source, {"DASH": "x"}) == 'print("\\N{DASH}", "\\\\Nx")'


def test_code_that_does_not_tokenize_is_left_alone() -> None:
    source = 'print("{name}"\nif'
    assert substitute_in_code(source, {"name": "Ada"}) == source


def test_raw_literal_takes_a_safe_value_verbatim() -> None:
    assert substitute_in_code('p = r"C:{dir}"', {"dir": "data set"}) == 'p = r"C:data set"'


@pytest.mark.parametrize("value", ["a\\b", 'q"q', "line\nbreak", "nul\x00"])
def test_raw_literal_refuses_a_value_it_cannot_hold(value: str) -> None:
    with pytest.raises(ParameterError, match="raw string literal of cell 3") as caught:
        substitute_in_code('p = r"{v}"', {"v": value}, cell_index=3)
    assert caught.value.parameter == "v"


def test_raw_literal_other_quote_is_fine() -> None:
    assert substitute_in_code("p = r'{v}'", {"v": 'say "x"'}) == "p = r'say \"x\"'"


# -- through the executor (fake engine) -------------------------------------------------------

LOGBOOK = """---
parameters:
  name: ...          # who to greet
  items: [1, 2]
  flag: true
{extra}---

# Greeting {name}

Items {items}, flag {flag}, kept {{name}}, unknown {nobody}.

```python
print("Hello, {name}!")
print(f"f-string {name}")
print("items {items} flag {flag}")
```
"""


def _logbook(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "greet.md"
    path.write_text(LOGBOOK.replace("{extra}", extra), encoding="utf-8")
    return path


def _stdout(nb: Any) -> str:
    return "".join(
        output.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.get("output_type") == "stream"
    )


def test_logbook_placeholders_in_code_narrative_and_record(tmp_path: Path) -> None:
    import nbformat

    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        result = ex.execute(_logbook(tmp_path), parameters={"name": "Richard"})
    assert result["status"] == "success", result
    nb = nbformat.read(result["output_path"], as_version=4)
    assert _stdout(nb) == "Hello, Richard!\nf-string Richard\nitems [1, 2] flag True\n"
    narrative = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert "# Greeting Richard\n" in narrative
    assert "Items [1, 2], flag True, kept {{name}}, unknown {nobody}." in narrative
    code = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    assert 'print("Hello, Richard!")' in code[-1]
    assert 'print(f"f-string {name}")' in code[-1]
    markdown = Path(result["output_path"]).with_suffix(".md").read_text(encoding="utf-8")
    assert 'print("Hello, Richard!")' in markdown
    assert "# Greeting Richard" in markdown


def test_substitute_false_turns_placeholders_off(tmp_path: Path) -> None:
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        path = _logbook(tmp_path, "substitute: false\n")
        result = ex.execute(path, parameters={"name": "Richard"})
    import nbformat

    nb = nbformat.read(result["output_path"], as_version=4)
    assert _stdout(nb).startswith("Hello, {name}!\n")


def test_substitute_must_be_a_boolean(tmp_path: Path) -> None:
    engine = FakeEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(NotebookSourceError, match="'substitute' must be true or false"),
    ):
        ex.execute(_logbook(tmp_path, "substitute: maybe\n"), parameters={"name": "x"})
    assert engine.jobs == []


def test_injection_through_a_placeholder_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat

    monkeypatch.chdir(tmp_path)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        result = ex.execute(_logbook(tmp_path), parameters={"name": INJECTION})
    assert result["status"] == "success", result
    assert not (tmp_path / "pwned").exists()
    nb = nbformat.read(result["output_path"], as_version=4)
    assert _stdout(nb).startswith(f"Hello, {INJECTION}!\n")


def test_placeholders_only_in_logbooks(tmp_path: Path) -> None:
    import nbformat

    path = tmp_path / "plain.py"
    path.write_text('# %% tags=["parameters"]\nname = "x"\n\n# %%\nprint("{name}")\n')
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        result = ex.execute(path, parameters={"name": "Ada"})
    nb = nbformat.read(result["output_path"], as_version=4)
    assert _stdout(nb) == "{name}\n"


# -- declared environment ---------------------------------------------------------------------

ENV_LOGBOOK = """---
parameters:
  who: "you"
env: [NBX_TEST_TOKEN]
---

```python
import os
print("token length", len(os.environ["NBX_TEST_TOKEN"]))
print(os.environ["NBX_TEST_TOKEN"])
```
"""


def _env_logbook(tmp_path: Path) -> Path:
    folder = tmp_path / "nb"
    folder.mkdir(exist_ok=True)
    path = folder / "env.md"
    path.write_text(ENV_LOGBOOK, encoding="utf-8")
    return path


def test_missing_declared_variable_is_a_parameter_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NBX_TEST_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine()
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex,
        pytest.raises(ParameterError, match="NBX_TEST_TOKEN") as caught,
    ):
        ex.execute(_env_logbook(tmp_path))
    assert caught.value.parameter == "NBX_TEST_TOKEN"
    assert engine.jobs == []
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("where", ["secrets", "env", "environ", "dotenv-notebook", "dotenv-cwd"])
def test_declared_variable_found_and_treated_as_secret(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = "tok-Vq81-secret-value"
    monkeypatch.delenv("NBX_TEST_TOKEN", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path = _env_logbook(tmp_path)
    options: dict[str, Any] = {}
    if where == "secrets":
        options["secrets"] = {"NBX_TEST_TOKEN": value}
    elif where == "env":
        options["env"] = {"NBX_TEST_TOKEN": value}
    elif where == "environ":
        monkeypatch.setenv("NBX_TEST_TOKEN", value)
    elif where == "dotenv-notebook":
        (path.parent / ".env").write_text(f"# tokens\nexport NBX_TEST_TOKEN='{value}'\n")
    else:
        (work / ".env").write_text(f'OTHER=1\nNBX_TEST_TOKEN="{value}"  # the token\n')
    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs, engine=FakeEngine()) as ex:
        result = ex.execute(path, **options)
    assert result["status"] == "success", result
    run_file = Path(result["output_path"])
    text = run_file.read_text(encoding="utf-8")
    assert f"token length {len(value)}" in text  # the kernel had it
    for written in (run_file, run_file.with_suffix(".md"), runs / "catalog.sqlite"):
        assert value.encode() not in written.read_bytes()
    import json

    record = json.loads(text)["metadata"]["notebook_executor"]
    assert record["secret_names"] == ["NBX_TEST_TOKEN"]
    assert "NBX_TEST_TOKEN" not in record["env_names"]


def test_declared_env_in_notebook_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat

    monkeypatch.delenv("NBX_TEST_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("print(1)"))
    nb.metadata["notebook_executor"] = {"env": ["NBX_TEST_TOKEN"]}
    path = tmp_path / "meta.ipynb"
    nbformat.write(nb, path)
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex,
        pytest.raises(ParameterError, match="NBX_TEST_TOKEN"),
    ):
        ex.execute(path)


def test_declared_env_must_be_a_list_of_names(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_text("---\nparameters:\n  a: 1\nenv: [1 2]\n---\n\ntext\n")
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex,
        pytest.raises(NotebookSourceError, match="'env' must be a list"),
    ):
        ex.execute(path)


def test_dotenv_parser(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text(
        "# comment\n"
        "\n"
        "PLAIN=value with spaces   # comment\n"
        "export EXPORTED=1\n"
        "SINGLE='a \\n # b'\n"
        'DOUBLE="x\\ny \\"q\\" # not a comment"\n'
        "EMPTY=\n"
        "not a line\n"
        'UNCLOSED="abc\n'
        " SPACED = yes \n",
        encoding="utf-8",
    )
    assert read_dotenv(path) == {
        "PLAIN": "value with spaces",
        "EXPORTED": "1",
        "SINGLE": "a \\n # b",
        "DOUBLE": 'x\ny "q" # not a comment',
        "EMPTY": "",
        "SPACED": "yes",
    }
    assert read_dotenv(tmp_path / "missing") == {}


def test_base_env_replaces_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set here, but not in base_env: neither the kernel nor the declared env sees it.
    monkeypatch.setenv("NBX_TEST_TOKEN", "from-the-process-environment")
    monkeypatch.setenv("NBX_OTHER_VARIABLE", "also-from-the-process")
    monkeypatch.chdir(tmp_path)
    path = _env_logbook(tmp_path)
    engine = FakeEngine()
    with NotebookExecutor(
        runs_dir=tmp_path / "runs", engine=engine, base_env={"PATH": "/usr/bin"}
    ) as ex:
        with pytest.raises(ParameterError, match="NBX_TEST_TOKEN"):
            ex.execute(path, parameters={"who": "x"})
        result = ex.execute(
            path, parameters={"who": "x"}, secrets={"NBX_TEST_TOKEN": "named-token-value"}
        )
    assert result["status"] == "success"
    [job] = engine.jobs
    assert job.env["PATH"] == "/usr/bin"
    assert job.env["NBX_TEST_TOKEN"] == "named-token-value"
    assert "NBX_OTHER_VARIABLE" not in job.env


def test_only_the_literals_own_quote_is_escaped() -> None:
    # As the logbook pattern writes it: a list's repr inside a double-quoted literal.
    texts = {"topics": str(["search", "placeholders"]), "said": 'it\'s "done"'}
    source = 'print("Topics: {topics}")\nprint(\'{said}\')\nprint(b"{said}")\n'
    assert substitute_in_code(source, texts) == (
        "print(\"Topics: ['search', 'placeholders']\")\n"
        "print('it\\'s \"done\"')\n"
        'print(b"it\'s \\"done\\"")\n'
    )
