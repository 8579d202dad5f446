"""What a client of the MCP server reaches through the files and notebooks it names.

A real server process per test (the SDK's client over stdio or streamable HTTP), confined to a
temporary root; real kernels. A client must reach no file outside the root (a ``.env`` or a
notebook that is, or becomes, a symlink to one), and a notebook it runs must reach none of the
server's variables it was not given: not through ``os.environ``, nor through ``/proc`` (the
server's environment, the template's, its own as it started).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.mcp_client import http_server, http_session, stdio_session, structured
from leaks import traces

pytestmark = pytest.mark.kernel


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _no_trace_under(folder: Path, values: dict[str, str]) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            assert traces(path.read_bytes(), values) == [], path


LOGBOOK = """---
parameters:
  who: "you"
env: [OUTSIDE_TOKEN]
---

```python
import os
print("reversed", os.environ["OUTSIDE_TOKEN"][::-1])
```
"""


def test_a_dotenv_that_is_a_symlink_out_of_the_root_is_not_read(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    outside = "outside-" + os.urandom(8).hex()
    write(elsewhere, "credentials", f"OUTSIDE_TOKEN={outside}\n")
    write(root, "logs/needs.md", LOGBOOK)
    (root / ".env").symlink_to(elsewhere / "credentials")
    (root / "logs" / ".env").symlink_to(elsewhere / "credentials")

    async def scenario() -> None:
        async with stdio_session(root) as session:
            refused = await session.call_tool("execute", {"path": "logs/needs.md"})
            assert refused.is_error
            text = refused.model_dump_json()
            assert "'OUTSIDE_TOKEN', which is not set" in text
            assert outside not in text and outside[::-1] not in text
            # A .env inside the root, through a symlink that stays inside, is read.
            (root / "logs" / ".env").unlink()
            write(root, "private/env", f"OUTSIDE_TOKEN={outside}\n")
            (root / "logs" / ".env").symlink_to(root / "private" / "env")
            result = structured(await session.call_tool("execute", {"path": "logs/needs.md"}))
            assert result["status"] == "success", result

    anyio.run(scenario)


NOTEBOOK = """# %%
x = 1

# %%
print("second cell", x)
"""


@pytest.mark.parametrize("swap", ["notebook", "folder"])
def test_a_session_does_not_follow_its_notebook_out_of_the_root(tmp_path: Path, swap: str) -> None:
    """The notebook (or its folder) is swapped for a symlink to a file outside the root between
    two steps: the next step is refused, and nothing of that file reaches the record or the
    client."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    marker = "outside-line-" + os.urandom(8).hex()
    # A file outside the root that would read as a notebook of one cell, as /etc/shadow does.
    write(elsewhere, "work/analysis.py", f"{marker}:$6$salt$hash:19000:0:99999:7:::\n")
    write(root, "work/analysis.py", NOTEBOOK)

    async def scenario() -> None:
        async with stdio_session(root) as session:
            opened = structured(
                await session.call_tool("open_session", {"path": "work/analysis.py"})
            )
            first = structured(
                await session.call_tool(
                    "session_run", {"session_id": opened["session_id"], "until": 0}
                )
            )
            assert first["status"] == "success", first
            if swap == "notebook":
                (root / "work" / "analysis.py").unlink()
                (root / "work" / "analysis.py").symlink_to(elsewhere / "work" / "analysis.py")
            else:
                (root / "work").rename(root / "work-was")
                (root / "work").symlink_to(elsewhere / "work")
            step = await session.call_tool("session_run", {"session_id": opened["session_id"]})
            assert step.is_error, step
            assert "outside the server's root folder" in step.model_dump_json()
            answers = [step.model_dump_json()]
            answers.append(
                (
                    await session.call_tool("read_notebook", {"run_id": opened["run_id"]})
                ).model_dump_json()
            )
            answers.append(
                (await session.call_tool("get_run", {"run_id": opened["run_id"]})).model_dump_json()
            )
            await session.call_tool("close_session", {"session_id": opened["session_id"]})
            answers.append(
                (
                    await session.call_tool("read_notebook", {"run_id": opened["run_id"]})
                ).model_dump_json()
            )
            for answer in answers:
                assert marker not in answer

    anyio.run(scenario)
    for path in (root / "runs").rglob("*"):
        if path.is_file():
            assert marker.encode() not in path.read_bytes(), path


REACH = """# %%
import os
import shutil
from pathlib import Path

import scrapbook as sb

wanted = bytes.fromhex(os.environ["NEEDLES"]).decode().split(",")
found = []
readable = 0
for entry in Path("/proc").iterdir():
    if not entry.name.isdigit():
        continue
    for name in ("environ", "cmdline"):
        try:
            data = (entry / name).read_bytes()
        except OSError:
            continue
        readable += name == "environ"
        text = data.decode("utf-8", "replace")
        # Reversed: redaction must not be what hides it.
        found += [f"{entry.name}/{name}:{w[::-1]}" for w in wanted if w in text]
ancestors, pid = [], os.getpid()
while pid > 1:
    ancestors.append(pid)
    pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
own = Path("/proc/self/environ").read_bytes()
sb.glue("found", found)
sb.glue("readable", readable)
sb.glue("ancestors", ancestors)
sb.glue("parent", Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace"))
names = {item.partition(b"=")[0].decode() for item in own.split(b"\\0") if item}
sb.glue("own_names", sorted(names))
"""

