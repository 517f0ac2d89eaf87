"""Overhead per MCP call over a plain Python tool call: the same tool, the same plan.

The tool is ``bench.mcp_tools.echo`` (no work). Three ways to call it N times:

- ``python``: planrail runs the plan with the ``@planrail.tool`` itself;
- ``mcp``: planrail runs the same plan with the tool served by ``python -m bench.mcp_tools``
  over stdio (one session, the server already started: start-up is reported apart);
- ``sdk``: the MCP SDK's own client calls the tool in a loop, no planrail (the protocol's
  floor on this machine).

Two plans: a chain (each step references the previous one's output: per-call latency) and a
fan of independent steps (throughput with up to 16 calls in flight). Median of the repeats.

    python -m bench.mcp_overhead [--quick]       # --quick: 50 steps, 1 repeat

Writes ``bench/results/mcp.json`` (``mcp-quick.json`` with --quick).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

from bench.report import table, write_json

STEPS, QUICK_STEPS = 500, 50
REPEATS, QUICK_REPEATS = 5, 1
IN_FLIGHT = 16


def plans(n: int, prefix: str) -> dict[str, dict[str, Any]]:
    tool = f"{prefix}echo"
    chain = [{"id": "s0", "tool": tool, "args": {"text": "x"}}] + [
        {"id": f"s{i}", "tool": tool, "args": {"text": f"${{s{i - 1}.text}}", "n": i},
         "depends_on": [f"s{i - 1}"]}
        for i in range(1, n)
    ]  # fmt: skip
    fan = [{"id": f"s{i}", "tool": tool, "args": {"text": str(i)}} for i in range(n)]
    return {"chain": {"steps": chain}, "fan": {"steps": fan}}


async def timed_runs(plan: dict[str, Any], tools: list[Any], repeats: int) -> float:
    import planrail

    times = []
    for _ in range(repeats + 1):  # the first run warms caches up and is not counted
        execution = planrail.prepare(plan, tools, max_concurrency=IN_FLIGHT)
        t0 = time.perf_counter()
        result = await execution.run()
        times.append(time.perf_counter() - t0)
        assert result.status == "succeeded", result.error
    return statistics.median(times[1:])


async def sdk_loop(n: int, repeats: int) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "bench.mcp_tools"])
    out: dict[str, float] = {}
    async with Client(params) as client:
        await client.list_tools()
        chain, fan = [], []
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(i: int) -> None:
            async with gate:
                await client.call_tool("echo", {"text": str(i)})

        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            for i in range(n):
                await client.call_tool("echo", {"text": str(i)})
            chain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(n)))
            fan.append(time.perf_counter() - t0)
        out = {"chain": statistics.median(chain[1:]), "fan": statistics.median(fan[1:])}
    return out


async def hop_seconds(hub: Any, n: int) -> float:
    """One round trip to the hub's event loop and back (what each MCP call pays for it)."""

    async def nothing() -> None:
        return None

    t0 = time.perf_counter()
    for _ in range(n):
        await hub.arun(nothing())
    return (time.perf_counter() - t0) / n


async def measure(n: int, repeats: int) -> dict[str, Any]:
    from bench.mcp_tools import echo
    from planrail.integrations.mcp import MCPHub, ServerConfig, mcp_tools

    server = ServerConfig(name="bench", command=(sys.executable, "-m", "bench.mcp_tools"),
                          trusted=True)  # fmt: skip
    seconds: dict[str, dict[str, float]] = {"python": {}, "mcp": {}}
    for shape, plan in plans(n, "").items():
        seconds["python"][shape] = await timed_runs(plan, [echo], repeats)
    async with MCPHub([server]) as hub:
        t0 = time.perf_counter()
        tools = await mcp_tools(hub)
        startup = time.perf_counter() - t0
        hop = await hop_seconds(hub, 20 * n)
        for shape, plan in plans(n, "bench.").items():
            seconds["mcp"][shape] = await timed_runs(plan, tools, repeats)
    seconds["sdk"] = await sdk_loop(n, repeats)
    return {"seconds": seconds, "server_startup_s": startup, "hop_s": hop}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 steps, one repeat")
    args = parser.parse_args(argv)
    n = QUICK_STEPS if args.quick else STEPS
    repeats = QUICK_REPEATS if args.quick else REPEATS
    found = asyncio.run(measure(n, repeats))
    per_call = {
        way: {shape: s / n * 1e6 for shape, s in shapes.items()}
        for way, shapes in found["seconds"].items()
    }
    rows = []
    for shape in ("chain", "fan"):
        py, mcp, sdk = (per_call[w][shape] for w in ("python", "mcp", "sdk"))
        rows.append([shape, py, mcp, sdk, mcp - py, mcp - sdk])
    print(f"{n} steps, median of {repeats}; µs per call")
    print(table(["plan", "python", "mcp", "sdk alone", "mcp - python", "mcp - sdk"], rows))
    print(f"each MCP call's round trip to the sessions' event loop: {found['hop_s'] * 1e6:.0f} µs")
    print(f"MCP server start-up and tool listing: {found['server_startup_s']:.2f} s")
    payload = {"steps": n, "repeats": repeats, "in_flight": IN_FLIGHT, "us_per_call": per_call,
               "hop_us": found["hop_s"] * 1e6,
               "server_startup_s": found["server_startup_s"]}  # fmt: skip
    print(f"wrote {write_json('mcp', args.quick, payload)}")
    return payload


if __name__ == "__main__":
    main()
