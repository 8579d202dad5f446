"""The modules a kernel template imports before it forks kernels.

Read by the template (``template_server.py``, which loads this file by path) and by the host,
which forks a run's first kernel from the full template when its notebook imports one of
:data:`DATA_PRELOAD`'s packages (``kernel_engine.notebook_imports``). Data only.
"""

#: Modules every kernel imports: the template preloads them.
PRELOAD = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.comm",
    "ipykernel.debugger",
    "IPython.core.interactiveshell",
    "IPython.core.completer",
    "IPython.core.history",
    "IPython.core.debugger",
    "IPython.core.completerlib",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "IPython.utils.wildcard",
    "traitlets.config.argcomplete_config",
    "tornado.platform.asyncio",
    "tornado.queues",
    "tornado.locks",
    "sqlite3",
    "jupyter_client.session",
)

#: Modules the notebooks of this project often import, preloaded too unless ``kernel`` only.
DATA_PRELOAD = (
    "scrapbook",
    "pandas",
    "numpy",
    "pyarrow",
    "pyarrow.parquet",
)

#: The packages of :data:`DATA_PRELOAD` (what a notebook's ``import`` names).
DATA_PACKAGES = frozenset(name.partition(".")[0] for name in DATA_PRELOAD)
