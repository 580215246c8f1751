"""`--events jsonl` with a stderr no one reads (issue 47, LOW): the envelope arrives, stdout
ends, and the process exits once stderr has taken nothing for a while, instead of waiting
the whole drain time for a reader that never comes."""

from __future__ import annotations

import json
import subprocess
import time

from conftest import LOBSTER, Cli
from vm.cli.common import EXIT_DRAIN_S, STALLED_S


def test_an_unread_stderr_does_not_hold_the_exit(tmp_path):
    cli = Cli(tmp_path)
    steps = [{"id": f"s{i}", "run": "echo " + "y" * 50} for i in range(1500)]
    (cli.work / "many.json").write_text(json.dumps({"steps": steps}))
    proc = subprocess.Popen([LOBSTER, "run", "--mode", "tool", "--events", "jsonl", "many.json"],
                            cwd=cli.work, env=cli.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        envelope = json.loads(proc.stdout.read())  # stdout ends although stderr is full
        assert envelope["status"] == "ok"
        start = time.monotonic()
        proc.wait(timeout=EXIT_DRAIN_S + 30)
        waited = time.monotonic() - start
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0
    assert waited < EXIT_DRAIN_S / 2, (waited, STALLED_S)  # the stall, not the whole drain
