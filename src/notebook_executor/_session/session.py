"""A session: one live kernel an agent steps through, with the state restored after an edit.

Every step reads the source as it is then (the executor's own planning: the same checks and
the same injected parameters as ``execute``), runs cells on the session's kernel, and brings the
run record up to date. After each cell that completes, the kernel's state is saved as a
checkpoint (when the kernel can take one); :meth:`Session.rerun_from` restores the nearest
checkpoint still valid for the cells as they are now and replays only the cells after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from .._errors import (
    ExecutorClosedError,
    InvalidArgumentError,
    KernelStartError,
    NotebookExecutorError,
)
from .._notebook import new_code_cell, new_notebook
from .._records.redaction import Redactor
from .._run.cell_loop import CellRan, Limits, open_kernel, run_cells
from .._run.runner import cell_teller
from .._sources.bounded import MAX_CODE_CHARS, unencodable
from .._types import CellText, EvaluationResult, StepResult
from ..engine import (
    CellFailure,
    CheckpointError,
    EngineKernel,
    EngineOutcome,
    RunCancelled,
    SupportsCheckpoints,
)
from .costs import Costs, estimate
from .ledger import FRESH, Ran
from .record import SessionRecord
from .steps import Step, cell_sources, code_cells, evaluation_error
from .texts import STEP_CHARS, outputs_text

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from .._run.plan import Plan
    from ..engine import Engine

__all__ = ["Session"]

logger = logging.getLogger(__name__)

#: Why no checkpoint is taken on an engine whose kernels keep none.
NO_CHECKPOINTS = "the engine's kernels keep no checkpoints"


class Session:
    """A live kernel stepped through a notebook; made by
    :meth:`NotebookExecutor.open_session <notebook_executor.NotebookExecutor.open_session>`.

    A context manager: leaving it closes the session. ``id`` names the session, ``run_id`` its
    run record. Methods are safe to call from several threads (one step at a time).
    """

    def __init__(
        self,
        plan: Plan,
        replan: Callable[[], Plan],
        engine: Engine,
        *,
        checkpoint_memory: int | None = None,
        runs_dir: Path,
        on_record: Callable[[str, Mapping[str, Any]], None],
        idle_timeout: float | None = None,
        on_close: Callable[[Session], None] | None = None,
    ) -> None:
        from .ledger import Ledger

        self.id = uuid.uuid4().hex[:16]
        self._replan = replan
        self._engine = engine
        self._memory = checkpoint_memory
        self._kernel: EngineKernel | None = None
        self._ended_kernel: EngineKernel | None = None
        self._ledger = Ledger()
        self._plan = plan
        self._secrets = plan.secrets
        self._redactor = Redactor(plan.secrets)
        self._timeout = plan.job.timeout
        self._cell_timeout = plan.job.cell_timeout
        self._idle_timeout = idle_timeout
        self._on_close = on_close
        self._lock = threading.RLock()
        self._ended = threading.Event()
        self._closed = False
        self._broken = False
        self._timer: threading.Timer | None = None
        self._step_cancel = _StepCancel()
        self._costs = Costs()
        self._seen = cell_sources(plan)
        self._record = SessionRecord(self.id, plan, runs_dir, on_record)
        self.run_id = self._record.run_id
        self._record.save_widgets = self._save_widgets
        try:
            self._fresh_kernel()
            self._record.write(plan)
        except BaseException as exc:
            cells = code_cells(plan)
            self._record.never_started(plan.nb, cells[0].index if cells else None, exc)
            self._end_kernel()
            self._record.write(self._replan_quietly())
            raise
        self._touch()

    # -- the public steps ------------------------------------------------------------------

    @property
    def checkpoints(self) -> list[int]:
        """Source indices of the cells whose state can be restored at once (a checkpoint
        valid for the cells as they were last read)."""
        with self._lock:
            if self._closed:
                return []
            held = set(self._held())
            current = {cell.index: cell for cell in code_cells(self._plan)}
            found = []
            for key, cells in self._ledger.saved.items():
                if key == FRESH or key not in held:
                    continue
                if all(current.get(cell.index) == cell for cell in cells):
                    found.append(self._shown(key))
            return sorted(set(found))

    def run(self, until: int | None = None, *, cancel: threading.Event | None = None) -> StepResult:
        """Run the code cells after the last one run, up to source index ``until``
        (inclusive; all by default), reading the source file as it is now.

        A failing cell ends the step (``status`` ``"error"``, ``failed_cell``); the session
        stays usable. After a timeout or a dead kernel, the state is first rebuilt. Ctrl-C
        stops the kernel (the cell does not run on), logs the step, and is raised again; the
        next step rebuilds the state, and the cancelled cell no longer sets the session's status.
        Setting ``cancel`` (from any thread) does what Ctrl-C does, as ``execute``'s.
        """
        with _StepContext(self, cancel) as (plan, step):
            with self._cancellable(plan, step, "run", until=until):
                end = self._last(plan, until)
                start = self._ledger.next_index()
                rebuilt = True
                if self._broken:
                    wanted = [cell for cell in code_cells(plan) if cell.index < start]
                    rebuilt = self._restore(plan, wanted, step)
                    # The cells run on are new work, checkpointed as in any run step.
                    self._costs.budget = None
                if rebuilt:
                    cells = [cell for cell in code_cells(plan) if start <= cell.index <= end]
                    self._execute(plan, cells, step)
            return self._finish(plan, step, "run", until=until)

    def rerun_from(
        self, index: int, until: int | None = None, *, cancel: threading.Event | None = None
    ) -> StepResult:
        """Restore the state that existed right after the last code cell before source index
        ``index`` ran, then run from ``index`` up to ``until`` (inclusive; all by default).

        When an earlier cell's source changed since it ran, the restore goes back before that
        cell and runs it again (``cells_run`` shows it). ``restored`` says how the state was
        rebuilt: ``"checkpoint"`` (a checkpoint, then only the cells after it), ``"replay"``
        (a fresh kernel ran the cells again; ``restore_reason`` says why). With ``until``
        before ``index``, the state is restored and nothing more runs. ``cancel``: as in
        :meth:`run`.
        """
        with _StepContext(self, cancel) as (plan, step):
            with self._cancellable(plan, step, "rerun_from", index=index, until=until):
                target = self._job_index(plan, index, "index")
                end = self._last(plan, until)
                wanted = [cell for cell in code_cells(plan) if cell.index < target]
                if self._restore(plan, wanted, step):
                    cells = [cell for cell in code_cells(plan) if target <= cell.index <= end]
                    self._execute(plan, cells, step)
            return self._finish(plan, step, "rerun_from", index=index, until=until)

    @contextlib.contextmanager
    def _cancellable(self, plan: Plan, step: Step, call: str, **arguments: Any) -> Iterator[None]:
        """Ctrl-C during a step: the step is logged, with the cell that was running (the loop
        stopped the kernel) or the one it cut off (:meth:`_execute`), and the interrupt raised
        again; the next step rebuilds the state.

        Any ``KeyboardInterrupt``, not only the cell loop's :class:`RunCancelled`: one may
        land outside every cell (a checkpoint waited for, the catalog told of a cell, a
        restore; through the run server, a client gone is such a Ctrl-C), the cells run so
        far already in the record, which must then say which step ran them."""
        try:
            yield
        except KeyboardInterrupt:
            self._broken = True
            self._finish(plan, step, call, cancelled=True, **arguments)
            raise

    def evaluate(self, code: str) -> EvaluationResult:
        """Run ``code`` in the current state, outside the notebook; returns ``{"status",
        "output", "error"}`` (``output`` bounded ANSI-free text, ``error`` null or ``{"ename",
        "evalue", "traceback"}``). What it defines stays in the state, as in Jupyter; the
        output is not kept whole anywhere (the log keeps its start). Code longer than
        :data:`~notebook_executor._sources.bounded.MAX_CODE_CHARS` characters is refused
        (:class:`InvalidArgumentError`) before anything runs."""
        if not isinstance(code, str):
            raise InvalidArgumentError(
                f"code must be a string, got {type(code).__name__}", argument="code"
            )
        if len(code) > MAX_CODE_CHARS:
            raise InvalidArgumentError(
                f"code is over {MAX_CODE_CHARS:,} characters ({len(code):,})", argument="code"
            )
        problem = unencodable(code)
        if problem:  # a kernel is sent UTF-8 text
            raise InvalidArgumentError(f"code is not valid text: {problem}", argument="code")
        with self._lock:
            self._check_open()
            self._cancel_timer()
            try:
                nb = new_notebook(cells=[new_code_cell(code)])
                # The files it reads and writes go to the record's, as a step's do.
                outcome = EngineOutcome(files=self._record.files)
                try:
                    if self._broken:
                        # The replayed cells are logged (the restore's entry), and so is
                        # this evaluation should a Ctrl-C cut the replay short.
                        wanted = [c for c in self._ledger.history if c.completed]
                        self._restore(self._plan, wanted, Step())
                    self._ledger.evaluated = True
                    run_cells(
                        self._live(),
                        self._plan.job,
                        nb,
                        [0],
                        Limits(self._cell_timeout, None, time.monotonic(), "evaluation"),
                        outcome,
                    )
                except KeyboardInterrupt:  # in the code, or outside it (see _cancellable)
                    self._broken = True
                    self._record.add("evaluate", code=code, status="cancelled", output="")
                    self._record.write(self._replan_quietly())
                    raise
                if outcome.failure is not None and outcome.failure.kind != "cell_error":
                    self._broken = True
                outputs = nb.cells[0].get("outputs", [])
                text = outputs_text(outputs, self._redactor, run_id=self.run_id, cell=None)
                error = evaluation_error(outcome.failure, self._redactor)
                answer: EvaluationResult = {
                    "status": "success" if error is None else "error",
                    "output": text,
                    "error": error,
                }
                self._record.add("evaluate", code=code, status=answer["status"], output=text)
                self._record.write(self._replan_quietly())
                return answer
            finally:
                self._touch()

    def close(self) -> None:
        """End the kernel and every checkpoint, and finish the run record. Safe to call
        more than once."""
        self._close("closed")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Session {self.id} run {self.run_id} ({state})>"

    @property
    def closed(self) -> bool:
        """Whether the session is closed (by :meth:`close`, its executor, or idleness): its
        kernel ended and its record written for the last time."""
        return self._ended.is_set()

    # -- steps -----------------------------------------------------------------------------

    def _read(self) -> Plan:
        """The source as it is now, planned as ``execute`` plans it; edits are logged."""
        plan = self._replan()
        seen = cell_sources(plan)
        for index in sorted(set(seen) | set(self._seen)):
            before, after = self._seen.get(index), seen.get(index)
            if before != after:
                self._record.add("edit", index=index, before=before, after=after)
        self._seen = seen
        self._plan = plan
        return plan

    def _replan_quietly(self) -> Plan:
        try:
            return self._read()
        except NotebookExecutorError:
            # The file became unreadable: the record keeps the notebook as last read.
            return self._replan_last()

    def _replan_last(self) -> Plan:
        import copy
        import dataclasses

        return dataclasses.replace(self._plan, nb=copy.deepcopy(self._plan.nb))

    def _restore(self, plan: Plan, wanted: list[Ran], step: Step) -> bool:
        """Bring the kernel to the state after ``wanted``; False when a replayed cell failed.

        The quickest way by what this session measured (each cell's last time, what a restore
        and a fresh kernel took): the cells missing run on when the state is the start of the
        one wanted; else the nearest valid checkpoint and the cells after it, unless a fresh
        kernel running them all is quicker. The step may then spend on checkpoints only what
        it saved on a fresh run (its costs' ``budget``).
        """
        ledger, costs = self._ledger, self._costs
        fresh = costs.start + costs.of(wanted)
        if not self._broken and ledger.history == wanted and not ledger.evaluated:
            costs.budget = fresh
            return True
        ledger.forget(set(self._held()), self._lost())
        unsupported = self._unsupported()
        restore = ledger.plan(wanted, self._held(), unsupported, self._shown)
        began = time.monotonic()
        carried = self._carry_on(wanted)
        if carried is not None and costs.of(carried) <= min(
            fresh, costs.restore + costs.of(restore.replay)
        ):
            # The state is the start of the one wanted, and nothing else ran into it: the
            # cells missing run on, no restore is quicker than that.
            costs.budget = fresh - costs.of(carried)
            return self._execute(plan, carried, step, replaying=True)
        replay = list(restore.replay)
        reason = restore.reason
        how: Literal["checkpoint", "replay"] = "checkpoint"
        restored = False
        if restore.key is not None and restore.key != FRESH:
            by_checkpoint = costs.restore + costs.of(restore.replay)
            # A fresh kernel also takes the checkpoint of itself, and leaves none of the
            # later ones: it must be quicker by that much.
            if fresh + costs.checkpoint < by_checkpoint:
                # A fresh kernel running every cell is quicker than this restore.
                reason = (
                    f"a fresh kernel running the cells again is quicker (about {fresh:.2f} s) "
                    f"than restoring the checkpoint after cell {self._shown(restore.key)} "
                    f"(about {by_checkpoint:.2f} s)"
                )
                restore = dataclasses.replace(restore, key=None)
        if restore.key is not None:
            try:
                clock = time.monotonic()
                self._checkpointing().restore(restore.key)
                costs.restore = estimate(costs.restore, time.monotonic() - clock)
                ledger.rebuilt(restore.key)
                costs.unsaved = 0.0
                restored = True
            except CheckpointError as exc:
                reason = f"the checkpoint could not be restored: {exc}"
                replay = list(wanted)
        if not restored:
            self._fresh_kernel()
            replay = list(wanted)
        if not restored or (restore.key == FRESH and replay):
            # A fresh kernel (made anew, or from the checkpoint of one) runs every cell again.
            how = "replay"
        self._broken = False
        failure = self._record.failure
        if failure is not None and failure.kind == "cancelled":
            # The cell cut short is no part of the state any more: the session is what its
            # steps make of it from here (the log keeps the cancelled step).
            self._record.failure = None
        step.restored, step.reason = how, reason
        self._record.add(
            "restore",
            how=how,
            why=reason,
            after=None
            if restore.key in (None, FRESH) or not restored
            else self._shown(restore.key),
            replay=[self._shown(cell.index) for cell in replay if not self._injected(cell)],
        )
        # What this step may spend on checkpoints: what it saved on a fresh run so far.
        costs.budget = fresh - (time.monotonic() - began) - costs.of(replay)
        return self._execute(plan, replay, step, replaying=True)

    def _carry_on(self, wanted: list[Ran]) -> list[Ran] | None:
        """The cells of ``wanted`` still to run when the current state is exactly its start
        (nothing failed, nothing evaluated, the kernel alive), else None."""
        ledger = self._ledger
        history = ledger.history
        if self._broken or not ledger.may_checkpoint() or len(history) > len(wanted):
            return None
        if list(wanted[: len(history)]) != history:
            return None
        return list(wanted[len(history) :])

    def _fresh_kernel(self) -> None:
        """A fresh kernel from the engine (the current one ended, its checkpoints with it);
        raises :class:`~notebook_executor.KernelStartError` when it does not start."""
        clock = time.monotonic()
        self._end_kernel()
        job = dataclasses.replace(
            self._plan.job,
            checkpoints=True,
            checkpoint_memory=self._memory,
            cancel=self._step_cancel,
        )
        try:
            self._kernel = open_kernel(self._engine, job)
            self._ended_kernel = None
        except NotebookExecutorError:
            raise
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            if not message.startswith("the kernel did not start"):
                message = f"the kernel did not start: {message}"
            raise KernelStartError(message) from None
        language_info = self._kernel.info.get("language_info")
        if isinstance(language_info, Mapping):
            self._record.language_info = dict(language_info)
        self._costs.start = estimate(self._costs.start, time.monotonic() - clock)
        self._ledger.reset()
        self._costs.unsaved = 0.0
        self._save(FRESH, always=True)

    def _live(self) -> EngineKernel:
        """The kernel now (a step runs only once the state was rebuilt: there is one)."""
        if self._kernel is None:
            self._fresh_kernel()
        assert self._kernel is not None
        return self._kernel

    def _end_kernel(self) -> None:
        kernel, self._kernel = self._kernel, None
        if kernel is not None:
            # Its widgets' state is the record's until a new kernel has its own.
            self._ended_kernel = kernel
            kernel.close(clean=False)

    def _checkpointing(self) -> SupportsCheckpoints:
        kernel = self._kernel
        if not isinstance(kernel, SupportsCheckpoints):
            raise CheckpointError(NO_CHECKPOINTS)
        return kernel

    def _held(self) -> list[int]:
        kernel = self._kernel
        return kernel.checkpoints() if isinstance(kernel, SupportsCheckpoints) else []

    def _lost(self) -> dict[int, str]:
        kernel = self._kernel
        return kernel.lost() if isinstance(kernel, SupportsCheckpoints) else {}

    def _unsupported(self) -> str | None:
        kernel = self._kernel
        if not isinstance(kernel, SupportsCheckpoints):
            return NO_CHECKPOINTS
        return kernel.checkpoint_unsupported()

    def _save_widgets(self, nb: NotebookNode) -> None:
        kernel = self._kernel or self._ended_kernel
        if kernel is not None:
            kernel.save_widgets(nb)

    def _save(self, key: int, *, always: bool = False) -> None:
        """Checkpoint the current state as ``key`` when it is exactly its cells' state and
        worth it (:meth:`.costs.Costs.checkpoint_worth_it`; ``always`` for the fresh kernel)."""
        if not self._ledger.may_checkpoint():
            return
        if not always and not self._costs.checkpoint_worth_it():
            self._ledger.quick.add(key)
            return
        began = time.monotonic()
        try:
            self._checkpointing().checkpoint(key)
        except CheckpointError as exc:
            self._ledger.refused[key] = str(exc)
            return
        self._costs.checkpointed(time.monotonic() - began)
        self._ledger.saved_as(key)
        self._ledger.forget(set(self._held()), self._lost())

    def _execute(
        self, plan: Plan, cells: list[Ran], step: Step, *, replaying: bool = False
    ) -> bool:
        """Run ``cells`` in order, through the cell loop of runs; False when one failed (the
        step ends there).

        A cell ending with ``sys.exit(0)`` ends the step there, successfully, as it ends a
        run (docs/how-to/papermill.md), unless it is replayed to rebuild a state (it ran on before).
        Ctrl-C raises :class:`~notebook_executor.engine.RunCancelled`, the cell that was
        running logged as not completed.
        """
        sources = {ran.index: ran for ran in cells}
        # The files the cells read and write add up in the record's (note_files, in the loop).
        outcome = EngineOutcome(files=self._record.files)
        told: set[int] = set()

        def after_cell(ran: CellRan) -> None:
            index = ran.index
            told.add(index)
            cell = plan.nb.cells[index]
            completed = ran.failure is None
            self._ledger.ran(Ran(index, sources[index].source, completed))
            self._costs.cells[index] = ran.seconds
            self._record.cell_ran(
                index,
                cell,
                completed=completed,
                seconds=ran.seconds,
                started=ran.started,
                exited=ran.exited,
            )
            if not self._injected(sources[index]):
                step.cells_run.append(index)
            if ran.failure is not None:
                step.failure = self._record.failure = ran.failure
                if ran.failure.kind != "cell_error":
                    # The loop stopped the kernel: the state is gone (checkpoints stay).
                    self._broken = True
                return
            if self._record.failure is not None and self._record.failure.index == index:
                self._record.failure = None
            self._costs.unsaved += ran.seconds
            self._save(index)

        if not cells:
            return True
        record = self._record
        teller = cell_teller(plan, record.run_id, record.on_record)  # ``runs``, a job's status
        try:
            with plan.job.hooks.observing(on_cell_executed=after_cell, on_cell_start=teller):
                run_cells(
                    self._live(),
                    plan.job,
                    plan.nb,
                    [ran.index for ran in cells],
                    Limits(self._cell_timeout, self._timeout, time.monotonic(), "step"),
                    outcome,
                    stop_at_exit=not replaying,
                )
        except KeyboardInterrupt as interrupt:
            self._broken = True
            left = [ran.index for ran in cells if ran.index not in told]
            if left and not (step.failure is not None and step.failure.index in told):
                # Not in a cell (the loop then stopped it and told after_cell): outside every
                # cell (a checkpoint, an observer, the kernel's start). The cells told of
                # completed; the next one never started: the step failed there, as a run's
                # first unfinished cell does, and the record claims no success it never
                # reached.
                stop = interrupt if isinstance(interrupt, RunCancelled) else RunCancelled()
                step.failure = CellFailure(left[0], stop.kind, stop.ename, stop.message, [])
                record.cut_off(left[0], plan.nb.cells[left[0]], step.failure)
            raise
        finally:
            record.on_record("at_cell", {"run_id": record.run_id, "cell": None})
        return outcome.failure is None

    def _finish(
        self, plan: Plan, step: Step, call: str, *, cancelled: bool = False, **arguments: Any
    ) -> StepResult:
        """Log the step and bring the record up to date; ``cancelled``: a Ctrl-C ended it
        (outside a cell, it failed no cell)."""
        stale = sorted(self._shown(i) for i in self._ledger.stale(code_cells(plan)))
        if step.failure is not None:
            status = "cancelled" if step.failure.kind == "cancelled" else "error"
        else:
            status = "cancelled" if cancelled else "success"
        self._record.add(
            "step",
            call=call,
            **arguments,
            cells_run=[self._shown(i) for i in step.cells_run],
            status=status,
            failed_cell=None if step.failure is None else self._shown(step.failure.index),
            restored=step.restored,
            restore_reason=step.reason,
        )
        result = self._record.write(plan)
        outputs = self._outputs(step.cells_run)
        answer = {
            **result,
            "session_id": self.id,
            "cells_run": [self._shown(i) for i in step.cells_run],
            "outputs": outputs,
            "stale_cells": stale,
            "restored": step.restored,
            "restore_reason": step.reason,
        }
        return cast(StepResult, answer)

    def _outputs(self, cells: list[int]) -> list[CellText]:
        shown: list[CellText] = []
        left = STEP_CHARS
        for index in cells:
            cell = self._record.cells.get(index)
            if cell is None:
                continue
            source_index = self._shown(index)
            text = outputs_text(
                cell.get("outputs", []),
                self._redactor,
                run_id=self.run_id,
                cell=source_index,
                limit=max(0, min(left, 4_000)),
            )
            left -= len(text)
            shown.append({"index": source_index, "text": text})
        return shown

    # -- indices ---------------------------------------------------------------------------

    def _shown(self, job_index: int) -> int:
        return self._plan.cell_map.to_source(job_index)

    def _injected(self, cell: Ran) -> bool:
        return self._plan.cell_map.is_injected(cell.index)

    def _job_index(self, plan: Plan, index: object, name: str) -> int:
        total = len(plan.nb.cells) - (plan.cell_map.injected_at is not None)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < total:
            raise InvalidArgumentError(
                f"{name} must be a cell index from 0 to {total - 1}, got {index!r}", argument=name
            )
        injected = plan.cell_map.injected_at
        return index if injected is None or index < injected else index + 1

    def _last(self, plan: Plan, until: int | None) -> int:
        if until is None:
            return len(plan.nb.cells) - 1
        end = self._job_index(plan, until, "until")
        # The injected values belong to the parameters cell they follow.
        return end + 1 if plan.cell_map.injected_at == end + 1 else end

    # -- lifetime --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ExecutorClosedError(f"session {self.id} is closed")

    def _touch(self) -> None:
        """Restart the idle clock."""
        self._cancel_timer()
        if self._idle_timeout is None or self._closed:
            return
        timer = threading.Timer(self._idle_timeout, self._close, args=("idle",))
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _close(self, why: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cancel_timer()
            try:
                self._end_kernel()
            finally:
                text = {
                    "closed": "closed by the caller",
                    "idle": f"idle for {self._idle_timeout:g} s" if self._idle_timeout else "idle",
                    "shutdown": "its executor was closed",
                }.get(why, why)
                self._record.add("close", why=text)
                self._record.open = False
                try:
                    self._record.write(self._replan_quietly())
                finally:
                    self._ended.set()
                    if self._on_close is not None:
                        self._on_close(self)


class _StepCancel(threading.Event):
    """The ``cancel`` of a session's kernel (its cells wait on it): set while the ``cancel``
    of the step going on (:meth:`Session.run`'s) is."""

    step: threading.Event | None = None

    def is_set(self) -> bool:
        step = self.step
        return step is not None and step.is_set()


class _StepContext:
    """One step: the lock held, the idle clock stopped, the source read (its plan's job
    cancelled by ``cancel``, which a job's also hears of its cells and outputs)."""

    def __init__(self, session: Session, cancel: threading.Event | None) -> None:
        self.session = session
        self.cancel = cancel

    def __enter__(self) -> tuple[Plan, Step]:
        session = self.session
        session._lock.acquire()
        try:
            session._check_open()
            session._cancel_timer()
            session._costs.budget = None
            plan = session._read()
            if self.cancel is not None:
                from .._dispatch.jobs import watch

                plan.job.cancel = session._step_cancel.step = self.cancel
                watch(plan, self.cancel)
            return plan, Step()
        except BaseException:
            session._touch()
            session._lock.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.session._step_cancel.step = None
        self.session._touch()
        self.session._lock.release()
