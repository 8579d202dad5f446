"""A forked kernel is a fresh kernel: what the template preloads leaves no trace in it.

The template preloads scrapbook, which imports papermill, which loads every installed
``papermill.engine`` plugin as it is imported. A plugin that imports ``matplotlib.pyplot``
before any kernel exists would fix matplotlib's backend to ``agg`` in every forked kernel: no
figure. Here such a plugin is built as a wheel and installed (``pip install --target``) by the
test, put on the kernels' path, and a plotting notebook run by ``execute`` (a warm executor's
second run), ``execute_many`` and a session must give what nbclient gives on a launched kernel.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from notebook_executor import NotebookExecutor
from notebook_executor._kernels.kernel_engine import KernelEngine

# Forked kernels from the templates this file's pools spawn themselves, in the environment
# each test sets (not the templates the suite's processes share: tests/conftest.py).
pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("own_templates")]

PLUGIN = "nbx_pyplot_engine"

PLUGIN_MODULE = '''"""A papermill engine that imports matplotlib.pyplot as it is imported."""
import matplotlib.pyplot  # noqa: F401

from papermill.engines import NBClientEngine as PyplotEngine  # noqa: F401
'''

NOTEBOOK = """\
# %%
import sys
names = ("matplotlib", "matplotlib.pyplot", "nbx_pyplot_engine")
print(sorted(m for m in names if m in sys.modules))

# %%
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [3, 1, 2])

# %%
import matplotlib
print(matplotlib.get_backend())
fig, ax = plt.subplots(figsize=(2, 2))
ax.bar(["a", "b"], [1, 2])
plt.show()

