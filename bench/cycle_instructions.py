#!/usr/bin/env python3
"""User-space instructions of one in-process run+halt+resume cycle, counted by valgrind.

    python bench/cycle_instructions.py [--pipeline TEXT] [--cycles 100] [--state-dir DIR]

The timed rows of bench/run.py move by up to 40% from minute to minute on a shared virtual
machine, so a change of a few per cent to the CPU path cannot be seen in them. An instruction
count can: it is the same from run to run within a tenth of a per cent. This runs the cycle
under callgrind with 10 and with 10 + --cycles counted cycles after the same warm-up, and
prints the difference per cycle: start-up, imports and the first compile cancel out. What the
kernel does for our system calls is not counted (compare those with `strace -c`), nor is any
child process. Our sources are byte-compiled first, as bench/run.py does, and one run goes
first uncounted. Needs valgrind; each run takes some seconds
(callgrind runs Python about 50 times slower). Prints a line; asserts nothing.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PURE = "state.get none | map --wrap v | approve --prompt ok | pick v"

# the child: warm up (the first cycle compiles; the key set settles after RACY_SECONDS), then
# run the cycles being counted
CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from vm.host.store.directory_keys import RACY_SECONDS
from vm.service.protocol import Decision, Options, handle, resume
options = Options(cwd=sys.argv[3], state_dir=sys.argv[3] + "/state", env={"PATH": ""})
def cycles(n):
    for _ in range(n):
        halted = handle({"action": "run", "pipeline": sys.argv[2]}, options)
        token = halted["requiresApproval"]["resumeToken"]
        assert resume(options, Decision(approve=True), token=token)["status"] == "ok"
cycles(20)
time.sleep(RACY_SECONDS + 0.1)
cycles(int(sys.argv[4]))
"""


def instructions(pipeline: str, cycles: int, state_parent: str) -> int:
    with tempfile.TemporaryDirectory(dir=state_parent) as work:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             "-c", CHILD, str(ROOT), pipeline, work, str(cycles)],
            capture_output=True, text=True, check=False,
            env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
        found = re.search(r"Collected : (\d+)", proc.stderr)
        if proc.returncode != 0 or found is None:
            raise SystemExit(f"valgrind failed: {proc.stderr[-800:]}")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default=PURE)
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--state-dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                        help="where the throwaway state dirs go (default: /dev/shm)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("cycle_instructions needs valgrind (apt install valgrind)")
    for package in ("vm", "lobsterc"):  # as installed: else the first run compiles them
        compileall.compile_dir(str(ROOT / package), quiet=1)
    instructions(args.pipeline, 10, args.state_dir)  # untimed: a first run
    few = instructions(args.pipeline, 10, args.state_dir)
    many = instructions(args.pipeline, 10 + args.cycles, args.state_dir)
    print(f"{(many - few) / args.cycles:,.0f} user-space instructions per cycle "
          f"({args.cycles} cycles of {args.pipeline!r})")


if __name__ == "__main__":
    main()
