"""``python -m notebook_executor``: the command line."""

import sys

from ._faces.cli import main

sys.exit(main())