# %%
import papermill.engines
print(papermill.engines.papermill_engines.get_engine("nbx_pyplot").__name__)
"""


def _wheel(folder: Path) -> Path:
    """A wheel of the plugin's distribution (a zip with its ``.dist-info``)."""
    dist_info = f"{PLUGIN}-1.0.dist-info"
    files = {
        f"{PLUGIN}.py": PLUGIN_MODULE,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 1.0\n",
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{dist_info}/entry_points.txt": (
            f"[papermill.engine]\nnbx_pyplot = {PLUGIN}:PyplotEngine\n"
        ),
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist_info}/RECORD,,\n"
    path = folder / f"{PLUGIN}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
        wheel.writestr(f"{dist_info}/RECORD", record)
    return path


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the installed plugin, for ``PYTHONPATH``."""
    build = tmp_path_factory.mktemp("plugin-build")
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(_wheel(build)),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert (target / f"{PLUGIN}.py").is_file()
    return target


def _outputs(cell: Any) -> list[Any]:
    """A code cell's outputs as compared: streams' text, each bundle's mime types, images'
    bytes (a ``text/plain`` repr holds an address, which differs in every process)."""
    kept: list[Any] = []
    for output in cell.get("outputs", []):
        kind = output["output_type"]
        if kind == "stream":
            kept.append((kind, output["name"], output["text"]))
            continue
        data = output.get("data", {})
        image = data.get("image/png")
        kept.append(
            (
                kind,
                sorted(data),
                None if image is None else base64.b64decode("".join(image)),
            )
        )
    return kept


def _cells(nb: Any) -> list[list[Any]]:
    return [_outputs(cell) for cell in nb.cells if cell.cell_type == "code"]


def _reference(tmp_path: Path, source: Path) -> list[list[Any]]:
    """The notebook run by nbclient on a launched kernel."""
    import jupytext

    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python", "language": "python"}
    resources = {"metadata": {"path": str(tmp_path)}}
    NotebookClient(nb, kernel_name="python3", resources=resources).execute()
    return _cells(nb)


def test_a_plugin_importing_pyplot_leaves_forked_kernels_their_figures(
    tmp_path: Path, plugin_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(plugin_path))
    source = tmp_path / "plot.py"
    source.write_text(NOTEBOOK, encoding="utf-8")
    expected = _reference(tmp_path, source)
    # The plugin is installed and loads where papermill is imported: the reference proves it.
    assert expected[0] == [("stream", "stdout", "[]\n")]
    assert any(image for _, _, image in expected[1] if image), expected[1]
    assert expected[2][0] == ("stream", "stdout", "module://matplotlib_inline.backend_inline\n")
    # The plugin works where it is used (the template leaves it to load there).
    assert expected[3] == [("stream", "stdout", "NBClientEngine\n")]

    runs = tmp_path / "runs"
    with NotebookExecutor(runs_dir=runs) as ex:
        first = ex.execute(source)
        second = ex.execute(source)
        many = ex.execute_many(source, [None, None])
        with ex.open_session(source) as session:
            step = session.run()
            run_id = session.run_id
        engine = ex._engine
        assert isinstance(engine, KernelEngine) and engine.pool is not None
        assert engine.pool.stats["forked"] >= 3, engine.pool.stats
        assert engine.pool.starts.full is not None
    assert step["status"] == "success"
    results = {"first": first, "second": second, "many 0": many[0], "many 1": many[1]}
    for label, result in results.items():
        assert result["status"] == "success", label
        nb = nbformat.read(result["output_path"], as_version=4)
        assert _cells(nb) == expected, label
    session_nb = nbformat.read(next(runs.rglob(f"{run_id}.ipynb")), as_version=4)
    assert _cells(session_nb) == expected
    json.dumps(step)


def test_a_forked_kernel_starts_as_a_launched_one(tmp_path: Path) -> None:
    """What a notebook can see of its kernel's start-up is the same, forked or launched:
    matplotlib's backend setting, the display hooks, IPython's event callbacks."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "# %%\nimport os, sys\n"
        "ip = get_ipython()\n"
        "print(os.environ.get('MPLBACKEND'))\n"
        "print(type(sys.displayhook).__name__, type(ip.display_pub).__name__)\n"
        "print({k: len(v) for k, v in ip.events.callbacks.items()})\n"
        "print(sorted(ip.display_formatter.active_types))\n"
        "print('matplotlib' in sys.modules)\n",
        encoding="utf-8",
    )
    texts = []
    for fork in (False, True):
        engine = KernelEngine(fork=fork)
        with NotebookExecutor(runs_dir=tmp_path / f"runs-{fork}", engine=engine) as ex:
            ex.execute(probe)
            result = ex.execute(probe)  # from the full template, when forking
        nb = nbformat.read(result["output_path"], as_version=4)
        texts.append("".join(o.get("text", "") for o in nb.cells[0].outputs))
    assert texts[0] == texts[1]
    assert "module://matplotlib_inline.backend_inline" in texts[0]


SHELL_PROBE = """\
# %%
import json, os, sys
from pathlib import Path
ip = get_ipython()
ready = sys.modules.get("_notebook_executor_ready_shell")
print(json.dumps({
    "adopted": bool(getattr(ready, "ADOPTED", False)),
    "forked": "_notebook_executor_fork_serving" in sys.modules,
    "env_read_differs": sorted(
        k for k, v in (getattr(ready, "ENV_READ", None) or {}).items() if os.environ.get(k) != v
    ),
    "kernel": [type(ip.kernel).__name__, ip.kernel is ip.parent, ip is ip.kernel.shell],
    "namespace": ip.user_ns is ip.kernel.user_ns,
    "starting_dir": ip.starting_dir == os.getcwd(),
    "dh": [str(p) for p in _dh] == [os.getcwd()],
    "profile": ip.profile_dir.location,
    "env": {
        k: os.environ.get(k) for k in ("TERM", "CLICOLOR", "FORCE_COLOR", "PAGER", "GIT_PAGER")
    },
    "streams": [type(sys.stdout).__name__, type(sys.stderr).__name__],
    "saved": sorted(
        (k, type(v).__name__ if k != "excepthook" else v is sys.excepthook)
        for k, v in ip._orig_sys_module_state.items()
    ),
    "excepthook": ip.sys_excepthook is sys.excepthook,
    "configurables": sorted(type(c).__name__ for c in ip.configurables),
    "magics": [len(ip.magics_manager.magics[kind]) for kind in ("line", "cell")],
    "namespace_keys": sorted(k for k in ip.user_ns if not k.startswith("_i")),
    "hidden": sorted(ip.user_ns_hidden),
    "count": ip.execution_count,
    "interactivity": ip.ast_node_interactivity,
    "main": sys.modules["__main__"] is ip.user_module,
}, sort_keys=True))
"""


