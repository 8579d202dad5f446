"""``python -m notebook_executor._faces.cli.serve``: the run server, serving this command line.

The server (``..server.daemon``) forks a child per command, which runs :func:`main` here.
"""

import sys

from ..server.daemon import main as serve
from . import main

if __name__ == "__main__":
    sys.exit(serve(main))
