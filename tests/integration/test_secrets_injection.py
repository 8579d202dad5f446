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

import contextlib
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leaks import scan_tree, traces
from notebook_executor import NotebookExecutor, NotebookSourceError, ParameterError
from support import alive, failed_cell

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
# The run records as they are on disk while the run is still going.
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
    """No ``touch PWNED`` ran: not anywhere in the test's folders, nor in this process's
    working folder (only its top: below it, other processes, such as CI's other sessions
    installing into ``.nox/``, add and remove folders while it would be searched)."""
    for folder in folders:
        assert not list(folder.rglob("PWNED")), f"an injected value ran as code in {folder}"
    assert not (Path.cwd() / "PWNED").exists(), "an injected value ran as code in the cwd"


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
        during = scan_tree(runs_dir, SECRETS)
        rows = ex.runs()
        frame = ex.scraps()
        stored = ex.get_run(result["run_id"])
        outputs = ex.collect_outputs(result["run_id"])
    after = scan_tree(runs_dir, SECRETS)

    # The kernel had the exact values: it hashed them and compared the parameter.
    assert result["status"] == "error"
    assert (result["error_kind"], failed_cell(result)["index"]) == ("cell_error", 3)
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
        assert traces(text, SECRETS) == [], name
    assert result["parameters"]["hint"] == "[secret API_TOKEN]"
    assert result["request"] == "check the login with [secret API_TOKEN] and [secret DB_PASSWORD]"
    assert result["scraps"]["token"] == "[secret API_TOKEN]"
    assert "[secret DB_PASSWORD]" in failed_cell(result)["evalue"]

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
    assert traces(done.stdout + done.stderr, SECRETS) == []
    assert scan_tree(runs_dir, SECRETS) == {}
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
    """The run records written when the run begins hold no secret either (the host may die
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
        during = scan_tree(runs_dir, SECRETS)
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
    assert scan_tree(runs_dir, SECRETS) == {}


#: A token, and a secret that is not ASCII (its bytes print as escapes).
TRICKY = {"TOKEN": "tok_live_9f8E7d6C5b4A3x2Y1z0-QwErTy", "UNI": "Zq7S\u00e9cret-42xy"}

#: What the notebook writes in pieces (to two streams, or in two cells): no piece may show.
TRICKY_PIECES = (TRICKY["TOKEN"][:9], TRICKY["TOKEN"][9:], TRICKY["UNI"][:7], TRICKY["UNI"][7:])

TRICKS = """# %%
import os
import sys

from IPython.display import HTML, Markdown, display

s, u = os.environ["TOKEN"], os.environ["UNI"]

# %%
# Escape codes inside a secret: colours, a hyperlink (OSC 8), an 8-bit CSI.
print(s[:9] + "\\x1b[0m" + s[9:])
print("link: " + s[:5] + "\\x1b]8;;https://example.com\\x1b\\\\" + s[5:] + "\\x1b]8;;\\x07")
sys.stderr.write(u[:4] + "\\x1b[1;31m" + u[4:] + "\\x1b[0m\\n")
display({"text/plain": s[:3] + "\\x1b[4m" + s[3:7] + "\\x9b0m" + s[7:]}, raw=True)

# %%
# Character references: decimal, hexadecimal, named and plain mixed, in markup of each kind.
def entities(text, style):
    named = {"_": "&lowbar;", "\u00e9": "&eacute;", "S": "&#83;"}
    if style == "dec":
        return "".join(f"&#{ord(c)};" for c in text)
    if style == "hex":
        return "".join(f"&#x{ord(c):x};" for c in text)
    return "".join(named.get(c, c if i % 2 else f"&#X{ord(c):X};") for i, c in enumerate(text))

display(HTML(entities(s, "dec")))
display(HTML("<p>" + entities(s, "hex") + "</p>"))
display(HTML(entities(u, "mixed")))
display(Markdown("**" + entities(u, "dec") + "**"))
svg = '<svg xmlns="http://www.w3.org/2000/svg"><text>' + entities(s, "mixed") + "</text></svg>"
display({"image/svg+xml": svg}, raw=True)

# %%
# The printed forms of a secret's bytes.
print(u.encode())
print(u.encode("utf-16"))
print(u.encode("utf-16-be"))
print(u.encode().hex(), u.encode().hex().upper())
print(s.encode("utf-16-le").hex())
print([u.encode()])
print(u.encode("unicode_escape"))

