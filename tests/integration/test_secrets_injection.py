"""Secrets never reach disk; parameter values never run as code. Real kernels throughout.

Secrets: the notebook gets them as environment variables and does its worst with them (prints
them plainly, as a repr, as JSON, to stderr and through logging, glues them, displays them,
raises an error holding them) while the caller also passes them as a parameter and in the
request. Afterwards every byte of every file under ``runs/`` (the catalog and its WAL included)
is searched for each value in every common encoding, and so is the result dict; a cell also
searches ``runs/`` while the run is still going.

Injection: parameter values full of quotes, backslashes, newlines, braces, code-looking text,
IPython magics and shell escapes, non-ASCII and emoji come back exactly as given (glued by the
notebook and compared), through the API and the command line, and none of them ever runs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notebook_executor import NotebookExecutor, NotebookSourceError, ParameterError
from support import alive

pytestmark = pytest.mark.kernel

CLI = [sys.executable, "-m", "notebook_executor"]
RUNS = ["--runs-dir", "cli-runs"]

# A realistic API token, and a password holding every character that escapes differently in
# Python source, JSON and YAML.
SECRETS = {
    "API_TOKEN": "tok_live_9f8E7d6C5b4A3x2Y1z0-QwErTy.UiOp+as/df=",
    "DB_PASSWORD": "p@ss'w\"rd\\n0t-a-newline\\\u00e9t\u00e9-\U0001f511{x}",
}

LEAKY = """# %% tags=["parameters"]
hint: str = ""
runs_dir: str = ""

# %%
import hashlib
import json
import logging
import os
import sys
from pathlib import Path

import scrapbook as sb

token = os.environ["API_TOKEN"]
password = os.environ["DB_PASSWORD"]
for value in (token, password):
    print(value)
    print(repr(value))
    print(json.dumps({"value": value}))
    print(json.dumps(value, ensure_ascii=False))
    print({"nested": [value]})
    sys.stderr.write(f"stderr: {value}\\n")
    logging.getLogger("leaky").warning("logged: %s", value)
    display({"text/plain": value, "text/html": f"<b>{value}</b>"}, raw=True)
sb.glue("token", token)
sb.glue("nested", {"auth": {"token": token, "password": password}, "all": [token, password]})
sb.glue("sha", [hashlib.sha256(v.encode()).hexdigest() for v in (token, password)])
sb.glue("hint_is_token", hint == token)
password

# %%
# The run files as they are on disk while the run is still going.
found = []
for path in Path(runs_dir).rglob("*"):
    if path.is_file():
        data = path.read_bytes()
        found += [path.name for v in (token, password) if v.encode() in data]
sb.glue("leaks_during_run", found)

# %%
raise RuntimeError(f"authentication failed for {token} with {password}")
"""

ECHO = """# %% tags=["parameters"]
text: str = "default"
items: list = []
mapping: dict = {}
anything = None

# %%
import os

import scrapbook as sb

sb.glue("text", text)
sb.glue("items", items)
sb.glue("mapping", mapping)
sb.glue("anything", {"value": anything})
sb.glue("pwned", os.path.exists("PWNED"))
"""

LOGBOOK = """---
title: injection through the front matter
parameters:
  text: "{__import__('os').system('touch PWNED')}"  # a default that looks like code
  quoted: "'; import os; os.system(\\"touch PWNED\\"); '"
---

# Logbook

