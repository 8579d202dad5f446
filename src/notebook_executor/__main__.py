"""``python -m notebook_executor``: the command line."""

from ._faces.cli import console

console()
