"""docs/how-to/reproduce.md on real kernels: what a record holds of where a run came from, ``diff``
naming the input that changed, ``reproduce``, and OpenLineage events sent to a real endpoint."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from integration.test_run_server import Shell, shell  # noqa: F401 (the fixture)
from notebook_executor import NotebookExecutor

pytestmark = pytest.mark.kernel

READS_CSV = """\
# %%
import pandas as pd
frame = pd.read_csv("data.csv")
with open("total.txt", "w") as out:
    out.write(str(frame.a.sum()))
print(frame.a.sum())
"""

RANDOM = """\
# %%
print(sum(range(10)))

# %% [markdown]
# Then an unseeded draw.

# %%
import random
print(random.random())
"""


def _spec_event(event: dict[str, Any]) -> None:
    """Check ``event`` (as the endpoint received it) against the OpenLineage specification,
    through the official client's classes, which are generated from the specification's JSON
    Schema (``openlineage.client.generated``; the schema file itself ships in no package the
    registries serve). Each part is rebuilt as the client's type, its validators run (a UUID
    run id), its required fields present; times are ISO 8601; every facet carries the
    ``_producer`` and ``_schemaURL`` a facet must; and the client serializes the rebuilt event
    back to the same core fields."""
    from dateutil.parser import isoparse
    from openlineage.client.generated import base
    from openlineage.client.serde import Serde

    assert set(event) >= {"eventTime", "producer", "schemaURL", "run", "job", "eventType"}
    isoparse(event["eventTime"])
    for uri in (event["producer"], event["schemaURL"]):
        assert uri.startswith(("http://", "https://")), uri
    facets = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
    datasets = [*event.get("inputs", []), *event.get("outputs", [])]
    for dataset in datasets:
        facets += dataset.get("facets", {}).values()
    for facet in facets:
        assert facet["_producer"].startswith(("http://", "https://")), facet
        assert "#/$defs/" in facet["_schemaURL"] or facet["_schemaURL"].startswith("http"), facet
    rebuilt = base.RunEvent(
        eventTime=event["eventTime"],
        producer=event["producer"],
        eventType=base.EventType(event["eventType"]),
        run=base.Run(runId=event["run"]["runId"]),
        job=base.Job(namespace=event["job"]["namespace"], name=event["job"]["name"]),
        inputs=[
            base.InputDataset(namespace=d["namespace"], name=d["name"])
            for d in event.get("inputs", [])
        ],
        outputs=[
            base.OutputDataset(namespace=d["namespace"], name=d["name"])
            for d in event.get("outputs", [])
        ],
    )
    again = json.loads(Serde.to_json(rebuilt))
    for key in ("eventTime", "producer", "eventType"):
        assert again[key] == event[key]
    assert again["run"]["runId"] == event["run"]["runId"]
    assert again["job"] == {k: event["job"][k] for k in ("namespace", "name")} | again["job"]


def _record(folder: Path, run_id: str) -> dict[str, Any]:
    path = next((folder / "runs").glob(f"*/{run_id}.ipynb"))
    record: dict[str, Any] = json.loads(path.read_text())["metadata"]["notebook_executor"]
    return record


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_diff_names_the_data_file_edited_between_two_runs(shell: Shell) -> None:  # noqa: F811
    work = shell.folder
    (work / "reads.py").write_text(READS_CSV)
    (work / "data.csv").write_text("a,b\n1,2\n")
    (work / ".gitignore").write_text("runs/\ntotal.txt\n")
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", "reads.py", "data.csv", ".gitignore")
    _git(work, "commit", "-q", "-m", "data")
    code, out, err = shell.run("run", "reads.py", "--json")
    assert code == 0, err
    first = json.loads(out)["run_id"]
    (work / "data.csv").write_text("a,b\n5,2\n")
    code, out, err = shell.run("run", "reads.py", "--json")
    assert code == 0, err
    second = json.loads(out)["run_id"]

    record = _record(work, first)
    assert record["git"] == {
        "commit": _git(work, "rev-parse", "HEAD"),
        "branch": "main",
        "dirty": False,
    }
    files = {entry["path"]: entry for entry in record["files"]["files"]}
    assert files["data.csv"]["read"] and not files["data.csv"]["written"]
    assert files["data.csv"]["size"] == len("a,b\n1,2\n")
    assert files["total.txt"]["written"]
    assert "reads.py" not in files or files["reads.py"]["read"]
    assert not any("site-packages" in path for path in files)
    assert record["machine"]["cpu_count"] >= 1 and record["machine"]["cpu"]
    assert len(record["environment"]["lock_sha256"]) == 64
    assert _record(work, second)["git"]["dirty"] is True  # data.csv is tracked, and edited

    code, out, err = shell.run("diff", first, second, "--json")
    assert code == 1, err
    inputs = json.loads(out)["inputs"]
    assert set(inputs["files"]) == {"data.csv", "total.txt"}
    old, new = inputs["files"]["data.csv"]
    assert old == files["data.csv"]["sha256"] and new != old
    assert inputs["git"] == {"dirty": [False, True]}
    code, out, err = shell.run("diff", first, second)
    assert code == 1, err
    assert "file data.csv:" in out


def test_reproduce_says_whether_the_outputs_are_the_same(shell: Shell) -> None:  # noqa: F811
    work = shell.folder
    (work / "random_draw.py").write_text(RANDOM)
    code, out, err = shell.run("run", "hello.py", "-p", "name", "Ada", "--json")
    assert code == 0, err
    steady = json.loads(out)["run_id"]
    code, out, err = shell.run("reproduce", steady, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["reproduced"] is True and answer["first_difference"] is None
    assert answer["run_id"] != steady and answer["inputs_changed"] == []
    again = _record(work, answer["run_id"])
    assert again["parameters"]["name"] == "Ada" and again["request"] == f"reproduce {steady}"

    code, out, err = shell.run("run", "random_draw.py", "--json")
    assert code == 0, err
    drawn = json.loads(out)["run_id"]
    code, out, err = shell.run("reproduce", drawn, "--json")
    assert code == 1, err
    answer = json.loads(out)
    assert answer["reproduced"] is False
    assert answer["first_difference"]["cell"] == 2  # the draw: cells counted as in the source
    code, out, err = shell.run("reproduce", drawn)
    assert code == 1 and "not reproduced" in out and "first difference: cell 2" in out

    # The notebook changed since: the recorded source runs, and the answer says so.
    (work / "hello.py").write_text((work / "hello.py").read_text() + "\n# %%\nprint(1)\n")
    code, out, err = shell.run("reproduce", steady, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["source"] == "record" and answer["inputs_changed"][0] == "source"

    code, out, err = shell.run("reproduce", "20200101T000000Z-nope-00000000")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


class _Endpoint(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def lineage_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    from notebook_executor._records import lineage

    port = _free_port()
    monkeypatch.setenv("OPENLINEAGE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("OPENLINEAGE_DISABLED", raising=False)
    lineage._shared.cache_clear()
    yield port
    lineage._shared.cache_clear()


def test_lineage_events_reach_an_endpoint_that_was_down_for_a_while(
    tmp_path: Path, lineage_env: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reads.py").write_text(READS_CSV)
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "broken.py").write_text("# %%\nx = 1\n# %%\nraise ValueError('no')\n")
    received: list[dict[str, Any]] = []
    handler = type("Endpoint", (_Endpoint,), {"received": received})
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        # Nothing listens yet: the runs neither fail nor wait for it.
        ok = ex.execute("reads.py")
        failed = ex.execute("broken.py")
        assert ok["status"] == "success" and failed["status"] == "error"
        assert ok["duration_seconds"] < 30
        server = ThreadingHTTPServer(("127.0.0.1", lineage_env), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 60
            while len(received) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            server.shutdown()
            server.server_close()
            thread.join()
    for event in received:
        _spec_event(event)
    by_run: dict[str, list[str]] = {}
    for event in received:
        by_run.setdefault(event["job"]["name"], []).append(event["eventType"])
    assert by_run == {"reads.py": ["START", "COMPLETE"], "broken.py": ["START", "FAIL"]}
    complete = next(e for e in received if e["eventType"] == "COMPLETE")
    assert [d["name"] for d in complete["inputs"]] == ["data.csv"]
    assert [d["name"] for d in complete["outputs"]] == ["total.txt"]
    fail = next(e for e in received if e["eventType"] == "FAIL")
    assert fail["run"]["facets"]["notebook_executor"]["failed_cell"]["index"] == 1
    assert "ValueError" in fail["run"]["facets"]["errorMessage"]["message"]


def test_no_lineage_when_disabled(
    tmp_path: Path, lineage_env: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_executor._records import lineage

    monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
    assert lineage.emitter() is None
    monkeypatch.delenv("OPENLINEAGE_DISABLED")
    monkeypatch.delenv("OPENLINEAGE_URL")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert lineage.emitter() is None
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: console\n")
    assert lineage.configured()


PARAMETERIZED = """\
# %% tags=["parameters"]
x = 1

