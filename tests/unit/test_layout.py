"""The package's layout: every module sits in a group, imports only its own group or groups below
it, and no import cycle exists. Read from the source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = "notebook_executor"
ROOT = Path(__file__).resolve().parents[2] / "src" / PACKAGE

#: Groups from the bottom up, as the docs' architecture page draws them. A module may
#: import from its own group and from groups of a lower rank, never from a higher one, nor from
#: another group of its rank (rank 0 excepted: the seam, the errors and the times are leaves).
RANKS: dict[str, int] = {
    "engine": 0,  # the public engine seam
    "_errors": 0,
    "_times": 0,
    "_extras": 0,
    "_notebook": 0,  # notebooks as data, without nbformat
    "_kernels": 1,
    "_sources": 1,
    "_parameters": 2,
    "_records": 3,
    "_run": 4,
    "_catalog": 5,
    "_review": 6,
    "_cluster": 6,
    "_executor": 7,
    "__init__": 8,  # the public surface: re-exports the executor, errors and engine types
    "_faces": 9,  # callers from outside Python: they may use the public surface
    "__main__": 10,
}

#: Top-level modules that belong to a group named after another module.
MEMBERS = {"_progress": "_executor"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def group(module: str) -> str:
    """The group of a module: its first component under the package (``__init__`` for the
    package itself)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    return MEMBERS.get(name, name)


def imports(module: str, path: Path, known: Iterable[str]) -> set[str]:
    """Modules of the package that ``module`` imports anywhere in its file (module level,
    inside functions, under ``TYPE_CHECKING``)."""
    known = set(known)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                # ``from .x`` in a package's __init__ is relative to the package itself.
                drop = node.level - 1 if is_package else node.level
                base = ".".join(anchor[: len(anchor) - drop])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if not target.startswith(PACKAGE):
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in known else target)
    found.discard(module)
    return {name for name in found if name in known}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, found) for name, path in found.items()}


def upward_imports(edges: Mapping[str, set[str]]) -> list[str]:
    """Every import of a higher group, or of another group of the same rank."""
    wrong = []
    for module, targets in edges.items():
        for target in targets:
            mine, theirs = group(module), group(target)
            if mine == theirs:
                continue
            if RANKS[theirs] > RANKS[mine] or (RANKS[theirs] == RANKS[mine] and RANKS[mine] != 0):
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    return sorted(wrong)


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``edges`` (one path per cycle found by depth-first search)."""
    found: list[list[str]] = []
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                found.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_the_layout_is_read_from_the_real_package() -> None:
    edges = graph()
    assert len(edges) >= 30, sorted(edges)
    assert sum(len(targets) for targets in edges.values()) >= 60
    # Spot checks that the reader resolves relative, nested and lazy imports.
    assert "notebook_executor.engine" in edges["notebook_executor._kernels.kernel_engine"]
    assert "notebook_executor._records.run_files" in edges["notebook_executor._catalog.rows"]
    assert "notebook_executor._run.runner" in edges["notebook_executor._executor"]
    assert "notebook_executor._catalog.store" in edges["notebook_executor._executor"]
    assert "notebook_executor._executor" in edges[PACKAGE]


def test_every_module_sits_in_a_known_group() -> None:
    assert sorted({group(name) for name in modules()} - set(RANKS)) == []


def test_no_module_imports_a_group_above_its_own() -> None:
    assert upward_imports(graph()) == []


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_kernel_script_imports_nothing_of_the_package() -> None:
    """It runs by path in a kernel process, where the package may not be importable."""
    script = ROOT / "_kernels" / "template_kernel.py"
    assert imports("notebook_executor._kernels.template_kernel", script, modules()) == set()
    tree = ast.parse(script.read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        (
            {"notebook_executor._sources.formats": {"notebook_executor._catalog.store"}},
            [
                "notebook_executor._sources.formats (_sources) imports "
                "notebook_executor._catalog.store (_catalog)"
            ],
        ),
        (
            {"notebook_executor._review.diff": {"notebook_executor._cluster.dask"}},
            [
                "notebook_executor._review.diff (_review) imports notebook_executor._cluster.dask "
                "(_cluster)"
            ],
        ),
        ({"notebook_executor._catalog.store": {"notebook_executor._records.run_files"}}, []),
    ],
)
def test_the_direction_check_catches_an_upward_import(
    edges: dict[str, set[str]], expected: list[str]
) -> None:
    assert upward_imports(edges) == expected


def test_the_cycle_check_catches_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_architecture_page_names_every_module() -> None:
    """The folder listing of the docs' architecture page matches the tree: every folder and
    every module (a subpackage's ``__init__.py`` aside) is named on a line of its own."""
    page = ROOT.parents[1] / "docs" / "explanation" / "architecture.md"
    listing = page.read_text(encoding="utf-8").split("```", 2)[1]
    named = {line.split()[0] for line in listing.splitlines() if line.strip()}
    files = [p for p in ROOT.rglob("*.py") if p.name != "__init__.py" or p.parent == ROOT]
    folders = [p for p in ROOT.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert len(files) >= 30
    assert sorted(p.name for p in files if p.name not in named) == []
    assert sorted(p.name for p in folders if f"{p.name}/" not in named) == []
