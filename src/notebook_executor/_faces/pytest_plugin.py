"""``pytest --notebooks``: notebook sources as pytest test items, run on warm forked kernels.

Registered through the ``pytest11`` entry point, so pytest loads it wherever this package is
installed; it does nothing unless ``--notebooks`` is given (importing it imports only pytest).

- **Collection.** Every file under the given paths that the format table calls a notebook
  (the detection ``check`` uses) is a test item; folders ``check`` leaves out (run-record
  folders, caches, virtual environments) are left out. An item's id is the notebook's path;
  with several parameter sets (``--notebook-parameter-sets``, the file ``check
  --parameter-sets`` reads), one item per set, ``path[set id]``.
- **Running.** Each item is checked by the code ``check --execute`` runs
  (``notebook_executor._executor.check_notebook``), so the two never disagree: nbval's and nbmake's
  markers honoured, a notebook whose required parameters or declared environment variables are
  not given skipped with the reason. One executor per pytest process (each pytest-xdist worker
  has its own warm kernels), closed when the session ends: its kernel template starts when the
  first notebook is collected, so that it imports ipykernel while pytest collects the rest (not
  with ``--collect-only``). Under pytest-xdist the controller, which runs no test, owns the
  templates and lends them to the workers (:mod:`.template_lending`): the first starts as the
  controller is configured, while the workers start, and the workers start none. A kernel
  starts from this process's environment without ``PYTEST_CURRENT_TEST`` (pytest's name of
  the item running here, different for every item, would make every warm kernel unfit for
  the next). Runs are recorded as any run, unless ``--notebook-no-record``: in the folder
  ``--notebook-runs-dir`` (or the ini setting ``notebook_runs_dir``) names, else where pytest
  keeps its state (:func:`_default_runs_dir`), never in the project's own runs folder.
- **Failures** name the cell (``cell N``, the index of ``failed_cell.index``), its code and its
  traceback with library frames collapsed, and for outputs that changed a diff against the
  golden ones (see :mod:`notebook_executor._review.golden` for where those live).
- **Timeouts.** ``--timeout S`` bounds each notebook's run: pytest-timeout's option when that
  plugin is installed (the item's own limit is then set a little longer, so the run stops
  first and is reported and recorded as a timeout), else this plugin's.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .._executor import NotebookExecutor
    from .._kernels.sharing import SharedForkServer
    from .._review.golden import OutputRules
    from .._review.parameter_sets import ParameterSet, ParameterSets
    from .._review.validate import Checked
    from .template_lending import TemplateLender

__all__ = [
    "NotebookFile",
    "NotebookItem",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_ignore_collect",
    "pytest_runtest_teardown",
    "pytest_unconfigure",
]

#: Seconds pytest-timeout waits beyond the run's own limit, so the run stops first.
_TIMEOUT_GRACE = 30.0
#: The key of pytest-xdist's ``workerinput`` that holds the address of the lent template.
_LENT_TEMPLATE = "notebook_executor_template"


class _State:
    """What the plugin keeps for one pytest process: the options and its executor."""

    def __init__(self, config: pytest.Config) -> None:
        from .._review.golden import load_rules
        from .._review.parameter_sets import load_parameter_sets

        self.config = config
        root = config.rootpath
        sets_file = config.getoption("notebook_parameter_sets") or _ini_path(
            config, "notebook_parameter_sets", root
        )
        sanitize = config.getoption("notebook_sanitize_with") or _ini_path(
            config, "notebook_sanitize_with", root
        )
        try:
            self.sets: ParameterSets | None = load_parameter_sets(sets_file)
            self.rules = load_rules(sanitize)
        except ValueError as exc:  # InvalidArgumentError: a bad file, said in one line
            raise pytest.UsageError(str(exc)) from None
        self.every_cell = bool(config.getoption("notebook_check_outputs"))
        self.update = bool(config.getoption("notebook_update_golden"))
        self.record = not config.getoption("notebook_no_record")
        self.runs_dir = config.getoption("notebook_runs_dir") or config.getini("notebook_runs_dir")
        self.timeout = _timeout(config)
        self._executor: NotebookExecutor | None = None
        #: Whether the kernel's template was asked to start (at the first notebook collected).
        self.prepared = False
        #: Under pytest-xdist: in the controller, the templates it lends the workers; in a
        #: worker, its copies of them.
        self.lender: TemplateLender | None = None
        self.borrowed: tuple[SharedForkServer, SharedForkServer] | None = None

    def executor(self) -> NotebookExecutor:
        if self._executor is None:
            from .._executor import NotebookExecutor

            runs_dir = self.runs_dir or _default_runs_dir(self.config)
            self._executor = NotebookExecutor(runs_dir, progress=False)
        return self._executor

    def rules_for(self, parameter_set: ParameterSet) -> OutputRules:
        from .._review.golden import OutputRules

        return OutputRules(
            every_cell=self.every_cell,
            rules=self.rules,
            update=self.update,
            set_id=parameter_set.id,
        )

    def prepare(self) -> None:
        """Start the kernel's template (in a worker, borrow the controller's first)."""
        address = getattr(self.config, "workerinput", {}).get(_LENT_TEMPLATE)
        if address:
            from .._kernels.sharing import adopt
            from .template_lending import lent_templates

            self.borrowed = lent_templates(str(address))
            adopt(*self.borrowed)
        self.executor().prepare_kernel()

    def close_executor(self) -> None:
        """Stop this process's kernels (a later notebook makes a new executor)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.close()

    def close(self) -> None:
        try:
            self.close_executor()
        finally:
            borrowed, self.borrowed = self.borrowed, None
            if borrowed is not None:
                from .._kernels.sharing import adopt

                adopt(None)
                for template in borrowed:
                    template.close()
            lender, self.lender = self.lender, None
            if lender is not None:
                lender.close()