# %%
# Pieces: half to stdout, half to stderr; then half in this cell and half in the next.
sys.stdout.write(s[:9])
sys.stdout.flush()
sys.stderr.write(s[9:] + "\\n")
sys.stderr.flush()
_ = sys.stdout.write(u[:7])

# %%
print(u[7:])

# %%
raise ValueError("refused: " + s[:9] + "\\x1b[31m" + s[9:])
"""


def test_secrets_hidden_by_escape_codes_entities_bytes_and_pieces_leave_no_trace(
    workdir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Escape codes between a secret's characters, an HTML output made of character references,
    the printed forms of a secret's bytes, a secret written half to each stream or half in each
    of two cells: no trace anywhere, as stored, indexed, reported, exported or shown live."""
    (workdir / "tricks.py").write_text(TRICKS)
    runs_dir = workdir / "tricky-runs"
    with NotebookExecutor(runs_dir=runs_dir, log_output=True) as ex:
        capfd.readouterr()
        result = ex.execute(workdir / "tricks.py", secrets=TRICKY)
        live = capfd.readouterr()
        hits = [
            hit
            for query in ["tok*", "live*", "Zq7S*", "secret", "link", "refused", "Zq7S\u00e9cret*"]
            for hit in ex.search(query)
        ]

    assert (result["error_kind"], failed_cell(result)["index"]) == ("cell_error", 6)
    # What the run stores, and hands back.
    assert scan_tree(runs_dir, TRICKY, TRICKY_PIECES) == {}
    assert traces(json.dumps(result, ensure_ascii=False), TRICKY, TRICKY_PIECES) == []
    # The search index: its rows and the snippets of its hits.
    assert any("[secret TOKEN]" in hit["snippet"] for hit in hits), hits
    assert traces(json.dumps(hits, ensure_ascii=False), TRICKY, TRICKY_PIECES) == []
    with contextlib.closing(sqlite3.connect(runs_dir / "catalog.sqlite")) as catalog:
        listed = catalog.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = [row[0] for row in listed.fetchall()]
        rows = [row for table in tables for row in catalog.execute(f'SELECT * FROM "{table}"')]
    assert any("[secret TOKEN]" in str(row) for row in rows)
    assert traces(json.dumps(rows, ensure_ascii=False, default=str), TRICKY, TRICKY_PIECES) == []
    # What was shown live on the host's stderr while it ran: the outputs, secrets masked.
    assert "link: [secret TOKEN]" in live.err
    assert traces(live.out + live.err, TRICKY, TRICKY_PIECES) == []

    # The report, and every export.
    report = workdir / "tricky-report"
    command = [*CLI, "report", "--runs-dir", str(runs_dir), "--out", str(report)]
    done = subprocess.run(command, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert any(report.rglob("*.html"))
    assert scan_tree(report, TRICKY, TRICKY_PIECES) == {}
    exports = workdir / "tricky-exports"
    exports.mkdir()
    for to in ("html", "markdown", "script"):
        out = exports / f"run.{to}"
        command = [*CLI, "export", result["run_id"], "--to", to, "--runs-dir", str(runs_dir)]
        done = subprocess.run([*command, "--out", str(out)], capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert out.exists()
    assert scan_tree(exports, TRICKY, TRICKY_PIECES) == {}

    # The outputs that could only be stored with a secret inside are withheld, and say so.
    stored = json.loads(Path(result["output_path"]).read_text(encoding="utf-8"))
    html_cell = stored["cells"][2]["outputs"]
    assert len(html_cell) == 5
    assert all("withheld" in str(output["data"]["text/plain"]) for output in html_cell)


def test_command_line_log_output_masks_a_secret_across_streams_and_cells(
    workdir: Path,
) -> None:
    """``run --log-output`` shows the outputs live on stderr; a secret in pieces (one on each
    stream, or one in each of two cells) or with escape codes inside is masked whole."""
    (workdir / "tricks.py").write_text(TRICKS)
    runs_dir = workdir / RUNS[1]
    done = subprocess.run(
        [*CLI, "run", "tricks.py", "--log-output", "--secret", "TOKEN", "--secret", "UNI", *RUNS],
        cwd=workdir,
        env={**os.environ, **TRICKY},
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert b"[secret TOKEN]" in done.stderr
    assert traces(done.stdout + done.stderr, TRICKY, TRICKY_PIECES) == []
    assert scan_tree(runs_dir, TRICKY, TRICKY_PIECES) == {}


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
