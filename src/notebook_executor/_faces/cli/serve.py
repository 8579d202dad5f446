"""``python -m notebook_executor._faces.cli.serve``: the run server, serving this command line.

The server (``..server.daemon``) forks a child per command, which runs :func:`main` here.
"""

import sys

from ..server.daemon import main as serve
from . import main, prebuild

if __name__ == "__main__":
    # Building the parser once imports every command's module, for every child.
    sys.exit(serve(main, prebuild))
