"""Durable checkpoints' store and keys, without a kernel: the layout, eviction within the
limits (oldest first, shared objects kept while named), and when a manifest is refused."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from notebook_executor._checkpoints.keeper import MANIFEST_VERSION, prefix_key, unusable
from notebook_executor._checkpoints.store import ORPHAN_SECONDS, CheckpointStore, Limits, Usage
from notebook_executor._notebook import new_code_cell, new_markdown_cell, new_notebook


def _object(store: CheckpointStore, data: bytes) -> str:
    store.prepare()
    digest = hashlib.sha256(data).hexdigest()
    (store.objects / f"{digest}.pkl").write_bytes(data)
    return digest


def _manifest(run_id: str, cell: int, saved: float, *digests: str) -> dict[str, Any]:
    return {
        "version": MANIFEST_VERSION,
        "run_id": run_id,
        "cell": cell,
        "saved": saved,
        "variables": {f"v{i}": digest for i, digest in enumerate(digests)},
        "process": {},
    }


def test_the_store_is_under_the_runs_folder_absolute_and_private(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    store = CheckpointStore(Path("runs"))
    assert store.root == tmp_path / "runs" / ".checkpoints"  # the kernel's cwd differs
    store.prepare()
    assert (store.objects.stat().st_mode & 0o777) == 0o700


def test_eviction_takes_the_oldest_first_and_keeps_objects_still_named(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    shared = _object(store, b"s" * 100)
    old = _object(store, b"o" * 300)
    new = _object(store, b"n" * 300)
    store.write("nb.py", _manifest("r1", 1, 1.0, shared, old))
    store.write("nb.py", _manifest("r2", 1, 2.0, shared, new))
    assert store.usage().checkpoints == 2
    freed = store.collect(Limits(per_notebook=450, total=10_000))
    assert freed == 300  # the old one's own object; the shared one stays
    assert [m["run_id"] for m in store.manifests("nb.py")] == ["r2"]
    assert sorted(p.stem for p in store.objects.glob("*.pkl")) == sorted([shared, new])


def test_the_total_limit_and_gc_max_bytes(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    for number in range(3):
        digest = _object(store, bytes([number]) * 200)
        store.write(f"nb{number}.py", _manifest(f"r{number}", 0, float(number), digest))
    store.collect(Limits(per_notebook=1_000, total=450))
    assert store.usage().checkpoints == 2  # the oldest notebook's went first
    store.collect(Limits(), keep=0)
    assert store.usage() == Usage(0, 0, 0, 0)


def test_objects_no_manifest_names_go_once_old(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    young = _object(store, b"y")
    old = _object(store, b"x")
    past = time.time() - ORPHAN_SECONDS - 5
    os.utime(store.objects / f"{old}.pkl", (past, past))
    store.collect(Limits())
    assert [p.stem for p in store.objects.glob("*.pkl")] == [young]  # may be being written


def test_a_manifest_that_cannot_be_read_is_left_out(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    path = store.write("nb.py", _manifest("r1", 0, 1.0))
    path.write_text("{not json", encoding="utf-8")
    assert store.manifests("nb.py") == []


def test_the_key_is_the_code_cells_sources_not_markdown_nor_metadata() -> None:
    nb = new_notebook(cells=[new_code_cell("a = 1"), new_code_cell("b = a + 1")])
    cells = [0, 1]
    key = prefix_key(nb, cells, 1, "python3")
    moved = new_notebook(
        cells=[new_markdown_cell("# title"), new_code_cell("a = 1"), new_code_cell("b = a + 1")]
    )
    moved.cells[2].metadata["collapsed"] = True
    assert prefix_key(moved, [1, 2], 1, "python3") == key
    assert prefix_key(nb, cells, 0, "python3") != key
    assert prefix_key(nb, cells, 1, "ir") != key
    nb.cells[0].source = "a = 2"
    assert prefix_key(nb, cells, 1, "python3") != key
    nb.cells[0].source = "a = 1"
    nb.cells[1].metadata["tags"] = ["raises-exception"]
    assert prefix_key(nb, cells, 1, "python3") != key


def test_a_manifest_is_refused_for_each_thing_that_could_make_it_wrong(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("1,2\n", encoding="utf-8")
    env = {"python": "3.11", "executable": "/x/python", "packages": "abc"}
    mode = hashlib.sha256(b"fast").hexdigest()
    reads: dict[str, Any] = {
        "complete": True,
        "files": {os.fspath(data): ["r", hashlib.sha256(b"1,2\n").hexdigest()]},
        "env": {"MODE": mode, "TOKEN": "secret"},
    }
    good: dict[str, Any] = {
        "version": MANIFEST_VERSION,
        "unkept": {},
        "environment": env,
        "reads": reads,
    }
    kernel: dict[str, Any] = {"environment": env, "env": {"MODE": mode, "TOKEN": "secret"}}
    assert unusable(good, kernel) is None
    cases = {
        "another version": {**good, "version": MANIFEST_VERSION + 1},
        "could not keep f": {**good, "unkept": {"f": "TextIOWrapper does not pickle"}},
        "not all known": {**good, "reads": {**reads, "complete": False}},
        "another interpreter": {**good, "environment": {**env, "packages": "def"}},
    }
    for expected, manifest in cases.items():
        why = unusable(manifest, kernel)
        assert why is not None and expected in why, (expected, why)
    other_env = {**kernel, "env": {**kernel["env"], "MODE": hashlib.sha256(b"slow").hexdigest()}}
    assert "MODE" in str(unusable(good, other_env))
    data.write_text("1,3\n", encoding="utf-8")
    assert "data.csv, which its cells read, changed" in str(unusable(good, kernel))
    data.unlink()
    assert "is gone" in str(unusable(good, kernel))
    json.dumps(good)  # manifests are JSON
