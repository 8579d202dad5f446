"""Every shell and Python snippet of the getting-started page and the how-to pages runs as
shown, on real kernels, in a temporary copy of ``notebooks/`` (nothing in the checkout is
written): ``bash`` blocks as scripts (``set -e``), ``python`` blocks as scripts, and each
page's ``{doctest}`` blocks as one doctest in a copy of their own, as ``sphinx-build -b
doctest`` runs them (the docs session builds the site only: the examples run here, once). The
README's snippets are run by test_readme.py, which also checks what they print. The few that
cannot run here are listed below with the reason. A page whose commands use the run server
(``session``, ``server``) runs them against a server of its own (a private runtime folder),
stopped at the end.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support import cli_on_path

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "docs" / "getting-started.md",
    *sorted((ROOT / "docs" / "how-to").glob("*.md")),
]
#: Every snippet of the README runs in test_readme.py, with what it prints checked.
README = ROOT / "README.md"

#: Sphinx's ``doctest_default_flags``: the ``{doctest}`` blocks are held to what
#: ``sphinx-build -b doctest`` holds them to.
DOCTEST_FLAGS = (
    "doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL | doctest.DONT_ACCEPT_TRUE_FOR_1"
)

#: Blocks that need what this machine has not, or minutes of a benchmark: a reason for each
#: (matched on the page's name and a piece of the block).
ELSEWHERE = {
    ("remote.md", "s3://"): "needs an S3 bucket (tests/integration/test_remote_io.py: moto)",
    ("remote.md", "https://example.org"): "needs a web server and an S3 bucket",
    ("server.md", "benchmarks/bench_server.py"): "a benchmark of minutes (15 whole processes "
    "of three commands, a 10 s notebook), run by hand: its figures are on the page",
}

#: Lines that install software: run verbatim by tests/release (``nox -s release``) and CI.
INSTALLS = re.compile(r"^\s*(pip install|python -m venv|pip install nox)")

#: Files a page shows and then names (saved from the fenced block holding the marker).
SHOWN_FILES = {
    "parameters.md": {"greet.md": 'print("Hello, {name}!")'},
    "environments.md": {"analysis.py": "# /// script"},
}

#: Commands that live in the run server: the suite runs without one (tests/conftest.py).
SERVED = re.compile(r"\bnotebook-executor (session|server)\b")

_FENCE = re.compile(r"^( *)(`{3,})([^\n`]*)\n(.*?)^\1\2[ \t]*$", re.MULTILINE | re.DOTALL)


def blocks(page: Path) -> list[tuple[str, str]]:
    """``(language, text)`` of each top-level fenced block of ``page``, in order."""
    found = []
    for match in _FENCE.finditer(page.read_text(encoding="utf-8")):
        indent, info, body = match.group(1), match.group(3).strip(), match.group(4)
        lines = [line[len(indent) :] if line.startswith(indent) else line
                 for line in body.splitlines()]  # fmt: skip
        found.append((info, "\n".join(lines) + "\n"))
    return found


def _work(tmp: Path) -> Path:
    tmp.mkdir(parents=True)
    shutil.copytree(ROOT / "notebooks", tmp / "notebooks")
    return tmp


def _elsewhere(page: Path, text: str) -> str | None:
    for (name, piece), why in ELSEWHERE.items():
        if page.name == name and piece in text:
            return why
    return None


def _run(command: list[str], cwd: Path, env: dict[str, str], what: str) -> None:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{what}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_snippet_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    found = blocks(page)
    work = _work(tmp_path / "work")
    env = cli_on_path(tmp_path / "bin")
    # Environments a page's notebooks declare are made here, not in the user's cache.
    env["NOTEBOOK_EXECUTOR_ENVS"] = str(tmp_path / "envs")
    for name, marker in SHOWN_FILES.get(page.name, {}).items():
        (shown,) = [text for info, text in found if marker in text and info != "bash"]
        (work / name).write_text(shown, encoding="utf-8")
    if not any(info == "bash" and SERVED.search(text) for info, text in found):
        _run_the_page(page, found, work, env, tmp_path)
        return
    # A run server of the page's own (a socket path is short: /tmp), stopped at the end.
    env.pop("NOTEBOOK_EXECUTOR_NO_SERVER", None)
    runtime = tempfile.mkdtemp(prefix="nbxd", dir="/tmp")
    env["NOTEBOOK_EXECUTOR_RUNTIME_DIR"] = runtime
    try:
        _run_the_page(page, found, work, env, tmp_path)
    finally:
        subprocess.run(
            [sys.executable, "-m", "notebook_executor", "server", "stop"],
            env=env, capture_output=True, timeout=120,
        )  # fmt: skip
        shutil.rmtree(runtime, ignore_errors=True)


def _run_the_page(
    page: Path, found: list[tuple[str, str]], work: Path, env: dict[str, str], tmp_path: Path
) -> None:
    ran = 0
    for number, (info, text) in enumerate(found):
        if info not in ("bash", "python") or _elsewhere(page, text):
            continue
        where = f"{page.name}, block {number} ({info}):\n{text}"
        if info == "bash":
            script = "\n".join(line for line in text.splitlines() if not INSTALLS.match(line))
            if not script.strip():
                continue
            _run(["bash", "-e", "-o", "pipefail", "-c", script], work, env, where)
        else:
            path = work / f"snippet_{number}.py"
            path.write_text(text, encoding="utf-8")
            _run([sys.executable, path.name], work, env, where)
        ran += 1
    doctests = [text for info, text in found if info == "{doctest}"]
    if doctests:
        isolated = _work(tmp_path / "doctest")
        source = isolated / "page.txt"
        source.write_text("\n".join(doctests), encoding="utf-8")
        check = (
            "import doctest, sys\n"
            "failed, tried = doctest.testfile(sys.argv[1], module_relative=False,\n"
            f"    optionflags={DOCTEST_FLAGS})\n"
            "sys.exit(1 if failed or not tried else 0)\n"
        )
        _run([sys.executable, "-c", check, source.name], isolated, env, f"{page.name} doctests")
        ran += 1
    shells = [text for info, text in found if info in ("bash", "python", "{doctest}")]
    assert ran or all(_elsewhere(page, text) for text in shells) or not shells
    # Nothing in the checkout was written.
    assert not (ROOT / "notebooks" / "runs").exists()


def test_no_page_shows_a_shell_or_python_block_the_test_would_not_see() -> None:
    # A block's language is one the test runs, or one it knows is no snippet.
    known = {"bash", "python", "{doctest}", "json", "yaml", "markdown", "text", "toml", "ini", ""}
    for page in [*PAGES, README]:
        for info, _ in blocks(page):
            assert info in known, (page.name, info)
    # Only these pages' doctests run (the docs session builds the site, it runs none): a page
    # elsewhere (the reference, the explanations) holds none.
    elsewhere = [
        page.relative_to(ROOT).as_posix()
        for page in [README, *(ROOT / "docs").rglob("*.md")]
        if page not in PAGES and "_build" not in page.parts
        and any(info == "{doctest}" for info, _ in blocks(page))
    ]  # fmt: skip
    assert elsewhere == []
