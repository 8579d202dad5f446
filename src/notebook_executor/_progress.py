"""Progress on stderr: a bar of cells for a long run, a bar of runs for a sweep, and cell
outputs as they arrive (``log_output``).

Bars are shown when asked (``progress=True``) or, by default, when stderr is a terminal; tqdm
is imported only then. They are display only: nothing here changes what a run does.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._records.redaction import Redactor
from ._records.text import strip_ansi

__all__ = [
    "BAR_DELAY",
    "OutputPrinter",
    "cell_progress",
    "output_printer",
    "output_text",
    "run_progress",
]

#: A run's bar of cells appears only once the run has lasted this long (seconds).
BAR_DELAY = 1.0

#: How often a shown bar of cells is redrawn while a cell runs (seconds).
_TICK = 1.0


def _wanted(wanted: bool | None) -> bool:
    return wanted is True or (wanted is None and sys.stderr.isatty())


def _tqdm(**options: Any) -> Any:
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]
    except ImportError:
        return None
    return tqdm(file=sys.stderr, **options)


@contextlib.contextmanager
def cell_progress(
    cells: int, label: str, wanted: bool | None
) -> Iterator[Callable[[int], None] | None]:
    """A bar of ``cells`` code cells named ``label``; yields the callback a completed cell calls.

    Yields None when no bar is shown. The bar appears after :data:`BAR_DELAY` and is redrawn
    every second, so a long cell still shows its elapsed time; it is cleared at the end.
    """
    bar = (
        _tqdm(total=cells, unit="cell", desc=label, delay=BAR_DELAY, leave=False)
        if cells > 0 and _wanted(wanted)
        else None
    )
    if bar is None:
        yield None
        return
    done = threading.Event()
    ticker = threading.Thread(
        target=_redraw, args=(bar, done), name="notebook-executor-progress", daemon=True
    )
    ticker.start()
    try:
        yield lambda _index: bar.update()
    finally:
        done.set()
        ticker.join()
        bar.close()


def _redraw(bar: Any, done: threading.Event) -> None:
    # Cells report only when they complete: without this, a bar would sit still (or not show
    # at all) for as long as one long cell runs.
    shown_from = time.monotonic() + BAR_DELAY
    while not done.wait(_TICK):
        if time.monotonic() >= shown_from:
            bar.refresh()


def run_progress(total: int, wanted: bool | None) -> Any:
    """A bar of ``total`` runs (a tqdm object), or None when not shown or fewer than two."""
    if total < 2 or not _wanted(wanted):
        return None
    return _tqdm(total=total, unit="run")


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
    (:meth:`flush`).
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
            self._write(ready)

    def flush(self) -> None:
        """Write what waits (the run ended)."""
        with self._lock:
            waiting, self._waiting = self._waiting, ""
            self._write(self._redactor.text(waiting))

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
