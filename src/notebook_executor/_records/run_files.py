"""The run files: ``runs/YYYY-MM-DD/<run_id>.ipynb`` (the truth) and ``<run_id>.md``.

The executed notebook carries the run's record in ``metadata["notebook_executor"]``: the result
dict plus provenance (source path and sha256, kernel, Python and package versions, the names of
secrets and extra environment variables, never their values). The markdown file is the same run
for people: a logbook-style front matter, then each cell with its text results.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import secrets as _secrets
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import NotebookSourceError, RunNotFoundError, RunsDirError
from .._sources.files import atomic_write_text
from .._sources.nbjson import dumps_indented
from .._sources.remote import is_url
from .scraps import find_scraps, summarize_scrap
from .text import strip_ansi

if TYPE_CHECKING:
    from .._notebook import NotebookNode

__all__ = [
    "RECORD_KEY",
    "RESULT_KEYS",
    "cap_streams",
    "display_path",
    "iter_run_notebooks",
    "new_run_id",
    "package_versions",
    "read_record",
    "read_run",
    "render_markdown",
    "run_notebook_path",
    "write_run_files",
]

RECORD_KEY = "notebook_executor"
#: Keys of the result dict, in order (SPEC section 4).
RESULT_KEYS = (
    "run_id",
    "status",
    "error_kind",
    "notebook",
    "output_path",
    "parameters",
    "request",
    "started_at",
    "finished_at",
    "duration_seconds",
    "cells_total",
    "cells_executed",
    "failed_cell",
    "scraps",
    "output_cut",
)

RECORD_VERSION = 1
_RUN_ID = re.compile(r"^(\d{4})(\d{2})(\d{2})T\d{6}Z-[A-Za-z0-9_.-]{1,80}$")
#: Longest text kept per stream of a cell in the run files; the rest is cut with a visible marker.
MAX_STREAM_CHARS = 1_000_000


def new_run_id(source: Path, started: datetime) -> str:
    """A unique, sortable, filesystem-safe id: ``20261122T172645Z-hello-3f2a1b9c``."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", source.stem).strip("-")[:40] or "notebook"
    return f"{started:%Y%m%dT%H%M%S}Z-{slug}-{_secrets.token_hex(4)}"


def _date_dir(run_id: str) -> str:
    match = _RUN_ID.fullmatch(run_id)
    if match is None:
        raise RunNotFoundError(run_id, "not a run id")
    return f"{match.group(1)}-{match.group(2)}-{match.group(3)}"


def run_notebook_path(runs_dir: Path, run_id: str) -> Path:
    """Path of a run's executed notebook (it may not exist)."""
    return runs_dir / _date_dir(run_id) / f"{run_id}.ipynb"


def display_path(path: str | os.PathLike[str]) -> str:
    """A path fit for a record: relative to the working directory when under it, ``~``-based
    when under the home folder, never an absolute home path. A URL is kept as given."""
    if is_url(path):
        return os.fspath(path)
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix()
    cwd, home = Path.cwd(), Path.home()
    try:
        resolved = candidate.resolve()
    except OSError:
        return candidate.as_posix()
    with_cwd = _relative_to(resolved, _resolved_folder(os.fspath(cwd)))
    if with_cwd is not None:
        return with_cwd
    under_home = _relative_to(resolved, _resolved_folder(os.fspath(home)))
    if under_home is not None:
        return "~" if under_home == "." else "~/" + under_home
    return resolved.as_posix()


def program_path(program: str | None) -> str | None:
    """The program a kernel runs, fit for a record as :func:`display_path` makes paths, but
    not resolved: a venv's ``bin/python`` is a link, and which venv ran is the point."""
    if program is None:
        return None
    candidate = Path(program)
    if not candidate.is_absolute():
        return candidate.as_posix()
    for base, shown in ((Path.cwd(), ""), (Path.home(), "~/")):
        relative = os.path.relpath(candidate, base)
        if not relative.startswith(".."):
            return shown + Path(relative).as_posix()
    return candidate.as_posix()


