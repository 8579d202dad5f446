"""Which of a host's environment variables a kernel template or the run server starts with.

Standard library only, and nothing imported: every served command's client imports it. The
kernel template (:mod:`.forkserver`) and the run server (``_faces/server/client.py``) keep the
same two kinds of variable of the environment they are started from, and nothing else of it
(tokens, credentials): those an interpreter and its libraries read as they start
(:func:`startup_environment`), and :data:`HOST_NAMES`; each adds a few of its own.
"""

from __future__ import annotations

__all__ = ["HOST_NAMES", "STARTUP_PREFIXES", "startup_environment"]

#: Environment variables read when an interpreter or its imported libraries start: a run that
#: sets them differently from a template cannot be forked from it.
STARTUP_PREFIXES = (
    "PYTHON",
    "OMP_",
    "OPENBLAS_",
    "MKL_",
    "NUMEXPR_",
    "VECLIB_",
    "GOTO_",
    "BLIS_",
    "LD_",
    "MALLOC_",
    "ARROW_",
    "JUPYTER_",
    "IPYTHON",
    "MPLBACKEND",
    "PYDEVD_",
)

#: What an interpreter and its imports read besides: the locale (and ``LC_*``), the time
#: zone, where the home and temporary folders are, ``PATH``; none of them secret.
HOST_NAMES = frozenset(
    {"HOME", "LANG", "LANGUAGE", "PATH", "SYSTEMROOT", "TEMP", "TMP", "TMPDIR", "TZ"}
)


def startup_environment(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` read when an interpreter or its libraries start."""
    return {key: value for key, value in env.items() if key.startswith(STARTUP_PREFIXES)}
