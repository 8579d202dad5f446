"""What a session's kernel state is made of, and which checkpoint can rebuild a wanted state.

Pure bookkeeping, no kernel: the session tells the ledger what ran and what was saved, and asks
it where a restore must start. Indices here are those of the job notebook (the source with the
injected parameters cell); the session translates them at its surface.

A checkpoint is the kernel's state after a sequence of cells, each with the source it ran; it
is valid for a wanted state only while that sequence is exactly how the wanted state begins
(the same cells, with the same sources). Checkpoint key ``-1`` is the fresh kernel, before any
cell: valid for every wanted state.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["FRESH", "Ledger", "Ran", "RestorePlan"]

#: The key of the checkpoint of the fresh kernel, before any cell ran.
FRESH = -1


@dataclass(frozen=True)
class Ran:
    """One code cell, with the source it ran (or is to run) with."""

    index: int
    source: str
    #: False for a cell that raised (or timed out): its effects on the state are partial.
    completed: bool = True


@dataclass(frozen=True)
class RestorePlan:
    """How to rebuild a wanted state: start from checkpoint ``key`` (None: a fresh kernel
    with no checkpoint at all), then run ``replay``; ``reason`` says why cells are replayed
    (None when the checkpoint is the wanted state itself)."""

    key: int | None
    replay: tuple[Ran, ...]
    reason: str | None
    #: The first cell replayed because its source changed since it ran, if one was.
    changed: int | None = None


@dataclass
class Ledger:
    """The cells run into the current kernel state, what each checkpoint holds, and the
    source each cell last ran with."""

    #: Cells run into the current state since it was last rebuilt, in order.
    history: list[Ran] = field(default_factory=list)
    #: What each checkpoint holds: its key (the last cell it follows) -> the cells run into it.
    saved: dict[int, tuple[Ran, ...]] = field(default_factory=dict)
    #: Source each cell last ran with, the latest run of a cell winning.
    latest: dict[int, str] = field(default_factory=dict)
    #: Whether code outside the notebook (an evaluation) ran into the current state.
    evaluated: bool = False
    #: Checkpoints the kernel dropped on its own (evicted, died): key -> why.
    gone: dict[int, str] = field(default_factory=dict)
    #: Checkpoints the kernel refused to take: key -> why (threads, a GPU context, ...).
    refused: dict[int, str] = field(default_factory=dict)
    #: Cells after which no checkpoint was taken: quicker to run again than to checkpoint.
    quick: set[int] = field(default_factory=set)

    def reset(self) -> None:
        """A fresh kernel replaced the old one: no checkpoint is held any more."""
        self.saved.clear()
        self.rebuilt(None)

    def rebuilt(self, key: int | None) -> None:
        """The state is now checkpoint ``key``'s (None: a fresh kernel)."""
        self.history = list(self.saved.get(key, ())) if key is not None else []
        self.evaluated = False

    def ran(self, cell: Ran) -> None:
        """``cell`` ran into the current state."""
        self.history.append(cell)
        self.latest[cell.index] = cell.source

    def may_checkpoint(self) -> bool:
        """Whether the current state is exactly its cells' (nothing failed, nothing
        evaluated): only such a state is worth saving."""
        return not self.evaluated and all(cell.completed for cell in self.history)

    def saved_as(self, key: int) -> None:
        """A checkpoint of the current state was taken as ``key`` (replacing any before)."""
        self.saved[key] = tuple(self.history)
        self.gone.pop(key, None)
        self.refused.pop(key, None)
        self.quick.discard(key)

    def forget(self, held: Collection[int], lost: Mapping[int, str]) -> None:
        """Only the checkpoints ``held`` remain; ``lost`` says why others went."""
        for key in [key for key in self.saved if key not in held]:
            del self.saved[key]
            self.gone[key] = lost.get(key, "it was dropped")

    def next_index(self) -> int:
        """The job index ``run()`` starts at: after the last completed cell, or at a cell
        that failed (it is tried again)."""
        if not self.history:
            return 0
        last = self.history[-1]
        return last.index + 1 if last.completed else last.index

    def stale(self, current: Sequence[Ran]) -> list[int]:
        """Job indices of cells whose source changed after they ran."""
        return [
            cell.index
            for cell in current
            if cell.index in self.latest and self.latest[cell.index] != cell.source
        ]

    def plan(
        self,
        wanted: Sequence[Ran],
        available: Collection[int],
        unsupported: str | None,
        shown: Callable[[int], int] = int,
    ) -> RestorePlan:
        """How to reach the state after ``wanted`` (the code cells before the target, with
        their sources now), from the checkpoints ``available`` in the kernel.

        The nearest valid checkpoint wins; the cells after it are replayed. With no usable
        checkpoint (``unsupported`` says why none can exist), a fresh kernel replays them all.
        ``shown`` turns a job index into the index a reason names (the source's).
        """
        wanted = tuple(wanted)
        best: int | None = None
        for key, held in self.saved.items():
            if key not in available or len(held) > len(wanted):
                continue
            if wanted[: len(held)] == held and (best is None or len(held) > len(self.saved[best])):
                best = key
        start = 0 if best is None else len(self.saved[best])
        replay = wanted[start:]
        changed = next(
            (
                cell.index
                for cell in replay
                if cell.index in self.latest and self.latest[cell.index] != cell.source
            ),
            None,
        )
        if not replay:
            return RestorePlan(best, (), None)
        if best is None and unsupported is not None:
            return RestorePlan(None, replay, unsupported, changed)
        reason = self._why(replay, changed, shown)
        return RestorePlan(best, replay, reason, changed)

    def _why(self, replay: Sequence[Ran], changed: int | None, shown: Callable[[int], int]) -> str:
        """Why ``replay`` must run again rather than come from a checkpoint."""
        if changed is not None:
            return f"cell {shown(changed)} changed since it ran"
        last = replay[-1].index
        if last in self.refused:
            return f"no checkpoint after cell {shown(last)}: {self.refused[last]}"
        if last in self.quick:
            return f"cells up to {shown(last)} are quicker to run again than to checkpoint"
        if last in self.gone:
            return f"the checkpoint after cell {shown(last)} is gone: {self.gone[last]}"
        never = next((cell.index for cell in replay if cell.index not in self.latest), None)
        if never is not None:
            return f"cell {shown(never)} has not run in this session"
        return f"no checkpoint holds the state after cell {shown(last)}"
