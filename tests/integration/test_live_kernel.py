"""Checkpoints of a live kernel, on real kernels: exact state, refusals, eviction, no orphans.

A :class:`LiveKernel` runs cells with the engine's own cell machinery (``execute_cell``);
checkpoints are copies of the kernel process, restored as new kernels.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from notebook_executor._kernels.cells import Displays, execute_cell
from notebook_executor._kernels.forkserver import ForkServer
from notebook_executor._kernels.launch import choose_kernel, kernel_environment
from notebook_executor._kernels.live import CheckpointError, LiveKernel
from notebook_executor._notebook import new_code_cell, new_notebook
from support import alive, wait_gone

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork checkpoints: Linux"),
]


async def run(live: LiveKernel, code: str) -> str:
    """Run ``code`` as a cell on the live kernel; its text output (an error raises)."""
    nb = new_notebook(cells=[new_code_cell(code)])
    end = await execute_cell(
        live.client,
        nb,
        0,
        timeout=60,
        iopub_timeout=60,
        alive=live.alive,
        displays=Displays(),
    )
    outputs = nb.cells[0].outputs
    if end.how != "ok":
        raise AssertionError(f"{end.how}: {outputs}")
    texts = []
    for output in outputs:
        if output.get("output_type") == "stream":
            texts.append(output["text"])
        elif "data" in output:
            texts.append(output["data"].get("text/plain", ""))
    return "".join(texts).strip()


async def start(cwd: Path, forkserver: ForkServer | None = None) -> LiveKernel:
    choice = choose_kernel("notebook", None, None)
    return await LiveKernel.start(
        choice, cwd=cwd, env=kernel_environment(None), ready_timeout=60, forkserver=forkserver
    )


@pytest.fixture(scope="module")
def template() -> Iterator[ForkServer]:
    server = ForkServer(kernel_environment(None), data_modules=False)
    server.start()
    try:
        yield server
    finally:
        server.close()


STATE = (
    "print(json.dumps([x, 'probe' in sys.modules, random.random(), float(rng.random()), "
    "float(np.random.random()), get_ipython().execution_count]))"
)


@pytest.mark.parametrize("origin", ["launched", "forked"])
def test_a_restore_gives_the_exact_state_and_can_be_repeated(
    short_tmp_path: Path, template: ForkServer, origin: str
) -> None:
    (short_tmp_path / "probe.py").write_text("VALUE = 1\n")

    async def scenario() -> None:
        live = await start(short_tmp_path, template if origin == "forked" else None)
        pids = {live.pid}
        try:
            await run(
                live,
                "import json, random, sys\nimport numpy as np\n"
                "random.seed(1); np.random.seed(3); rng = np.random.default_rng(7); x = [1, 2]",
            )
            assert live.checkpoint_unsupported() is None
            assert await live.checkpoint(0) is None
            assert live.checkpoints == [0]
            after = json.loads(await run(live, STATE))
            await run(live, "import probe\nx.append(3)\nrandom.random()")
            now = await run(live, "print(json.dumps([x, 'probe' in sys.modules]))")
            assert json.loads(now) == [[1, 2, 3], True]
            for _ in range(2):
                await live.restore(0)
                pids.add(live.pid)
                again = json.loads(await run(live, STATE))
                # Variables, modules, the three generators and the execution count are as
                # they were right after the checkpoint's cell.
                assert again == after
                assert again[:2] == [[1, 2], False]
            assert live.checkpoints == [0]
            pids.update(live.checkpoint_pids())
            assert len(pids) == 4  # the first kernel, two made from the checkpoint, and it
        finally:
            await live.shutdown()
        assert wait_gone(pid for pid in pids if pid is not None) == set()

    asyncio.run(scenario())


HIDDEN = "print(json.dumps(sorted(get_ipython().user_ns_hidden)))"


@pytest.mark.parametrize("origin", ["launched", "forked"])
def test_a_restore_keeps_the_hidden_namespace_and_who_lists_the_variables(
    short_tmp_path: Path, template: ForkServer, origin: str
) -> None:
    """The new application of a restored kernel hides nothing more: ``%who`` sees the user's
    variables, and ``user_ns_hidden`` is as it was at the checkpoint."""

    async def scenario() -> None:
        live = await start(short_tmp_path, template if origin == "forked" else None)
        try:
            await run(live, "import json\nalpha = 1\nbeta = [2]")
            assert await live.checkpoint(0) is None
            hidden = json.loads(await run(live, HIDDEN))
            assert "alpha" not in hidden
            await live.restore(0)
            assert json.loads(await run(live, HIDDEN)) == hidden
            assert await run(live, "%who") == "alpha\t beta\t json"
        finally:
            await live.shutdown()

    asyncio.run(scenario())


def test_a_file_written_after_a_checkpoint_stays_written(short_tmp_path: Path) -> None:
    """A checkpoint is memory, not files."""

    async def scenario() -> None:
        live = await start(short_tmp_path)
        try:
            await run(live, "from pathlib import Path\nn = 1")
            assert await live.checkpoint(0) is None
            await run(live, "Path('written.txt').write_text('after'); n = 2")
            await live.restore(0)
            assert await run(live, "print(n, Path('written.txt').read_text())") == "1 after"
        finally:
            await live.shutdown()

    asyncio.run(scenario())
    assert (short_tmp_path / "written.txt").read_text() == "after"


def test_a_stream_the_notebook_holds_still_prints_after_a_restore(short_tmp_path: Path) -> None:
    async def scenario() -> None:
        live = await start(short_tmp_path)
        try:
            await run(
                live,
                "import logging, sys\nlog = logging.getLogger('probe')\n"
                "log.addHandler(logging.StreamHandler(sys.stdout)); log.setLevel('INFO')",
            )
            assert await live.checkpoint(0) is None
            await live.restore(0)
            assert await run(live, "log.info('after'); print('plain')") == "after\nplain"
        finally:
            await live.shutdown()

    asyncio.run(scenario())


REFUSALS = [
    (
        "import threading, time\nstop = threading.Event()\n"
        "worker = threading.Thread(target=stop.wait, name='mine'); worker.start()",
        "stop.set(); worker.join()",
        "threads of its own (mine)",
    ),
    (
        "import subprocess\nchild = subprocess.Popen(['sleep', '60'])",
        "child.kill(); child.wait()",
        "processes that still run",
    ),
    (
        "import sys, types\ntorch = types.ModuleType('torch')\n"
        "torch.cuda = types.SimpleNamespace(is_initialized=lambda: True)\n"
        "sys.modules['torch'] = torch",
        "del sys.modules['torch']",
        "GPU context (torch.cuda is initialised)",
    ),
    (
        "from comm import create_comm\nopened = create_comm(target_name='probe')",
        "opened.close()",
        "1 open comms (widgets)",
    ),
]


@pytest.mark.parametrize(("start_code", "end_code", "reason"), REFUSALS)
def test_a_checkpoint_is_refused_when_its_copy_could_break(
    short_tmp_path: Path, start_code: str, end_code: str, reason: str
) -> None:
    async def scenario() -> None:
        live = await start(short_tmp_path)
        try:
            await run(live, start_code)
            why = await live.checkpoint(1)
            assert why is not None and reason in why
            assert live.checkpoint_unsupported() == why
            assert live.checkpoints == []
            with pytest.raises(CheckpointError, match="no checkpoint 1"):
                await live.restore(1)
            # The kernel goes on, and once the cause is gone checkpoints are taken again.
            await run(live, end_code)
            assert await live.checkpoint(2) is None
            assert live.checkpoint_unsupported() is None
            assert live.checkpoints == [2]
        finally:
            await live.shutdown()

    asyncio.run(scenario())


def test_a_kernel_that_is_not_python_takes_no_checkpoint(
    bash_kernel: str, short_tmp_path: Path
) -> None:
    async def scenario() -> None:
        choice = choose_kernel("notebook", bash_kernel, None)
        live = await LiveKernel.start(
            choice, cwd=short_tmp_path, env=kernel_environment(None), ready_timeout=60
        )
        try:
            why = live.checkpoint_unsupported()
            assert why is not None and "not this interpreter's Python kernel" in why
            assert await live.checkpoint(0) == why
            assert live.checkpoints == []
        finally:
            await live.shutdown()

    asyncio.run(scenario())


def test_the_oldest_checkpoints_are_evicted_under_the_memory_limit(short_tmp_path: Path) -> None:
    size = 40 * 2**20

    async def scenario() -> None:
        live = await start(short_tmp_path)
        try:
            await run(live, f"import numpy as np\na = np.ones({size // 8})")
            assert await live.checkpoint(1) is None
            # Each change of the array leaves the previous version to the checkpoint only.
            await run(live, "a[:] = 2")
            assert await live.checkpoint(2) is None
            await run(live, "a[:] = 3")
            held = await live.account_memory()
            assert held >= 2 * size * 0.9
            live.memory_limit = int(1.5 * size)
            held = await live.account_memory()
            assert held <= live.memory_limit
            assert live.checkpoints == [2]
            assert "evicted" in live.lost[1]
            with pytest.raises(CheckpointError, match="evicted"):
                await live.restore(1)
            await live.restore(2)
            assert await run(live, "print(int(a[0]), int(a[-1]))") == "2 2"
        finally:
            await live.shutdown()

    asyncio.run(scenario())


def test_the_memory_limit_holds_at_every_step(short_tmp_path: Path) -> None:
    # Each step changes the whole array: the checkpoint before it keeps the old version. A
    # limit of 1.5 versions holds one checkpoint: it is never over, not even by one step.
    size = 40 * 2**20

    async def scenario() -> None:
        live = await start(short_tmp_path)
        live.memory_limit = int(1.5 * size)
        try:
            await run(live, f"import numpy as np\na = np.ones({size // 8})")
            for step in range(1, 5):
                assert await live.checkpoint(step) is None
                await run(live, f"a[:] = {step + 1}")
                held = await asyncio.to_thread(live.measure_memory)
                assert held <= live.memory_limit, f"step {step}: {held / size:.0%} of a version"
            assert live.checkpoints == [4]
            assert "evicted" in live.lost[3]
            await live.restore(4)
            assert await run(live, "print(int(a[0]), int(a[-1]))") == "4 4"
        finally:
            await live.shutdown()

    asyncio.run(scenario())


def test_a_checkpoint_is_measured_holding_the_whole_version_it_keeps(
    short_tmp_path: Path,
) -> None:
    # The libraries' pages are shared with every process mapping them: counting them took a
    # quarter of the version off (more with more Python processes on the machine), which let
    # a step go over the limit.
    size = 40 * 2**20

    async def scenario() -> None:
        live = await start(short_tmp_path)
        live.memory_limit = 10 * size
        try:
            await run(live, f"import numpy as np\na = np.ones({size // 8})")
            assert await live.checkpoint(1) is None
            before = await asyncio.to_thread(live.measure_memory)
            await run(live, "a[:] = 2")
            held = await asyncio.to_thread(live.measure_memory)
            assert 0.95 * size <= held - before <= 1.1 * size, (before, held)
        finally:
            await live.shutdown()

    asyncio.run(scenario())


HOST = r"""
import asyncio, json, sys, time
from pathlib import Path
from notebook_executor._kernels.launch import choose_kernel, kernel_environment
from notebook_executor._kernels.live import LiveKernel

