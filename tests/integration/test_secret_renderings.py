"""A secret shows in no rendering: report pages, exports, and a terminal showing ``--log-output``.

The notebook hides a secret's value behind what a reader turns into nothing, or into markup:
an ``ESC [`` followed by bytes outside CSI syntax (nbconvert and JupyterLab remove
``\\x1b\\[(.*?)([@-~])``, up to the next letter), markdown syntax inside it (emphasis, a link, a
code span: the rendered page shows it joined), a backspace or a carriage return inside it (a
terminal writes what follows over what it showed). Real kernels; the report and the exports are
made by the CLI (real nbconvert); ``--log-output`` runs in a pseudo-terminal read by a terminal
emulator (pyte), as a person would see it.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaks import scan_tree, traces
from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

CLI = [sys.executable, "-m", "notebook_executor"]

SECRETS = {"TOKEN": "tok3nABCDEF99xy", "UNI": "Zq7S\u00e9cret-42xy"}

#: Pieces the notebook writes apart, in the output that joins them: none may show.
PIECES = (SECRETS["UNI"][:5], SECRETS["UNI"][5:])

RENDERINGS = """# %%
import os
import sys

from IPython.display import Markdown, display

s, u = os.environ["TOKEN"], os.environ["UNI"]

# %%
# ESC [ then bytes outside CSI syntax: the renderers swallow them up to the next letter.
print(s[:5] + "\\x1b[\\u00e9m" + s[5:])
sys.stderr.write(u[:3] + "\\x1b[\\x01\\u00e9;m" + u[3:] + "\\n")
display({"text/plain": s[:6] + "\\x1b[\\u00e9\\u00e9K" + s[6:]}, raw=True)

# %%
# Markdown inside the secret: emphasis, strong emphasis, a link, a code span.
display(Markdown(s[:5] + "*" + s[5:] + "*"))
display(Markdown(s[:5] + "**" + s[5:] + "**"))
display(Markdown("[" + s[:5] + "](https://example.com)" + s[5:]))
display(Markdown(u[:4] + "`" + u[4:9] + "`" + u[9:]))
display(Markdown(s[:5] + "<!-- a comment -->" + s[5:]))

# %%
# A backspace, a carriage return inside the secret; the pieces sent apart.
print(s[:4] + "X\\b" + s[4:])
print("XXXX" + s[4:] + "\\r" + s[:4])
sys.stdout.write(u[:5] + "Q")
sys.stdout.flush()
sys.stdout.write("\\b" + u[5:] + "\\n")
sys.stdout.flush()

# %%
raise ValueError("refused: " + s[:5] + "*" + s[5:] + "* or " + s[:5] + "\\x1b[\\u00e9m" + s[5:])
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("renderings")
    (folder / "renderings.py").write_text(RENDERINGS, encoding="utf-8")
    return folder


def test_no_rendering_of_the_records_the_report_or_an_export_shows_a_secret(
    workdir: Path,
) -> None:
    runs = workdir / "runs"
    with NotebookExecutor(runs_dir=runs) as ex:
        result = ex.execute(workdir / "renderings.py", secrets=SECRETS)
    assert result["error_kind"] == "cell_error"
    assert scan_tree(runs, SECRETS, PIECES) == {}
    assert traces(json.dumps(result, ensure_ascii=False), SECRETS, PIECES) == []

    # The markdown outputs that render a secret are withheld, and say so.
    stored = json.loads(Path(result["output_path"]).read_text(encoding="utf-8"))
    markdown = stored["cells"][2]["outputs"]
    assert len(markdown) == 5
    assert all("withheld" in str(output["data"]["text/plain"]) for output in markdown)

    report = workdir / "report"
    command = [*CLI, "report", "--runs-dir", str(runs), "--out", str(report)]
    done = subprocess.run(command, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    pages = list(report.rglob("*.html"))
    assert any(result["run_id"] in page.name for page in pages), pages
    assert scan_tree(report, SECRETS, PIECES) == {}

    exports = workdir / "exports"
    exports.mkdir()
    for to in ("html", "markdown", "script"):
        out = exports / f"run.{to}"
        command = [*CLI, "export", result["run_id"], "--to", to, "--runs-dir", str(runs)]
        done = subprocess.run([*command, "--out", str(out)], capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert out.exists()
    assert "[secret TOKEN]" in (exports / "run.html").read_text(encoding="utf-8")
    assert scan_tree(exports, SECRETS, PIECES) == {}


def _terminal_screen(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[list[str], bytes]:
    """Run ``command`` with its output on a pseudo-terminal; the lines a terminal shows after
    (pyte, 400 columns, no line scrolled off) and the bytes it was sent."""
    import pyte

    screen = pyte.Screen(400, 2000)
    stream = pyte.ByteStream(screen)
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
        )
    finally:
        os.close(follower)
    received = bytearray()
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            received += chunk
            stream.feed(chunk)
        assert process.wait(timeout=60) == 1, received.decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    return [line.rstrip() for line in screen.display], bytes(received)


def test_log_output_in_a_terminal_shows_no_secret(workdir: Path) -> None:
    """What a terminal shows of ``run --log-output``: each output, the secrets masked, and no
    backspace, carriage return or escape code puts a secret back together on the screen."""
    lines, sent = _terminal_screen(
        [
            *CLI,
            "run",
            "renderings.py",
            "--log-output",
            "--secret",
            "TOKEN",
            "--secret",
            "UNI",
            "--runs-dir",
            "cli-runs",
        ],
        workdir,
        {**os.environ, **SECRETS},
    )
    shown = "\n".join(lines)
    assert "[secret TOKEN]" in shown, shown
    assert "refused: " in shown
    for name, value in SECRETS.items():
        assert value not in shown, (name, shown)
        assert value not in shown.replace("\n", ""), name
    assert traces(shown, SECRETS) == []
    assert traces(sent, SECRETS) == []
    assert scan_tree(workdir / "cli-runs", SECRETS, PIECES) == {}
