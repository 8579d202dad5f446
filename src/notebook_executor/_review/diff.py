"""Compare two notebooks cell by cell, and two runs by what they produced.

Cells are matched by id where both notebooks share ids (two ``.ipynb`` files, or runs of one
``.ipynb``), and otherwise by aligning their sources (``difflib``); an unmatched pair of similar
cells between two matches counts as one modified cell. Outputs are compared, when asked, without
the noise that differs from run to run: execution counts, output metadata and timings, ANSI
colours, and memory addresses in reprs (``<Foo at 0x7f...>``).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._parameters.declared import INJECTED_TAG
from .._records.text import strip_ansi
from .._types import CellChange, NotebookDiff, RunDiff

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = ["diff_cells", "diff_records", "normalised_outputs", "sanitise_text"]

#: Similarity (difflib ratio of sources) from which an unmatched pair counts as one modified cell.
NEAR_MATCH = 0.5
#: Above this many candidate pairs in one unmatched stretch, pair cells by position.
_PAIRING_LIMIT = 2500

_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,16}\b")
#: Notebook metadata that records how or when a notebook was written or run, not what it is.
_NOISY_METADATA = frozenset(
    {"jupytext", "papermill", "notebook_executor", "language_info", "widgets", "toc"}
)
#: Display data that cannot be compared meaningfully across runs.
_NOISY_MIMES = frozenset({"application/vnd.jupyter.widget-view+json"})


def sanitise_text(text: str) -> str:
    """``text`` without ANSI escapes, with memory addresses replaced by ``0x...``."""
    return _ADDRESS.sub("0x...", strip_ansi(text))


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def normalised_outputs(
    outputs: Sequence[Mapping[str, Any]], *, mimes: frozenset[str] | None = None
) -> list[Any]:
    """The outputs of a cell reduced to what they show: no execution counts, no metadata,
    ANSI colours and memory addresses removed, consecutive stream chunks merged; with
    ``mimes``, only display data of those types is kept."""
    shown: list[Any] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            name, text = output.get("name"), sanitise_text(_text(output.get("text", "")))
            if shown and shown[-1][0] == "stream" and shown[-1][1] == name:
                shown[-1] = ("stream", name, shown[-1][2] + text)
            else:
                shown.append(("stream", name, text))
        elif kind in ("execute_result", "display_data", "update_display_data"):
            data = {
                mime: sanitise_text(_text(value)) if isinstance(value, (str, list)) else value
                for mime, value in sorted(dict(output.get("data", {})).items())
                if mime not in _NOISY_MIMES and (mimes is None or mime in mimes)
            }
            if data:
                shown.append(("display", json.dumps(data, sort_keys=True, default=str)))
        elif kind == "error":
            shown.append(
                ("error", output.get("ename"), sanitise_text(str(output.get("evalue", ""))))
            )
    return [list(item) for item in shown]


def source_cells(nb: NotebookNode) -> list[NotebookNode]:
    """The cells of ``nb`` as its source has them: a run's injected parameters cell dropped,
    so indices are those of ``read_notebook(source).cells``."""
    return [c for c in nb.cells if INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]


def _unified(a: str, b: str, label_a: str, label_b: str) -> str:
    lines = difflib.unified_diff(
        a.splitlines(keepends=True), b.splitlines(keepends=True), label_a, label_b, n=3
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _pairs(cells_a: list[NotebookNode], cells_b: list[NotebookNode]) -> list[tuple[int, int]]:
    """Matched ``(index_a, index_b)`` pairs, in order."""
    ids_a = [str(c.get("id", "")) for c in cells_a]
    ids_b = [str(c.get("id", "")) for c in cells_b]
    common = (set(ids_a) & set(ids_b)) - {""}
    if not common:
        return _align(cells_a, cells_b, 0, len(cells_a), 0, len(cells_b))
    keyed_a = [(i, key) for i, key in enumerate(ids_a) if key in common]
    keyed_b = [(j, key) for j, key in enumerate(ids_b) if key in common]
    matcher = difflib.SequenceMatcher(
        None, [k for _, k in keyed_a], [k for _, k in keyed_b], autojunk=False
    )
    anchors = [
        (keyed_a[block.a + k][0], keyed_b[block.b + k][0])
        for block in matcher.get_matching_blocks()
        for k in range(block.size)
    ]
    pairs: list[tuple[int, int]] = []
    last_a = last_b = 0
    for i, j in [*anchors, (len(cells_a), len(cells_b))]:
        pairs.extend(_align(cells_a, cells_b, last_a, i, last_b, j))
        if i < len(cells_a):
            pairs.append((i, j))
        last_a, last_b = i + 1, j + 1
    return pairs


def _align(
    cells_a: list[NotebookNode],
    cells_b: list[NotebookNode],
    a0: int,
    a1: int,
    b0: int,
    b1: int,
) -> list[tuple[int, int]]:
    """Pairs of cells in ``a[a0:a1]`` and ``b[b0:b1]``, aligned by source."""
    keys_a = [f"{c.cell_type}\0{c.source}" for c in cells_a[a0:a1]]
    keys_b = [f"{c.cell_type}\0{c.source}" for c in cells_b[b0:b1]]
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    pairs: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs.extend((a0 + i1 + k, b0 + j1 + k) for k in range(i2 - i1))
        elif tag == "replace":
            pairs.extend(_near_pairs(cells_a, cells_b, a0 + i1, a0 + i2, b0 + j1, b0 + j2))
    return pairs


def _near_pairs(
    cells_a: list[NotebookNode],
    cells_b: list[NotebookNode],
    a0: int,
    a1: int,
    b0: int,
    b1: int,
) -> list[tuple[int, int]]:
    """Similar cells of two unmatched stretches, paired in order (greedy, monotone)."""
    if (a1 - a0) * (b1 - b0) > _PAIRING_LIMIT:
        candidates = [(a0 + k, b0 + k) for k in range(min(a1 - a0, b1 - b0))]
        return [(i, j) for i, j in candidates if _similar(cells_a[i], cells_b[j])]
    pairs: list[tuple[int, int]] = []
    next_b = b0
    for i in range(a0, a1):
        for j in range(next_b, b1):
            if _similar(cells_a[i], cells_b[j]):
                pairs.append((i, j))
                next_b = j + 1
                break
    return pairs


def _similar(a: NotebookNode, b: NotebookNode) -> bool:
    if a.cell_type != b.cell_type:
        return False
    matcher = difflib.SequenceMatcher(None, a.source, b.source, autojunk=False)
    return matcher.real_quick_ratio() >= NEAR_MATCH and matcher.ratio() >= NEAR_MATCH


def diff_cells(
    nb_a: NotebookNode,
    nb_b: NotebookNode,
    *,
    outputs: bool = False,
    labels: tuple[str, str] = ("a", "b"),
) -> NotebookDiff:
    """The difference of two notebooks (see ``NotebookExecutor.diff_notebooks``)."""
    cells_a, cells_b = source_cells(nb_a), source_cells(nb_b)
    pairs = _pairs(cells_a, cells_b)
    paired_a = {i for i, _ in pairs}
    paired_b = {j for _, j in pairs}
    changes: list[tuple[tuple[float, int], CellChange]] = []
    for i, j in pairs:
        a, b = cells_a[i], cells_b[j]
        source_changed = a.source != b.source or a.cell_type != b.cell_type
        outputs_changed = outputs and normalised_outputs(a.get("outputs", [])) != (
            normalised_outputs(b.get("outputs", []))
        )
        if source_changed or outputs_changed:
            changes.append(((i, j), _change("modified", i, j, a, b, outputs_changed, labels)))
    for i, a in enumerate(cells_a):
        if i not in paired_a:
            changed = outputs and bool(a.get("outputs"))
            changes.append(((i, -1), _change("removed", i, None, a, None, changed, labels)))
    for j, b in enumerate(cells_b):
        if j not in paired_b:
            changed = outputs and bool(b.get("outputs"))
            # An added cell sorts just before the next matched cell of ``a``.
            before = min((i for i, jj in pairs if jj > j), default=len(cells_a))
            changes.append(((before - 0.5, j), _change("added", None, j, None, b, changed, labels)))
    changes.sort(key=lambda item: item[0])
    metadata_changed = _metadata(nb_a) != _metadata(nb_b)
    return {
        "identical": not changes and not metadata_changed,
        "cells": [change for _, change in changes],
        "metadata_changed": metadata_changed,
    }


def _change(
    op: Literal["added", "removed", "modified"],
    index_a: int | None,
    index_b: int | None,
    a: NotebookNode | None,
    b: NotebookNode | None,
    outputs_changed: bool,
    labels: tuple[str, str],
) -> CellChange:
    source_a = a.source if a is not None else ""
    source_b = b.source if b is not None else ""
    cell = b if b is not None else a
    assert cell is not None
    return {
        "op": op,
        "index_a": index_a,
        "index_b": index_b,
        "cell_type": cell.cell_type,
        "source_diff": _unified(
            source_a,
            source_b,
            f"{labels[0]} cell {index_a}" if index_a is not None else "/dev/null",
            f"{labels[1]} cell {index_b}" if index_b is not None else "/dev/null",
        ),
        "outputs_changed": bool(outputs_changed),
    }


def _metadata(nb: NotebookNode) -> dict[str, Any]:
    kept = {k: v for k, v in dict(nb.metadata).items() if k not in _NOISY_METADATA}
    kernelspec = kept.pop("kernelspec", None)
    if isinstance(kernelspec, Mapping) and kernelspec.get("name") not in (None, "python3"):
        # Only a kernel other than the default Python one changes how the notebook runs.
        kept["kernel"] = kernelspec.get("name")
    return json.loads(json.dumps(kept, sort_keys=True, default=str))  # type: ignore[no-any-return]


def diff_records(
    result_a: Mapping[str, Any],
    result_b: Mapping[str, Any],
    nb_a: NotebookNode,
    nb_b: NotebookNode,
) -> RunDiff:
    """What differs between two runs, from their result dicts and executed notebooks (whose
    records say which package versions ran: :func:`run_packages`)."""
    return {
        "status": [result_a.get("status"), result_b.get("status")],
        "parameters": _differing(result_a.get("parameters"), result_b.get("parameters")),
        "scraps": _differing(result_a.get("scraps"), result_b.get("scraps")),
        "packages": _differing(run_packages(nb_a), run_packages(nb_b)),
        "inputs": differing_inputs(_record(nb_a), _record(nb_b)),
        "cells": diff_cells(
            nb_a,
            nb_b,
            outputs=True,
            labels=(str(result_a.get("run_id")), str(result_b.get("run_id"))),
        )["cells"],
    }


def _record(nb: NotebookNode) -> Mapping[str, Any]:
    record = nb.get("metadata", {}).get("notebook_executor")
    return record if isinstance(record, Mapping) else {}


def recorded_files(record: Mapping[str, Any]) -> dict[str, str | None]:
    """``{path: sha256}`` of the files a run's record says it opened (docs/how-to/reproduce.md)."""
    files = record.get("files")
    listed = files.get("files") if isinstance(files, Mapping) else None
    return {
        str(entry["path"]): entry.get("sha256")
        for entry in listed or ()
        if isinstance(entry, Mapping) and "path" in entry
    }


