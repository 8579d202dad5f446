"""Progress bars on stderr: a bar of cells for a long run, a bar of runs for a sweep.

Bars are shown when asked (``progress=True``) or, by default, when stderr is a terminal; tqdm
is imported only then. They are display only: nothing here changes what a run does.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..engine import CellRan

__all__ = ["BAR_DELAY", "cell_hook", "cell_progress", "run_progress"]

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


def cell_hook(
    bar: Callable[[int], None] | None,
    hook: Callable[[int, int], None] | None,
    total: int,
) -> Callable[[CellRan], None] | None:
    """An ``on_cell_executed`` observer (:class:`~notebook_executor.engine.CellHooks`) that
    counts the completed cells: it moves the progress bar and calls the caller's ``(done,
    total)``, whichever are given; None when neither is."""
    if bar is None and hook is None:
        return None
    done = 0

    def on_cell_executed(ran: CellRan) -> None:
        nonlocal done
        if ran.failure is not None:
            return
        done += 1
        if bar is not None:
            bar(ran.index)
        if hook is not None:
            hook(done, total)

    return on_cell_executed