#: What REACH glued, as the last line a session's evaluation prints.
GLUED = """import json
print(json.dumps({
    "found": found, "readable": readable, "ancestors": ancestors, "own_names": sorted(names),
    "parent": Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace"),
}))
"""


@pytest.mark.skipif(
    not Path("/proc/self").is_dir() or (os.geteuid() == 0 and not shutil.which("setpriv")),
    reason="/proc, and setpriv to drop root's capabilities",
)
def test_a_notebook_reads_none_of_the_server_variables_through_proc(tmp_path: Path) -> None:
    """The server's bearer token and a variable not allowed to clients: a notebook reading every
    ``/proc/<pid>/environ`` (and ``cmdline``) it can, its server's, its template's and its own
    included, finds neither, in a forked kernel and in a launched one."""
    token = "bearer-" + os.urandom(12).hex()
    hidden = "not-allowed-" + os.urandom(12).hex()
    write(tmp_path, "reach.py", REACH)
    # Whether a run's native kernel is forked or launched depends on the pool's timing; a
    # session's is always forked from the template, and a kernelspec of the same Python is
    # always launched by the server itself. The server finds it in its user data folder (not
    # through JUPYTER_PATH: a JUPYTER_* variable of the server that its kernels lack has them
    # all launched).
    spec = tmp_path / ".data" / "jupyter" / "kernels" / "other-python"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Other Python", "language": "python"})
    )
    header = "# ---\n# jupyter:\n#   kernelspec:\n#     name: other-python\n"
    header += "#     display_name: Other Python\n#     language: python\n# ---\n\n"
    write(tmp_path, "reach_launched.py", header + REACH)
    # Only the server's environment holds them: this process's does not.
    assert token not in str(os.environ) and hidden not in str(os.environ)
    # What to look for, handed to the notebook as an allowed secret, hex-encoded.
    needles = ",".join((token, hidden)).encode().hex()
    env = {
        "NOTEBOOK_EXECUTOR_MCP_TOKEN": token,
        "CLOUD_SECRET_KEY": hidden,
        "NEEDLES": needles,
        "XDG_DATA_HOME": str(tmp_path / ".data"),
    }
    paths = ["reach.py", "reach_launched.py"] * 2

    async def scenario(url: str, server_token: str) -> list[dict[str, Any]]:
        scraps = []
        async with http_session(url, server_token) as session:
            for path in paths:
                result = structured(
                    await session.call_tool("execute", {"path": path, "secrets": ["NEEDLES"]})
                )
                assert result["status"] == "success", result
                scraps.append(result["scraps"])
                page = await session.call_tool("read_notebook", {"run_id": result["run_id"]})
                assert token not in page.model_dump_json()
                assert hidden not in page.model_dump_json()
            opened = structured(
                await session.call_tool(
                    "open_session", {"path": "reach.py", "secrets": ["NEEDLES"]}
                )
            )
            step = structured(
                await session.call_tool("session_run", {"session_id": opened["session_id"]})
            )
            assert step["status"] == "success", step
            asked = structured(
                await session.call_tool(
                    "session_evaluate", {"session_id": opened["session_id"], "code": GLUED}
                )
            )
            assert asked["error"] is None, asked
            scraps.append(json.loads(asked["output"]))
            await session.call_tool("close_session", {"session_id": opened["session_id"]})
        return scraps

    # Root with its capabilities reads every process's memory, hidden or not: the server runs
    # without them, as the service account a server runs as has none.
    wrapper: tuple[str, ...] = ()
    if os.geteuid() == 0:
        wrapper = ("setpriv", "--bounding-set=-all", "--inh-caps=-all", "--")
    # Kernels are forked from a template only when their start-up variables (PYTHON*, ...)
    # are the server's: its kernels get only PYTHONPATH of those.
    startup = [name for name in os.environ if name.startswith("PYTHON") and name != "PYTHONPATH"]
    wrapper = ("env", *(f"--unset={name}" for name in startup), *wrapper)
    served_by = http_server(tmp_path, env=env, args=("--allow-secret", "NEEDLES"), wrapper=wrapper)
    with served_by as served:
        assert served.token == token
        scraps = anyio.run(scenario, served.url, token)
    launched = ["notebook_executor\0mcp" in str(scrap["parent"]) for scrap in scraps]
    # The runs of the kernelspec are launched; the others are forked when the template serves
    # them (the session's kernel as a rule, though a busy machine may launch it: then only
    # launched kernels were tried, and the same assertions hold for them).
    assert [launched[1], launched[3]] == [True, True], launched
    for scrap in scraps:
        assert scrap["found"] == [], scrap
        assert scrap["readable"] > 0  # the kernel did read environments: its own at least
        assert len(scrap["ancestors"]) >= 2
        assert "NOTEBOOK_EXECUTOR_MCP_TOKEN" not in scrap["own_names"]
        assert "CLOUD_SECRET_KEY" not in scrap["own_names"]
    _no_trace_under(tmp_path / "runs", {"token": token, "hidden": hidden})
