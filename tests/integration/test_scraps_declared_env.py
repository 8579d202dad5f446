"""Scraps in a declared environment, and the PEP 723 block that is no cell
(docs/how-to/environments.md).

The environment is made by the real uv from the package index (``dependencies = []``: only
the kernel), once for the module, in a folder of its own; every command runs as a user's shell
runs it, through its own run server (the ``shell`` fixture, stopped after each test).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .test_run_server import Shell, shell  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(600)]

BLOCK = "# /// script\n# dependencies = []\n# ///\n"

GLUE = (
    BLOCK
    + """
# %% tags=["parameters"]
n = 3

# %%
import scrapbook as sb
sb.glue("count", n)
sb.glue("ratio", 0.25)
sb.glue("flag", True)
sb.glue("label", "north-3")
sb.glue("values", [1, 2.5, "x"])
sb.glue("table", {"a": 1, "b": [True, None]})
sb.glue("parsed", '{"k": [1, 2]}', encoder="json")
sb.glue("as_text", 42, encoder="text")
sb.glue("shown", 7, display=True)

# %%
try:
    sb.glue("object", object())
except Exception as exc:
    refused = f"{type(exc).__name__}: {exc}"
else:
    refused = "glued"
print("REFUSED " + refused)
"""
)

FAILING = (
    BLOCK
    + """
# %%
x = 1

# %%
raise ValueError("boom")
"""
)


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("envs")


def _shell(user: Shell, envs: Path) -> Shell:
    user.env["NOTEBOOK_EXECUTOR_ENVS"] = str(envs)
    return user


def _run(user: Shell, *argv: str) -> dict[str, Any]:
    code, out, err = user.run("run", *argv, "--json")
    assert out, err
    result: dict[str, Any] = json.loads(out)
    assert code in (0, 1), err
    # The output path as the user's shell reads it (relative to its folder).
    result["output_path"] = str(user.folder / result["output_path"])
    return result


def _scrap_outputs(output_path: str) -> list[dict[str, Any]]:
    """The scrap outputs of a run's notebook: each display output scrapbook wrote."""
    nb = json.loads(Path(output_path).read_text(encoding="utf-8"))
    return [
        {"data": output["data"], "metadata": output["metadata"]}
        for cell in nb["cells"]
        for output in cell.get("outputs", [])
        if output.get("output_type") == "display_data" and "scrapbook" in output["metadata"]
    ]


