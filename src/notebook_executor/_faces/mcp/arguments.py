"""Tool arguments taken strictly, and tool errors worded for the caller.

The SDK builds each tool's argument model from its signature and drops any argument the
signature does not name: ``execute(path="hello.py", name="Bob")`` would run with the defaults
while the caller believes it ran with Bob. A :class:`StrictTool` refuses such a call as a tool
error that names the unknown arguments and the closest known one, and its schema says
``additionalProperties: false``. Every tool error it gives passes through one rewrite (secret
values redacted, the root's absolute path left out).

Tools are module-level functions, registered from a table (:data:`Table`): what the tools of
one server share (its workspace ``ws``, its ``jobs``, its clients' ``sessions``) they take as
leading parameters of those names, which :func:`strict_tool` gives them and leaves out of the
tool's arguments.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import Field

from ..._errors import NotebookExecutorError
from ..._parameters.values import TextValue

if TYPE_CHECKING:
    from mcp.server.mcpserver.context import Context

    from .paths import Root

__all__ = [
    "EDITS",
    "READ_ONLY",
    "RUNS",
    "StrictTool",
    "Table",
    "client_values",
    "progress_requested",
    "strict_tool",
    "unknown_arguments",
    "within",
]

#: How a tool acts: it only reads, it edits files, or it runs notebooks.
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
EDITS = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
RUNS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

#: Tools in the order they are listed, each with how it acts.
Table = list[tuple[Callable[..., Any], ToolAnnotations]]


class StrictTool(Tool):
    """A tool that refuses arguments its signature does not name; its errors are rewritten
    by ``shown`` before they reach the caller."""

    shown: Callable[[str], str] = Field(default=lambda text: text, exclude=True)

    async def run(
        self,
        arguments: dict[str, Any],
        context: Context[Any, Any],
        convert_result: bool = False,
    ) -> Any:
        """Run the tool, unless ``arguments`` holds a name it does not take."""
        known = list(self.parameters.get("properties", {}))
        problem = unknown_arguments(self.name, known, arguments)
        if problem is not None:
            raise ToolError(f"Error executing tool {self.name}: {problem}")
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except UnexpectedToolError:
            # Its message is the SDK's generic one: nothing to reword.
            raise
        except ToolError as exc:
            raise ToolError(self.shown(str(exc))) from exc.__cause__


def strict_tool(
    fn: Callable[..., Any],
    annotations: ToolAnnotations,
    shown: Callable[[str], str],
    shared: Mapping[str, object] | None = None,
) -> StrictTool:
    """``fn`` as a strict tool, described by its docstring without the source's indentation;
    its parameters named in ``shared`` are given those values, and are no arguments of the
    tool."""
    tool = StrictTool.from_function(
        _given(fn, shared or {}),
        description=inspect.cleandoc(fn.__doc__ or ""),
        annotations=annotations,
    )
    assert isinstance(tool, StrictTool)
    tool.shown = shown
    tool.parameters["additionalProperties"] = False
    return tool


def _given(fn: Callable[..., Any], shared: Mapping[str, object]) -> Callable[..., Any]:
    """The coroutine function ``fn`` with its parameters named in ``shared`` given: its name,
    docstring, signature and annotations are ``fn``'s without them (the SDK builds the tool's
    arguments from them)."""
    signature = inspect.signature(fn)
    given = {name: value for name, value in shared.items() if name in signature.parameters}
    if not given:
        return fn

    async def tool(**arguments: Any) -> Any:
        return await fn(**given, **arguments)

    tool.__name__ = tool.__qualname__ = fn.__name__
    tool.__doc__ = fn.__doc__
    tool.__module__ = fn.__module__
    kept = [param for name, param in signature.parameters.items() if name not in given]
    tool.__signature__ = signature.replace(parameters=kept)  # type: ignore[attr-defined]
    tool.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k not in given}
    return tool


def within(root: Root, path: str) -> str:
    """``path`` (relative to ``root``) resolved, if it lies inside it; a tool error otherwise."""
    try:
        return str(root.resolve(path))
    except NotebookExecutorError as exc:
        raise ToolError(str(exc)) from None


def progress_requested(ctx: Context[Any, Any]) -> bool:
    """Whether the request carried a progress token."""
    meta = ctx.request_context.meta or {}
    return "progressToken" in meta or "progress_token" in meta


#: Other words callers use for a tool's own arguments, not close enough in spelling to be
#: suggested: ``execute(notebook=...)`` means ``path``, not a notebook parameter ``notebook``.
_ALIASES: dict[str, tuple[str, ...]] = {
    "path": ("notebook", "notebook_path", "nb", "file", "filename", "file_path", "filepath"),
    "parameters": ("params", "parameter", "args", "arguments", "values"),
    "run_id": ("run", "id", "runid"),
    "session_id": ("session", "sid", "id"),
    "index": ("cell", "cell_index", "position"),
    "source": ("code", "text", "content", "new_source"),
    "query": ("q", "search", "text"),
}


def _alias(name: str, known: list[str]) -> str | None:
    """The tool's argument that ``name`` is another word for, if any."""
    return next(
        (real for real, words in _ALIASES.items() if name.lower() in words and real in known), None
    )


def unknown_arguments(tool: str, known: list[str], arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` cannot be given to ``tool`` (which takes ``known``), or None when
    every name is known. The message suggests the closest known name; for a tool that takes
    ``parameters``, a name close to none (and no other word for one of its arguments, such as
    ``notebook`` for ``path``) is taken for a notebook parameter."""
    unknown = [name for name in arguments if name not in known]
    if not unknown:
        return None
    listed = ", ".join(repr(name) for name in unknown)
    plural = "s" if len(unknown) > 1 else ""
    message = f"unknown argument{plural} {listed}; {tool} takes {', '.join(known)}"
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        alias = None if close else _alias(name, known)
        if alias is not None:
            close = [alias]
        if close:
            hints.append(f"{close[0]!r} (for {name!r})" if plural else repr(close[0]))
        elif "parameters" in known:
            hints.append(f"parameters={{{name!r}: ...}}")
    if hints:
        message += f"; did you mean {', '.join(hints)}?"
    return message


def client_values(values: dict[str, Any] | None) -> dict[str, Any] | None:
    """``values`` with each string marked as text a JSON client sent (JSON clients often send
    numbers as text): the planner types it against the parameters the notebook declares,
    once it has read the source (:func:`~notebook_executor._parameters.values.typed_values`);
    ``str`` and ``any`` parameters take it as it is."""
    if not values:
        return values
    return {
        name: TextValue(value, always=False) if isinstance(value, str) else value
        for name, value in values.items()
    }
