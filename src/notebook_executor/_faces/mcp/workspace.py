"""What every tool shares: the root, the warm executor, secret values, and how answers go out.

An answer is a small JSON document sent twice (as structured content, and as the same JSON in a
text block for clients that read only text), redacted of every secret value this server has
handed to a kernel and cut to the context budget as measured on the wire.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from ..._errors import NotebookExecutorError, ParameterError
from ..._executor import NotebookExecutor
from ..._parameters.environment import declared_env_names
from ..._records.identity import project_folder
from ..._records.results import redact
from ..._records.store import RunStore
from ..._sources.formats import load_source
from .budget import MAX_PAYLOAD_CHARS, MAX_RESPONSE_CHARS, fit, trim_traceback
from .paths import Root

__all__ = ["Workspace", "not_allowed", "tool_result"]

T = TypeVar("T")

#: What a tool result may take of the budget; the rest is for the JSON-RPC envelope.
_ROOM = MAX_RESPONSE_CHARS - 200


def not_allowed(name: str) -> str:
    """Why a kernel cannot have the server's variable ``name``, and how the operator allows it."""
    return (
        f"secret {name!r} is not allowed: kernels get only the server's variables its operator "
        f"allows; the operator starts the server with --allow-secret {name} "
        "(and the client names it in secrets)"
    )


