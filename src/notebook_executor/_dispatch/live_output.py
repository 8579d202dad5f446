"""Cell outputs written to stderr as they arrive (``log_output``, papermill's), secrets masked."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any

from .._records.redaction import Redactor, for_terminal
from .._records.text import strip_ansi

__all__ = ["OutputPrinter", "output_printer", "output_text"]


def output_text(output: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(stream, text)`` for a cell output: ``stream`` is ``"stdout"`` or ``"stderr"``.

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


class OutputPrinter:
    """An ``on_output`` callback writing each cell output to stderr, secrets masked.

    What it writes is one text (stdout and stderr, results, tracebacks, cell after cell), and
    secrets are masked in that text: a secret written in pieces, each sent alone
    (``write(s[:4]); flush(); write(s[4:])``), half to each stream or half in each of two
    cells, is masked whole. So the shortest tail that could begin a secret (or an escape
    sequence) waits for what follows; it is written, masked, at the end of the run
    (:meth:`flush`). With secrets, what is written moves no cursor back (backspaces, carriage
    returns, cursor moves: :func:`~notebook_executor._records.redaction.for_terminal`): a
    terminal cannot write a secret's pieces over one another; a progress bar then shows each
    frame on its own line.
    """

    def __init__(self, secrets: Mapping[str, str]) -> None:
        self._redactor = Redactor(secrets)
        #: The raw text not shown yet.
        self._waiting = ""
        self._lock = threading.Lock()

    def __call__(self, index: int, output: Mapping[str, Any]) -> None:
        shown = output_text(output)
        if shown is None:
            return
        with self._lock:
            ready, self._waiting = self._redactor.release(self._waiting + shown[1])
            self._write(self._shown(ready))

    def flush(self) -> None:
        """Write what waits (the run ended)."""
        with self._lock:
            waiting, self._waiting = self._waiting, ""
            self._write(self._shown(self._redactor.text(waiting)))

    def _shown(self, text: str) -> str:
        return for_terminal(text) if self._redactor else text

    @staticmethod
    def _write(text: str) -> None:
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()


def output_printer(secrets: Mapping[str, str]) -> OutputPrinter:
    """An ``on_output`` callback writing each cell output to stderr, secrets masked
    (:class:`OutputPrinter`); call its ``flush`` when the run ends."""
    return OutputPrinter(secrets)


def _joined(text: Any) -> str:
    return "".join(text) if isinstance(text, list) else str(text)
