"""A forked kernel sees the settings a library fixed at import as a launched kernel does.

The full template imports pandas, numpy, pyarrow and scrapbook outside any kernel, before
forking its kernels. A library that looks at its host as it is imported (pandas asks whether
it runs in a kernel to choose ``display.max_columns``: 0, fit the terminal, or 20) would fix
what it saw in the template in every forked kernel. Here a probe prints what a notebook can see
of those settings, from a launched kernel and from a forked one (the full template's).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._kernels.kernel_engine import KernelEngine

# Forked kernels from the templates this file's pools spawn themselves, in the environment
# each test sets (not the templates the suite's processes share: tests/conftest.py).
pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("own_templates")]

PROBE = """\
# %%
import sys
import numpy, pandas, pyarrow, scrapbook
from pandas._config import config

def flat(values, prefix=""):
    for key, value in sorted(values.items()):
        if isinstance(value, dict):
            yield from flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}={value!r}"

print("\\n".join(flat(config._global_config)))
print("\\n".join(f"default {key}={option.defval!r}"
                for key, option in sorted(config._registered_options.items())))
print(numpy.get_printoptions())
print(type(sys.stdout).__name__, sys.stdout.isatty(), type(sys.stderr).__name__,
      sys.stderr.isatty(), sys.stdin is None or sys.stdin.isatty())
print(type(sys.displayhook).__name__, type(sys.excepthook).__name__)

# %%
pandas.DataFrame({f"column_{i}": range(3) for i in range(12)})

# %%
print(pandas.DataFrame({f"column_{i}": [i * 1000] for i in range(12)}))
"""


def _texts(tmp_path: Path, fork: bool) -> list[str]:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    with NotebookExecutor(runs_dir=tmp_path / f"runs-{fork}", engine=KernelEngine(fork=fork)) as ex:
        # A sweep: each kernel is forked from the full template (when forking), or launched.
        results = ex.execute_many(probe, [None, None])
        engine = ex._engine
        assert isinstance(engine, KernelEngine) and engine.pool is not None
        stats = dict(engine.pool.stats)
    assert stats["forked" if fork else "launched"] >= 2, stats
    result = results[1]
    assert result["status"] == "success", result
    nb = nbformat.read(result["output_path"], as_version=4)
    texts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text") or output.get("data", {}).get("text/plain", ""))
    return texts


def test_a_forked_kernel_sees_the_settings_libraries_fixed_at_import_as_a_launched_one(
    tmp_path: Path,
) -> None:
    launched = _texts(tmp_path, fork=False)
    forked = _texts(tmp_path, fork=True)
    assert "max_columns=20" in launched[0]
    # A wide frame wraps all its columns, as nbclient shows it, not "column_0 ... column_11".
    assert "..." not in launched[1] and "column_11" in launched[1]
    assert forked == launched