def _printed(output_path: str, prefix: str) -> str:
    nb = json.loads(Path(output_path).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            for line in "".join(output.get("text", "")).splitlines():
                if line.startswith(prefix):
                    return line[len(prefix) :]
    raise AssertionError(f"nothing printed as {prefix!r}")


def test_glue_needs_no_declaration_and_gives_scrapbooks_records(
    shell: Shell,  # noqa: F811
    envs: Path,
) -> None:
    user = _shell(shell, envs)
    (user.folder / "glue.py").write_text(GLUE, encoding="utf-8")
    declared = _run(user, "glue.py")
    assert declared["status"] == "success", declared.get("failed_cell")
    current = _run(user, "glue.py", "--env", "current")
    assert current["status"] == "success", current.get("failed_cell")
    # The first ran in the environment made for the declaration, the second on the
    # executor's own interpreter, with the real scrapbook.
    record = json.loads(Path(declared["output_path"]).read_text(encoding="utf-8"))
    environment = record["metadata"]["notebook_executor"]["notebook_environment"]
    assert environment["declaration"]["dependencies"] == []
    assert "scrapbook" not in environment["packages"]

    assert declared["scraps"] == current["scraps"]
    assert declared["scraps"]["count"] == 3
    assert declared["scraps"]["parsed"] == {"k": [1, 2]}
    assert declared["scraps"]["as_text"] == "42"
    # The same outputs, byte for byte: mime types, payloads (name, data, encoder, version),
    # scrapbook's metadata, and the display of a scrap glued with display=True.
    glued = _scrap_outputs(declared["output_path"])
    assert glued == _scrap_outputs(current["output_path"])
    assert len(glued) == 10
    assert glued[0] == {
        "data": {
            "application/scrapbook.scrap.json+json": {
                "name": "count",
                "data": 3,
                "encoder": "json",
                "version": 1,
            }
        },
        "metadata": {"scrapbook": {"name": "count", "data": True, "display": False}},
    }

    # scrapbook's own reader reads both alike.
    import scrapbook

    read = [scrapbook.read_notebook(r["output_path"]).scraps for r in (declared, current)]
    assert read[0].data_dict == read[1].data_dict
    assert read[0].display_dict == read[1].display_dict
    assert read[0]["shown"].display["data"] == {"text/plain": "7"}

    # A value no JSON encoder takes is refused with what to declare instead.
    refused = _printed(declared["output_path"], "REFUSED ")
    assert refused.startswith("NotImplementedError: "), refused
    assert "dependencies" in refused and "scrapbook" in refused and "six" in refused


def test_the_script_block_is_no_cell(shell: Shell, envs: Path) -> None:  # noqa: F811
    user = _shell(shell, envs)
    notebook = user.folder / "failing.py"
    notebook.write_text(FAILING, encoding="utf-8")
    code, out, err = user.run("cells", "failing.py", "--json")
    assert code == 0, err
    cells = json.loads(out)["cells"]
    assert [cell["index"] for cell in cells] == [0, 1]

    result = _run(user, "failing.py", "--env", "current")
    assert result["status"] == "error"
    assert result["failed_cell"]["index"] == 1
    assert result["failed_cell"]["source"] == 'raise ValueError("boom")'

    # ``edit`` counts the same way, and leaves the block as it was.
    fixed = user.folder / "fixed.txt"
    fixed.write_text("y = x + 1\n", encoding="utf-8")
    code, out, err = user.run("edit", "failing.py", "1", str(fixed))
    assert code == 0, err
    assert notebook.read_text(encoding="utf-8") == FAILING.replace(
        'raise ValueError("boom")', "y = x + 1"
    )
    assert _run(user, "failing.py", "--env", "current")["status"] == "success"

    # A session's steps too (in the declared environment): cell 1 is the edited one.
    code, out, err = user.run("session", "open", "failing.py", "--json")
    assert code == 0, err
    session = json.loads(out)["session_id"]
    try:
        code, out, err = user.run("session", "run", session, "--until", "1", "--json")
        assert code == 0, err
        step = json.loads(out)
        assert step["status"] == "success", step
        assert step["cells_run"] == [0, 1], step
    finally:
        user.run("session", "close", session)


def _scrapbook_wheel(folder: Path) -> Path:
    """A wheel of a package named scrapbook (made here), standing for the real one."""
    import base64
    import hashlib
    import zipfile

    dist = "scrapbook-0.0.1.dist-info"
    files = {
        "scrapbook/__init__.py": "OWN = True\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: scrapbook\nVersion: 0.0.1\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    lines = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        lines.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*lines, f"{dist}/RECORD,,"]) + "\n"
    wheel = folder / "scrapbook-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def test_a_declared_scrapbook_comes_before_the_stand_in(
    shell: Shell,  # noqa: F811
    envs: Path,
) -> None:
    user = _shell(shell, envs)
    wheel = _scrapbook_wheel(user.folder)
    (user.folder / "own.py").write_text(
        f'# /// script\n# dependencies = ["scrapbook @ {wheel.as_uri()}"]\n# ///\n\n'
        '# %%\nimport scrapbook\nprint("OWN", getattr(scrapbook, "OWN", False))\n',
        encoding="utf-8",
    )
    result = _run(user, "own.py")
    assert result["status"] == "success", result.get("failed_cell")
    assert _printed(result["output_path"], "OWN ") == "True"


PARENT = (
    BLOCK
    + """
# %%
import os
import scrapbook as sb
sb.glue("parent", os.getppid())
"""
)


def test_the_server_keeps_a_template_of_the_environment_and_later_runs_fork_from_it(
    shell: Shell,  # noqa: F811
    envs: Path,
) -> None:
    """A served run in a cached declared environment forks its kernel from a template the
    server keeps for that environment (each command's child spawned one of its own: about a
    second of CPU per run)."""
    user = _shell(shell, envs)
    (user.folder / "parent.py").write_text(PARENT, encoding="utf-8")
    first = _run(user, "parent.py")
    assert first["status"] == "success", first.get("failed_cell")
    deadline = time.monotonic() + 120
    while not user.status()["environment_templates"] and time.monotonic() < deadline:
        time.sleep(0.2)
    ((interpreter, pid),) = user.status()["environment_templates"].items()
    assert Path(interpreter).is_absolute() and pid not in (None, user.status()["template_pid"])
    for _ in range(2):  # the second: a kernel started ahead, from that template too
        later = _run(user, "parent.py")
        assert later["status"] == "success", later.get("failed_cell")
        assert later["scraps"]["parent"] == pid
    # A run in the default environment still forks from the server's own template.
    current = _run(user, "parent.py", "--env", "current")
    assert current["scraps"]["parent"] == user.status()["template_pid"]
