"""Notebooks at URLs, through papermill's I/O handlers, against a real S3 API (moto's server,
started on 127.0.0.1 by the test and stopped after it)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from notebook_executor import NotebookExecutor, NotebookSourceError

pytestmark = pytest.mark.kernel

BUCKET = "notebooks"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A bucket on a moto S3 server on loopback; AWS_ENDPOINT_URL points boto3 at it."""
    import boto3
    from moto.server import ThreadedMotoServer
    from papermill.s3 import S3

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        # Papermill keeps one boto3 session per process: drop it, so it sees this server.
        monkeypatch.setattr(S3, "s3_session", (None, None, None))
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)
        yield client
    finally:
        server.stop()


def _notebook() -> str:
    v4 = nbformat.v4
    params = v4.new_code_cell("name = 'world'")
    params.metadata["tags"] = ["parameters"]
    nb = v4.new_notebook(
        cells=[
            params,
            v4.new_code_cell("import scrapbook as sb\nsb.glue('greeting', f'hello {name}')"),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    return str(nbformat.writes(nb))


def test_s3_in_s3_out(s3: Any, tmp_path: Path) -> None:
    s3.put_object(Bucket=BUCKET, Key="in/hello.ipynb", Body=_notebook().encode())
    source, target = f"s3://{BUCKET}/in/hello.ipynb", f"s3://{BUCKET}/out/hello.ipynb"
    runs = tmp_path / "runs"
    with NotebookExecutor(runs, warm_kernels=0) as ex:
        result = ex.execute(source, target, parameters={"name": "Ada"})
    assert result["status"] == "success", result
    assert result["notebook"] == source and result["output_path"] == target
    assert result["scraps"] == {"greeting": "hello Ada"}
    written = json.loads(s3.get_object(Bucket=BUCKET, Key="out/hello.ipynb")["Body"].read())
    assert written["metadata"]["papermill"]["parameters"] == {"name": "Ada"}
    assert written["metadata"]["papermill"]["input_path"] == source
    assert written["cells"][1]["metadata"]["tags"] == ["injected-parameters"]
    assert written["metadata"]["notebook_executor"]["run_id"] == result["run_id"]
    # The run record stays local, naming the URL and the hash of what was read.
    (record_path,) = runs.glob("*/*.ipynb")
    record = nbformat.read(record_path, as_version=4).metadata["notebook_executor"]
    assert record["notebook"] == source
    assert record["source"]["path"] == source
    from papermill.iorw import papermill_io

    read = papermill_io.read(source, extensions=None).encode()
    assert record["source"]["sha256"] == hashlib.sha256(read).hexdigest()


def test_unreachable_bucket_fails_before_any_kernel(s3: Any, tmp_path: Path) -> None:
    s3.put_object(Bucket=BUCKET, Key="in/hello.ipynb", Body=_notebook().encode())
    with NotebookExecutor(tmp_path / "runs") as ex:
        with pytest.raises(NotebookSourceError, match=re.escape("s3://missing-bucket/x.ipynb")):
            ex.execute("s3://missing-bucket/x.ipynb")
        with pytest.raises(NotebookSourceError, match="cannot write"):
            ex.execute(f"s3://{BUCKET}/in/hello.ipynb", "s3://missing-bucket/out.ipynb")
        assert ex._engine.pool is None  # type: ignore[attr-defined]
    assert not (tmp_path / "runs").exists()


def test_cli_unreachable_bucket_exits_2(s3: Any, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "notebook_executor", "run", "s3://missing-bucket/nb.ipynb"],
        cwd=tmp_path,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("notebook-executor: error: s3://missing-bucket/nb.ipynb")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "extra"), [("gs://b/nb.ipynb", "gcs"), ("abs://a/b/nb.ipynb", "azure")]
)
def test_missing_extra_names_it(url: str, extra: str) -> None:
    for module in {"gcs": ["gcsfs"], "azure": ["azure.storage.blob"]}[extra]:
        try:
            __import__(module)
        except ImportError:
            continue
        pytest.skip(f"{module} is installed here, so the {extra} extra is not missing")
    with NotebookExecutor() as ex, pytest.raises(NotebookSourceError) as caught:
        ex.execute(url)
    assert f"notebook-executor[{extra}]" in str(caught.value)
