#!/usr/bin/env python3
"""MCP benchmark: per-call latency of one warm `lobster mcp` process next to cold CLIs.

    python bench/mcp_bench.py [--calls N] [--reference PATH]

Two workloads: a run (`exec --json` then `head`), and a halt (`approve`) followed by its resume
(`--approve yes`). Three ways to make each call: the SDK's client over stdio to one warm
`lobster mcp` (its start is not counted), the cold `lobster` CLI (one process per call), and
the original's cold CLI (`/tmp/ref/node_modules/.bin/lobster`, or --reference / the
LOBSTER_REFERENCE variable; its rows are left out when it is missing). Each way gets its own
state dir and HOME. Prints medians and 90th percentiles in ms, and each median as a share of
the original's cold median for the same call, and that share over the 5% target (target: a
warm call within 5%, a ratio of 1.00x or less). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOBSTER = str(Path(sys.executable).parent / "lobster")
REFERENCE = "/tmp/ref/node_modules/.bin/lobster"
RUN = "exec --json --shell 'echo [1,2,3]' | head --n 2"
HALT = "exec --json --shell 'echo [1,2]' | approve --prompt 'Send?'"
CALLS = ("run", "halt", "resume", "halt+resume")
TARGET = 0.05  # a warm call's median within 5% of the original's cold median


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    env.update(HOME=str(home), LOBSTER_STATE_DIR=str(home / "state"))
    return env


def cold(exe: str, calls: int) -> dict[str, list[float]]:
    """Per-call wall times (s) of one CLI process per call."""
    home = Path(tempfile.mkdtemp(prefix="lobster-bench-"))
    env = environment(home)

    def call(*argv: str) -> tuple[dict, float]:
        started = time.perf_counter()
        proc = subprocess.run([exe, *argv], cwd=home, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120)
        elapsed = time.perf_counter() - started
        envelope = json.loads(proc.stdout)
        assert envelope.get("ok"), envelope
        return envelope, elapsed

    times: dict[str, list[float]] = {name: [] for name in CALLS}
    call("run", "--mode", "tool", RUN)  # one untimed call: file caches, a compiled program
    for _ in range(calls):
        times["run"].append(call("run", "--mode", "tool", RUN)[1])
        halted, halt = call("run", "--mode", "tool", HALT)
        token = halted["requiresApproval"]["resumeToken"]
        resumed, resume = call("resume", "--token", token, "--approve", "yes")
        assert resumed["output"] == [1, 2], resumed
        times["halt"].append(halt)
        times["resume"].append(resume)
        times["halt+resume"].append(halt + resume)
    return times


def warm(calls: int) -> dict[str, list[float]]:
    """Per-call wall times (s) through one `lobster mcp` process and the SDK's client."""
    import anyio
    import mcp

    home = Path(tempfile.mkdtemp(prefix="lobster-bench-"))
    params = mcp.StdioServerParameters(command=LOBSTER, args=["mcp"], env=environment(home),
                                       cwd=str(home))
    times: dict[str, list[float]] = {name: [] for name in CALLS}

    async def body() -> None:
        async with mcp.Client(params, read_timeout_seconds=120) as client:
            async def call(tool: str, **arguments) -> tuple[dict, float]:
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                elapsed = time.perf_counter() - started
                assert result.structured_content.get("ok"), result.structured_content
                return result.structured_content, elapsed

            await client.list_tools()
            await call("lobster_run", pipeline=RUN)  # untimed: the compiler's first use
            for _ in range(calls):
                times["run"].append((await call("lobster_run", pipeline=RUN))[1])
                halted, halt = await call("lobster_run", pipeline=HALT)
                token = halted["requiresApproval"]["resumeToken"]
                resumed, resume = await call("lobster_resume", token=token, approve=True)
                assert resumed["output"] == [1, 2], resumed
                times["halt"].append(halt)
                times["resume"].append(resume)
                times["halt+resume"].append(halt + resume)

    anyio.run(body)
    return times


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--reference", default=os.environ.get("LOBSTER_REFERENCE", REFERENCE))
    args = parser.parse_args()
    rows = [("lobster mcp (warm, SDK client)", warm(args.calls)),
            ("lobster CLI (cold)", cold(LOBSTER, args.calls))]
    if os.access(args.reference, os.X_OK):
        rows.append(("original CLI (cold)", cold(args.reference, args.calls)))
    else:
        print(f"(no original at {args.reference}: its rows and the shares are left out)")
    base = dict(rows).get("original CLI (cold)")
    print(f"per-call latency, ms: median / p90 over {args.calls} calls each"
          + ("; [share of the original's cold median, that share / the 5% target]"
             if base else ""))
    print(f"{'':32}" + "".join(f"{name:>34}" for name in CALLS))
    for label, times in rows:
        cells = []
        for name in CALLS:
            median = statistics.median(times[name])
            cell = f"{median * 1000:.1f} / {p90(times[name]) * 1000:.1f}"
            if base:
                share = median / statistics.median(base[name])
                cell += f" [{share:.1%}, {share / TARGET:.2f}x]"
            cells.append(f"{cell:>34}")
        print(f"{label:32}" + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
