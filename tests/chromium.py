"""Headless Chromium driven over the DevTools protocol, through a pipe (no extra package).

Chromium started with ``--remote-debugging-pipe`` reads commands from its file descriptor 3 and
writes answers and events to descriptor 4, each a JSON text ended by a NUL byte. This is enough
to open a page, run an expression in it, click, time it and take a screenshot. Used by the
report's browser tests and by ``benchmarks/bench_report.py``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["Chromium", "find_chromium"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _browser_environment() -> dict[str, str]:
    """This environment, but with a short ``TMPDIR``: Chromium keeps sockets there too."""
    env = dict(os.environ)
    if len(env.get("TMPDIR", "")) > 60:
        env["TMPDIR"] = "/tmp"
    return env


class Chromium:
    """One headless browser with one page; a context manager that stops it on exit."""

    def __init__(
        self,
        profile: Path,
        *,
        width: int = 1400,
        height: int = 1000,
        remove_after: Path | None = None,
    ) -> None:
        #: A folder of the caller's to remove once the browser has stopped.
        self._remove_after = remove_after
        binary = find_chromium()
        if binary is None:
            raise RuntimeError("chromium is not installed")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def _fds() -> None:  # the protocol's fixed descriptors, in the child only
            # Copied above 10 first, so that neither lands on the other's target number.
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND",
             f"--user-data-dir={profile}", f"--window-size={width},{height}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=_fds, env=_browser_environment(),
        )  # fmt: skip
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self._session = self.send(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}
        )["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable", session=True)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def __enter__(self) -> Chromium:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            self._process.kill()
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        if self._remove_after is not None:
            shutil.rmtree(self._remove_after, ignore_errors=True)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = False,
        timeout: float = 60,
    ) -> dict[str, Any]:
        """Sends one command and returns its result; events that come meanwhile are kept."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_for(self, event: str, timeout: float = 60) -> dict[str, Any]:
        for at, seen in enumerate(self.events):
            if seen.get("method") == event:
                return self.events.pop(at)
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("method") == event:
                return answer
            self.events.append(answer)

    def open(self, url: str) -> None:
        """Opens ``url`` and waits for its load event (and a moment for timers to fire)."""
        # From a blank page, so that a change of fragment alone is a full load too.
        for address in ("about:blank", url):
            self.events.clear()
            self.send("Page.navigate", {"url": address}, session=True)
            self.wait_for("Page.loadEventFired")
        time.sleep(0.3)

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (DevTools runs it whatever the page's CSP)."""
        answer = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        if "exceptionDetails" in answer:
            raise RuntimeError(str(answer["exceptionDetails"]))
        return answer["result"].get("value")

    def screenshot(self, path: Path, *, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        data = self.send("Page.captureScreenshot", params, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def console_errors(self) -> list[str]:
        """Messages of the CSP violations and errors the page reported so far."""
        return [
            str(event["params"])
            for event in self.events
            if event.get("method") in ("Runtime.exceptionThrown", "Runtime.consoleAPICalled")
        ]