```python
import scrapbook as sb
sb.glue("text", text)
sb.glue("quoted", quoted)
```
"""

#: Values that would run as code, or break out of a literal, if injected carelessly.
NASTY = [
    "'",
    '"',
    "'''",
    '"""',
    "\\",
    "ends with a backslash\\",
    "\\'",
    '\\"',
    "line one\nline two",
    "\r\n\t\x0b\x0c",
    "{}",
    "{x}",
    "{{x}}",
    "{__import__('os').system('touch PWNED')}",
    "f\"{__import__('os').system('touch PWNED')}\"",
    "'); __import__('os').system('touch PWNED'); ('",
    "\"); __import__('os').system('touch PWNED'); (\"",
    "'''; __import__('os').system('touch PWNED'); '''",
    '"""; __import__("os").system("touch PWNED"); """',
    "\n__import__('os').system('touch PWNED')\n",
    "\n!touch PWNED\n",
    "\n%system touch PWNED\n",
    "%%bash\ntouch PWNED",
    "$(touch PWNED) `touch PWNED`",
    "# not a comment",
    "%(name)s %s {0}",
    "caf\u00e9 na\u00efve \u00fc\u00df \u65e5\u672c\u8a9e \u0639\u0631\u0628\u064a",
    "emoji \U0001f680\U0001f525 family \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u202eright-to-left override\u202c zero\u200bwidth",
    "line\u2028separator\u2029paragraph\x85next",
    "e\u0301 combining",
    " leading and trailing spaces ",
    "",
    "x" * 5000,
]

#: Strings that look like other types; a ``str`` parameter keeps them as typed on the CLI.
LOOKS_TYPED = ["None", "True", "false", "007", "1e3", "nan", "[1, 2]", "{a: 1}", "null", "~"]

ECHO_MANY = (
    '# %% tags=["parameters"]\n'
    + "".join(f'p{i}: str = ""\n' for i in range(len(NASTY) + len(LOOKS_TYPED)))
    + "\n# %%\nimport os\n\nimport scrapbook as sb\n\n"
    + f"sb.glue('values', [{', '.join(f'p{i}' for i in range(len(NASTY) + len(LOOKS_TYPED)))}])\n"
    + "sb.glue('pwned', os.path.exists('PWNED'))\n"
)


def _escapes(value: str) -> list[str]:
    """``value`` as the body of a Python repr, an ASCII repr and a JSON string."""
    return [
        repr(value)[1:-1],
        ascii(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value)[1:-1],
    ]


def _encodings(value: str) -> dict[str, bytes]:
    """The forms a leaked value could take in a file: plain, escaped once or twice (a repr
    printed by the notebook, then stored in a JSON file), base64, UTF-16."""
    forms = {"plain": value.encode()}
    for n, once in enumerate(_escapes(value)):
        forms[f"escaped-{n}"] = once.encode()
        for m, twice in enumerate(_escapes(once)):
            forms[f"escaped-{n}-{m}"] = twice.encode()
    forms["base64"] = base64.b64encode(value.encode())
    forms["base64-url"] = base64.urlsafe_b64encode(value.encode())
    forms["utf-16"] = value.encode("utf-16-le")
    return forms


def _leaks(data: bytes, values: dict[str, str]) -> list[str]:
    return [
        f"{name} as {form}"
        for name, value in values.items()
        for form, needle in _encodings(value).items()
        if needle in data
    ]


def _scan_runs(runs_dir: Path, values: dict[str, str]) -> dict[str, list[str]]:
    """Every file under ``runs_dir`` that holds any form of any value."""
    found: dict[str, list[str]] = {}
    for path in sorted(runs_dir.rglob("*")):
        if path.is_file():
            leaks = _leaks(path.read_bytes(), values)
            if leaks:
                found[str(path.relative_to(runs_dir))] = leaks
    return found


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("secrets")
    (folder / "leaky.py").write_text(LEAKY)
    (folder / "echo.py").write_text(ECHO)
    (folder / "echo_many.py").write_text(ECHO_MANY)
    (folder / "logbook.md").write_text(LOGBOOK)
    return folder


@pytest.fixture(scope="module")
def ex(workdir: Path) -> Iterator[NotebookExecutor]:
    executor = NotebookExecutor(runs_dir=workdir / "runs")
    yield executor
    executor.close()


def _no_pwned(*folders: Path) -> None:
    for folder in {*folders, Path.cwd()}:
        assert not list(folder.rglob("PWNED")), f"an injected value ran as code in {folder}"


