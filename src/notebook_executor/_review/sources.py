"""What the facade does with a source alone: the parameters and the environment it declares,
one cell edited in place.

:class:`~notebook_executor._executor.NotebookExecutor` exposes these functions as its static
methods, as they are: none of them needs an executor's state.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast

from .._notebook import notebook_language
from .._parameters.declared import check_parameters_cell, declared_parameters
from .._run.checks import PathLike
from .._run.plan import parses_parameters
from .._sources.formats import load_source
from .._types import DeclaredParameters, EnvironmentInfo

if TYPE_CHECKING:
    import nbformat

    from .._notebook import NotebookNode
    from .._sources.dependencies import Dependencies

__all__ = ["delete_cell", "edit_cell", "insert_cell", "inspect_environment", "inspect_parameters"]


def inspect_parameters(notebook_path: PathLike) -> DeclaredParameters:
    """The parameters ``notebook_path`` declares: ``{name: {name, type, default, help,
    required}}``.

    The argument is named ``notebook_path`` as in docs/reference/api.md (a source, as ``path`` of
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


def inspect_environment(notebook_path: PathLike) -> EnvironmentInfo | None:
    """The dependencies ``notebook_path`` declares (docs/how-to/environments.md), or None:
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
        ``read_notebook(path)`` after the edit (docs/how-to/review.md).
    """
    from . import edit

    return _public(edit.edit_cell(path, index, source, expect=expect))


def insert_cell(
    path: PathLike, index: int, source: str, cell_type: str = "code"
) -> nbformat.NotebookNode:
    """Insert a cell at ``index`` (``len(cells)`` appends); same rules as :meth:`edit_cell`."""
    from . import edit

    return _public(edit.insert_cell(path, index, source, cell_type))


def delete_cell(path: PathLike, index: int, *, expect: str | None = None) -> nbformat.NotebookNode:
    """Delete cell ``index``; same rules as :meth:`edit_cell`."""
    from . import edit

    return _public(edit.delete_cell(path, index, expect=expect))


def _public(nb: NotebookNode) -> nbformat.NotebookNode:
    """``nb`` as the public API hands notebooks back: nbformat's own node
    (docs/reference/api.md)."""
    import nbformat

    public: nbformat.NotebookNode = nbformat.from_dict(nb)
    return public


def _environment_info(declared: Dependencies | None) -> EnvironmentInfo | None:
    return None if declared is None else cast("EnvironmentInfo", declared.as_dict())
