"""validate() and execute() run the same checks: validate says valid exactly when execute
starts the run, and an argument execute refuses is refused by validate with the same error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, NotebookExecutorError
from unit.fake_engine import FakeEngine

LOGBOOK = """\
---
parameters:
  x: 1
{front}
---

Hello {{x}}

```python
print("{{x}}")
```
"""

R_NOTEBOOK = """\
{"cells": [{"cell_type": "code", "id": "a", "metadata": {"tags": ["parameters"]},
  "source": "x <- 1", "outputs": [], "execution_count": null}],
 "metadata": {"kernelspec": {"name": "bash", "language": "bash", "display_name": "Bash"}},
 "nbformat": 4, "nbformat_minor": 5}
"""

TOKEN = "NBX_AGREE_TOKEN"


def _setup(tmp_path: Path, front: str = "", dotenv: str | None = None) -> Path:
    folder = tmp_path / "book"
    folder.mkdir(exist_ok=True)
    path = folder / "log.md"
    path.write_text(LOGBOOK.format(front=front))
    if dotenv is not None:
        (folder / ".env").write_text(dotenv)
    return path


# (name, front matter, .env text, executor options, run options, valid?)
CASES: list[tuple[str, str, str | None, dict[str, Any], dict[str, Any], bool]] = [
    ("env-as-a-string", f"env: {TOKEN}", None, {}, {"secrets": {TOKEN: "abcdefgh"}}, False),
    ("dotenv-unterminated", f"env: [{TOKEN}]", f'{TOKEN}="unterminated\n', {}, {}, False),
    ("dotenv-good", f"env: [{TOKEN}]", f'{TOKEN}="abcdefgh"\n', {}, {}, True),
    ("only-in-base-env", f"env: [{TOKEN}]", None, {"base_env": {TOKEN: "abcdefgh"}}, {}, True),
    ("dotenv-outside-root", f"env: [{TOKEN}]", f"{TOKEN}=abcdefgh\n",
     {"dotenv_root": "elsewhere"}, {}, False),
    ("unknown-parameter", "", None, {}, {"parameters": {"y": 2}}, False),
    ("ill-typed-parameter", "", None, {}, {"parameters": {"x": "one"}}, False),
    ("given-parameter-fits", "", None, {}, {"parameters": {"x": 2}}, True),
    ("substitute-not-a-bool", "substitute: 'no'", None, {}, {}, False),
    ("kernel-not-installed", "", None, {"kernel_name": "nbx-no-such-kernel"}, {}, False),
]  # fmt: skip


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", call()
    except NotebookExecutorError as exc:
        return type(exc).__name__, exc


@pytest.mark.parametrize(
    ("front", "dotenv", "executor", "options", "valid"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_validate_says_what_execute_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    front: str,
    dotenv: str | None,
    executor: dict[str, Any],
    options: dict[str, Any],
    valid: bool,
) -> None:
    monkeypatch.delenv(TOKEN, raising=False)
    monkeypatch.chdir(tmp_path)
    path = _setup(tmp_path, front, dotenv)
    if "dotenv_root" in executor:
        (tmp_path / executor["dotenv_root"]).mkdir()
        executor = {**executor, "dotenv_root": tmp_path / executor["dotenv_root"]}
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine(), **executor) as ex:
        verdict = ex.validate(path, **options)
        kind, _ = _outcome(lambda: ex.execute(path, **options))
    assert verdict["valid"] is valid, verdict
    assert (kind == "ok") is valid
    if not valid:
        assert [p["severity"] for p in verdict["problems"]].count("error") >= 1


def test_a_variable_only_in_this_process_is_missing_for_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server gives kernels a minimal environment: its own variables are not the notebook's.
    monkeypatch.setenv(TOKEN, "abcdefgh")
    path = _setup(tmp_path, f"env: [{TOKEN}]")
    with NotebookExecutor(
        runs_dir=tmp_path / "runs", engine=FakeEngine(), base_env={"PATH": "/usr/bin"}
    ) as ex:
        verdict = ex.validate(path)
        kind, _ = _outcome(lambda: ex.execute(path))
    assert kind == "ParameterError"
    assert verdict["valid"] is False
    [problem] = verdict["problems"]
    assert TOKEN in problem["message"] and "set it in the environment" not in problem["message"]


def test_a_notebook_whose_parameters_are_not_parsed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bash notebook's parameters cell is not Python: execute injects unchecked, so validate
    # must not call it invalid Python. The kernel is named, never started (the fake engine):
    # a kernelspec of this test's own, so that no installed bash kernel is needed.
    spec = tmp_path / "jupyter" / "kernels" / "bash"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {"argv": ["bash", "{connection_file}"], "display_name": "Bash", "language": "bash"}
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    path = tmp_path / "b.ipynb"
    path.write_text(R_NOTEBOOK)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        verdict = ex.validate(path)
        kind, _ = _outcome(lambda: ex.execute(path))
    assert kind == "ok"
    assert verdict == {"valid": True, "problems": []}


@pytest.mark.parametrize(
    "options",
    [
        {"env": "x"},
        {"secrets": {"A": 1}},
        {"timeout": -1},
        {"request": 3},
        {"cwd": "/nonexistent/folder/nbx"},
        {"parameters": [1]},
    ],
    ids=["env", "secrets", "timeout", "request", "cwd", "parameters"],
)
def test_arguments_execute_refuses_are_refused_by_validate(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    path = _setup(tmp_path)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        kind, error = _outcome(lambda: ex.execute(path, **options))
        assert kind != "ok"
        with pytest.raises(type(error)) as raised:
            ex.validate(path, **options)
    assert str(raised.value) == str(error)


REQUIRED = """\
---
parameters:
  station: ...
env: [NBX_AGREE_TOKEN]
---

```python
print(station)
```
"""


def test_a_required_parameter_leaves_the_other_checks_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without parameters=, a notebook that requires one is valid; its environment is still
    # checked, as execute (given the value) would check it.
    monkeypatch.delenv(TOKEN, raising=False)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "log.md"
    path.write_text(REQUIRED)
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=FakeEngine()) as ex:
        [problem] = ex.validate(path)["problems"]
        assert TOKEN in problem["message"] and problem["cell"] is None
        secrets = {TOKEN: "abcdefgh"}
        assert ex.validate(path, secrets=secrets) == {"valid": True, "problems": []}
        verdict = ex.validate(path, secrets=secrets, parameters={})
        assert verdict["valid"] is False
        assert "missing required parameter 'station'" in verdict["problems"][0]["message"]
        assert ex.execute(path, secrets=secrets, parameters={"station": "x"})["status"] == "success"
