"""What the MCP server adds: latency of ``execute`` over the Python API, and response sizes.

1. latency: a trivial notebook run by a warm ``NotebookExecutor`` in this process and by the
   ``execute`` tool of a warm ``notebook-executor mcp`` server (stdio, the SDK's own client),
   runs interleaved one API / one MCP so both see the same machine, a pause between runs (as
   an agent pauses) so warm kernels are ready. Kernel time varies far more than what MCP adds,
   so the figure is the difference of the medians of what lies outside the run itself (wall
   time minus the result's ``duration_seconds``): the transport, the tool, planning and
   record writing (target: under 10 ms); the plain medians are printed too;
2. response sizes: ``execute`` and ``read_notebook`` on a run that printed 20 MB, and on a run
   that displayed a 200 kB PNG (against the characters its base64 would have cost inline).

Usage::

    python benchmarks/bench_mcp.py [--runs 30] [--pause 0.3]
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from notebook_executor import NotebookExecutor

TRIVIAL = """# %% tags=["parameters"]
x = 1

# %%
y = x + 1
print(y)
"""

FLOOD = """# %%
import sys
for _ in range(20):
    sys.stdout.write("x" * 1_000_000)
"""

# A noisy 200 kB PNG drawn by the kernel (no imaging library): random pixels do not compress.
PLOT = """# %%
import os, struct, zlib
from IPython.display import Image, display

def png(width, height):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    rows = b"".join(b"\\x00" + os.urandom(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))

image = png(260, 260)
display(Image(data=image))
"""


def size(result: CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True))


async def measure(root: Path, runs: int, pause: float) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "notebook_executor", "mcp", "--root", str(root)],
        cwd=str(root),
    )
    api_seconds: list[float] = []
    mcp_seconds: list[float] = []
    api_overhead: list[float] = []
    mcp_overhead: list[float] = []
    figures: dict[str, Any] = {}
    with NotebookExecutor(runs_dir=root / "api-runs", progress=False) as ex:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(3):  # warm both up: first kernels, imports, catalogs
                ex.execute(root / "trivial.py")
                await session.call_tool("execute", {"path": "trivial.py"})
            for _ in range(runs):
                await anyio.sleep(pause)
                began = time.perf_counter()
                result = ex.execute(root / "trivial.py")
                api_seconds.append(time.perf_counter() - began)
                api_overhead.append(api_seconds[-1] - result["duration_seconds"])
                assert result["status"] == "success"
                await anyio.sleep(pause)
                began = time.perf_counter()
                answer = await session.call_tool("execute", {"path": "trivial.py"})
                mcp_seconds.append(time.perf_counter() - began)
                assert not answer.is_error and answer.structured_content is not None
                assert answer.structured_content["status"] == "success"
                mcp_overhead.append(mcp_seconds[-1] - answer.structured_content["duration_seconds"])
            flood = await session.call_tool("execute", {"path": "flood.py"})
            assert flood.structured_content is not None
            flood_run = flood.structured_content["run_id"]
            flood_page = await session.call_tool("read_notebook", {"run_id": flood_run})
            plot = await session.call_tool("execute", {"path": "plot.py"})
            assert plot.structured_content is not None
            plot_run = plot.structured_content["run_id"]
            plot_page = await session.call_tool("read_notebook", {"run_id": plot_run})
            assert plot_page.structured_content is not None
            uri = plot_page.structured_content["cells"][0]["outputs"][0]["images"][0]["uri"]
            image = await session.read_resource(uri)
            blob = getattr(image.contents[0], "blob", "")
            figures.update(
                flood_execute=size(flood),
                flood_read=size(flood_page),
                plot_execute=size(plot),
                plot_read=size(plot_page),
                plot_png_bytes=len(base64.b64decode(blob)),
                plot_base64_chars=len(blob),
            )
    figures.update(
        api=statistics.median(api_seconds),
        mcp=statistics.median(mcp_seconds),
        api_overhead=statistics.median(api_overhead),
        mcp_overhead=statistics.median(mcp_overhead),
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs of each (default 30)")
    parser.add_argument(
        "--pause",
        type=float,
        default=0.3,
        help="seconds between runs, as an agent pauses, so warm kernels are ready (default 0.3)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as folder:
        root = Path(folder)
        for name, text in [("trivial.py", TRIVIAL), ("flood.py", FLOOD), ("plot.py", PLOT)]:
            (root / name).write_text(text, encoding="utf-8")
        figures = anyio.run(measure, root, args.runs, args.pause)
    added_ms = (figures["mcp_overhead"] - figures["api_overhead"]) * 1000
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"execute, trivial notebook, median of {args.runs} (interleaved, {args.pause} s apart):")
    print(f"  Python API        {figures['api'] * 1000:8.1f} ms")
    print(f"  MCP (stdio)       {figures['mcp'] * 1000:8.1f} ms")
    print(
        "  outside the run (wall time - the result's duration_seconds): "
        f"API {figures['api_overhead'] * 1000:.1f} ms, MCP {figures['mcp_overhead'] * 1000:.1f} ms"
    )
    verdict = "pass" if added_ms < 10 else "FAIL"
    print(f"  added by MCP      {added_ms:8.1f} ms   (target < 10 ms: {verdict})")
    print("response sizes (characters of the whole tool result as JSON; budget 20,000):")
    print(f"  execute, 20 MB printed        {figures['flood_execute']:8,}")
    print(f"  read_notebook, 20 MB printed  {figures['flood_read']:8,}")
    print(f"  execute, a plot               {figures['plot_execute']:8,}")
    print(f"  read_notebook, a plot         {figures['plot_read']:8,}")
    print(
        f"  (the plot's PNG: {figures['plot_png_bytes']:,} bytes, "
        f"{figures['plot_base64_chars']:,} characters as base64 inline)"
    )


if __name__ == "__main__":
    main()