def differing_inputs(record_a: Mapping[str, Any], record_b: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded inputs of two runs that differ: files (by path: their sha256), the git
    commit, branch and dirty state, the machine, the environment's lock."""
    found: dict[str, Any] = {}
    files = _differing(recorded_files(record_a), recorded_files(record_b))
    git = _differing(record_a.get("git"), record_b.get("git"))
    machine = _differing(record_a.get("machine"), record_b.get("machine"))
    env_a, env_b = record_a.get("environment"), record_b.get("environment")
    locks = [env.get("lock_sha256") if isinstance(env, Mapping) else None for env in (env_a, env_b)]
    for name, value in (("files", files), ("git", git), ("machine", machine)):
        if value:
            found[name] = value
    if locks[0] != locks[1]:
        found["environment"] = locks
    return found


def changed_input_names(inputs: Mapping[str, Any], packages: Mapping[str, Any]) -> list[str]:
    """One readable name per input that changed: ``file data.csv``, ``package pandas``,
    ``git commit``, ``machine cpu``, ``environment lock``."""
    names = [f"file {path}" for path in inputs.get("files", {})]
    names += [f"package {name}" for name in packages]
    names += [f"git {key}" for key in inputs.get("git", {})]
    names += [f"machine {key}" for key in inputs.get("machine", {})]
    if "environment" in inputs:
        names.append("environment lock")
    return names


def run_packages(nb: NotebookNode) -> dict[str, str]:
    """The package versions a run's record says ran: those resolved in the notebook's own
    environment (docs/how-to/environments.md), else the executor's own that the record lists."""
    record = nb.get("metadata", {}).get("notebook_executor")
    if not isinstance(record, Mapping):
        return {}
    own = record.get("notebook_environment")
    where = own if isinstance(own, Mapping) else record.get("environment")
    packages = where.get("packages") if isinstance(where, Mapping) else None
    return dict(packages) if isinstance(packages, Mapping) else {}


def _differing(a: Any, b: Any) -> dict[str, list[Any]]:
    a = a if isinstance(a, Mapping) else {}
    b = b if isinstance(b, Mapping) else {}
    missing = object()
    differing: dict[str, list[Any]] = {}
    for name in sorted(set(a) | set(b)):
        value_a, value_b = a.get(name, missing), b.get(name, missing)
        if value_a != value_b:
            differing[name] = [
                None if value_a is missing else value_a,
                None if value_b is missing else value_b,
            ]
    return differing