def _probe(
    tmp_path: Path, source: Path, *, fork: bool, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """The probe's answer from a run's kernel: a forked one's with ``fork`` (a loaded machine
    may launch a run's kernel while the templates start: runs are repeated until one is
    forked), else a launched one's."""
    engine = KernelEngine(fork=fork)
    with NotebookExecutor(runs_dir=tmp_path / f"runs-{fork}", engine=engine) as ex:
        for _ in range(8):
            result = ex.execute(source, env=env)
            assert result["status"] == "success", result
            nb = nbformat.read(result["output_path"], as_version=4)
            answer = dict(json.loads("".join(o.get("text", "") for o in nb.cells[0].outputs)))
            if answer.pop("forked") is fork:
                answer["why_not_adopted"] = answer.pop("env_read_differs")
                return answer
            time.sleep(1.0)
    raise AssertionError(f"no run's kernel was {'forked' if fork else 'launched'}")


def _own_shell_as_launched(tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The probe's answer on a forked kernel (the run given ``env``), checked to have built
    its own shell and to see what a launched kernel sees."""
    source = tmp_path / "shell.py"
    source.write_text(SHELL_PROBE, encoding="utf-8")
    launched = _probe(tmp_path, source, fork=False, env=env)
    forked = _probe(tmp_path, source, fork=True, env=env)
    assert forked.pop("adopted") is False
    launched.pop("adopted")
    for answer in (forked, launched):
        answer.pop("why_not_adopted")
    assert forked == launched
    return forked


def test_a_forked_kernel_takes_the_shell_a_launched_one_builds(tmp_path: Path) -> None:
    """The template builds the kernels' IPython shell once; a forked kernel that takes it
    sees what a launched kernel's own shell gives: its kernel, namespace, working folder,
    streams, hooks, environment variables, magics, configuration."""
    source = tmp_path / "shell.py"
    source.write_text(SHELL_PROBE, encoding="utf-8")
    launched = _probe(tmp_path, source, fork=False)
    forked = _probe(tmp_path, source, fork=True)
    assert launched.pop("adopted") is False
    launched.pop("why_not_adopted")
    assert forked.pop("adopted") is True, forked["why_not_adopted"]
    forked.pop("why_not_adopted")
    assert forked == launched
    assert launched["kernel"] == ["IPythonKernel", True, True]
    assert launched["dh"] is launched["starting_dir"] is True


def test_a_forked_kernel_with_its_own_ipython_configuration_builds_its_own_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration file the template's shell was not built with (here in the run's own
    ``IPYTHONDIR``): the kernel builds its shell as a launched one does, and the file holds."""
    ipython = tmp_path / "ipython"
    (ipython / "profile_default").mkdir(parents=True)
    (ipython / "profile_default" / "ipython_kernel_config.py").write_text(
        "c.InteractiveShell.ast_node_interactivity = 'all'\n", encoding="utf-8"
    )
    monkeypatch.setenv("IPYTHONDIR", str(ipython))
    forked = _own_shell_as_launched(tmp_path)
    assert forked["interactivity"] == "all"
    assert forked["profile"] == str(ipython / "profile_default")


def test_a_forked_kernel_whose_environment_differs_builds_its_own_shell(tmp_path: Path) -> None:
    """A variable the template read while building the shell (the terminal's width) has
    another value in the kernel's environment (the run's own ``env``) than in the
    template's: the kernel builds its own shell, as a launched kernel does."""
    _own_shell_as_launched(tmp_path, {"COLUMNS": "123"})