# -- secrets --------------------------------------------------------------------------------------


def test_secrets_reach_the_kernel_and_nothing_else(workdir: Path) -> None:
    runs_dir = workdir / "secret-runs"
    token, password = SECRETS["API_TOKEN"], SECRETS["DB_PASSWORD"]
    with NotebookExecutor(runs_dir=runs_dir) as ex:
        result = ex.execute(
            workdir / "leaky.py",
            parameters={"hint": token, "runs_dir": str(runs_dir)},
            request=f"check the login with {token} and {password}",
            secrets=SECRETS,
        )
        # The catalog's write-ahead log still holds the latest writes here.
        assert (runs_dir / "catalog.sqlite-wal").exists()
        during = _scan_runs(runs_dir, SECRETS)
        rows = ex.runs()
        frame = ex.scraps()
        stored = ex.get_run(result["run_id"])
        outputs = ex.collect_outputs(result["run_id"])
    after = _scan_runs(runs_dir, SECRETS)

    # The kernel had the exact values: it hashed them and compared the parameter.
    assert result["status"] == "error"
    assert (result["error_kind"], result["failed_cell"]["index"]) == ("cell_error", 3)
    assert result["scraps"]["sha"] == [
        hashlib.sha256(v.encode()).hexdigest() for v in (token, password)
    ]
    assert result["scraps"]["hint_is_token"] is True
    assert result["scraps"]["leaks_during_run"] == []

    # Nothing under runs/ holds a value in any form, while the executor is open or after.
    assert during == {}
    assert after == {}
    assert (runs_dir / "catalog.sqlite").exists()
    assert any(path.name.endswith(".md") for path in runs_dir.rglob("*"))

    # Nor does anything handed back to the caller.
    for name, returned in [
        ("result", result),
        ("runs()", rows),
        ("get_run()", stored),
        ("scraps()", frame.to_json()),
        ("collect_outputs()", outputs),
    ]:
        text = json.dumps(returned, ensure_ascii=False, default=str).encode()
        assert _leaks(text, SECRETS) == [], name
    assert result["parameters"]["hint"] == "[secret API_TOKEN]"
    assert result["request"] == "check the login with [secret API_TOKEN] and [secret DB_PASSWORD]"
    assert result["scraps"]["token"] == "[secret API_TOKEN]"
    assert "[secret DB_PASSWORD]" in result["failed_cell"]["evalue"]

    # The record names the secrets.
    record = json.loads(Path(result["output_path"]).read_text(encoding="utf-8"))["metadata"][
        "notebook_executor"
    ]
    assert record["secret_names"] == ["API_TOKEN", "DB_PASSWORD"]
    assert record["env_names"] == []


