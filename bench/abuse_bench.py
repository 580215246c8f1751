#!/usr/bin/env python3
"""The service under abuse, timed: `lobsterc dis` of a big program, the refusal of 1 MB
workflow files, a workflow file run, and the peak memory of `lobster mcp` fed one huge line.

    python bench/abuse_bench.py [--root DIR] [--steps 20000] [--line-mb 200] [--skip NAME,...]

--root runs another checkout's code (an unpacked `git archive`, say) under this one's
interpreter, so a "before" and an "after" can be printed from one machine. Each figure is one
cold process (wall seconds, or peak RSS in MiB). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024


def _env(root: Path, work: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    env.update(PYTHONPATH=str(root), LOBSTER_STATE_DIR=str(work / "state"))
    return env


def _timed(argv: list[str], root: Path, work: Path, limit: float) -> str:
    start = time.monotonic()
    try:
        subprocess.run(argv, cwd=work, env=_env(root, work), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=limit)
    except subprocess.TimeoutExpired:
        return f"> {limit:.0f} s"
    return f"{time.monotonic() - start:.2f} s"


def _lobster(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from lobsterc.frontend import lobster; "
            "sys.exit(lobster(sys.argv[1:]))", *args]


def _lobsterc(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from lobsterc.tools.cli import main; "
            "sys.exit(main(sys.argv[1:]))", *args]


def _fill(path: Path, head: str, step, size: int = MB - 300) -> Path:
    parts, total, i = [head], len(head), 0
    while total < size:
        text = step(i)
        if total + len(text) > size:
            break
        parts.append(text)
        total += len(text)
        i += 1
    path.write_text("".join(parts))
    return path


def _steps_with_when(path: Path, n: int) -> Path:
    """n steps, each after the first with a condition (a jump), in flow style to stay under
    the 1 MiB limit of a workflow file."""
    lines = ["steps:", "- {id: s0, run: e}"]
    lines += [f"- {{id: s{i}, run: e, when: $s0.json}}" for i in range(1, n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def mcp_peak_rss(root: Path, work: Path, megabytes: int) -> str:
    """Peak RSS of `lobster mcp` after one line of `megabytes` MiB (and its answer, if any)."""
    proc = subprocess.Popen(_lobster("mcp"), cwd=work, env=_env(root, work),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "0"}}}
    proc.stdin.write(json.dumps(hello).encode() + b"\n")
    proc.stdin.flush()
    proc.stdout.readline()
    head = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lobster_run",'
            b'"arguments":{"pipeline":"')
    chunk = b"x" * MB
    proc.stdin.write(head)
    for _ in range(megabytes):
        proc.stdin.write(chunk)
    proc.stdin.write(b'"}}}\n')
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    answer = "answered" if ready and proc.stdout.readline() else "no answer"
    with open(f"/proc/{proc.pid}/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    proc.stdin.close()
    proc.wait(timeout=60)
    return f"{peak / 1024:.0f} MiB ({answer})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=str(ROOT))
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--line-mb", type=int, default=200)
    parser.add_argument("--limit", type=float, default=600.0, help="seconds per figure")
    parser.add_argument("--skip", default="")
    opts = parser.parse_args()
    root = Path(opts.root).resolve()
    skip = set(filter(None, opts.skip.split(",")))
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="lobster-abuse-") as tmp:
        work = Path(tmp)
        if "dis" not in skip:
            source = _steps_with_when(work / "big.lobster", opts.steps)
            subprocess.run(_lobsterc("compile", str(source), "-o", str(work / "big.lbc")),
                           cwd=work, env=_env(root, work), check=True,
                           stdout=subprocess.DEVNULL)
            rows.append((f"lobsterc dis, {opts.steps} steps with when:",
                         _timed(_lobsterc("dis", str(work / "big.lbc")), root, work, opts.limit)))
        if "refuse" not in skip:
            refs = _fill(work / "refs.lobster", "steps:\n",
                         lambda i: f"  - id: s{i}\n    run: echo\n    stdin: $nope{i}.stdout\n")
            rows.append(("1 MB workflow, every step an unknown reference (E211)",
                         _timed(_lobster("run", "--mode", "tool", str(refs)), root, work,
                                opts.limit)))
            commands = _fill(work / "commands.lobster", "steps:\n",
                             lambda i: f"  - id: s{i}\n    pipeline: nosuch{i} --x {i}\n")
            rows.append(("1 MB workflow, every step an unknown command (E201)",
                         _timed(_lobster("run", "--mode", "tool", str(commands)), root, work,
                                opts.limit)))
            nodes = _fill(work / "nodes.lobster", "steps:\n",
                          lambda i: f"  - id: x\n    run: echo {i}\n")
            rows.append(("1 MB workflow over the value limit (E230)",
                         _timed(_lobster("run", "--mode", "tool", str(nodes)), root, work,
                                opts.limit)))
        if "mcp" not in skip:
            rows.append((f"lobster mcp peak RSS, one {opts.line_mb} MiB line",
                         mcp_peak_rss(root, work, opts.line_mb)))
    width = max(len(name) for name, _ in rows)
    print(f"code: {root}")
    print(f"{'what':<{width}}  figure")
    for name, figure in rows:
        print(f"{name:<{width}}  {figure}")


if __name__ == "__main__":
    main()
