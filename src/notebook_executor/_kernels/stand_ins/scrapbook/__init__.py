"""scrapbook's ``glue``, for the kernels of environments made without scrapbook.

notebook-executor's stand-in (see the folder's ``__init__``): imported only when the
environment holds no scrapbook of its own. ``glue(name, value)`` writes the scrap scrapbook 0.5
writes: a ``display_data`` output whose data is
``{"application/scrapbook.scrap.<encoder>+json": {"name", "data", "encoder", "version": 1}}``
and whose metadata is ``{"scrapbook": {"name", "data": true, "display": false}}``, then, when
asked (``display=``), the value's display with ``{"scrapbook": {"name", "data": false,
"display": true}}``. Encoders as scrapbook picks them: ``text`` for a string, ``json`` for a
list, dict, number or bool, ``display`` for an IPython display object. Any other value or
encoder (a DataFrame: ``pandas``) needs the real scrapbook, which this says.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

__all__ = ["glue"]

#: The version of the scrap payload (scrapbook 0.5's latest).
SCRAP_VERSION = 1

_ADVICE = (
    "this environment has notebook-executor's stand-in for scrapbook, which glues JSON "
    "values (lists, dicts, numbers, bools), text and displays; for others, declare "
    '"scrapbook" and "six" in the notebook\'s dependencies (with "pandas" and "pyarrow" '
    "for DataFrames)"
)


def glue(name: str, data: Any, encoder: str | None = None, display: Any = None) -> None:
    """Record ``data`` under ``name`` in this cell's outputs, as ``scrapbook.glue`` does.

    Raises
    ------
    NotImplementedError
        No encoder here takes ``data``, or ``encoder`` is not ``json``, ``text`` or
        ``display``.
    ValueError
        ``name`` is not a string, or the value is not JSON (``None``, or one holding an
        object JSON cannot write).
    """
    import IPython.display
    from IPython import get_ipython
    from IPython.core import formatters

    show: Any = IPython.display.display  # (IPython's functions are not annotated)

    if getattr(get_ipython(), "kernel", None) is None:
        warnings.warn("No kernel detected for 'glue'.", stacklevel=2)
    if not isinstance(name, str):
        raise ValueError(f"a scrap's name must be a string, got {type(name).__name__}")
    if not encoder:
        encoder = _encoder_of(data, display is not None)
    if display is None:
        display = encoder == "display"
    if encoder != "display":
        payload = {
            "name": name,
            "data": _encoded(name, data, encoder),
            "encoder": encoder,
            "version": SCRAP_VERSION,
        }
        show(
            {f"application/scrapbook.scrap.{encoder}+json": payload},
            metadata={"scrapbook": {"name": name, "data": True, "display": False}},
            raw=True,
        )
    if display:
        options: dict[str, Any] = {}
        if isinstance(display, (list, tuple)):
            options = {"include": display}
        elif isinstance(display, dict):
            options = display
        formatted: Any = formatters.format_display_data
        bundle, metadata = formatted(data, **options)
        metadata["scrapbook"] = {"name": name, "data": False, "display": True}
        show(bundle, metadata=metadata, raw=True)


def _encoder_of(data: Any, displayed: bool) -> str:
    """The encoder scrapbook would pick for ``data``."""
    if isinstance(data, str):
        return "text"
    if isinstance(data, (list, dict, int, float, bool)):
        return "json"
    from IPython.display import DisplayObject

    if isinstance(data, DisplayObject) or displayed:
        return "display"
    raise NotImplementedError(f"a {type(data).__name__} value cannot be glued: {_ADVICE}")


def _encoded(name: str, data: Any, encoder: str) -> Any:
    """``data`` as the payload holds it, checked to be JSON."""
    if encoder == "json":
        if isinstance(data, str):
            data = json.loads(data)
    elif encoder == "text":
        data = data if isinstance(data, str) else str(data)
    else:
        raise NotImplementedError(f"scrap {name!r}: no {encoder!r} encoder: {_ADVICE}")
    if data is None:
        raise ValueError(f"scrap {name!r}: None cannot be glued (a scrap holds a value)")
    try:
        json.dumps(data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"scrap {name!r} is not JSON ({exc}): {_ADVICE}") from None
    return data


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"scrapbook.{name} is not available: {_ADVICE}")
