"""RunStore: the one owner of the run records, which names, writes, reads and lists them.

A run leaves ``<runs_dir>/YYYY-MM-DD/<run_id>.ipynb`` (the truth: the executed notebook, with
the run's record in ``metadata["notebook_executor"]``) and ``<run_id>.md`` beside it (the same
run for people, :func:`.run_markdown.render_markdown`). Everything else (the executor, the
catalog, the report, the Dask client, the MCP server) goes through a :class:`RunStore`: no
other module builds a run record's path or parses one.

Files are written atomically (a reader never sees half of one). A read parses the file once
into a :class:`RunFile`, from which the record, the cells as stored and an nbformat notebook
are all taken. A store made with ``cache=N`` keeps its last N reads, keyed by the file's
modification time and size, for callers that look at one run several times (the report).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import NotebookSourceError, RunNotFoundError, RunsDirError
from .._sources.files import atomic_write_text
from .._sources.regular import read_regular_text
from .ids import DAY_FOLDER, is_run_id, run_day
from .layout import run_json, split_lines
from .run_markdown import RECORD_KEY, render_markdown

if TYPE_CHECKING:
    import nbformat

    from .._notebook import NotebookNode

__all__ = ["NOTEBOOK_SUFFIX", "RunFile", "RunStore", "executed_cells", "unwritable"]

logger = logging.getLogger(__name__)

#: Largest run record read, in bytes: streams are capped when written, but images are not.
MAX_RECORD_BYTES = 512 * 1024 * 1024

#: The suffix of a run's executed notebook, and of its readable twin.
NOTEBOOK_SUFFIX, MARKDOWN_SUFFIX = ".ipynb", ".md"


@dataclass(frozen=True)
class RunFile:
    """One run record, parsed once: its record, its cells as stored (text split into lines,
    as nbformat writes them) and the whole document. A store's cache shares it between
    readers: it is read, never changed (:meth:`notebook` gives a copy to change)."""

    path: Path
    record: dict[str, Any]
    cells: list[Any]
    document: dict[str, Any]

    @property
    def run_id(self) -> str:
        """The run's id (the file's name)."""
        return self.path.stem

    def notebook(self) -> nbformat.NotebookNode:
        """The executed notebook as ``nbformat.read`` gives it (a new one at each call, so
        that callers may change it), built from the parse already made."""
        import nbformat
        from nbformat.reader import get_version

        major, minor = get_version(self.document)
        try:
            nb = nbformat.versions[major].to_notebook_json(self.document, minor=minor)
            converted: nbformat.NotebookNode = nbformat.convert(nb, 4)
            return converted
        except Exception as exc:  # a damaged run record can break nbformat in many ways
            raise NotebookSourceError(str(self.path), f"unreadable run record: {exc}") from None


def _parse(path: Path, missing: str) -> dict[str, Any]:
    """The JSON object ``path`` holds; ``missing`` names it in the error when it is absent."""
    try:
        raw = json.loads(read_regular_text(path, MAX_RECORD_BYTES))
    except FileNotFoundError:
        raise RunNotFoundError(missing, "no such run") from None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise NotebookSourceError(str(path), f"unreadable run record: {reason}") from None
    if not isinstance(raw, dict):
        raise NotebookSourceError(str(path), "unreadable run record: not a JSON object")
    return raw


def read_run_file(path: Path) -> RunFile:
    """The run record at ``path``, parsed once.

    Raises
    ------
    RunNotFoundError
        There is no such file.
    NotebookSourceError
        It cannot be read, or holds no run record.
    """
    raw = _parse(path, path.stem)
    metadata = raw.get("metadata")
    record = metadata.get(RECORD_KEY) if isinstance(metadata, dict) else None
    if not isinstance(record, dict):
        raise NotebookSourceError(str(path), "not a notebook-executor run record")
    cells = raw.get("cells")
    return RunFile(path, record, cells if isinstance(cells, list) else [], raw)


def executed_cells(path: Path) -> list[Any]:
    """The cells of an executed notebook at ``path``, as stored: a run record, or any other
    executed ``.ipynb`` (papermill's output, a caller's copy), which needs no record."""
    cells = _parse(path, os.fspath(path)).get("cells")
    return cells if isinstance(cells, list) else []


class RunStore:
    """The run records under ``runs_dir``.

    Parameters
    ----------
    runs_dir : path
        The runs folder (made by :meth:`prepare`, never by the constructor).
    cache : int, default 0
        How many parsed files to keep (0: none); a kept file is parsed again once its
        modification time or size changes.
    """

    def __init__(self, runs_dir: str | os.PathLike[str], *, cache: int = 0) -> None:
        self.runs_dir = Path(runs_dir)
        self._cache_size = cache
        self._cache: OrderedDict[Path, tuple[tuple[int, int], RunFile]] = OrderedDict()
        self._lock = threading.Lock()

    # -- names ------------------------------------------------------------------------------

    def path(self, run_id: str) -> Path:
        """Path of a run's executed notebook (it may not exist).

        Raises
        ------
        RunNotFoundError
            ``run_id`` is not a run id.
        """
        return self.runs_dir / run_day(run_id) / f"{run_id}{NOTEBOOK_SUFFIX}"

    def exists(self, run_id: str) -> bool:
        """Whether run ``run_id`` has a file (False for what is no run id)."""
        return is_run_id(run_id) and self.path(run_id).is_file()

    def paths(self) -> Iterator[Path]:
        """Every run notebook, oldest day folder first, by id within a day."""
        if not self.runs_dir.is_dir():
            return
        for day in sorted(self.runs_dir.iterdir()):
            if day.is_dir() and DAY_FOLDER.fullmatch(day.name):
                yield from sorted(p for p in day.glob(f"*{NOTEBOOK_SUFFIX}") if is_run_id(p.stem))

    # -- writes -----------------------------------------------------------------------------

    def prepare(self) -> None:
        """Make sure the runs folder is one runs can be written to (creating it if need be).

        Raises :class:`~notebook_executor.RunsDirError` when it cannot be: a file stands where
        it or a parent folder should be, no permission, a read-only file system, an invalid
        name. Called before anything starts.
        """
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise RunsDirError(os.fspath(self.runs_dir), reason) from None
        problem = unwritable(self.runs_dir)
        if problem is not None:
            raise RunsDirError(os.fspath(self.runs_dir), problem)

    def write(
        self, run_id: str, nb: NotebookNode, record: Mapping[str, Any], *, final: bool
    ) -> Path:
        """Write the run's ``.ipynb`` (and, when ``final``, its ``.md``) atomically.

        ``nb`` is written as given (streams already capped: :func:`.streams.cap_streams`),
        with the record in its metadata.

        The record written when a run starts (``final`` false) is replaced when it ends: it is
        the same document in compact JSON, the fastest form to write. The final one has
        nbformat's layout (sorted keys, one-space indent, text split into lines).
        """
        path = self.path(run_id)
        nb.metadata[RECORD_KEY] = dict(record)
        if not final:
            atomic_write_text(path, run_json(nb, indent=None))
            return path
        atomic_write_text(path, run_json(split_lines(nb), indent=1) + "\n")
        atomic_write_text(path.with_suffix(MARKDOWN_SUFFIX), render_markdown(nb, record))
        return path

    # -- reads ------------------------------------------------------------------------------

    def read(self, run_id: str) -> RunFile:
        """Run ``run_id``'s file, parsed once (or taken from the cache while unchanged).

        Raises
        ------
        RunNotFoundError
            No run has this id (or it is no run id).
        NotebookSourceError
            Its file cannot be read, or holds no run record.
        """
        return self.read_path(self.path(run_id))

    def read_path(self, path: Path) -> RunFile:
        """The run record at ``path`` (one :meth:`paths` gave), as :meth:`read`."""
        if not self._cache_size:
            return read_run_file(path)
        try:
            stat = path.stat()
        except OSError:
            return read_run_file(path)  # raises as the read would
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            kept = self._cache.get(path)
            if kept is not None and kept[0] == stamp:
                self._cache.move_to_end(path)
                return kept[1]
        run_file = read_run_file(path)
        with self._lock:
            self._cache[path] = (stamp, run_file)
            self._cache.move_to_end(path)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return run_file

    def record(self, run_id: str) -> dict[str, Any]:
        """The record stored in run ``run_id``'s file."""
        return self.read(run_id).record


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
