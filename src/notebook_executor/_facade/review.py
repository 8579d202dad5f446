"""The facade's authoring and review methods: notebooks read and written, one cell edited,
notebooks and runs compared, a notebook validated."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._notebook import notebook_language
from .._parameters.declared import check_parameters_cell, declared_parameters
from .._run.checks import PathLike, check_path
from .._run.plan import parses_parameters
from .._sources.formats import load_source
from .._sources.formats import read_notebook as _read_notebook
from .._sources.formats import write_notebook as _write_notebook
from .._types import (
    DeclaredParameters,
    EnvironmentInfo,
    NotebookDiff,
    RunDiff,
    RunResult,
    ValidateAnswer,
)
from .records import RecordQueries

if TYPE_CHECKING:
    import nbformat

    from .._notebook import NotebookNode
    from .._review.golden import OutputRules
    from .._review.validate import Checked
    from .._run.plan import Plan
    from .._sources.dependencies import Dependencies

__all__ = ["ReviewMethods"]


class ReviewMethods(RecordQueries):
    """Sources read, written, edited, compared and validated."""

    @staticmethod
    def inspect_parameters(notebook_path: PathLike) -> DeclaredParameters:
        """The parameters ``notebook_path`` declares: ``{name: {name, type, default, help,
        required}}``.

        The argument is named ``notebook_path`` by SPEC section 3 (a source, as ``path`` of
        the other methods and ``input_path`` of :meth:`execute`). The answer is that mapping;
        its ``environment`` attribute holds the dependencies the notebook declares (as
        :meth:`inspect_environment` gives them), or None.

        Raises
        ------
        NotebookSourceError
            The source is missing or malformed, or its parameters cell is not valid Python
            (naming the cell and the line): it declares nothing that can be read. (A run of
            that notebook fails at that cell, as papermill's does, and is recorded.)
        """
        loaded = load_source(notebook_path)
        if parses_parameters(notebook_language(loaded.nb)):
            check_parameters_cell(os.fspath(notebook_path), loaded.nb)
        declared = declared_parameters(loaded.nb)
        return DeclaredParameters(
            {name: parameter.as_dict() for name, parameter in declared.items()},
            _environment_info(loaded.dependencies),
        )

    @staticmethod
    def inspect_environment(notebook_path: PathLike) -> EnvironmentInfo | None:
        """The dependencies ``notebook_path`` declares (SPEC section 19), or None:
        ``{"dependencies": [...], "requires-python": spec or None, "declared_in": where}``,
        ``where`` being ``"script block"`` (PEP 723), ``"front matter"`` or ``"metadata"``
        (``.ipynb`` metadata ``notebook_executor.dependencies`` and
        ``notebook_executor.requires-python``).

        Raises
        ------
        NotebookSourceError
            The source is missing or malformed, its declaration included.
        """
        return _environment_info(load_source(notebook_path).dependencies)

    @staticmethod
    def read_notebook(path: PathLike) -> nbformat.NotebookNode:
        """Read any supported source as an nbformat 4 notebook (``nbformat.NotebookNode``).

        The same function as the top-level :func:`notebook_executor.read_notebook`. The
        argument is named ``path`` as in SPEC section 3.
        """
        return _read_notebook(path)

    @staticmethod
    def write_notebook(nb: Mapping[str, Any], path: PathLike) -> Path:
        """Write ``nb`` (an nbformat 4 notebook, a node or plain dicts) in the format
        ``path``'s extension names; return the path.

        The same function as the top-level :func:`notebook_executor.write_notebook`.
        """
        return _write_notebook(nb, path)

    @staticmethod
    def edit_cell(
        path: PathLike, index: int, source: str, *, expect: str | None = None
    ) -> nbformat.NotebookNode:
        """Replace the source of cell ``index`` in the file, in its own format.

        Every other cell's text stays byte-identical; the file is written atomically. Indices
        are those of ``read_notebook(path).cells`` (and of a result's ``failed_cell.index``).
        ``expect``, the source the caller read, refuses the edit when the cell changed since.
        A new text that would split or merge cells in this format (``# %%`` in a percent
        script, a fence in markdown) is refused with :class:`NotebookSourceError`.

        Returns
        -------
        nbformat.NotebookNode
            ``read_notebook(path)`` after the edit (SPEC section 11).
        """
        from .._review.edit import edit_cell

        return _public(edit_cell(path, index, source, expect=expect))

    @staticmethod
    def insert_cell(
        path: PathLike, index: int, source: str, cell_type: str = "code"
    ) -> nbformat.NotebookNode:
        """Insert a cell at ``index`` (``len(cells)`` appends); same rules as :meth:`edit_cell`."""
        from .._review.edit import insert_cell

        return _public(insert_cell(path, index, source, cell_type))

    @staticmethod
    def delete_cell(
        path: PathLike, index: int, *, expect: str | None = None
    ) -> nbformat.NotebookNode:
        """Delete cell ``index``; same rules as :meth:`edit_cell`."""
        from .._review.edit import delete_cell

        return _public(delete_cell(path, index, expect=expect))

    def diff_notebooks(self, a: PathLike, b: PathLike, *, outputs: bool = False) -> NotebookDiff:
        """Compare two notebooks, each a source path (any format) or a run id.

        Returns ``{"identical", "cells", "metadata_changed"}``; ``cells`` lists the cells
        ``"added"``, ``"removed"`` or ``"modified"`` with ``index_a``, ``index_b`` (indices of
        ``read_notebook``; a run's injected parameters cell is left out), a unified
        ``source_diff`` and ``outputs_changed`` (compared only with ``outputs=True``, without
        execution counts, timings or memory addresses).
        """
        from .._review.diff import diff_cells

        return diff_cells(
            self._notebook_or_run(a),
            self._notebook_or_run(b),
            outputs=outputs,
            labels=(os.fspath(a), os.fspath(b)),
        )

    def diff_runs(self, run_a: str, run_b: str) -> RunDiff:
        """What differs between two past runs: ``{"status": [a, b], "parameters": {name:
        [a, b]}, "scraps": {name: [a, b]}, "packages": {name: [a, b]}, "cells": [...]}`` (only
        differing names; ``packages``: the versions that ran, those of the notebook's own
        environment when it declares dependencies; ``cells`` as in :meth:`diff_notebooks`
        with outputs compared)."""
        from .._review.diff import diff_records

        return diff_records(
            self.get_run(run_a),
            self.get_run(run_b),
            self._run_notebook(run_a),
            self._run_notebook(run_b),
        )

    def validate(
        self, path: PathLike, *, execute: bool = False, **execute_options: Any
    ) -> ValidateAnswer:
        """Check a notebook: ``{"valid": bool, "problems": [{"cell", "severity", "message"}]}``.

        Checks the nbformat schema, that the parameters cell parses, that code cells compile,
        one language, an installed kernel and the declared environment variables. With
        ``execute=True`` it also runs the notebook (options as for :meth:`execute`; the run is
        not recorded) and honours nbval's markers: ``# NBVAL_SKIP`` / tags ``skip-execution``,
        ``nbval-skip``; ``raises-exception`` (the cell must raise; the run goes on);
        ``# NBVAL_CHECK_OUTPUT`` (outputs must equal the stored ones, sanitised). ``cell`` is
        an index of ``read_notebook(path).cells`` or None; ``severity`` is ``"error"`` or
        ``"warning"``; the notebook is valid when there is no error.
        """
        from .._review.validate import validate_notebook

        self._check_open()
        check_path("path", path)
        return validate_notebook(
            path,
            execute=execute,
            plan=self._plan_keywords,
            engine=self._engine,
            options=execute_options,
        )

    def _check_notebook(
        self,
        path: PathLike,
        *,
        execute: bool,
        record: bool = False,
        outputs: OutputRules | None = None,
        skip_unset: bool = True,
        **execute_options: Any,
    ) -> Checked:
        """The verdict ``check`` and ``pytest --notebooks`` both give (one code, so the two
        never disagree): :meth:`validate`'s answer, the run's result and output diffs, or the
        reason the notebook is skipped (with ``skip_unset``: a required parameter or declared
        environment variable not given). With ``record`` the run is kept under ``runs_dir``
        and indexed, as any run."""
        from .._review.validate import check_notebook

        self._check_open()
        check_path("path", path)
        return check_notebook(
            path,
            execute=execute,
            plan=self._plan_keywords,
            engine=self._engine,
            options=execute_options,
            run=self._recorded_run if record else None,
            outputs=outputs,
            skip_unset=skip_unset,
        )

    def _recorded_run(self, plan: Plan) -> RunResult:
        self._announce([plan])
        return self._run(plan)


def _public(nb: NotebookNode) -> nbformat.NotebookNode:
    """``nb`` as the public API hands notebooks back: nbformat's own node (SPEC section 3)."""
    import nbformat

    public: nbformat.NotebookNode = nbformat.from_dict(nb)
    return public


def _environment_info(declared: Dependencies | None) -> EnvironmentInfo | None:
    return None if declared is None else cast("EnvironmentInfo", declared.as_dict())
