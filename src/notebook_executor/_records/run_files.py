"""What a run record holds: the key of the record in the notebook's metadata, and the result's keys.

The executed notebook (``runs/YYYY-MM-DD/<run_id>.ipynb``, the truth) carries the run's record
in ``metadata["notebook_executor"]``: the result dict plus provenance (source path and sha256,
kernel, Python and package versions, the names of secrets and extra environment variables,
never their values). The markdown file beside it (:mod:`.run_markdown`) is the same run for
people. The files themselves are named, written, read and listed by :class:`.store.RunStore`
alone.
"""

from __future__ import annotations

from .._types import RunResult
from .run_markdown import RECORD_KEY, render_markdown

__all__ = ["RECORD_KEY", "RESULT_KEYS", "render_markdown"]

#: Keys of the result dict, in order (SPEC section 4): those of :class:`RunResult`.
RESULT_KEYS = tuple(RunResult.__annotations__)
