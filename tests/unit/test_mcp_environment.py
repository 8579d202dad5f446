"""What of the server's environment and files may reach a kernel started for an MCP client:
the variables the operator allows, and ``.env`` files inside the root (fake engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor, ParameterError
from notebook_executor.engine import ScriptedEngine

LOGBOOK = """---
parameters:
  who: "you"
env: [NBX_ROOTED_TOKEN]
---

```python
import os
print("length", len(os.environ["NBX_ROOTED_TOKEN"]))
```
"""


@pytest.mark.parametrize("where", ["notebook-folder", "root"])
def test_a_confined_executor_reads_env_files_inside_its_root(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    path = root / "logs" / "env.md"
    path.parent.mkdir(parents=True)
    path.write_text(LOGBOOK, encoding="utf-8")
    (root if where == "root" else path.parent).joinpath(".env").write_text(
        "NBX_ROOTED_TOKEN=inside-value\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    engine = ScriptedEngine()
    with NotebookExecutor(
        runs_dir=tmp_path / "runs", engine=engine, base_env={}, dotenv_root=root
    ) as ex:
        result = ex.execute(path)
    assert result["status"] == "success", result
    assert engine.jobs[0].env["NBX_ROOTED_TOKEN"] == "inside-value"


def test_a_confined_executor_never_reads_the_working_directory_env_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, work = tmp_path / "root", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    path = root / "env.md"
    path.write_text(LOGBOOK, encoding="utf-8")
    (work / ".env").write_text("NBX_ROOTED_TOKEN=outside-value\n", encoding="utf-8")
    (tmp_path / ".env").write_text("NBX_ROOTED_TOKEN=outside-value\n", encoding="utf-8")
    monkeypatch.chdir(work)
    engine = ScriptedEngine()
    with (
        NotebookExecutor(
            runs_dir=tmp_path / "runs", engine=engine, base_env={}, dotenv_root=root
        ) as ex,
        pytest.raises(ParameterError, match="NBX_ROOTED_TOKEN") as caught,
    ):
        ex.execute(path)
    assert engine.jobs == []
    message = str(caught.value)
    assert str(work) not in message
    assert str(root / ".env") in message
    # The environment given is not the caller's: setting a variable there is no remedy.
    assert "set it in the environment" not in message


def test_the_workspace_hands_over_only_allowed_variables(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from notebook_executor._faces.mcp.paths import Root
    from notebook_executor._faces.mcp.workspace import Workspace

    environ = {"API_KEY": "allowed-value", "AWS_SECRET_ACCESS_KEY": "aws-value"}
    with NotebookExecutor(runs_dir=tmp_path / "runs", engine=ScriptedEngine()) as ex:
        ws = Workspace(Root(tmp_path), ex, environ, allowed=["API_KEY", "UNSET"])
        assert ws.secrets(["API_KEY"]) == {"API_KEY": "allowed-value"}
        with pytest.raises(ToolError, match="--allow-secret AWS_SECRET_ACCESS_KEY"):
            ws.secrets(["AWS_SECRET_ACCESS_KEY"])
        with pytest.raises(ToolError, match="allowed but not set"):
            ws.secrets(["UNSET"])
    # Only allowed values are kept.
    assert "aws-value" not in repr(vars(ws))
