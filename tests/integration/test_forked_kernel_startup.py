"""A forked kernel starts as a launched one does, though the template did part of its start-up;
both run without kernel subshells (their shell messages handled on the main thread).

The template records the files of the modules it loaded, and parses a kernel's command line
once, before forking; each kernel then takes those (its own connection file put in) instead of
redoing the work. These tests
prove, on real kernels, forked and launched, that what the kernel ends up with is the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from notebook_executor import NotebookExecutor
from notebook_executor._kernels.kernel_engine import KernelEngine

# Forked kernels from the templates this file's pools spawn themselves, in the environment
# each test sets (not the templates the suite's processes share: tests/conftest.py).
pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("own_templates")]

PROBE = """# %% tags=["parameters"]
x = 0

# %%
import sys

import scrapbook as sb

kernel = get_ipython().kernel
listed = kernel._kernel_modules
now = [m.__file__ for m in sys.modules.copy().values() if hasattr(m, "__file__") and m.__file__]
sb.glue("count", len(listed))
sb.glue("all_text", all(isinstance(path, str) for path in listed))
# Modules loaded later come after those loaded when the kernel started: the list the kernel
# made at start-up is exactly the head of the one made now.
sb.glue("is_head", listed == now[: len(listed)])
sb.glue("has_ipykernel", any(path.endswith("ipkernel.py") for path in listed))
debugger = getattr(kernel, "debugger", None)
sb.glue("debugger_list", getattr(debugger, "_kernel_modules", listed) is listed)
sb.glue("sys_restored", sys.modules["ipykernel.ipkernel"].sys is sys)
app = kernel.parent
sb.glue("app", [type(app).__name__, type(app).instance() is app, app.connection_file])
sb.glue("history", get_ipython().history_manager.enabled)
# No subshells: shell messages are handled on the main thread, no channel thread runs.
import threading

sb.glue(
    "subshells",
    [kernel._supports_kernel_subshells, [t.name for t in threading.enumerate()]],
)
# scrapbook still checks what it glues against its schema.
try:
    sb.glue("bad", object(), encoder="json")
except Exception as exc:
    sb.glue("bad_refused", type(exc).__name__)
# The configuration the kernel took from its command line is what parsing it gives.
from ipykernel.kernelapp import IPKernelApp

fresh = type(app)()
IPKernelApp.parse_command_line(fresh, app.argv)
sb.glue(
    "parsed_alike",
    [
        fresh.cli_config == app.cli_config,
        fresh.extra_args == app.extra_args,
        fresh.connection_file == app.connection_file,
        app.argv[:2] == ["-f", app.connection_file],
        app.cli_config is not fresh.cli_config,
    ],
)
"""


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "launched"])
def test_kernels_list_their_modules_and_take_their_options_as_launched_ones_do(
    tmp_path: Path, fork: bool
) -> None:
    if fork and not sys.platform.startswith("linux"):
        pytest.skip("kernels are forked on Linux only")
    (tmp_path / "probe.py").write_text(PROBE)
    engine = KernelEngine(warm_kernels=2, fork=fork)
    try:
        with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
            results = ex.execute_many(tmp_path / "probe.py", [{"x": i} for i in range(3)])
            pool = engine.pool
            assert pool is not None
            stats = dict(pool.stats)
    finally:
        engine.close()
    assert [r["status"] for r in results] == ["success"] * 3
    assert stats["forked" if fork else "launched"] >= 3, stats
    connection_files = set()
    for result in results:
        scraps = result["scraps"]
        assert scraps["count"] > 100
        assert scraps["all_text"] is True
        assert scraps["is_head"] is True
        assert scraps["has_ipykernel"] is True
        assert scraps["debugger_list"] is True
        assert scraps["sys_restored"] is True
        name, singleton, connection_file = scraps["app"]
        assert (name, singleton) == ("KernelApp", True)
        connection_files.add(connection_file)
        assert scraps["history"] is False
        supports_subshells, threads = scraps["subshells"]
        assert supports_subshells is False
        assert "MainThread" in threads and "Shell channel" not in threads, threads
        assert scraps["parsed_alike"] == [True] * 5
        assert scraps["bad_refused"] == "ScrapbookDataException"
        assert "bad" not in scraps
    # Each kernel parsed its own command line: its own connection file.
    assert len(connection_files) == 3
