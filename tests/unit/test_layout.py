"""The package's layout: the layering contracts of import-linter (``[tool.importlinter]`` in
pyproject.toml: every module sits in a group, imports only its own group or groups below it,
and no import cycle exists), the kernel scripts' independence, and the architecture page's
listing of every module."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "notebook_executor"
ROOT = Path(__file__).resolve().parents[2] / "src" / PACKAGE


def test_the_import_contracts_are_kept() -> None:
    """``lint-imports`` on this tree's source (not an installed copy), all four contracts."""
    linter = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT.parent), *sys.path])}
    done = subprocess.run(
        [linter, "--no-cache", "--no-logo"],
        cwd=ROOT.parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 4 kept, 0 broken." in done.stdout


INSIDE = ROOT / "_kernels" / "inside"


@pytest.mark.parametrize("name", sorted(p.stem for p in INSIDE.glob("*.py")))
def test_the_kernel_scripts_import_nothing_of_the_package(name: str) -> None:
    """They run by path in a kernel process, where the package may not be importable."""
    script = INSIDE / f"{name}.py"
    tree = ast.parse(script.read_text(encoding="utf-8"))
    absolute = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.split(".")[0] == PACKAGE
    ]
    absolute += [
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == PACKAGE
    ]
    assert absolute == []
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]


def test_the_architecture_page_names_every_module() -> None:
    """The folder listing of the docs' architecture page matches the tree: every folder and
    every module (a subpackage's ``__init__.py`` aside) is named on a line of its own."""
    page = ROOT.parents[1] / "docs" / "explanation" / "architecture.md"
    listing = page.read_text(encoding="utf-8").split("```", 2)[1]
    named = {line.split()[0] for line in listing.splitlines() if line.strip()}
    files = [p for p in ROOT.rglob("*.py") if p.name != "__init__.py" or p.parent == ROOT]
    folders = [p for p in ROOT.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert len(files) >= 30
    assert sorted(p.name for p in files if p.name not in named) == []
    assert sorted(p.name for p in folders if f"{p.name}/" not in named) == []
