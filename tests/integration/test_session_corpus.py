"""Correctness corpus: for every notebook of ``notebooks/`` and of the test corpus, and every
cell index ``k``, ``rerun_from(k)`` after a full session run gives the same outputs for cells
``k..`` as a fresh ``execute()`` (after the diff's output normalisation), and the user
namespace restored for ``k`` (names, types, values or array bytes) is the one a fresh kernel
has after the cells before ``k``.

Slow (every restore of every cell of every notebook): one parametrised file, run on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from notebook_executor import NotebookExecutor, read_notebook
from notebook_executor._review.diff import normalised_outputs

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(
    [
        *(p for p in (ROOT / "notebooks").iterdir() if p.suffix in (".py", ".md", ".ipynb")),
        *(ROOT / "tests" / "data" / "notebooks").iterdir(),
    ]
)

#: Values for required parameters, by declared type.
SAMPLES: dict[str, Any] = {"str": "station-7", "int": 3, "float": 1.5, "any": "station-7"}

#: Secrets a notebook declares it needs (handed as secrets, as a caller would).
SECRETS = {"GREETING_TOKEN": "greeting-token-value"}

#: The digest of the user namespace, computed in the kernel and printed; it defines nothing
#: that stays (its own name starts with an underscore and is deleted). IPython's own names are
#: left out as ``%who`` leaves them out: those ``user_ns_hidden`` holds with the same value.
DIGEST = """\
def _nbx_digest():
    import hashlib, pickle, types
    shell = get_ipython()
    hidden = shell.user_ns_hidden
    digest = hashlib.sha256()
    for name in sorted(shell.user_ns):
        value = shell.user_ns[name]
        if name.startswith("_") or (name in hidden and hidden[name] is value):
            continue
        digest.update(f"{name}:{type(value).__module__}.{type(value).__qualname__}".encode())
        if isinstance(value, types.ModuleType):
            digest.update(value.__name__.encode())
        elif hasattr(value, "to_numpy") and hasattr(value, "columns"):
            digest.update(pickle.dumps((list(value.columns), value.to_numpy().tolist())))
        elif hasattr(value, "tobytes"):
            digest.update(value.tobytes())
        else:
            try:
                digest.update(pickle.dumps(value))
            except Exception:
                digest.update(b"unpicklable")
    return digest.hexdigest()
print(_nbx_digest())
del _nbx_digest
"""


def parameters_for(ex: NotebookExecutor, path: Path) -> dict[str, Any]:
    declared = ex.inspect_parameters(path)
    return {
        name: SAMPLES.get(spec["type"], "x") for name, spec in declared.items() if spec["required"]
    }


def job_cells(path: str) -> list[Any]:
    """The cells of a run file (the injected parameters cell included)."""
    return list(json.loads(Path(path).read_text(encoding="utf-8"))["cells"])


def digest(session: Any) -> str:
    answer = session.evaluate(DIGEST)
    assert answer["status"] == "success", answer
    return str(answer["output"]).strip()


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_rerun_from_every_cell_matches_a_fresh_run(path: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs) as ex:
        parameters = parameters_for(ex, path)
        options: dict[str, Any] = {"parameters": parameters, "secrets": SECRETS}
        fresh = ex.execute(path, **options)
        assert fresh["status"] == "success", fresh["failed_cell"]
        expected = job_cells(fresh["output_path"])
        cells = len(read_notebook(path).cells)
        # The reference namespace before each cell: one fresh kernel, cells run once, in order.
        before: dict[int, str] = {}
        with ex.open_session(path, **options) as reference:
            for k in range(cells):
                if k > 0:
                    reference.run(until=k - 1)
                before[k] = digest(reference)
        with ex.open_session(path, **options) as session:
            assert session.run()["status"] == "success"
            for k in range(cells):
                if k > 0:
                    restored = session.rerun_from(k, until=k - 1)
                    assert restored["status"] == "success", restored["failed_cell"]
                    assert digest(session) == before[k], f"namespace before cell {k}"
                step = session.rerun_from(k)
                assert step["status"] == "success", step["failed_cell"]
                assert step["restored"] is not None or k == 0
                got = job_cells(str(next(runs.rglob(f"{session.run_id}.ipynb"))))
                assert len(got) == len(expected)
                first = k if fresh["output_path"] is None else _job_index(expected, k)
                for index in range(first, len(expected)):
                    if expected[index]["cell_type"] != "code":
                        continue
                    assert normalised_outputs(got[index]["outputs"]) == normalised_outputs(
                        expected[index]["outputs"]
                    ), f"cell {index} after rerun_from({k})"


def _job_index(cells: list[Any], source_index: int) -> int:
    """The run file's index of source cell ``source_index`` (the injected cell skipped)."""
    seen = -1
    for index, cell in enumerate(cells):
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            continue
        seen += 1
        if seen == source_index:
            return index
    raise AssertionError(f"no cell {source_index}")
