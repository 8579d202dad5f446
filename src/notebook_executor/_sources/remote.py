"""Notebooks at URLs, read and written through papermill's I/O handlers.

``s3://``, ``gs://``, ``abs://``, ``adl://``, ``hdfs://`` and ``http(s)://`` (read only) go to
papermill's handler registry (:data:`papermill.iorw.papermill_io`), including handlers other
packages register in its ``papermill.io`` entry point group. Their client libraries are extras
(``notebook-executor[s3]``, ``[gcs]``, ``[azure]``); a missing one, an unreachable store or a
missing object is a :class:`~notebook_executor.NotebookSourceError` naming the URL.

S3 goes through boto3, which takes its endpoint from ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``); papermill also reads ``BOTO3_ENDPOINT_URL``.
"""

from __future__ import annotations

import re
from typing import Any

from .._errors import NotebookSourceError, install_hint

__all__ = ["is_url", "read_url", "write_url"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

#: The extra that installs what papermill's handler for a scheme needs.
_EXTRAS = {"s3": "s3", "gs": "gcs", "abs": "azure", "adl": "azure"}


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path."""
    return isinstance(path, str) and _URL.match(path) is not None


def read_url(url: str) -> str:
    """The text at ``url``, read by papermill's handler for its scheme."""
    io = _papermill_io(url)
    try:
        return str(io.read(url, extensions=None))
    except Exception as exc:
        raise NotebookSourceError(url, _reason("cannot read", url, exc)) from None


def write_url(text: str, url: str) -> None:
    """Write ``text`` to ``url`` with papermill's handler for its scheme."""
    if url.lower().startswith(("http://", "https://")):
        raise NotebookSourceError(url, "http(s) URLs can be read, not written")
    io = _papermill_io(url)
    try:
        io.write(text, url, extensions=None)
    except Exception as exc:
        raise NotebookSourceError(url, _reason("cannot write", url, exc)) from None


def _papermill_io(url: str) -> Any:
    from papermill.iorw import papermill_io

    return papermill_io


def _reason(action: str, url: str, exc: Exception) -> str:
    from papermill.exceptions import PapermillOptionalDependencyException

    if isinstance(exc, PapermillOptionalDependencyException):
        scheme = url.split("://", 1)[0].lower()
        extra = _EXTRAS.get(scheme, scheme)
        return f"{scheme}:// URLs need an optional dependency: {install_hint(extra)}"
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{action}: {type(exc).__name__}" + (f": {text}" if text else "")
