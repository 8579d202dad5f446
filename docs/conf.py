"""Sphinx configuration of the notebook-executor documentation (``nox -s docs`` builds it)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent / "src"))

import notebook_executor  # noqa: E402

project = "notebook-executor"
author = "the notebook-executor authors"
copyright = "2026, the notebook-executor authors"  # noqa: A001 (Sphinx's name)
release = version = notebook_executor.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "ne_docs",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"notebook-executor {release}"

# The API page documents what notebook_executor.__all__ exports, with numpydoc docstrings.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = True

# Not nitpicky (see the docs session in noxfile.py); no intersphinx: the build uses no network.
# Docstrings say "path" in prose types, which names several attributes (``error.path``).
suppress_warnings = ["ref.python"]

# The examples run as tests (``sphinx-build -b doctest``): on a copy of notebooks/ in a
# temporary folder, so that the runs they record stay out of the checkout.
doctest_global_setup = f"""
import os, shutil, tempfile
_docs_home = os.getcwd()
_docs_tmp = tempfile.mkdtemp(prefix="ne-docs-")
shutil.copytree({str(HERE.parent / "notebooks")!r}, os.path.join(_docs_tmp, "notebooks"))
os.chdir(_docs_tmp)
"""
doctest_global_cleanup = """
os.chdir(_docs_home)
shutil.rmtree(_docs_tmp, ignore_errors=True)
"""