def _relative_to(path: Path, base: Path | None) -> str | None:
    if base is None:
        return None
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


@functools.lru_cache(maxsize=16)
def _resolved_folder(folder: str) -> Path | None:
    """``folder`` (the working directory or home) resolved, once per process and folder: every
    record shows paths relative to them, and resolving costs a system call per component."""
    try:
        return Path(folder).resolve()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Versions of the packages a run depends on (computed once per process)."""
    from importlib.metadata import PackageNotFoundError, version

    names = (
        "notebook-executor",
        "nbclient",
        "nbformat",
        "jupyter_client",
        "ipykernel",
        "jupytext",
        "papermill",
        "scrapbook",
        "pandas",
    )
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def environment_record() -> dict[str, Any]:
    """Interpreter and package versions for the provenance record."""
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": sys.platform,
        "packages": package_versions(),
    }


def prepare_runs_dir(runs_dir: Path) -> None:
    """Make sure ``runs_dir`` is a folder runs can be written to (creating it if need be).

    Raises :class:`~notebook_executor.RunsDirError` when it cannot be: a file stands where it
    or a parent folder should be, no permission, a read-only file system, an invalid name.
    Called before anything starts.
    """
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise RunsDirError(os.fspath(runs_dir), reason) from None
    problem = unwritable(runs_dir)
    if problem is not None:
        raise RunsDirError(os.fspath(runs_dir), problem)


def unwritable(folder: Path) -> str | None:
    """Why files cannot be made in the existing ``folder`` (one line), or None if they can.

    ``os.access`` answers for permissions and read-only file systems alike, in one system
    call, without leaving anything behind.
    """
    if os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        return None
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        read_only = False
    return "it is on a read-only file system" if read_only else "no permission to write in it"


def write_run_files(
    runs_dir: Path, run_id: str, nb: NotebookNode, record: Mapping[str, Any], *, final: bool
) -> Path:
    """Write the run's ``.ipynb`` (and, when ``final``, its ``.md``) atomically.

    ``nb`` is written as given (streams already capped: :func:`cap_streams`), with the
    record in its metadata.

    The record written when a run starts (``final`` false) is replaced when it ends: it is the
    same document in compact JSON, the fastest form to write. The final one has nbformat's
    layout (sorted keys, one-space indent, text split into lines).
    """
    path = run_notebook_path(runs_dir, run_id)
    nb.metadata[RECORD_KEY] = dict(record)
    if not final:
        atomic_write_text(path, _json(nb, indent=None))
        return path
    atomic_write_text(path, _json(_split_lines(nb), indent=1) + "\n")
    atomic_write_text(path.with_suffix(".md"), render_markdown(nb, record))
    return path


def _json(document: Any, *, indent: int | None) -> str:
    # nbformat.writes would also validate the whole document against the schema and deep-copy
    # it: the source was validated when read and the kernel's outputs come from nbclient.
    if indent == 1:
        return dumps_indented(document, default=_bytes_as_base64)
    separators = (",", ": ") if indent is not None else (",", ":")
    return json.dumps(
        document,
        indent=indent,
        sort_keys=True,
        ensure_ascii=False,
        separators=separators,
        default=_bytes_as_base64,
    )


def _bytes_as_base64(value: Any) -> str:
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


#: Mime types besides ``text/*`` whose values nbformat stores split into lines.
_SPLIT_MIMES = frozenset({"application/javascript", "image/svg+xml"})


def _split_lines(nb: NotebookNode) -> dict[str, Any]:
    """nbformat's file layout of ``nb`` (text split into lines), sharing what it can."""
    from .._notebook import strip_transient

    strip_transient(nb)
    cells = []
    for cell in nb.cells:
        copied = dict(cell)
        if isinstance(cell.get("source"), str):
            copied["source"] = cell["source"].splitlines(True)
        if cell.get("attachments"):
            copied["attachments"] = {
                name: _split_bundle(bundle) for name, bundle in cell["attachments"].items()
            }
        if cell.get("cell_type") == "code":
            copied["outputs"] = [_split_output(output) for output in cell.get("outputs", [])]
        cells.append(copied)
    return {**nb, "cells": cells}


