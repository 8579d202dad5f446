"""Reading scrapbook scraps from notebook outputs, fast.

Format-compatible with scrapbook: a scrap is a ``display_data`` output whose data holds
``application/scrapbook.scrap.<encoder>+json`` (a payload with ``name``, ``data``, ``encoder``,
``version``), or a display-only output tagged ``metadata.scrapbook.display``; papermill's older
``application/papermill.record/<encoder>`` outputs are read too. Unlike scrapbook, reading does
not validate each payload against a JSON schema: the shape is checked by hand, which costs
nothing, and a malformed payload is skipped rather than aborting the read.

Measured by ``benchmarks/bench_library_pieces.py``: the scraps of a notebook with 20 glued values
take 0.13-0.16 ms here and 38-54 ms through ``scrapbook.models.Notebook(nb).scraps`` (most of it
validating each payload); the catalog reads them for every run it indexes.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RawScrap", "decode_scrap", "find_scraps", "summarize_scrap"]

SCRAP_PREFIX = "application/scrapbook.scrap."
PAPERMILL_PREFIX = "application/papermill.record"
JSON_ENCODERS = ("json", "text")


@dataclass(frozen=True)
class RawScrap:
    """A scrap as stored: its encoder and still-encoded data, or a display bundle."""

    name: str
    encoder: str
    data: Any
    display: Mapping[str, Any] | None = None


def find_scraps(cells: Iterable[Mapping[str, Any]]) -> dict[str, RawScrap]:
    """All scraps in ``cells``' outputs, by name; a later glue of a name wins, as in scrapbook."""
    found: dict[str, RawScrap] = {}
    for cell in cells:
        for output in cell.get("outputs", ()) or ():
            if output.get("output_type") != "display_data":
                continue
            data = output.get("data") or {}
            for key, payload in data.items():
                scrap = _scrap_from(key, payload)
                if scrap is not None:
                    found[scrap.name] = scrap
            name = _display_name(output.get("metadata") or {})
            if name is not None:
                bundle = {
                    k: _joined(k, v) for k, v in data.items() if not k.startswith(SCRAP_PREFIX)
                }
                previous = found.get(name)
                if previous is not None and previous.encoder != "display":
                    found[name] = RawScrap(name, previous.encoder, previous.data, bundle)
                else:
                    found[name] = RawScrap(name, "display", None, bundle)
    return found


def _joined(mime: str, value: Any) -> Any:
    """A bundle value as nbformat reads it: on disk, text mime types are lists of lines."""
    is_json = mime == "application/json" or (
        mime.startswith("application/") and mime.endswith("+json")
    )
    if not is_json and isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "".join(value)
    return value


def _display_name(metadata: Mapping[str, Any]) -> str | None:
    """The scrap name of a display output: scrapbook's marker, or papermill's older one."""
    papermill = metadata.get("papermill")
    if isinstance(papermill, Mapping) and papermill.get("name"):
        return str(papermill["name"])
    marker = metadata.get("scrapbook")
    if isinstance(marker, Mapping) and marker.get("display") and marker.get("name"):
        return str(marker["name"])
    return None


def _scrap_from(key: str, payload: Any) -> RawScrap | None:
    if key.startswith(SCRAP_PREFIX):
        if not isinstance(payload, Mapping) or not isinstance(payload.get("name"), str):
            return None
        encoder = payload.get("encoder") or key[len(SCRAP_PREFIX) :].split("+", 1)[0]
        return RawScrap(payload["name"], str(encoder), payload.get("data"))
    if key.startswith(PAPERMILL_PREFIX) and isinstance(payload, Mapping) and payload:
        encoder = key[len(PAPERMILL_PREFIX) :].lstrip("+/").split("+", 1)[0] or "json"
        name, data = next(iter(payload.items()))
        return RawScrap(str(name), encoder, data)
    return None


def decode_scrap(scrap: RawScrap) -> Any:
    """The scrap's value, fully decoded (a ``pandas`` scrap becomes a DataFrame).

    A display-only scrap decodes to its mime bundle.
    """
    if scrap.encoder == "json":
        if isinstance(scrap.data, str):
            import json

            try:
                return json.loads(scrap.data)
            except ValueError:
                return scrap.data
        return scrap.data
    if scrap.encoder == "text":
        return scrap.data if isinstance(scrap.data, str) else str(scrap.data)
    if scrap.encoder == "pandas":
        import pandas as pd

        return pd.read_parquet(io.BytesIO(base64.b64decode(scrap.data)), engine="pyarrow")
    if scrap.encoder == "display":
        return dict(scrap.display or {})
    return scrap.data


def summarize_scrap(scrap: RawScrap) -> Any:
    """What the result dict shows: the value if it is JSON, else a small summary object."""
    if scrap.encoder in JSON_ENCODERS:
        return decode_scrap(scrap)
    summary: dict[str, Any] = {"encoder": scrap.encoder}
    if scrap.encoder == "pandas":
        summary.update(_parquet_summary(scrap.data))
    elif scrap.encoder == "display":
        summary["mime_types"] = sorted((scrap.display or {}).keys())
    return summary


def _parquet_summary(data: Any) -> dict[str, Any]:
    try:
        import pyarrow.parquet as pq

        metadata = pq.read_metadata(io.BytesIO(base64.b64decode(data)))
        hidden = set(_pandas_index_columns(metadata.metadata or {}))
        names = [
            name
            for name in metadata.schema.names
            if name not in hidden and not name.startswith("__index_level_")
        ]
        return {"type": "DataFrame", "shape": [metadata.num_rows, len(names)], "columns": names}
    except Exception:  # a damaged payload still gets a summary, just a poorer one
        return {"type": "DataFrame"}


def _pandas_index_columns(key_values: Mapping[bytes, bytes]) -> list[str]:
    """Columns that pandas stored for the index (named indexes are real parquet columns)."""
    import json

    try:
        pandas_meta = json.loads(key_values.get(b"pandas", b"{}"))
    except ValueError:
        return []
    return [name for name in pandas_meta.get("index_columns", []) if isinstance(name, str)]
