"""Atomic file writes: a reader sees the old file or the new one, never half, nothing left over."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from notebook_executor._sources.files import atomic_write_text


def _names(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


TEXT = "first line\nsecond é \u2028 line\n"


def test_a_private_file_is_written_whole_with_mode_0600(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "run.ipynb"  # folders created as needed
    atomic_write_text(target, TEXT)
    assert target.read_bytes() == TEXT.encode("utf-8")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert _names(target.parent) == ["run.ipynb"]


def test_a_file_is_replaced_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    target = tmp_path / "run.ipynb"
    target.write_text("old, and longer than the new text\n" * 100)
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert _names(tmp_path) == ["run.ipynb"]


def test_a_failed_replace_keeps_the_old_file_and_removes_the_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "run.ipynb"
    target.write_text("old\n")

    def refuse(source: Path, destination: Path) -> None:
        assert source.read_text() == "new\n"  # the new text was whole before the rename
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"
    assert _names(tmp_path) == ["run.ipynb"]


def test_text_that_cannot_be_encoded_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "run.md"
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "lone surrogate \ud800")
    assert _names(tmp_path) == []


def test_a_usual_file_gets_the_umask_mode_or_keeps_the_replaced_files_mode(
    tmp_path: Path,
) -> None:
    previous = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.py"
        atomic_write_text(fresh, TEXT, private=False)
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        kept = tmp_path / "kept.py"
        kept.write_text("old\n")
        kept.chmod(0o640)
        atomic_write_text(kept, TEXT, private=False)
        assert stat.S_IMODE(kept.stat().st_mode) == 0o640
        assert kept.read_text(encoding="utf-8") == TEXT
    finally:
        os.umask(previous)
    assert _names(tmp_path) == ["fresh.py", "kept.py"]


def test_a_file_standing_where_the_folder_should_be_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "runs" / "run.ipynb", TEXT)
    assert (tmp_path / "runs").read_text() == "not a folder"