_STATE = pytest.StashKey[_State]()


#: The folder test runs are recorded in, in pytest's cache or base temporary folder.
RUNS_FOLDER = "notebook-executor-runs"


def _default_runs_dir(config: pytest.Config) -> Path:
    """Where a test session's runs are recorded unless asked: in pytest's cache
    (``.pytest_cache/d/notebook-executor-runs``), else, with the cache provider off, in
    pytest's base temporary folder (``/tmp/pytest-of-USER/pytest-N/``, of which pytest keeps
    the last few; a pytest-xdist worker's is in the controller's, whose folder the workers
    share), else in a new temporary folder."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir(RUNS_FOLDER))
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        base = Path(factory.getbasetemp())
        return (base.parent if hasattr(config, "workerinput") else base) / RUNS_FOLDER
    import tempfile

    return Path(tempfile.mkdtemp(prefix=f"{RUNS_FOLDER}-"))


def _has_pytest_timeout() -> bool:
    return importlib.util.find_spec("pytest_timeout") is not None


def _ini_path(config: pytest.Config, name: str, root: Path) -> str | None:
    value = str(config.getini(name) or "")
    return os.fspath(root / value) if value else None


def _timeout(config: pytest.Config) -> float | None:
    value = config.getoption("timeout", None)
    if value is None and config.pluginmanager.has_plugin("timeout"):
        try:
            value = config.getini("timeout")
        except ValueError:
            value = None
    try:
        seconds = float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds else None


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The ``--notebooks`` options (and ``--timeout`` when pytest-timeout is not there)."""
    group = parser.getgroup("notebooks", "notebooks as tests (notebook-executor)")
    group.addoption(
        "--notebooks",
        action="store_true",
        default=False,
        help="collect notebook sources (.ipynb, percent .py, markdown .md) as tests and run "
        "them on warm kernels",
    )
    group.addoption(
        "--notebook-parameter-sets",
        metavar="FILE",
        default=None,
        help="YAML file of parameter sets per notebook (as `check --parameter-sets`): one "
        "item per set",
    )
    group.addoption(
        "--notebook-check-outputs",
        action="store_true",
        default=False,
        help="compare every code cell's outputs with the golden ones (by default only "
        "NBVAL_CHECK_OUTPUT cells)",
    )
    group.addoption(
        "--notebook-update-golden",
        action="store_true",
        default=False,
        help="store this run's outputs as the golden ones instead of comparing them",
    )
    group.addoption(
        "--notebook-sanitize-with",
        metavar="FILE",
        default=None,
        help="regexes applied to outputs before comparing them (nbval's sanitize file format)",
    )
    group.addoption(
        "--notebook-runs-dir",
        metavar="DIR",
        default=None,
        help="where the runs are recorded (default: notebook-executor-runs in pytest's "
        "cache folder, or in its temporary folder when the cache is off)",
    )
    group.addoption(
        "--notebook-no-record",
        action="store_true",
        default=False,
        help="do not record the runs",
    )
    if not _has_pytest_timeout() or pluginmanager.is_blocked("timeout"):
        group.addoption(
            "--timeout",
            type=float,
            default=None,
            metavar="S",
            help="limit in seconds for each notebook's run",
        )
    parser.addini("notebook_parameter_sets", "parameter-sets file (as --notebook-parameter-sets)")
    parser.addini("notebook_sanitize_with", "sanitize file (as --notebook-sanitize-with)")
    parser.addini(
        "notebook_runs_dir",
        "where the runs are recorded (as --notebook-runs-dir; default: in pytest's cache)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Read the options (a bad parameter-sets or sanitize file is a usage error)."""
    if config.getoption("notebooks"):
        state = _State(config)
        config.stash[_STATE] = state
        config.pluginmanager.register(_NotModules(), "notebook_executor_not_modules")
        if _lends_template(config):
            state.lender = _start_lending()
            if state.lender is not None:
                config.pluginmanager.register(_Lending(state.lender), "notebook_executor_lending")


def _runs_tests(config: pytest.Config) -> bool:
    """Whether this pytest process runs tests: not with ``--collect-only``, nor as
    pytest-xdist's controller (its workers run them)."""
    if config.getoption("collectonly", False):
        return False
    if hasattr(config, "workerinput"):
        return True
    workers = config.getoption("numprocesses", None)
    return not workers or config.getoption("dist", "no") == "no"


def _lends_template(config: pytest.Config) -> bool:
    """Whether this is pytest-xdist's controller, with workers that will run notebooks."""
    if hasattr(config, "workerinput") or _runs_tests(config):
        return False
    if config.getoption("collectonly", False):
        return False
    from .._kernels.sharing import fork_supported

    return fork_supported()


def _start_lending() -> TemplateLender | None:
    from .._kernels.launch import kernel_environment
    from .template_lending import TemplateLender

    try:
        return TemplateLender(kernel_environment(None))
    except Exception as exc:  # the workers start their own
        import logging

        logging.getLogger(__name__).info("no kernel template for the workers: %s", exc)
        return None


class _Lending:
    """pytest-xdist's hook in the controller: each worker is told where the template is lent."""

    def __init__(self, lender: TemplateLender) -> None:
        self.lender = lender

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        # Only to a worker on this machine running this Python (``-n N``, ``--tx popen``):
        # another one starts its own templates.
        spec = node.gateway.spec
        if spec.popen and not spec.via and spec.python in (None, sys.executable):
            node.workerinput[_LENT_TEMPLATE] = self.lender.address


class _NotModules:
    """A notebook named on the command line is a notebook, not a Python module to import.

    pytest imports every ``.py`` file named on its command line as a test module, which would
    run a percent script's code at collection. Such a file, when it is a notebook and not
    named like a test module (``python_files``), is collected as a notebook only.
    """

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        outcome = yield
        found = outcome.get_result()
        if file_path.suffix != ".py" or not any(isinstance(n, NotebookFile) for n in found):
            return
        patterns = parent.config.getini("python_files")
        if any(fnmatch.fnmatch(file_path.name, pattern) for pattern in patterns):
            return
        outcome.force_result([n for n in found if not isinstance(n, pytest.Module)])


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop this process's kernels."""
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After this process's last notebook, stop its kernels at once: the kernel the pool
    would start for a next run is then never started, only to be killed at the session's end."""
    if isinstance(item, NotebookItem) and not isinstance(nextitem, NotebookItem):
        item.config.stash[_STATE].close_executor()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave out the folders ``check`` leaves out (run records, caches, environments)."""
    if not config.getoption("notebooks") or not collection_path.is_dir():
        return None
    from .._sources.discover import skipped_folder

    return True if skipped_folder(collection_path) else None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> NotebookFile | None:
    """A notebook source is collected as a :class:`NotebookFile`."""
    if not parent.config.getoption("notebooks"):
        return None
    from .._sources.formats import is_notebook

    if not is_notebook(file_path):
        return None
    state = parent.config.stash[_STATE]
    if not state.prepared:
        # The first notebook found: in a process that will run it, the kernel's template
        # starts now, and imports ipykernel while pytest collects the others.
        state.prepared = True
        if _runs_tests(parent.config):
            state.prepare()
    file: NotebookFile = NotebookFile.from_parent(parent, path=file_path)
    return file


class NotebookFile(pytest.File):
    """A notebook source: one item per parameter set."""

    def collect(self) -> list[NotebookItem]:
        from .._review.parameter_sets import DEFAULT_SET

        state = self.config.stash[_STATE]
        sets = state.sets.for_notebook(self.path) if state.sets is not None else (DEFAULT_SET,)
        items = []
        for parameter_set in sets:
            item: NotebookItem = NotebookItem.from_parent(
                self,
                name=parameter_set.label(self.path.name),
                nodeid=parameter_set.label(self.nodeid),
                parameter_set=parameter_set,
            )
            items.append(item)
        return items


class NotebookFailed(Exception):
    """A notebook's check failed; holds the verdict."""

    def __init__(self, checked: Checked) -> None:
        super().__init__("notebook failed")
        self.checked = checked


class NotebookItem(pytest.Item):
    """One run of a notebook (with one parameter set)."""

    def __init__(self, *, parameter_set: ParameterSet, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parameter_set = parameter_set
        state = self.config.stash[_STATE]
        if state.timeout is not None and self.config.pluginmanager.has_plugin("timeout"):
            self.add_marker(pytest.mark.timeout(state.timeout + _TIMEOUT_GRACE))

    def runtest(self) -> None:
        from .._executor import check_notebook

        state = self.config.stash[_STATE]
        options: dict[str, Any] = {"parameters": self.parameter_set.parameters}
        if state.timeout is not None:
            options["timeout"] = state.timeout
        checked = check_notebook(
            state.executor(),
            _shown_path(self.path),
            execute=True,
            record=state.record,
            outputs=state.rules_for(self.parameter_set),
            base_env=_kernel_base_env(),
            **options,
        )
        if checked.result is not None:
            self.user_properties.append(("run_id", checked.result["run_id"]))
        if checked.golden_written is not None:
            self.user_properties.append(("golden_written", checked.golden_written))
        if checked.skipped is not None:
            # Reported at the notebook, not at this line.
            raise pytest.skip.Exception(checked.skipped, _use_item_location=True)
        for problem in checked.answer["problems"]:
            if problem["severity"] == "warning":
                where = f"cell {problem['cell']}: " if problem["cell"] is not None else ""
                self.warn(pytest.PytestWarning(f"{self.nodeid}: {where}{problem['message']}"))
        if not checked.answer["valid"]:
            raise NotebookFailed(checked)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> Any:
        from .._errors import NotebookExecutorError

        if isinstance(excinfo.value, NotebookFailed):
            from .._review.check import failure_report

            return failure_report(excinfo.value.checked)
        if isinstance(excinfo.value, NotebookExecutorError):
            # The library's own refusal (a golden file that cannot be read, ...): its message,
            # which names what and why, not a traceback through the library.
            return f"notebook: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"notebook {self.nodeid}"


def _kernel_base_env() -> dict[str, str]:
    """The environment a notebook's kernel starts from: this process's, as it is now, without
    pytest's name of the test running in this process (a kernel is not that process, and a
    variable that differs for every item would make every warm kernel unfit for the next)."""
    return {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when inside it (as the CLI records it)."""
    try:
        return Path(path).relative_to(Path.cwd()).as_posix()
    except ValueError:
        return os.fspath(path)
