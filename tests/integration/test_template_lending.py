"""The kernel templates pytest-xdist's controller lends its workers, with real templates.

A :class:`TemplateLender` owns real template processes; other processes (started as
pytest-xdist starts its workers: new interpreters, not forks) fetch them over its Unix socket
and ask them for kernels, several threads of several processes at once. Every request must get
its own answer, a process of another user must get nothing, and closing the lender must leave
no process and no folder behind.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_executor._faces.template_lending import TemplateLender, lent_templates
from notebook_executor._kernels.launch import kernel_environment
from support import alive, wait_gone

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork server and /proc"),
]

#: A worker: fetch the lent template of a kind, then ask it, from several threads at once,
#: requests whose answers name them (an unknown op is answered with its name).
WORKER = """
import json, sys, threading
from notebook_executor._faces.template_lending import lent_templates

address, kind, threads, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kernel, full = lent_templates(address)
template = kernel if kind == "kernel" else full
template.wait_ready()
crossed = []

def ask(thread):
    for number in range(calls):
        op = f"probe-{thread}-{number}"
        answer = template._call({"op": op})
        if op not in str(answer.get("error", "")):
            crossed.append([op, answer])

workers = [threading.Thread(target=ask, args=(n,)) for n in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
print(json.dumps({"pid": template.pid, "crossed": crossed[:5], "modules": template.data_modules}))
template.close()
kernel.close()
full.close()
"""


@pytest.fixture
def lender() -> Iterator[TemplateLender]:
    lender = TemplateLender(kernel_environment(None))
    yield lender
    lender.close()


def _workers(address: str, kind: str, count: int = 2) -> list[dict[str, object]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, address, kind, "3", "150"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    answers = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err[-3000:]
            answers.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        # A worker waiting for an answer that another process read would wait for ever.
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return answers


def test_workers_share_the_lent_templates_and_each_request_gets_its_own_answer(
    lender: TemplateLender,
) -> None:
    """Two processes of three threads each take turns on one template: no answer crosses
    another request's (a thread's turn must hold the other processes off, and the other
    threads of its own process). The full template starts only when first asked for."""
    assert set(lender.templates) == {"kernel"}
    folder = Path(lender.folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for kind in ("kernel", "full"):
        answers = _workers(lender.address, kind)
        assert [a["crossed"] for a in answers] == [[], []], answers
        pids = {a["pid"] for a in answers}
        assert pids == {lender.templates[kind].pid}, (pids, kind)
        assert {a["modules"] for a in answers} == {kind == "full"}
    assert set(lender.templates) == {"kernel", "full"}


def test_a_worker_forks_a_real_kernel_from_the_lent_template(
    lender: TemplateLender, tmp_path: Path
) -> None:
    """A kernel asked of a lent template is the template's child, watched and reaped by the
    process that asked for it."""
    kernel, full = lent_templates(lender.address)
    try:
        kernel.wait_ready()
        owner = lender.templates["kernel"]
        assert kernel.pid == owner.pid and kernel.kernel_id == owner.kernel_id
        forked = kernel.fork(
            connection_file=str(tmp_path / "kernel.json"),
            cwd=str(tmp_path),
            env=kernel_environment(None),
            stderr_path=str(tmp_path / "stderr.log"),
        )
        assert alive(forked.pid)
        status = Path(f"/proc/{forked.pid}/stat").read_text()
        assert int(status.rsplit(")", 1)[1].split()[1]) == owner.pid
        forked.kill()
        assert forked.wait(timeout=10) is not None
    finally:
        kernel.close()
        full.close()
    # Closing a worker's copy leaves the template to its owner.
    owner_pid = lender.templates["kernel"].pid
    assert owner_pid is not None and alive(owner_pid)


def test_closing_a_copy_while_it_waits_for_its_template_returns_at_once(
    lender: TemplateLender,
) -> None:
    """A worker that ends while the full template is still starting is not held up by it."""
    import threading

    from notebook_executor._kernels.forkserver import ForkServerError

    kernel, full = lent_templates(lender.address)
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            full.wait_ready()
        except ForkServerError as exc:
            failed.append(exc)

    waiting = threading.Thread(target=wait)
    waiting.start()
    # Until the lender has the request (it spawns the template, which imports pandas for a
    # while): the copy is then waiting for the answer.
    deadline = time.monotonic() + 30
    while "full" not in lender.templates and time.monotonic() < deadline:
        time.sleep(0.01)  # a poll of the event, with a deadline
    assert "full" in lender.templates, "the request never reached the lender"
    began = time.monotonic()
    full.close()
    kernel.close()
    waiting.join(timeout=10)
    assert not waiting.is_alive()
    assert time.monotonic() - began < 2.0
    assert full.pid is None or failed


def test_closing_the_lender_stops_its_templates_and_removes_its_folder() -> None:
    lender = TemplateLender(kernel_environment(None))
    answers = _workers(lender.address, "kernel", count=1)
    pids = {t.pid for t in lender.templates.values()} | {a["pid"] for a in answers}
    folder = Path(lender.folder)
    lender.close()
    assert wait_gone({p for p in pids if isinstance(p, int)}) == set()
    assert not folder.exists()


@pytest.fixture
def open_lender(monkeypatch: pytest.MonkeyPatch) -> Iterator[TemplateLender]:
    """A lender whose private folder is made in a folder every user may pass through (the
    suite's own ``$TMPDIR`` is private)."""
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="nbx-lending-", dir="/tmp")
    Path(base).chmod(0o711)
    monkeypatch.setattr(tempfile, "tempdir", base)
    lender = TemplateLender(kernel_environment(None))
    monkeypatch.undo()
    yield lender
    lender.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs another user: run as root")
