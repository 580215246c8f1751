#!/usr/bin/env python3
"""Lobster benchmarks: every scenario of the performance issue, ours against the original.

    python bench/run.py [--lobster CMD] [--reference CMD] [--runs N]

Each scenario runs `--runs` times per command, alternating ours and the reference's, and the
table shows medians and the ratio ours / reference. Process scenarios start a new process each
run ("cold" process); the state dir is fresh per scenario, so the first of our runs compiles and
later runs find the program in the compile cache (the "first run" rows show the uncached cost).
Then the in-process figures for a gateway that embeds `vm`. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = json.dumps([{"id": i, "name": f"n{i}", "score": (i * 37) % 101, "active": i % 3 != 0}
                   for i in range(20)])
FIVE_STAGE = (f"exec --json --shell \"echo '{ROWS.replace(chr(34), chr(92) + chr(34))}'\" "
              "| where active=true | sort --key score --desc | pick id,name,score | head --n 5")
APPROVAL = FIVE_STAGE + " | approve --prompt 'Send these?' --preview-from-stdin --limit 2"
TEN_STEPS = "steps:\n" + "".join(
    f"  - id: s{i}\n    run: echo '{{\"n\": {i}}}'\n" + (f"    stdin: $s{i - 1}.stdout\n" if i else "")
    for i in range(10))


def big_input(path: Path, count: int) -> None:
    rows = [{"id": i, "team": ("red", "blue", "green")[i % 3], "score": (i * 7919) % 1000,
             "name": f"user{i}", "tags": ["a", "b"]} for i in range(count)]
    path.write_text(json.dumps(rows))


class Runner:
    """Runs one CLI (ours or the reference) in its own scratch dir and state dir."""

    def __init__(self, name: str, cmd: list[str], scratch: Path) -> None:
        self.name, self.cmd = name, cmd
        self.work = scratch / name
        self.work.mkdir(parents=True)
        (self.work / "ten.lobster").write_text(TEN_STEPS)
        self.state = self.work / "state"

    def fresh_state(self) -> None:
        shutil.rmtree(self.state, ignore_errors=True)

    def run(self, *argv: str) -> tuple[float, int, str]:
        """(wall seconds, peak RSS in KiB, stdout) of one invocation. The peak is read by
        /usr/bin/time: a child's own rusage would count the pages of this (large) process
        that it held between fork and exec."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
        env.update(LOBSTER_STATE_DIR=str(self.state), HOME=str(self.work))
        timer = ["/usr/bin/time", "-f", "%M"] if os.path.exists("/usr/bin/time") else []
        start = time.perf_counter()
        proc = subprocess.run([*timer, *self.cmd, *argv], cwd=self.work, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True)
        elapsed = time.perf_counter() - start
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        rss = int(lines[-1]) if timer and lines and lines[-1].isdigit() else 0
        return elapsed, rss, proc.stdout.decode("utf-8", "replace")


def state_bytes(state: Path) -> int:
    return sum(p.stat().st_size for p in state.rglob("*") if p.is_file())


def token_of(out: str) -> str:
    return json.loads(out)["requiresApproval"]["resumeToken"]


def measure_once(runner: Runner, scratch_big: Path, first: bool) -> dict[str, float]:
    """One sample of every process scenario."""
    sample: dict[str, float] = {}
    if first:
        runner.fresh_state()
        sample["first run: five-stage pipeline (no compile cache)"] = runner.run(
            "run", "--mode", "tool", FIVE_STAGE)[0]
    wall, rss, _ = runner.run("run", "--mode", "tool", FIVE_STAGE)
    sample["five-stage pipeline (exec, where, sort, pick, head)"] = wall
    sample["peak RSS of the five-stage pipeline (MiB)"] = rss / 1024
    sample["ten chained shell steps (workflow)"] = runner.run(
        "run", "--mode", "tool", "--file", "ten.lobster")[0]
    before = state_bytes(runner.state) if runner.state.exists() else 0
    wall, _, out = runner.run("run", "--mode", "tool", APPROVAL)
    sample["halt at an approval"] = wall
    sample["state bytes written for the approval halt"] = state_bytes(runner.state) - before
    sample["resume --approve yes of that halt"] = runner.run(
        "resume", "--token", token_of(out), "--approve", "yes")[0]
    sample["100 000 items: exec --json | where | sort | pick | head"] = runner.run(
        "run", "--mode", "tool", f"exec --json --shell 'cat {scratch_big}' | where team=red | "
        "sort --key score --desc | pick id,name,score | head --n 10")[0]
    return sample