async def main():
    live = await LiveKernel.start(
        choose_kernel("nb", None, None), cwd=Path(sys.argv[1]),
        env=kernel_environment(None), ready_timeout=60,
    )
    client = live.client
    pids = [live.pid]
    for key in (0, 1, 2):
        assert await live.checkpoint(key) is None
    await live.restore(1)
    pids.append(live.pid)
    assert await live.checkpoint(3) is None
    deadline = time.monotonic() + 30
    while len(live.checkpoint_pids()) < 4 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    pids += live.checkpoint_pids()
    print(json.dumps(pids), flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_a_killed_host_leaves_no_kernel_and_no_checkpoint(short_tmp_path: Path) -> None:
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(short_tmp_path)], stdout=subprocess.PIPE, text=True
    )
    pids: list[int] = []
    try:
        assert host.stdout is not None
        pids = json.loads(host.stdout.readline())
        # The first kernel (replaced), the restored one, and four checkpoints.
        assert len(pids) == 6
        assert pids[0] is not None and not alive(pids[0])
        assert all(alive(pid) for pid in pids[1:])
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    try:
        assert wait_gone(pids) == set()
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_checkpoints_that_could_not_act_are_swept_at_the_next_start(
    short_tmp_path: Path,
) -> None:
    """Stopped (so deaf to their host's death), the checkpoints and the kernel made from one
    are killed by the next sweep, from the records in their kernel folders."""
    from notebook_executor._kernels.workdirs import sweep_stale

    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(short_tmp_path)], stdout=subprocess.PIPE, text=True
    )
    pids: list[int] = []
    try:
        assert host.stdout is not None
        pids = json.loads(host.stdout.readline())[1:]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    try:
        assert all(alive(pid) for pid in pids)
        sweep_stale()
        assert wait_gone(pids) == set()
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