def test_a_process_of_another_user_is_lent_nothing(open_lender: TemplateLender) -> None:
    """Another user's process cannot reach the socket (its folder is private); let in by
    opening the folder and the socket (as only a test would), it is still refused: the lender
    reads the peer's uid and answers nothing."""
    lender = open_lender
    assert Path(lender.folder).parent.name.startswith("nbx-lending-")
    script = (
        "import os, socket, sys\n"
        "from notebook_executor._faces.server.wire import receive_with_fds, send\n"
        "os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "s.settimeout(30)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except PermissionError:\n"
        "    print('unreachable')\n"
        "    sys.exit()\n"
        "try:\n"
        "    send(s, {'template': 'kernel'})\n"
        "    message, fds = receive_with_fds(s, 1 << 20, 1)\n"
        "except OSError as exc:\n"
        "    print('refused')\n"
        "else:\n"
        "    print('lent' if fds else 'answered: ' + str(message))\n"
    )

    def attempt() -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, lender.address],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    assert attempt() == "unreachable"
    Path(lender.folder).chmod(0o755)
    Path(lender.address).chmod(0o777)
    assert attempt() == "refused"


def test_a_worker_lent_nothing_forks_from_a_template_of_its_own(
    tmp_path: Path, own_templates: None
) -> None:
    """A worker told of a lender that is gone runs its notebooks all the same: its first
    kernel is launched, and the next ones are forked from a template of its own."""
    from notebook_executor import NotebookExecutor
    from notebook_executor._kernels.kernel_engine import KernelEngine
    from notebook_executor._kernels.shared_template import SharedForkServer, adopt, adopted

    (tmp_path / "nb.py").write_text("# %%\nimport json\nprint(json.dumps(6 * 7))\n")
    copies = lent_templates(str(tmp_path / "gone" / "templates.sock"))
    adopt(*copies)
    engine = KernelEngine()
    try:
        with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
            ex.prepare_kernel()
            results = [ex.execute(tmp_path / "nb.py") for _ in range(4)]
            assert [r["status"] for r in results] == ["success"] * 4
            assert adopted(False) is None  # (the full one was never asked for)
            pool = engine.pool
            assert pool is not None
            stats = dict(pool.stats)
            first = pool.starts.first
            assert first is not None and not isinstance(first.server, SharedForkServer)
    finally:
        adopt(None)
        for copy in copies:
            copy.close()
    assert stats["forked"] >= 2, stats
    assert stats["launched"] <= 1, stats


def test_a_lender_killed_outright_leaves_no_template_and_its_folder_goes_with_the_next() -> None:
    """SIGKILL a process lending templates: its template dies with it (parent-death signal);
    its folder stays until the next lender, which removes it and nothing else of the kind."""
    import signal

    script = (
        "import sys, time\n"
        "from notebook_executor._faces.template_lending import TemplateLender\n"
        "from notebook_executor._kernels.launch import kernel_environment\n"
        "lender = TemplateLender(kernel_environment(None))\n"
        "lender.templates['kernel'].wait_ready()\n"
        "print(lender.folder, lender.templates['kernel'].pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        folder_name, template = proc.stdout.readline().split()
        folder = Path(folder_name)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert wait_gone({int(template)}) == set()
    assert folder.is_dir()
    # A folder of the same kind holding what a lender never makes stays.
    kept = folder.parent / f"nbx-templates-{proc.pid}-kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("not a lender's")
    try:
        lender = TemplateLender(kernel_environment(None))
        try:
            assert not folder.exists()
            assert kept.is_dir() and Path(lender.folder).is_dir()
        finally:
            lender.close()
    finally:
        (kept / "notes.txt").unlink()
        kept.rmdir()


def test_executors_one_after_another_all_fork_from_the_adopted_template(
    tmp_path: Path, own_templates: None
) -> None:
    """A template adopted by a process serves every executor of it in turn: each one's first
    kernel is forked from it (not launched, though nothing prepared it), and closing an
    executor leaves the template to the next (a pool that closed it made every later one
    spawn templates of its own)."""
    from notebook_executor import NotebookExecutor
    from notebook_executor._kernels.kernel_engine import KernelEngine
    from notebook_executor._kernels.shared_template import SharedForkServer, adopt, adopted

    (tmp_path / "nb.py").write_text("# %%\nprint(6 * 7)\n")
    env = kernel_environment(None)
    kernel = SharedForkServer(env, tmp_path / "kernel.lock", data_modules=False)
    full = SharedForkServer(env, tmp_path / "full.lock", data_modules=True)
    for template in (kernel, full):
        template.spawn()
    try:
        for template in (kernel, full):
            template.wait_ready()
        adopt(kernel, full)
        for number in range(3):
            engine = KernelEngine(warm_kernels=0)
            with NotebookExecutor(runs_dir=tmp_path / "runs", engine=engine) as ex:
                result = ex.execute(tmp_path / "nb.py")
                assert result["status"] == "success", result
                pool = engine.pool
                assert pool is not None
                stats = dict(pool.stats)
                first = pool.starts.first
            assert first is not None and first.server is kernel, number
            assert stats["launched"] == 0 and stats["forked"] == 1, (number, stats)
            assert adopted(False) is kernel and kernel.running, number
    finally:
        adopt(None)
        for template in (kernel, full):
            template.close()