def _split_output(output: Mapping[str, Any]) -> dict[str, Any]:
    copied = dict(output)
    kind = output.get("output_type")
    if kind in ("execute_result", "display_data") and isinstance(output.get("data"), dict):
        copied["data"] = _split_bundle(output["data"])
    elif kind == "stream" and isinstance(output.get("text"), str):
        copied["text"] = output["text"].splitlines(True)
    return copied


def _split_bundle(bundle: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value.splitlines(True)
        if isinstance(value, str) and (key.startswith("text/") or key in _SPLIT_MIMES)
        else value
        for key, value in bundle.items()
    }


def cap_streams(nb: NotebookNode) -> tuple[NotebookNode, list[int]]:
    """A copy of ``nb`` whose streams hold at most :data:`MAX_STREAM_CHARS` per cell.

    A kernel sends a long stream in many messages: the cap holds for each stream (stdout,
    stderr) of a cell as a whole; what follows the cut is dropped and counted in a marker at
    the place of the cut. Returns the copy and the indices of the cells that were cut.
    ``nb`` itself is not changed.
    """
    import copy

    capped = copy.copy(nb)
    capped["cells"] = list(nb.cells)
    cut_cells: list[int] = []
    for index, cell in enumerate(nb.cells):
        kept: dict[str, int] = {}
        cut: dict[str, Any] = {}
        dropped: dict[str, int] = {}
        outputs = []
        for output in cell.get("outputs", ()):
            if output.get("output_type") != "stream":
                outputs.append(output)
                continue
            name = str(output.get("name", ""))
            text = output.get("text", "")
            if isinstance(text, list):
                text = "".join(text)
            if name in cut:
                dropped[name] += len(text)
                continue
            room = MAX_STREAM_CHARS - kept.get(name, 0)
            if len(text) > room:
                output = copy.copy(output)
                output["text"] = text[:room]
                cut[name], dropped[name] = output, len(text) - room
            kept[name] = kept.get(name, 0) + len(text)
            outputs.append(output)
        if not cut:
            continue
        for name, output in cut.items():
            output["text"] += (
                f"\n[notebook-executor: output truncated, {dropped[name]} more characters "
                "not kept]\n"
            )
        capped.cells[index] = copy.copy(cell)
        capped.cells[index]["outputs"] = outputs
        cut_cells.append(index)
    return capped, cut_cells


def read_record(path: Path) -> dict[str, Any]:
    """The run record stored in an executed notebook (parsed without full validation)."""
    return read_run(path)[0]