class Workspace:
    """What the tools share: the root, the warm executor, and the secret values to redact.

    Parameters
    ----------
    root : Root
        The folder paths are confined to.
    executor : NotebookExecutor
        Lives as long as the server: after the first run, kernels are ready.
    environ : mapping
        The server's environment. Only the values of ``allowed`` are kept; the other names
        are kept (without their values) to explain a refusal.
    allowed : collection of str
        The variables the operator allows clients to name as secrets (``--allow-secret``).

    Attributes
    ----------
    checkpoint_memory : int or None
        Most bytes the checkpoints of one session may hold (``--checkpoint-memory``); None:
        the session tools' default.
    """

    checkpoint_memory: int | None = None

    def __init__(
        self,
        root: Root,
        executor: NotebookExecutor,
        environ: Mapping[str, str],
        allowed: Collection[str] = (),
    ) -> None:
        self.root = root
        self.executor = executor
        self.allowed = frozenset(allowed)
        self._allowed_values = {name: environ[name] for name in self.allowed if name in environ}
        self._withheld = frozenset(environ) - self.allowed
        self._secrets: dict[str, str] = {}
        self._lock = threading.Lock()

    def secrets(self, names: list[str] | None) -> dict[str, str]:
        """The values of the named environment variables, each allowed by the operator;
        remembered so that no later answer can show them either.

        Raises
        ------
        ToolError
            A name the operator did not allow (whether the server has it or not), or one
            allowed but not set.
        """
        found: dict[str, str] = {}
        for name in names or []:
            if name not in self.allowed:
                raise ToolError(not_allowed(name))
            value = self._allowed_values.get(name)
            if value is None:
                raise ToolError(
                    f"secret {name!r} is allowed but not set in the server's environment"
                )
            found[name] = value
        with self._lock:
            self._secrets.update(found)
        return found

    def explain_env(self, path: str | os.PathLike[str], error: ParameterError) -> ParameterError:
        """``error`` with each missing declared ``env:`` variable that the server's own
        environment has explained: the operator allows it, then a client names it in
        secrets."""
        try:
            names = declared_env_names(os.fspath(path), load_source(path).nb)
        except NotebookExecutorError:
            return error
        problems = []
        for problem in error.problems:
            name = next((n for n in names if f"environment variable {n!r}" in problem), None)
            if name is not None and name in self._withheld:
                problem = (
                    f"the notebook needs environment variable {name!r}: the server's "
                    "environment has it, but it is not allowed: kernels get only the server's "
                    "variables its operator allows (notebook-executor mcp --allow-secret "
                    f"{name}), and then the client names it in secrets; or put it in a .env "
                    "file in the notebook's folder or the root"
                )
            elif name is not None and name in self._allowed_values:
                problem = (
                    f"the notebook needs environment variable {name!r}: the operator allows "
                    "it; name it in secrets"
                )
            problems.append(problem)
        return ParameterError(error.parameter, problems, error.declared)

    async def call(self, call: Callable[[], T]) -> T:
        """``call()`` on a worker thread; the library's errors become tool errors."""
        import anyio.to_thread

        try:
            return await anyio.to_thread.run_sync(call)
        except NotebookExecutorError as exc:
            raise self.refusal(str(exc)) from None

    def refusal(self, message: str) -> ToolError:
        """A tool error whose message shows no secret value."""
        return ToolError(self.shown(message))

    def shown(self, message: str) -> str:
        """``message`` as a caller may read it: no secret value, paths under the root
        relative to it."""
        with self._lock:
            known = dict(self._secrets)
        return self.root.relative_text(str(redact(message, known)))

    def answer(
        self,
        payload: dict[str, Any],
        prefit: Callable[[dict[str, Any], int], dict[str, Any]] | None = None,
    ) -> CallToolResult:
        """``payload`` redacted and cut to the budget, as structured content and JSON text
        (``prefit``, when given, cuts it first: see :func:`tool_result`)."""
        with self._lock:
            known = dict(self._secrets)
        return tool_result(_sendable(redact(payload, known)), prefit)

    def present(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """A result dict as the caller sees it: paths relative to the root, tracebacks trimmed."""
        shown = dict(result)
        if isinstance(shown.get("notebook"), str):
            shown["notebook"] = self.notebook_name(shown["notebook"])
        if isinstance(shown.get("output_path"), str):
            shown["output_path"] = self.root.relative(shown["output_path"])
        failed = shown.get("failed_cell")
        if isinstance(failed, dict):
            shown["failed_cell"] = {
                **failed,
                "traceback": trim_traceback([str(line) for line in failed.get("traceback", [])]),
            }
        return shown

    def notebook_name(self, recorded: str) -> str:
        """A notebook as the caller names it: a record's name (relative to the project, the
        runs folder's parent: see :mod:`~..._records.identity`) or a path, made relative to
        the root when inside it."""
        path = Path(recorded)
        project = project_folder(self.executor.runs_dir)
        if not path.is_absolute() and not recorded.startswith("~") and project is not None:
            path = project / path
        if not path.is_absolute():
            return recorded
        return self.root.relative(path)

    def run_path(self, run_id: str) -> Path:
        """The executed notebook of run ``run_id``."""
        store = RunStore(self.executor.runs_dir)
        try:
            path = store.path(run_id)
        except NotebookExecutorError as exc:
            raise ToolError(str(exc)) from None
        if not path.is_file():
            raise ToolError(f"no run {run_id!r}")
        return path

    def path_or_run(self, value: str) -> tuple[str, bool]:
        """``(absolute path, False)`` if ``value`` names a file under the root, else
        ``(value, True)`` for the run id it must then be."""
        try:
            path = self.root.resolve(value)
        except NotebookExecutorError:
            path = None
        if path is not None and path.is_file():
            return str(path), False
        if path is None and ("/" in value or "\\" in value):
            raise ToolError(f"{value!r} is outside the server's root folder")
        self.run_path(value)
        return value, True


def tool_result(
    payload: dict[str, Any],
    prefit: Callable[[dict[str, Any], int], dict[str, Any]] | None = None,
) -> CallToolResult:
    """``payload`` as structured content and as JSON text, the whole result (as it goes over
    the wire) within :data:`MAX_RESPONSE_CHARS` characters.

    ``prefit(payload, limit)``, when given, cuts the payload its own way first (the digest's
    lists, its page kept whole: :func:`.budget.fit_lists`); :func:`.budget.fit` then cuts
    what still does not fit."""
    limit = MAX_PAYLOAD_CHARS
    while True:
        fitted = fit(payload if prefit is None else prefit(payload, limit), limit)
        text = json.dumps(fitted, ensure_ascii=False, separators=(",", ":"), default=str)
        result = CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=json.loads(text)
        )
        # The text copy is JSON inside JSON: its quotes and backslashes are escaped again, so
        # a long answer is measured as it will be sent.
        if 3 * len(text) < _ROOM or limit < 500:
            return result
        if len(result.model_dump_json(by_alias=True, exclude_none=True)) <= _ROOM:
            return result
        limit = limit * 3 // 4


def _sendable(value: Any) -> Any:
    """``value`` with any lone surrogate (a file name's byte that was not UTF-8) shown as a
    backslash escape: the transport writes UTF-8, and one such character would break it."""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return _escaped(value)
    return value


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, dict):
        return {_escaped(key): _escaped(item) for key, item in value.items()}
    return value
