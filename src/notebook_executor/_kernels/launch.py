"""Where kernels come from: which kernelspec a run uses, and starting and stopping kernels.

A run with no kernel name, or the generic ``python3``, runs on ipykernel in the interpreter that
runs the executor (``sys.executable``), so a venv or ``uv run`` just works without
``jupyter kernelspec install``. Other names are looked up as Jupyter kernelspecs.

Kernels talk over IPC sockets in a private temporary folder rather than TCP: nothing listens on
the network, and ipykernel has no reason to warn about unencrypted TCP on every run.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import NotebookSourceError
from ..engine import CellEnd, KernelChoice
from .inside.sessions import KERNEL_ID, kill_sessions
from .options import KERNEL_OPTIONS, NATIVE_KERNEL_NAME, script_command
from .workdirs import Workdir, make_workdir

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import AsyncKernelManager

    from .forkserver import ForkChannel

__all__ = [
    "KERNEL_ENV_NAMES",
    "RunningKernel",
    "choose_kernel",
    "client_context",
    "kernel_base_environment",
    "kernel_environment",
    "start_kernel",
    "wait_until_ready",
]

logger = logging.getLogger(__name__)

#: Seconds a kernel asked to shut down has to exit before it is killed.
SHUTDOWN_GRACE = 3.0

#: Seconds a killed kernel is waited for (jupyter_client's wait after its own kill).
KILL_WAIT = 5.0


def choose_kernel(
    notebook: str, requested: str | None, kernelspec: dict[str, Any] | None
) -> KernelChoice:
    """Decide the kernel for a run.

    ``requested`` (the caller's ``kernel_name``) wins; else the notebook's kernelspec; else the
    native Python kernel. ``python3`` (or ``python``, as jupyter_client reads it) is the native
    kernel: ipykernel in this interpreter. Any
    other name must be an installed kernelspec, else NotebookSourceError lists those installed
    (no silent fallback: a notebook naming ``python3.12`` or ``conda-env`` means that one).
    """
    kernelspec = kernelspec or {}
    name = requested or kernelspec.get("name") or NATIVE_KERNEL_NAME
    if not isinstance(name, str):
        raise NotebookSourceError(notebook, f"kernel name must be a string, got {name!r}")
    if name == "python":
        # jupyter_client's KernelManager (so nbclient and papermill) runs it as ``python3``.
        name = NATIVE_KERNEL_NAME
    if name == NATIVE_KERNEL_NAME:
        return KernelChoice(NATIVE_KERNEL_NAME, "python", native=True, interpreter=sys.executable)
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        installed = {NATIVE_KERNEL_NAME, *_installed_kernels()}
        raise NotebookSourceError(
            notebook,
            f"kernel {name!r} is not installed (installed: {', '.join(sorted(installed))})",
        ) from None
    except (OSError, ValueError) as exc:
        raise NotebookSourceError(notebook, f"kernel {name!r} is unusable: {exc}") from None
    program = spec.argv[0] if spec.argv else None
    return KernelChoice(name, spec.language or "python", native=False, interpreter=program)


def _installed_kernels() -> list[str]:
    from jupyter_client.kernelspec import KernelSpecManager

    try:
        return list(KernelSpecManager().find_kernel_specs())
    except (OSError, ValueError):
        return []


def _native_spec(interpreter: str | None = None) -> KernelSpec:
    from jupyter_client.kernelspec import KernelSpec

    return KernelSpec(
        argv=[
            *script_command("__nbx_kernel__", interpreter),
            "-f",
            "{connection_file}",
            *KERNEL_OPTIONS,
        ],
        display_name=f"Python {sys.version_info.major}.{sys.version_info.minor}",
        language="python",
        resource_dir="",
    )


def _spec_manager(choice: KernelChoice) -> Any:
    from jupyter_client.kernelspec import KernelSpecManager

    if not choice.native:
        return KernelSpecManager()
    manager = _native_spec_manager_class()()
    # A notebook's own environment (docs/how-to/environments.md): the same kernel program, its
    # Python.
    manager.interpreter = choice.interpreter
    return manager


@functools.cache
def _native_spec_manager_class() -> type:
    """A spec manager that knows the native kernel; made once (traitlets classes are costly
    to set up)."""
    from jupyter_client.kernelspec import KernelSpecManager

    class _NativeSpecManager(KernelSpecManager):  # type: ignore[misc]
        interpreter: str | None = None

        def get_kernel_spec(self, kernel_name: str, *args: Any, **kwargs: Any) -> KernelSpec:
            return _native_spec(self.interpreter)

    return _NativeSpecManager


@dataclass
class RunningKernel:
    """A started kernel with its connected client."""

    manager: AsyncKernelManager
    client: AsyncKernelClient
    workdir: Workdir
    stderr_path: Path
    _stderr: Any = field(repr=False, default=None)
    #: The content of the kernel's ``kernel_info_reply`` (its ``language_info`` above all).
    info: dict[str, Any] = field(default_factory=dict)
    #: The :data:`~.inside.sessions.KERNEL_ID` values recorded for the kernel's session.
    session_ids: list[str] = field(default_factory=list)

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the kernel process wrote to stderr."""
        try:
            data = self.stderr_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode("utf-8", errors="replace").strip()

    def exit_status(self) -> int | None:
        """The kernel process's exit status, once it has exited (else None)."""
        provisioner = getattr(self.manager, "provisioner", None)
        process = getattr(provisioner, "process", None)
        if process is None:
            return None
        try:
            code = process.poll()
        except Exception:
            return None
        return None if code is None else int(code)

    def account_for(self, end: CellEnd) -> CellEnd:
        """``end``, with how the kernel died when it did: its exit status and the last lines
        it wrote to stderr."""
        if end.how == "dead":
            end.exit_status = self.exit_status()
            tail = self.stderr_tail()
            end.stderr = tail.splitlines()[-20:] if tail else []
        return end

    async def stop(self, *, now: bool, closing: bool = False) -> bool:
        """Stop the kernel process and release its sockets and files.

        Unless ``now``, the kernel is asked to shut down and given :data:`SHUTDOWN_GRACE`
        seconds to exit on its own (watched closely: jupyter_client polls every 0.1 s); then,
        or at once with ``now``, it is killed. True when it exited on its own when asked.
        A killed kernel is watched every 0.1 s, as jupyter_client does (a used run kernel is
        stopped in the background; a session's restore overlaps the stop with the next
        kernel's start); when ``closing`` (its pool closes, and the caller waits), every
        5 ms: an executor's close with two warm kernels took 127 ms, and takes 40-80 ms so.
        """
        manager = self.manager
        provisioner = getattr(manager, "provisioner", None)
        leader = getattr(provisioner, "pgid", None) or getattr(provisioner, "pid", None)
        exited = False
        try:
            self.client.stop_channels()
            if not now and await manager.is_alive():
                await manager.request_shutdown()
                exited = await _gone_within(manager, SHUTDOWN_GRACE, every=0.01)
            await _kill(manager, every=0.005 if closing else 0.1)
        finally:
            if isinstance(leader, int):
                # Whatever the notebook left running in the kernel's session goes with it.
                kill_sessions([leader])
            if self._stderr is not None:
                self._stderr.close()
            self.workdir.remove()
        return exited


async def start_kernel(
    choice: KernelChoice,
    *,
    cwd: Path,
    env: dict[str, str],
    ready_timeout: float,
    forkserver: ForkChannel | None = None,
    context: Any = None,
    warm_up: bool = False,
) -> RunningKernel:
    """Start a kernel in ``cwd`` with environment ``env`` and wait until it answers.

    With ``forkserver`` (native kernels only), the kernel process is forked from its template
    rather than launched: the same fresh kernel, without paying for the imports again (or
    from a checkpoint: see :mod:`.live`). With
    ``context`` (a ``zmq.asyncio.Context``), the kernel's sockets share it instead of each
    manager and client creating, and tearing down, a context of its own. With ``warm_up``
    (kernels started ahead of a run), the kernel also runs one silent, history-less ``pass``,
    so the run's first cell does not pay for the kernel's first execution.
    """
    from jupyter_client.manager import AsyncKernelManager

    workdir = make_workdir()
    stderr_path = workdir.path / "stderr.log"
    stderr = stderr_path.open("wb")
    manager = AsyncKernelManager(
        kernel_name=choice.name,
        kernel_spec_manager=_spec_manager(choice),
        transport="ipc",
        connection_file=str(workdir.path / "connection.json"),
        **({} if context is None else {"context": context}),
    )
    manager.ip = str(workdir.path / "k")
    if forkserver is not None:
        from .forkserver import make_fork_provisioner

        manager.kernel_id = str(uuid.uuid4())
        manager.provisioner = make_fork_provisioner(manager, forkserver, str(stderr_path))
    # Inherited by whatever the kernel starts: how a sweep tells its processes (see
    # .inside.sessions).
    kernel_id = uuid.uuid4().hex
    env = {**env, KERNEL_ID: kernel_id}
    ids = [kernel_id] if forkserver is None else [kernel_id, *forkserver.kernel_ids]
    try:
        await manager.start_kernel(cwd=str(cwd), env=env, stdout=_devnull(), stderr=stderr)
        pid = getattr(manager.provisioner, "pid", None)
        if isinstance(pid, int):
            workdir.record_session(pid, ids)
        client = manager.client() if context is None else manager.client(context=context)
        # Liveness comes from the manager (the process itself): no heartbeat thread needed.
        client.start_channels(hb=False)
        try:
            info = await wait_until_ready(client, manager, timeout=ready_timeout)
            if warm_up:
                await _warm_up(client, manager, timeout=ready_timeout)
        except BaseException:
            client.stop_channels()
            raise
    except BaseException:
        # A start given up (a pool closing cancels those under way) or failed: killed and
        # watched closely. (jupyter_client's ``shutdown_kernel(now=True)`` interrupts it first,
        # then checks every 0.1 s: a worker of ``pytest --notebooks -n 2`` took 113-930 ms to
        # close its pool, on every run's way out.)
        try:
            if manager.has_kernel:
                await _kill(manager, every=0.005)
        finally:
            stderr.close()
            workdir.remove()
        raise
    return RunningKernel(manager, client, workdir, stderr_path, stderr, info, ids)


async def _kill(manager: AsyncKernelManager, *, every: float) -> None:
    """jupyter_client's ``shutdown_kernel(now=True)``, with no interrupt first, the kernel
    watched every ``every`` seconds until it is gone (:data:`KILL_WAIT` at most: past that, it
    is left to the session kill, as jupyter_client leaves it), and its resources released."""
    if await manager.is_alive() and manager.provisioner is not None:
        await manager.provisioner.kill()
        await _gone_within(manager, KILL_WAIT, every=every)
    if manager.has_kernel and manager.provisioner is not None and not await manager.is_alive():
        await manager.provisioner.wait()
    await manager.cleanup_resources()


async def wait_until_ready(
    client: AsyncKernelClient, manager: AsyncKernelManager, *, timeout: float
) -> dict[str, Any]:
    """Return the content of the kernel's ``kernel_info_reply`` once it answers on its shell
    channel and publishes on IOPub.

    jupyter_client's ``wait_for_ready`` ends by waiting for 0.2 s of IOPub silence; here the
    kernel's ``idle`` status for one of our own ``kernel_info_request`` proves IOPub is
    connected. A status published before our subscription took hold is lost (ZeroMQ's "slow
    joiner"): we ask again soon, after :data:`IOPUB_RETRY` at first, then twice as long each
    time. (It was 0.25 s at once: in ``pytest --notebooks`` runs of 20 small notebooks, one
    kernel start in seven took 200-300 ms instead of 30-60, and a run waited for it.)
    """
    from queue import Empty

    deadline = time.monotonic() + timeout
    info: dict[str, Any] = {}
    asked: set[str] = set()
    retry = IOPUB_RETRY
    while True:
        msg_id = client.kernel_info()
        asked.add(msg_id)
        answered = False
        round_ends = min(deadline, time.monotonic() + 1.0)
        while not answered and (left := round_ends - time.monotonic()) > 0:
            try:
                reply = await client.shell_channel.get_msg(timeout=left)
            except Empty:
                break
            answered = reply.get("parent_header", {}).get("msg_id") in asked
            if answered:
                info = dict(reply.get("content", {}))
        round_ends = min(deadline, time.monotonic() + retry)
        retry = min(2 * retry, IOPUB_RETRY_MAX)
        while answered and (left := round_ends - time.monotonic()) > 0:
            try:
                message = await client.iopub_channel.get_msg(timeout=left)
            except Empty:
                break
            if (
                message.get("msg_type") == "status"
                and message.get("parent_header", {}).get("msg_id") in asked
                and message.get("content", {}).get("execution_state") == "idle"
            ):
                return info
        if not await manager.is_alive():
            raise RuntimeError("the kernel died before answering")
        if time.monotonic() >= deadline:
            raise RuntimeError(f"the kernel did not answer within {timeout:g} s")


#: How long a kernel's start first waits for its idle status on IOPub before asking again
#: (:func:`wait_until_ready`; doubled at each round, up to :data:`IOPUB_RETRY_MAX`).
IOPUB_RETRY = 0.02
IOPUB_RETRY_MAX = 0.25


async def _warm_up(
    client: AsyncKernelClient, manager: AsyncKernelManager, *, timeout: float
) -> None:
    """Run a silent ``pass`` (no execution count, no history) and wait until it is done.

    The kernel is checked to be alive every second meanwhile: one killed while it warms up (its
    template killed, say) is given up at once, not waited for until ``timeout``.
    """
    from queue import Empty

    msg_id = client.execute("pass", silent=False, store_history=False)
    deadline = time.monotonic() + timeout
    replied = idle = False
    while not (replied and idle) and (left := deadline - time.monotonic()) > 0:
        channel = client.iopub_channel if replied else client.shell_channel
        try:
            message = await channel.get_msg(timeout=min(left, 1.0))
        except Empty:
            if not await manager.is_alive():
                raise RuntimeError("the kernel died during its warm-up") from None
            continue
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if replied:
            idle = message.get("content", {}).get("execution_state") == "idle"
        else:
            replied = message.get("msg_type") == "execute_reply"
    if not (replied and idle):
        raise RuntimeError(f"the kernel did not finish its warm-up within {timeout:g} s")


def client_context() -> Any:
    """A ``zmq.asyncio.Context`` for the clients of many kernels (see :func:`start_kernel`)."""
    import zmq
    import zmq.asyncio

    context = zmq.asyncio.Context()
    # Kernels bind their IPC sockets a moment after we connect: retry quickly.
    context.setsockopt(zmq.RECONNECT_IVL, 10)
    context.setsockopt(zmq.LINGER, 0)
    # No high-water mark on our side of IOPub either: a queue that fills drops output.
    context.setsockopt(zmq.RCVHWM, 0)
    return context


#: The variables of a server's own environment a kernel it starts for a client gets (``LC_*``
#: too): the MCP server's kernels, the run server's template. A client names any other it
#: needs (``execute``'s ``secrets``, or its own environment for the run server).
KERNEL_ENV_NAMES = (
    "HOME",
    "LANG",
    "PATH",
    "PYTHONPATH",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "TMPDIR",
    "VIRTUAL_ENV",
)


def kernel_base_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The minimal environment kernels start from: a client cannot read the server's own
    variables (tokens, credentials, another client's) through a notebook it edits and runs."""
    return {
        name: value
        for name, value in environ.items()
        if name in KERNEL_ENV_NAMES or name.startswith("LC_")
    }


def kernel_environment(
    extra: dict[str, str] | None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a kernel starts with: ``base`` (default: this process's), overlaid
    by ``extra``."""
    env = dict(os.environ if base is None else base)
    # The kernel's own stderr goes to a log; keep it free of debugger start-up noise.
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    env.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    if extra:
        env.update(extra)
    return env


async def _gone_within(manager: Any, seconds: float, *, every: float) -> bool:
    """Whether the kernel of ``manager`` is gone within ``seconds``, checked ``every`` so
    often."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends and await manager.is_alive():
        await _sleep(every)
    return not await manager.is_alive()


async def _sleep(seconds: float) -> None:
    # asyncio and subprocess load with the first kernel: ``import notebook_executor`` stays light.
    import asyncio

    await asyncio.sleep(seconds)


def _devnull() -> int:
    import subprocess

    return subprocess.DEVNULL