def test_command_line_secrets_come_from_the_environment_and_are_written_nowhere(
    workdir: Path,
) -> None:
    """``--secret NAME`` hands the caller's variable to the kernel as a secret: masked in what
    the command prints, absent from every file under runs/; an unset name is bad input."""
    runs_dir = workdir / "cli-secret-runs"
    env = {**os.environ, **SECRETS}
    command = [*CLI, "run", "leaky.py", "--runs-dir", str(runs_dir), "-p", "runs_dir"]
    done = subprocess.run(
        [*command, str(runs_dir), "--secret", "API_TOKEN", "--secret", "DB_PASSWORD", "--json"],
        cwd=workdir,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert (result["error_kind"], result["failed_cell"]["index"]) == ("cell_error", 3)
    assert result["scraps"]["token"] == "[secret API_TOKEN]"
    assert _leaks(done.stdout + done.stderr, SECRETS) == []
    assert _scan_runs(runs_dir, SECRETS) == {}
    record = json.loads(Path(result["output_path"]).read_text(encoding="utf-8"))
    assert record["metadata"]["notebook_executor"]["secret_names"] == ["API_TOKEN", "DB_PASSWORD"]

    unset = {key: value for key, value in env.items() if key != "NBX_UNSET_SECRET"}
    missing = subprocess.run(
        [*command, str(runs_dir), "--secret", "NBX_UNSET_SECRET"],
        cwd=workdir,
        env=unset,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert missing.stdout == ""
    assert missing.stderr.strip().count("\n") == 0
    assert "NBX_UNSET_SECRET" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_secret_survives_a_killed_host_unwritten(workdir: Path) -> None:
    """The run files written when the run begins hold no secret either (the host may die
    before the final write)."""
    runs_dir = workdir / "killed-host-runs"
    ready = workdir / "secret.ready"
    (workdir / "hang.py").write_text(
        '# %% tags=["parameters"]\nhint: str = ""\n\n'
        "# %%\nimport os, pathlib, time\n"
        f"pathlib.Path({str(ready)!r}).write_text(str(os.getpid()))\ntime.sleep(120)\n"
    )
    host = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, json\nfrom notebook_executor import NotebookExecutor\n"
            "secrets = json.loads(sys.argv[3])\n"
            "with NotebookExecutor(runs_dir=sys.argv[1]) as ex:\n"
            "    ex.execute(sys.argv[2], parameters={'hint': secrets['API_TOKEN']},\n"
            "               request=secrets['DB_PASSWORD'], secrets=secrets)\n",
            str(runs_dir),
            str(workdir / "hang.py"),
            json.dumps(SECRETS),
        ],
        cwd=workdir,
    )
    try:
        deadline = time.monotonic() + 120
        while not (ready.exists() and ready.read_text()):
            assert host.poll() is None, "the host ended before the cell started"
            assert time.monotonic() < deadline, "the cell never started"
            time.sleep(0.05)
        during = _scan_runs(runs_dir, SECRETS)
    finally:
        host.kill()
        host.wait(timeout=60)
    kernel = int(ready.read_text())
    deadline = time.monotonic() + 10
    while alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(kernel), "the kernel outlived its killed host"
    with NotebookExecutor(runs_dir=runs_dir) as after:
        [row] = after.runs()
        assert row["error_kind"] == "interrupted"
        assert row["parameters"] == {"hint": "[secret API_TOKEN]"}
    assert during == {}
    assert _scan_runs(runs_dir, SECRETS) == {}


# -- injection ------------------------------------------------------------------------------------


def test_nasty_values_round_trip_through_the_api(ex: NotebookExecutor, workdir: Path) -> None:
    mapping = {value: [value, {value: value}] for value in NASTY}
    result = ex.execute(
        workdir / "echo.py",
        parameters={"text": "".join(NASTY), "items": NASTY, "mapping": mapping, "anything": NASTY},
        request="".join(NASTY),
    )
    assert result["status"] == "success", result["failed_cell"]
    scraps = ex.collect_outputs(result["run_id"])
    assert scraps["text"] == "".join(NASTY)
    assert scraps["items"] == NASTY
    assert scraps["mapping"] == mapping
    assert scraps["anything"] == {"value": NASTY}
    assert scraps["pwned"] is False
    assert result["parameters"]["items"] == NASTY
    assert result["request"] == "".join(NASTY)
    # The record keeps them exactly too, and so does the catalog.
    assert ex.get_run(result["run_id"])["parameters"]["mapping"] == mapping
    assert ex.runs(limit=1)[0]["request"] == "".join(NASTY)
    _no_pwned(workdir)