# %%
print(10 / x)
"""


class _Listening:
    """A real OpenLineage HTTP endpoint on ``port``, collecting the events it receives."""

    def __init__(self, port: int) -> None:
        self.received: list[dict[str, Any]] = []
        handler = type("Endpoint", (_Endpoint,), {"received": self.received})
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Listening:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 60
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        for event in self.received:
            _spec_event(event)
        return self.received


def test_a_sweep_is_its_runs_parent_run_in_lineage(
    tmp_path: Path, lineage_env: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.py").write_text(PARAMETERIZED)
    with _Listening(lineage_env) as endpoint, NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        results = ex.execute_many("sweep.py", [{"x": 1}, {"x": 2}], max_workers=2)
        assert [r["status"] for r in results] == ["success", "success"]
        failing = ex.execute_many("sweep.py", [{"x": 1}, {"x": 0}], max_workers=1)
        assert [r["status"] for r in failing] == ["success", "error"]
        received = endpoint.wait_for(12)
    assert len(received) == 12
    parents = [e for e in received if e["job"]["name"] == "sweep:sweep.py"]
    assert [e["eventType"] for e in parents] == ["START", "COMPLETE", "START", "FAIL"]
    first, second = parents[0]["run"]["runId"], parents[2]["run"]["runId"]
    assert first != second and parents[1]["run"]["runId"] == first
    assert "1 of 2 runs" in parents[3]["run"]["facets"]["errorMessage"]["message"]
    children = [e for e in received if e["job"]["name"] == "sweep.py"]
    assert len(children) == 8
    by_parent: dict[str, set[str]] = {}
    for event in children:
        parent = event["run"]["facets"]["parent"]
        assert parent["job"]["namespace"] == "notebook-executor"
        assert parent["job"]["name"] == "sweep:sweep.py"
        by_parent.setdefault(parent["run"]["runId"], set()).add(event["run"]["runId"])
    ran = {first: results, second: failing}
    assert by_parent == {
        key: {_record(tmp_path, r["run_id"])["uuid"] for r in runs} for key, runs in ran.items()
    }
    record = _record(tmp_path, results[0]["run_id"])
    assert record["parent_run"] == {"kind": "sweep", "uuid": first, "job": "sweep:sweep.py"}
    # Each parent event precedes its children's and its ending follows theirs.
    order = [e["run"]["runId"] for e in received]
    for parent_id, runs in by_parent.items():
        assert order.index(parent_id) < min(order.index(run) for run in runs)
        assert len(order) - 1 - order[::-1].index(parent_id) > max(
            len(order) - 1 - order[::-1].index(run) for run in runs
        )


def test_a_session_has_a_runs_provenance_and_lineage(
    tmp_path: Path, lineage_env: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reads.py").write_text(READS_CSV)
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "broken.py").write_text("# %%\nx = 1\n# %%\nraise ValueError('no')\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "reads.py", "data.csv")
    _git(tmp_path, "commit", "-q", "-m", "data")
    with _Listening(lineage_env) as endpoint, NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        session = ex.open_session("reads.py")
        assert endpoint.wait_for(1)[0]["eventType"] == "START"
        assert session.run()["status"] == "success"
        answer = session.evaluate("open('more.txt', 'w').write('x')")
        assert answer["status"] == "success"
        record = _record(tmp_path, session.run_id)
        assert record["session"]["open"] is True
        files = {entry["path"]: entry for entry in record["files"]["files"]}
        assert files["data.csv"]["read"] and files["total.txt"]["written"]
        assert files["more.txt"]["written"] and files["more.txt"]["size"] == 1
        assert record["git"]["commit"] == _git(tmp_path, "rev-parse", "HEAD")
        assert record["git"]["branch"] == "main"
        assert record["machine"]["cpu_count"] >= 1
        assert len(record["environment"]["lock_sha256"]) == 64
        session.close()
        failed = ex.open_session("broken.py")
        assert failed.run()["status"] == "error"
        failed.close()
        received = endpoint.wait_for(4)
    by_run: dict[str, list[str]] = {}
    for event in received:
        by_run.setdefault(event["job"]["name"], []).append(event["eventType"])
    assert by_run == {"reads.py": ["START", "COMPLETE"], "broken.py": ["START", "FAIL"]}
    complete = next(e for e in received if e["eventType"] == "COMPLETE")
    assert complete["run"]["runId"] == record["uuid"]
    # Sent as the session closed, not after its first step.
    closed = _record(tmp_path, session.run_id)
    assert closed["session"]["open"] is False
    assert complete["eventTime"] == closed["finished_at"]
    assert [d["name"] for d in complete["inputs"]] == ["data.csv"]
    assert sorted(d["name"] for d in complete["outputs"]) == ["more.txt", "total.txt"]


def test_a_run_page_shows_the_last_reproduction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notebook_executor._faces.report import build_report
    from notebook_executor._faces.report.index import page_name

    monkeypatch.chdir(tmp_path)
    (tmp_path / "random_draw.py").write_text(RANDOM)
    (tmp_path / "steady.py").write_text("# %%\nprint(6 * 7)\n")
    site = tmp_path / "site"
    with NotebookExecutor(runs_dir=tmp_path / "runs") as ex:
        drawn = ex.execute("random_draw.py")["run_id"]
        steady = ex.execute("steady.py")["run_id"]
        build_report(ex.runs(), ex.runs_dir, site)
        assert "Last reproduction" not in (site / page_name(drawn)).read_text()
        assert ex.reproduce(drawn)["reproduced"] is False
        again = ex.reproduce(steady)
        assert again["reproduced"] is True
        build_report(ex.runs(), ex.runs_dir, site)
    page = (site / page_name(drawn)).read_text()
    assert "<h2>Last reproduction: not reproduced</h2>" in page
    assert "<dt>first difference</dt><dd>cell 2</dd>" in page
    page = (site / page_name(steady)).read_text()
    assert "<h2>Last reproduction: reproduced</h2>" in page
    assert f"<dt>run again as</dt><dd>{again['run_id']}</dd>" in page
    assert "first difference" not in page
