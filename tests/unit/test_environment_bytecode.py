"""A declared environment's install compiles its bytecode ahead only where Python writes none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from notebook_executor._kernels import environments


def _install_arguments(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    calls: list[list[str]] = []

    def fake_uv(notebook: str, dependencies: object, arguments: list[str]) -> str:
        calls.append(arguments)
        if arguments[0] == "venv":
            Path(arguments[-1]).mkdir()
        return "six==1.16.0\n" if arguments[:2] == ["pip", "freeze"] else ""

    monkeypatch.setattr(environments, "_uv", fake_uv)
    environments._build("nb.py", tmp_path, "abc", ["six"], sys.executable, "3.11", {})
    (install,) = [call for call in calls if call[:2] == ["pip", "install"]]
    return install


def test_bytecode_is_compiled_at_install_where_python_writes_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert "--compile-bytecode" in _install_arguments(monkeypatch, tmp_path)


def test_elsewhere_the_first_kernel_writes_what_it_imports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    arguments = _install_arguments(monkeypatch, tmp_path)
    assert "--compile-bytecode" not in arguments
    assert arguments[-2:] == ["six", environments.KERNEL_REQUIREMENT]
