"""What a session measures of its kernel, to choose how to rebuild a state and when a checkpoint
is worth taking: what a checkpoint, a restore and a fresh kernel take (running estimates), each
cell's last time, the cell work since the last checkpoint, and what a step may still spend on
checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .ledger import Ran

__all__ = ["Costs", "estimate"]

#: A checkpoint is taken once the cells since the last one took this many times what a
#: checkpoint takes: at most a fifth more time per trivial cell, and a restore replays at most
#: that much work. Measured with ``benchmarks/bench_sessions.py``: a checkpoint after every
#: one of 100 trivial cells cost 70 ms each (load average 14 on 2 cores), 20 times the 5 ms
#: per cell allowed; with this ratio, 2 ms per cell.
WORTH_RATIO = 5.0

#: What a checkpoint is taken to cost before one is measured (seconds).
FIRST_CHECKPOINT_COST = 0.02

#: What a restore (a kernel forked from a checkpoint) and a fresh kernel (forked from the
#: template, or launched) are taken to cost before one is measured (seconds). Measured on the
#: corpus of ``nox -s wild`` (2 cores, load 10-13): restores took 0.13-0.21 s.
FIRST_RESTORE_COST = 0.15
FIRST_START_COST = 0.15

#: What a cell that has not run yet in this session is taken to cost (seconds).
UNKNOWN_CELL_COST = 0.01


@dataclass
class Costs:
    """What one session measured (seconds)."""

    #: What a checkpoint, a restore and a fresh kernel take (running estimates).
    checkpoint: float = field(default_factory=lambda: FIRST_CHECKPOINT_COST)
    restore: float = field(default_factory=lambda: FIRST_RESTORE_COST)
    start: float = field(default_factory=lambda: FIRST_START_COST)
    #: What each cell (job index) took the last time it ran.
    cells: dict[int, float] = field(default_factory=dict)
    #: Cell work in the state since its last checkpoint.
    unsaved: float = 0.0
    #: What the current step may still spend on checkpoints (None: no limit), so that a
    #: rerun_from stays quicker than a fresh run of the same cells.
    budget: float | None = None

    def of(self, cells: Sequence[Ran]) -> float:
        """What running ``cells`` again is expected to take (their last times)."""
        return sum(self.cells.get(cell.index, UNKNOWN_CELL_COST) for cell in cells)

    def checkpoint_worth_it(self) -> bool:
        """Whether the cells run since the last checkpoint took :data:`WORTH_RATIO` times
        what a checkpoint takes, and the step can still afford one. Quicker cells are run
        again after a restore instead: a checkpoint after every trivial cell would cost more
        than the cell."""
        if self.unsaved < WORTH_RATIO * self.checkpoint:
            return False
        return self.budget is None or self.budget >= self.checkpoint

    def checkpointed(self, took: float) -> None:
        """A checkpoint was taken in ``took`` seconds."""
        self.checkpoint = estimate(self.checkpoint, took)
        if self.budget is not None:
            self.budget -= took
        self.unsaved = 0.0


def estimate(before: float, measured: float) -> float:
    """A running estimate of a cost: one slow measure (a loaded machine) does not set it."""
    return 0.7 * before + 0.3 * measured
