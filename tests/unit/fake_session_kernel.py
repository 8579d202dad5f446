"""A fake session kernel for the unit tier: cells run in-process, checkpoints are copies.

A test double for :class:`notebook_executor._session.kernel.SessionKernel`, built on the fake
engine's cell runner (:mod:`fake_engine`): cells are ``exec``-ed in one namespace; a checkpoint
is a deep copy of that namespace. ``unsupported`` makes every checkpoint refused with that
reason; ``keep`` evicts the oldest checkpoints beyond that many (as the memory limit does);
``broken_restores`` makes restores fail. Every call is counted in :attr:`calls`.
"""

from __future__ import annotations

import copy
from typing import Any

from notebook_executor._kernels.cells import CellEnd
from notebook_executor._kernels.live import CheckpointError
from unit.fake_engine import _builtins_with, _captured, _Glue, _os_view, _run_cell


class FakeSessionKernel:
    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        unsupported: str | None = None,
        keep: int | None = None,
        broken_restores: bool = False,
    ) -> None:
        self.env = env or {}
        self.unsupported = unsupported
        self.keep = keep
        self.broken_restores = broken_restores
        self.namespace: dict[str, Any] | None = None
        self.saved: dict[int, dict[str, Any]] = {}
        self.dropped: dict[int, str] = {}
        self.calls: list[tuple[str, Any]] = []
        self.count = 0
        self.running = False
        self.shut = False

    def _fresh(self) -> dict[str, Any]:
        return {
            "__name__": "__main__",
            "__builtins__": _builtins_with(_Glue().module(), _os_view(self.env)),
        }

    def start(self) -> None:
        self.calls.append(("start", None))
        self.saved.clear()
        self.namespace = self._fresh()
        self.running = True

    def execute(self, nb: Any, index: int, timeout: float | None) -> CellEnd:
        self.calls.append(("execute", index))
        if not self.running or self.namespace is None:
            return CellEnd("dead")
        cell = nb.cells[index]
        self.count += 1
        cell.execution_count = self.count
        cell.outputs = []
        with _captured():
            failure = _run_cell(cell, index, self.namespace)
        if failure is None:
            return CellEnd("ok", idle=True)
        if failure.kind == "timeout":
            return CellEnd("timeout")
        if failure.kind == "kernel_died":
            self.running = False
            return CellEnd("dead")
        return CellEnd("error", idle=True)

    def checkpoint_unsupported(self) -> str | None:
        return self.unsupported

    def checkpoint(self, key: int) -> None:
        self.calls.append(("checkpoint", key))
        if self.unsupported is not None:
            raise CheckpointError(self.unsupported)
        assert self.namespace is not None
        self.saved.pop(key, None)
        self.saved[key] = _copy(self.namespace)
        while self.keep is not None and len(self.saved) > self.keep:
            oldest = next(iter(self.saved))
            del self.saved[oldest]
            self.dropped[oldest] = "evicted to stay within checkpoint_memory"

    def restore(self, key: int) -> None:
        self.calls.append(("restore", key))
        if self.broken_restores:
            raise CheckpointError("the new kernel did not start")
        if key not in self.saved:
            raise CheckpointError(f"no checkpoint {key}")
        self.namespace = _copy(self.saved[key])
        self.running = True

    def checkpoints(self) -> list[int]:
        return list(self.saved)

    def lost(self) -> dict[int, str]:
        return dict(self.dropped)

    def language_info(self) -> dict[str, Any]:
        return {"name": "python"}

    def save_widgets(self, nb: Any) -> None:
        pass

    def stop(self) -> None:
        self.calls.append(("stop", None))
        self.running = False

    def shutdown(self) -> None:
        self.calls.append(("shutdown", None))
        self.running = False
        self.saved.clear()
        self.shut = True


def _copy(namespace: dict[str, Any]) -> dict[str, Any]:
    copied = {}
    for name, value in namespace.items():
        try:
            copied[name] = copy.deepcopy(value)
        except Exception:
            copied[name] = value
    return copied
