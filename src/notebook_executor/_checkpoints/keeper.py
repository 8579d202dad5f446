"""Durable checkpoints of one run: states written after cells, one read back before the first.

The cell loop calls a :class:`Keeper` (:class:`~notebook_executor.engine.StateKeeper`), and
subscribes it to the job's cell events while the cells run:

- :meth:`Keeper.cell_executed` writes the kernel's state (``_kernels/inside/state_files.py``)
  once the cells since the last checkpoint took :attr:`Policy.every_seconds` and twenty times
  what the last one cost (so that checkpoints cost at most some 5% of a run), and after the
  last cell of a run whose cells took that long. Its manifest names the cells so far by their
  sources (:func:`prefix_key`), and holds what they read.
- :meth:`Keeper.restore` (``reuse``, and ``resume``, which asks for one run's checkpoints,
  or those of the runs its state came from, before one cell) takes the checkpoint of the
  longest prefix of code cells whose sources are those of the notebook now, and that is
  still true: the same working folder, every variable kept (:func:`unusable`), the files the
  cells read and wrote unchanged, the environment variables they read the same, no magic
  whose effect a state does not hold nor shell command (``!``), no module's state changed
  (which a state, keeping modules by name, does not hold), no later cell reading IPython's
  output history. Its cells' outputs come from that run's record. Any doubt: the cells run,
  and the result says why (``outcome.state_notes``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from .._notebook import code_cell_indices, from_dict
from .._records.files import file_hash
from .._records.store import RunStore
from ..engine import StateUnusable, SupportsState
from .store import CheckpointStore, Limits

if TYPE_CHECKING:
    from .._notebook import NotebookNode
    from ..engine import CellRan, EngineKernel, EngineOutcome, RunJob

__all__ = ["MANIFEST_VERSION", "Keeper", "Policy", "prefix_key", "unusable"]

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1

#: Magics whose effect a stored state holds, or that have none on the state nor on what
#: later cells show. Not ``precision`` (the display's state, which no checkpoint holds), nor
#: ``bash``, ``sh``, ``script`` (a shell's reads and writes are not audited).
_HARMLESS_MAGICS = frozenset(
    {"time", "timeit", "matplotlib", "pip", "conda", "env", "cd", "pwd", "who", "whos", "ls"}
    | {"capture", "writefile", "html", "HTML", "markdown", "latex", "javascript"}
    | {"js", "svg", "prun", "debug"}
)
_MAGIC = re.compile(r"^\s*%{1,2}([A-Za-z_]\w*)", re.MULTILINE)
#: A shell escape (``!cmd``, ``files = !ls``): the files its command reads are not known.
_SHELL = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\s*=\s*)?!", re.MULTILINE)
#: Names of IPython's output and input history.
_HISTORY = re.compile(r"(?<![\w.])(_{1,3}|_i{1,3}|_\d+|_i\d+|Out|In|_oh|_ih)(?!\w)")


@dataclass(frozen=True)
class Policy:
    """When to write checkpoints, and which to read back.

    ``save``: write checkpoints (``checkpoints=False`` turns it off). ``reuse``: start from
    the longest matching prefix. ``run_id`` and ``before``: only the checkpoints of that run
    and of the runs its state came from (``reused_from``, in turn: a resumed run resumed
    again goes on from the state it was given), after cells before job index ``before``
    (``resume``).
    """

    save: bool = True
    reuse: bool = False
    every_seconds: float = 0.5
    cost_share: float = 0.05
    limits: Limits = field(default_factory=Limits)
    run_id: str | None = None
    before: int | None = None


def prefix_key(nb: NotebookNode, cells: list[int], position: int, kernel: str) -> str:
    """What the code cells up to ``position`` (of those that run) are: their sources, and
    whether each may raise, with the kernel; markdown and metadata are not part of it."""
    parts = [kernel]
    for index in cells[: position + 1]:
        cell = nb.cells[index]
        tags = cell.get("metadata", {}).get("tags", [])
        raises = isinstance(tags, list) and "raises-exception" in tags
        parts.append(("!" if raises else "") + str(cell.source))
    return hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogatepass")).hexdigest()


def file_digest(path: str) -> str | None:
    """As the kernel's ``state_files`` knows a file: its sha256 (:func:`~notebook_executor.
    _records.files.file_hash`, cached), or its size and time of change past 1 GiB; None
    when it is gone."""
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    if stat.st_size > 1 << 30:
        return f"size:{stat.st_size}:mtime:{stat.st_mtime_ns}"
    try:
        return file_hash(path, stat.st_size, stat.st_mtime_ns)
    except OSError:
        return None


def unusable(manifest: dict[str, Any], kernel: dict[str, Any]) -> str | None:
    """Why ``manifest``'s state might differ from what running its cells gives now in the
    kernel that ``kernel`` describes (its ``environment`` and the digests of the environment
    variables, as ``state_files`` answers); None when it cannot."""
    if manifest.get("version") != MANIFEST_VERSION:
        return "written by another version"
    if manifest.get("environment") != kernel.get("environment"):
        return "it was written with another interpreter or other packages"
    unkept = manifest.get("unkept") or {}
    if unkept:
        shown = ", ".join(f"{name} ({why})" for name, why in sorted(unkept.items())[:3])
        more = f" and {len(unkept) - 3} more" if len(unkept) > 3 else ""
        return f"it could not keep {shown}{more}"
    reads = manifest.get("reads") or {}
    if not reads.get("complete"):
        return "the files its cells opened are not all known"
    for path, (access, digest) in sorted((reads.get("files") or {}).items()):
        now = file_digest(path)
        if now != digest:
            what = "wrote" if "w" in access else "read"
            state = "is gone" if now is None else "changed"
            return f"{path}, which its cells {what}, {state}"
    env = kernel.get("env") or {}
    for name, digest in sorted((reads.get("env") or {}).items()):
        if digest == "secret" and env.get(name) == "secret":
            continue
        if env.get(name, "?") != digest:
            return f"the environment variable {name}, which its cells read, changed"
    return None


def _magic_problem(nb: NotebookNode, cells: list[int], shown: Any) -> str | None:
    for index in cells:
        source = str(nb.cells[index].source)
        for name in _MAGIC.findall(source):
            if name not in _HARMLESS_MAGICS:
                return (
                    f"cell {shown(index)} uses %{name}, whose effect a stored state does not hold"
                )
        if _SHELL.search(source):
            return f"cell {shown(index)} runs a shell command, whose reads and writes are not known"
    return None


#: Calls that change a module's state (options, warnings, logging, seeds) when made on a
#: module (``pd.set_option(...)``, ``plt.style.use(...)``).
_SETTERS = frozenset(
    {"set_option", "reset_option", "set_printoptions", "seterr", "filterwarnings", "use"}
    | {"simplefilter", "resetwarnings", "basicConfig", "setLevel", "addHandler", "disable"}
    | {"setrecursionlimit", "set_theme", "set_style", "set_context", "set_palette", "set"}
    | {"rc", "rcdefaults", "update", "manual_seed", "set_seed", "set_default_dtype"}
)
#: Module state a checkpoint holds (the environment, ``sys.path``).
_HELD = frozenset({("os", "environ"), ("sys", "path")})
_NOT_PYTHON = re.compile(r"^\s*[%!].*$", re.MULTILINE)


def _chain(node: ast.AST) -> list[str]:
    """The names of an attribute chain from its root: ``pd.options.display`` ->
    ``["pd", "options", "display"]`` (through subscripts and calls; [] without a name)."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            return [node.id, *reversed(names)]
        else:
            return []


def _of_module(chain: list[str], modules: dict[str, str]) -> bool:
    """Whether ``chain`` reaches into a module's state that a checkpoint does not hold."""
    return len(chain) > 1 and chain[0] in modules and (modules[chain[0]], chain[1]) not in _HELD


def _module_state_problem(
    nb: NotebookNode, cells: list[int], modules: dict[str, str], shown: Any
) -> str | None:
    """Why a cell in ``cells`` changed a module's state, which a checkpoint does not hold (a
    module is kept by its name: read back, it is as imported): an attribute or item of a
    module set or deleted (``helper.VALUE = 5``, ``plt.rcParams[...] = ...``), or a setter
    called on one (:data:`_SETTERS`). ``modules``: the notebook's names of modules."""
    for index in cells:
        source = _NOT_PYTHON.sub("", str(nb.cells[index].source))
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign | ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                chain = _chain(node.func)
                if _of_module(chain, modules) and chain[-1] in _SETTERS:
                    dotted = ".".join(chain)
                    return f"cell {shown(index)} calls {dotted}, which a state does not hold"
            while targets:
                target = targets.pop()
                if isinstance(target, ast.Tuple | ast.List):
                    targets.extend(target.elts)
                    continue
                if isinstance(target, ast.Starred):
                    targets.append(target.value)
                    continue
                if not isinstance(target, ast.Attribute | ast.Subscript):
                    continue
                chain = _chain(target)
                if _of_module(chain, modules):
                    dotted = ".".join(chain)
                    return f"cell {shown(index)} changes {dotted}, which a state does not hold"
    return None


def _history_reader(nb: NotebookNode, cells: list[int]) -> int | None:
    for index in cells:
        if _HISTORY.search(str(nb.cells[index].source)):
            return index
    return None


def _text(source: Any) -> str:
    """A cell's source as one text (a file's JSON may hold it as lines)."""
    return "".join(source) if isinstance(source, list) else str(source)


class Keeper:
    """The checkpoints of one run (see the module doc)."""

    def __init__(
        self,
        job: RunJob,
        runs_dir: Path,
        run_id: str,
        identity: str,
        policy: Policy,
        secret_forms: list[bytes],
        shown: Any,
    ) -> None:
        self.job = job
        self.store = CheckpointStore(runs_dir)
        self.runs_dir = runs_dir
        self.run_id = run_id
        self.identity = identity
        self.policy = policy
        self.forms = [form.hex() for form in secret_forms]
        #: Source index of a job index (the result's indices).
        self.shown = shown
        self._mark = time.monotonic()
        self._began = self._mark
        self._last_cost = 0.0
        self._saving = policy.save
        self._gave_up = False
        self._kernel: EngineKernel | None = None
        self._stateful = False
        self._nb: NotebookNode | None = None
        self._cells: list[int] = []
        self.saved: list[int] = []
        self.notes: list[str] = []

    # -- reading back ----------------------------------------------------------------------

    def restore(
        self, kernel: EngineKernel, nb: NotebookNode, cells: list[int], outcome: EngineOutcome
    ) -> list[int]:
        # The cells' time counts from here (not the kernel's start): a run of fast cells
        # writes no checkpoint at its end.
        self._mark = self._began = time.monotonic()
        self._kernel, self._nb, self._cells = kernel, nb, cells
        # Asked once: a check against the protocol costs 20 us, and cells are many.
        self._stateful = self._holds_state(kernel)
        if not self.policy.reuse or self._gave_up:
            return cells
        notes = outcome.state_notes
        if not self._stateful or not self._holds_state(kernel):
            notes.append(
                "every cell ran: this engine cannot read a stored state"
                if self.job.kernel.native
                else f"every cell ran: kernel {self.job.kernel.name!r} keeps no stored state "
                "(only the Python kernel this tool starts does)"
            )
            return cells
        kernel_name = self.job.kernel.name
        keys = [prefix_key(nb, cells, p, kernel_name) for p in range(len(cells))]
        runs = None if self.policy.run_id is None else self._lineage(self.policy.run_id)
        found = []
        for manifest in self.store.manifests(self.identity):
            position = manifest.get("position")
            if not isinstance(position, int) or not 0 <= position < len(cells):
                continue
            if manifest.get("prefix") != keys[position]:
                continue
            if runs is not None and manifest.get("run_id") not in runs:
                continue
            if self.policy.before is not None and cells[position] >= self.policy.before:
                continue
            found.append(manifest)
        found.sort(key=lambda m: (m["position"], m.get("saved", 0.0)), reverse=True)
        if not found:
            notes.append("every cell ran: no checkpoint holds the state after these cells")
            return cells
        names = sorted({n for m in found for n in ((m.get("reads") or {}).get("env") or {})})
        described = kernel.state({"op": "environment", "names": names, "forms": self.forms})
        rejected: list[str] = []
        for manifest in found:
            position = manifest["position"]
            where = f"the checkpoint after cell {self.shown(cells[position])}"
            prefix = cells[: position + 1]
            why = (
                (
                    None
                    if manifest.get("cwd") == self._cwd()
                    else f"it was written in another working folder ({manifest.get('cwd')})"
                )
                or unusable(manifest, described)
                or _magic_problem(nb, prefix, self.shown)
                or _module_state_problem(nb, prefix, manifest.get("modules") or {}, self.shown)
            )
            later = _history_reader(nb, cells[position + 1 :])
            if why is None and later is not None:
                why = f"cell {self.shown(later)} reads IPython's output history"
            record = None if why is not None else self._record_cells(manifest, nb, cells)
            if why is None and record is None:
                why = f"the record of run {manifest.get('run_id')} is gone or differs"
            if why is not None:
                rejected.append(f"{where} of run {manifest.get('run_id')} was not used: {why}")
                continue
            assert record is not None
            if position + 1 < len(cells):
                reply = kernel.state(
                    {"op": "load", "objects": str(self.store.objects), "manifest": manifest}
                )
                if reply.get("status") != "ok":
                    why = str(reply.get("evalue") or reply.get("ename") or "unknown")
                    if reply.get("touched") is False:
                        rejected.append(f"{where} was not used: {why}")
                        continue
                    self._gave_up = True
                    raise StateUnusable(f"{where} could not be read: {why}")
            for index, recorded in zip(cells[: position + 1], record, strict=False):
                cell = nb.cells[index]
                cell.outputs = from_dict(recorded.get("outputs", []))
                cell.execution_count = recorded.get("execution_count")
                execution = recorded.get("metadata", {}).get("execution")
                if isinstance(execution, dict):
                    cell.metadata["execution"] = from_dict(execution)
                outcome.completed.append(index)
                outcome.cell_seconds[index] = 0.0
            outcome.reused = list(cells[: position + 1])
            outcome.reused_from = str(manifest["run_id"])
            notes.extend(rejected[:3])
            self._mark = time.monotonic()
            return cells[position + 1 :]
        notes.append("every cell ran:")
        notes.extend(rejected[:3])
        return cells

    def _cwd(self) -> str:
        """The run's working folder (the kernel's as it starts; a state read back goes on in
        the folder it was written in)."""
        return str(Path(self.job.cwd).resolve())

    def _holds_state(self, kernel: EngineKernel | None) -> TypeGuard[SupportsState]:
        """Whether ``kernel`` answers state requests: the engine's, on the Python kernel this
        tool starts (``native``); an installed kernelspec's (another language, or another
        Python's ipykernel) would leave each request unanswered until its timeout."""
        return isinstance(kernel, SupportsState) and self.job.kernel.native

    def _lineage(self, run_id: str) -> set[str]:
        """Run ``run_id`` and the runs its state came from: the ``reused_from`` of each
        record, in turn."""
        runs: set[str] = set()
        current: Any = run_id
        while isinstance(current, str) and current not in runs and len(runs) < 64:
            runs.add(current)
            try:
                path = RunStore(self.runs_dir).path(current)
                record = json.loads(path.read_text(encoding="utf-8"))["metadata"]
                current = record["notebook_executor"].get("reused_from")
            except Exception:
                break
        return runs

    def _record_cells(
        self, manifest: dict[str, Any], nb: NotebookNode, cells: list[int]
    ) -> list[dict[str, Any]] | None:
        """The recorded code cells the checkpoint stands for, if the record still shows them
        with the same sources."""
        try:
            path = RunStore(self.runs_dir).path(str(manifest["run_id"]))
            recorded = from_dict(json.loads(path.read_text(encoding="utf-8")))
        except Exception:
            return None
        ran = code_cell_indices(recorded)
        position = int(manifest["position"])
        if len(ran) <= position:
            return None
        chosen = [recorded.cells[i] for i in ran[: position + 1]]
        for index, cell in zip(cells, chosen, strict=False):
            if _text(cell.get("source", "")) != _text(nb.cells[index].source):
                return None
        return [dict(cell) for cell in chosen]

    # -- writing ---------------------------------------------------------------------------

    def cell_executed(self, event: CellRan) -> None:
        """Write the state after a completed cell when the policy says so (see the module
        doc); an observer of the job's cells (:class:`~notebook_executor.engine.CellHooks`)."""
        kernel, nb, index = self._kernel, self._nb, event.index
        if not self._saving or event.failure is not None or event.exited or nb is None:
            return
        if not self._stateful or event.next_sent:
            # (The next cell runs already: a state now would hold part of it.)
            return
        last = bool(self._cells) and index == self._cells[-1]
        now = time.monotonic()
        since = now - self._mark
        due = self._due()
        if since < due and not (last and now - self._began >= due and since > 0):
            return
        if not self._holds_state(kernel):
            return
        try:
            self._save(kernel, nb, index)
        except Exception as exc:  # a checkpoint is never worth a run
            logger.debug("checkpoint after cell %s failed: %s", index, exc)
            self.notes.append(f"no checkpoint after cell {self.shown(index)}: {exc}")
            self._saving = False
        self._mark = time.monotonic()

    def quiet_until(self) -> float | None:
        """Until when no state is written after a cell but the last (see
        :meth:`~notebook_executor.engine.StateKeeper.quiet_until`): the cell loop sends the
        next cell ahead of a cell ending before then."""
        if not self._saving or not self._stateful or self._nb is None:
            return None
        return self._mark + self._due()

    def _due(self) -> float:
        """How long after the last state (or the start) the next is written: at least
        :attr:`Policy.every_seconds`, and twenty times what the last one cost."""
        return max(self.policy.every_seconds, self._last_cost / self.policy.cost_share)

    def _save(self, kernel: SupportsState, nb: NotebookNode, index: int) -> None:
        began = time.monotonic()
        self.store.prepare()
        reply = kernel.state(
            {
                "op": "save",
                "objects": str(self.store.objects),
                "forms": self.forms,
                "limit": self.policy.limits.per_notebook,
            }
        )
        if reply.get("status") != "ok":
            raise RuntimeError(str(reply.get("evalue") or "the kernel refused"))
        cells = code_cell_indices(nb)
        position = cells.index(index)
        manifest: dict[str, Any] = {
            key: reply[key]
            for key in ("variables", "modules", "unkept", "sizes", "process", "reads")
            if key in reply
        }
        manifest.update(
            version=MANIFEST_VERSION,
            run_id=self.run_id,
            cwd=self._cwd(),
            cell=index,
            source_cell=self.shown(index),
            position=position,
            prefix=prefix_key(nb, cells, position, self.job.kernel.name),
            kernel=self.job.kernel.name,
            environment=reply.get("environment"),
            execution_count=reply.get("execution_count"),
            saved=time.time(),
            cost=round(time.monotonic() - began, 6),
            written=reply.get("written", 0),
            rebuilt=(
                "every kept variable is read back"
                if not reply.get("unkept")
                else "not restorable: an earlier checkpoint, then the cells after it, run again"
            ),
        )
        self.store.write(self.identity, manifest)
        self._last_cost = time.monotonic() - began
        self.saved.append(index)

    def close(self) -> None:
        """After the run: keep the checkpoints within their limits."""
        if self.saved:
            try:
                self.store.collect(self.policy.limits)
            except OSError as exc:
                logger.debug("checkpoint collection failed: %s", exc)
