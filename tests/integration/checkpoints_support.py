"""What the durable-checkpoint tests read back (tests/integration/test_reuse_invalidation.py,
test_checkpoint_objects.py, test_resume.py): a run's checkpoint manifests, a run's code cells
and their outputs, as the run's record (the executed notebook) holds them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: A cell slow enough for the checkpoint policy (0.5 s, and 20 times the last checkpoint's
#: cost) to write a checkpoint after it.
SLOW = "time.sleep(0.6)"


def manifests(runs_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """The checkpoints run ``run_id`` wrote, in the order of its cells."""
    found = [
        json.loads(path.read_text(encoding="utf-8"))
        for path in (runs_dir / ".checkpoints" / "notebooks").glob(f"*/{run_id}.*.json")
    ]
    return sorted(found, key=lambda manifest: int(manifest["position"]))


def checkpoint_files(runs_dir: Path) -> list[Path]:
    """Every file under ``runs/.checkpoints``."""
    root = runs_dir / ".checkpoints"
    return sorted(path for path in root.rglob("*") if path.is_file()) if root.is_dir() else []


def executed(result: Mapping[str, Any]) -> dict[str, Any]:
    """The executed notebook of a run (its record)."""
    notebook: dict[str, Any] = json.loads(Path(result["output_path"]).read_text("utf-8"))
    return notebook


def source_code_cells(result: Mapping[str, Any]) -> list[int | None]:
    """The code cells of the run's job notebook, in order, as source indices (those of
    ``failed_cell.index`` and ``reused_cells``); None for the injected parameters cell."""
    indices: list[int | None] = []
    injected_seen = False
    for job_index, cell in enumerate(executed(result)["cells"]):
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            injected_seen = True
            if cell["cell_type"] == "code":
                indices.append(None)
            continue
        if cell["cell_type"] == "code":
            indices.append(job_index - 1 if injected_seen else job_index)
    return indices


def _normal(output: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in output.items() if k not in ("execution_count", "metadata")}
    if isinstance(kept.get("text"), list):
        kept["text"] = "".join(kept["text"])
    if isinstance(kept.get("data"), dict):
        kept["data"] = {
            mime: "".join(value) if isinstance(value, list) else value
            for mime, value in kept["data"].items()
        }
    if output.get("output_type") == "stream":
        kept.pop("name", None)  # stdout and stderr interleave as they come
    return kept


def code_outputs(result: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """Each code cell's outputs (execution counts and metadata aside), job order."""
    return [
        [_normal(output) for output in cell.get("outputs", [])]
        for cell in executed(result)["cells"]
        if cell["cell_type"] == "code"
    ]


def expected_reuse(
    result: Mapping[str, Any], positions: list[int], usable: Any
) -> tuple[list[int], int | None]:
    """The cells a reuse should start after: those up to the last of ``positions`` (code cell
    positions of checkpoints) that ``usable(position)`` accepts, as source indices of
    ``result``'s notebook (the injected cell left out); and that position (None: none)."""
    chosen = max((p for p in positions if usable(p)), default=None)
    if chosen is None:
        return [], None
    cells = source_code_cells(result)[: chosen + 1]
    return [index for index in cells if index is not None], chosen
