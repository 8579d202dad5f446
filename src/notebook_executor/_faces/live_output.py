"""Cell outputs as text, for showing them live while a run goes on (``--log-output``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._run.results import strip_ansi

__all__ = ["output_text"]


def output_text(output: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(stream, text)`` for an output: ``stream`` is ``"stdout"`` or ``"stderr"``.

    Streams keep their channel; a result or display shows its ``text/plain``; an error its
    traceback, free of ANSI codes. Outputs with no text (an image alone) give None.
    """
    kind = output.get("output_type")
    if kind == "stream":
        name = "stderr" if output.get("name") == "stderr" else "stdout"
        return name, _joined(output.get("text", ""))
    if kind in ("execute_result", "display_data"):
        text = output.get("data", {}).get("text/plain")
        return None if text is None else ("stdout", _joined(text) + "\n")
    if kind == "error":
        lines = [strip_ansi(str(line)) for line in output.get("traceback", [])]
        return "stderr", "\n".join(lines) + "\n"
    return None


def _joined(text: Any) -> str:
    return "".join(text) if isinstance(text, list) else str(text)
