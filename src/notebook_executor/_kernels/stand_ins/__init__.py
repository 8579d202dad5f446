"""Stand-ins for packages a notebook may use without declaring them (see :data:`FOLDER`).

The kernels of an environment made for a notebook's declared dependencies
(docs/how-to/environments.md)
get this folder appended at the end of ``sys.path`` (``options.script_command``): a
package the environment holds itself comes first, and a stand-in is imported only when the
environment has no such package. Each stand-in runs in the kernel's interpreter and imports
nothing of this package.

- ``scrapbook``: ``glue`` for JSON-able values and text, writing the scraps scrapbook 0.5
  writes, so that ``import scrapbook as sb; sb.glue(name, value)`` works without declaring
  scrapbook (whose import needs ``six``, pandas, pyarrow and papermill).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FOLDER"]

#: The folder the kernels of a declared environment append to ``sys.path``.
FOLDER = Path(__file__).parent