@pytest.mark.parametrize("option", ["-p", "-r"])
def test_nasty_values_round_trip_through_the_command_line(workdir: Path, option: str) -> None:
    values = [*NASTY, *LOOKS_TYPED]
    arguments = [arg for i, value in enumerate(values) for arg in (option, f"p{i}", value)]
    done = subprocess.run(
        [*CLI, "run", "echo_many.py", "--json", *arguments, "--runs-dir", "cli-runs"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["scraps"]["values"] == values
    assert result["scraps"]["pwned"] is False
    assert result["parameters"] == {f"p{i}": value for i, value in enumerate(values)}
    _no_pwned(workdir)


def test_structured_values_from_the_command_line_stay_data(workdir: Path) -> None:
    items = json.dumps(NASTY[:20])
    mapping = json.dumps({"code": "{__import__('os').system('touch PWNED')}", "q": "'\"\\"})
    done = subprocess.run(
        [*CLI, "run", "echo.py", "--json", "-p", "items", items, "-p", "mapping", mapping, *RUNS],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["scraps"]["items"] == NASTY[:20]
    assert result["scraps"]["mapping"] == json.loads(mapping)
    _no_pwned(workdir)


@pytest.mark.parametrize(
    "args",
    [
        ["-y", "text: !!python/object/apply:os.system ['touch PWNED']"],
        ["-y", "!!python/object/apply:os.system ['touch PWNED']"],
        ["-p", "text=1; __import__('os').system('touch PWNED')", "x"],
        ["-p", "mapping", "!!python/object/apply:os.system ['touch PWNED']"],
    ],
    ids=["yaml-tag-value", "yaml-tag-document", "code-as-a-name", "yaml-tag-in-p"],
)
def test_code_in_yaml_tags_and_names_is_refused(workdir: Path, args: list[str]) -> None:
    done = subprocess.run(
        [*CLI, "run", "echo.py", *args, "--runs-dir", "refused-runs"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not (workdir / "refused-runs").exists()
    _no_pwned(workdir)


def test_a_logbook_default_that_looks_like_code_stays_a_string(
    ex: NotebookExecutor, workdir: Path
) -> None:
    result = ex.execute(workdir / "logbook.md")
    assert result["status"] == "success", result["failed_cell"]
    assert result["scraps"]["text"] == "{__import__('os').system('touch PWNED')}"
    assert result["scraps"]["quoted"] == "'; import os; os.system(\"touch PWNED\"); '"
    given = ex.execute(workdir / "logbook.md", parameters={"quoted": "\\'\n!touch PWNED"})
    assert given["scraps"]["quoted"] == "\\'\n!touch PWNED"
    _no_pwned(workdir)


@pytest.mark.parametrize(
    "name",
    ["x = 1; __import__('os').system('touch PWNED'); y", "import", "a b", "1x", "class"],
)
def test_a_logbook_parameter_name_that_is_code_is_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "badname.md").write_text(
        f"---\nparameters:\n  {json.dumps(name)}: 1\n---\n\n```python\nprint(1)\n```\n"
    )
    with (
        NotebookExecutor(runs_dir=tmp_path / "runs") as ex,
        pytest.raises(NotebookSourceError, match="not a valid Python name"),
    ):
        ex.execute(tmp_path / "badname.md")
    assert not (tmp_path / "runs").exists()


def test_unknown_parameter_names_are_refused_not_injected(
    ex: NotebookExecutor, workdir: Path
) -> None:
    with pytest.raises(ParameterError) as caught:
        ex.execute(workdir / "echo.py", parameters={"text = 1\nimport os\nos.system('x')#": 1})
    assert "\n" not in str(caught.value)


TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=60)


@settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=TEXT, items=st.lists(TEXT, max_size=3), mapping=st.dictionaries(TEXT, TEXT, max_size=3))
def test_any_text_round_trips_exactly(
    ex: NotebookExecutor, workdir: Path, text: str, items: list[str], mapping: dict[str, str]
) -> None:
    result = ex.execute(
        workdir / "echo.py", parameters={"text": text, "items": items, "mapping": mapping}
    )
    assert result["status"] == "success", result["failed_cell"]
    assert (result["scraps"]["text"], result["scraps"]["items"]) == (text, items)
    assert result["scraps"]["mapping"] == mapping
    assert result["scraps"]["pwned"] is False
    stored: Any = ex.get_run(result["run_id"])["parameters"]
    assert stored == {"text": text, "items": items, "mapping": mapping, "anything": None}
