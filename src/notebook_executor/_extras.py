"""Optional parts of the package (extras), and how to install one when it is missing."""

from __future__ import annotations


def install_hint(extra: str) -> str:
    """The install line for the optional part ``extra``, true both from a checkout and once
    the package is on an index (``notebook-executor`` is the name it will have there)."""
    return f"pip install '.[{extra}]' in a checkout, or 'notebook-executor[{extra}]' from a wheel"