def read_run(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The run record and the cells of an executed notebook, from one parse of the file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunNotFoundError(path.stem, "no such run") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise NotebookSourceError(str(path), f"unreadable run file: {exc}") from None
    record = raw.get("metadata", {}).get(RECORD_KEY) if isinstance(raw, dict) else None
    if not isinstance(record, dict):
        raise NotebookSourceError(str(path), "not a notebook-executor run record")
    cells = raw.get("cells")
    return record, cells if isinstance(cells, list) else []


def iter_run_notebooks(runs_dir: Path) -> Iterator[Path]:
    """Every run notebook under ``runs_dir``, oldest date folder first."""
    if not runs_dir.is_dir():
        return
    for day in sorted(runs_dir.iterdir()):
        if day.is_dir() and re.fullmatch(r"\d{4}-\d{2}-\d{2}", day.name):
            yield from sorted(p for p in day.glob("*.ipynb") if _RUN_ID.fullmatch(p.stem))


def render_markdown(nb: NotebookNode, record: Mapping[str, Any]) -> str:
    """The readable record of a run: front matter, then cells and their text results."""
    import yaml

    front = {
        "run_id": record.get("run_id"),
        "uuid": record.get("uuid"),
        "notebook": record.get("notebook"),
        "parameters": record.get("parameters") or {},
        "user_request": record.get("request"),
        "executed_at": record.get("started_at"),
        "finished_at": record.get("finished_at"),
        "duration_seconds": record.get("duration_seconds"),
        "status": record.get("status"),
        "error_kind": record.get("error_kind"),
        "output_path": record.get("output_path"),
    }
    if record.get("dask_attempts"):
        # A run on a Dask cluster: where each attempt began and how it ended.
        front["attempts"] = record["dask_attempts"]
    parts = [
        "---",
        yaml.dump(
            _plain(front),
            Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),  # libyaml when built with it
            sort_keys=False,
            allow_unicode=True,
        ).rstrip(),
    ]
    parts += ["---", ""]
    title = Path(str(record.get("notebook") or "notebook")).name
    parts.append(f"# Run of `{title}`: {record.get('status')}")
    parts.append("")
    failed = record.get("failed_cell")
    if isinstance(failed, dict):
        parts.append(
            f"Failed in cell {failed.get('index')}: {failed.get('ename')}: {failed.get('evalue')}"
        )
        parts.append("")
    for cell in nb.cells:
        parts.extend(_render_cell(cell))
    scraps = {name: summarize_scrap(raw) for name, raw in find_scraps(nb.cells).items()}
    if scraps:
        parts += ["## Scraps", "", "```json"]
        parts.append(json.dumps(scraps, indent=2, ensure_ascii=False, default=str))
        parts += ["```", ""]
    if isinstance(record.get("session"), Mapping):
        from .session_log import render_session_log

        parts += render_session_log(record["session"])
    return "\n".join(parts).rstrip() + "\n"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _fence(text: str, info: str = "") -> list[str]:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return [f"{ticks}{info}", text.rstrip("\n"), ticks, ""]


def _render_cell(cell: Mapping[str, Any]) -> list[str]:
    source = str(cell.get("source", ""))
    kind = cell.get("cell_type")
    if kind == "markdown":
        return [source.rstrip("\n"), ""]
    if kind == "raw":
        return _fence(source, "text")
    lines: list[str] = []
    tags = (cell.get("metadata") or {}).get("tags") or []
    status = ((cell.get("metadata") or {}).get(RECORD_KEY) or {}).get("status")
    label = "python"
    if "injected-parameters" in tags:
        lines.append("*Injected parameters:*")
        lines.append("")
    if status in ("not_run", "skipped"):
        lines.append("*Not run.*" if status == "not_run" else "*Skipped (`skip-execution`).*")
        lines.append("")
    lines += _fence(source, label)
    for output in cell.get("outputs", ()):
        lines += _render_output(output)
    return lines


def _render_output(output: Mapping[str, Any]) -> list[str]:
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
        return _fence(strip_ansi("".join(text) if isinstance(text, list) else str(text)), "text")
    if kind == "error":
        body = "\n".join(strip_ansi(str(line)) for line in output.get("traceback", []))
        if not body:
            body = f"{output.get('ename')}: {output.get('evalue')}"
        return _fence(body, "text")
    if kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        if any(key.startswith("application/scrapbook.scrap.") for key in data):
            return []
        if "text/markdown" in data:
            text = data["text/markdown"]
            return ["".join(text) if isinstance(text, list) else str(text), ""]
        if "text/plain" in data:
            text = data["text/plain"]
            return _fence(
                strip_ansi("".join(text) if isinstance(text, list) else str(text)), "text"
            )
        if data:
            return [f"*[{', '.join(sorted(data))} output]*", ""]
    return []