def in_process_figures() -> list[tuple[str, str]]:
    sys.path.insert(0, str(ROOT))
    from lobsterc.generate.workflow import compile_workflow
    from vm.service.protocol import Decision, Options, handle, resume

    scratch = Path(tempfile.mkdtemp(prefix="lobster-bench-"))
    # distinct texts (the name differs), so no memo of an earlier compile can answer
    n = 200
    files = []
    for index in range(n + 1):
        wf = scratch / f"typical-{index}.lobster"
        wf.write_text(TYPICAL_WORKFLOW.replace("name: typical", f"name: typical-{index}", 1))
        files.append(str(wf))
    compile_workflow(files.pop())  # warm the parser
    start = time.perf_counter()
    for path in files:
        compile_workflow(path)
    compile_ms = (time.perf_counter() - start) / n * 1000
    options = Options(cwd=str(scratch), state_dir=str(scratch / "state"))
    pipeline = "state.get none | map --wrap v | approve --prompt ok | pick v"
    handle({"action": "run", "pipeline": pipeline}, options)  # compile once, then cached
    cycles, start = 0, time.perf_counter()
    while time.perf_counter() - start < 2.0:
        envelope = handle({"action": "run", "pipeline": pipeline}, Options(
            cwd=str(scratch), state_dir=str(scratch / "state")))
        token = envelope["requiresApproval"]["resumeToken"]
        done = resume(Options(cwd=str(scratch), state_dir=str(scratch / "state")),
                      Decision(approve=True), token=token)
        assert done["status"] == "ok", done
        cycles += 1
    rate = cycles / (time.perf_counter() - start)
    shutil.rmtree(scratch, ignore_errors=True)
    return [("compile a typical 10-step workflow, parser warm (target < 2 ms)", f"{compile_ms:.2f} ms"),
            ("run-halt-resume cycles of a pure-data pipeline (target >= 2000/s)", f"{rate:,.0f} /s")]


TYPICAL_WORKFLOW = """\
name: typical
args:
  env: {default: staging}
steps:
  - id: fetch
    run: echo '[{"host":"a","ok":true},{"host":"b","ok":false}]'
    timeout_ms: 5000
  - id: healthy
    pipeline: where ok=true | pick host
    stdin: $fetch.json
  - id: count
    run: python3 -c "import sys, json; print(len(json.load(sys.stdin)))"
    stdin: $healthy.json
  - id: gate
    approval: Deploy to ${env}?
    stdin: $healthy.json
  - id: deploy
    for_each: $healthy.json
    steps:
      - id: push
        run: echo "deploy $item.json.host"
  - id: notify
    run: echo done
    when: $gate.approved && $count.json > 0
    retry: {max: 2, delay_ms: 10}
  - id: report
    pipeline: template --text 'deployed {{host}}'
    stdin: $healthy.json
  - id: summary
    run: "echo '{\\"ok\\":true}'"
    on_error: continue
  - id: review
    input:
      prompt: Anything to add?
      responseSchema: {type: string}
  - id: final
    run: echo "$review.response"
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lobster", default=str(Path(sys.executable).parent / "lobster"))
    ap.add_argument("--reference", help="the original's command, e.g. 'node .../bin/lobster.js'")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="lobster-bench-"))
    big = scratch / "big.json"
    big_input(big, 100_000)
    runners = [Runner("ours", shlex.split(args.lobster), scratch)]
    if args.reference:
        runners.append(Runner("reference", shlex.split(args.reference), scratch))
    samples: dict[str, dict[str, list[float]]] = {r.name: {} for r in runners}
    for i in range(args.runs):
        for runner in runners if i % 2 == 0 else reversed(runners):
            for key, value in measure_once(runner, big, first=(i == 0 or i == 1)).items():
                samples[runner.name].setdefault(key, []).append(value)
    print(f"{'scenario':<58} {'ours':>10} {'original':>10} {'ratio':>7}")
    for key in samples["ours"]:
        ours = statistics.median(samples["ours"][key])
        unit = "" if "MiB" in key or "bytes" in key else " ms"
        scale = 1 if unit == "" else 1000
        line = f"{key:<58} {ours * scale:>8.1f}{unit}"
        if "reference" in samples and key in samples["reference"]:
            ref = statistics.median(samples["reference"][key])
            line = (f"{key:<58} {ours * scale:>7.1f}{unit:<3} {ref * scale:>7.1f}{unit:<3}"
                    f" {ours / ref if ref else float('nan'):>6.2f}")
        print(line)
    print()
    for name, value in in_process_figures():
        print(f"{name:<70} {value:>12}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
