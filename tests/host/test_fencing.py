"""Fenced claims (issue 47 HIGH 1): a resume whose lease lapsed (the process stopped past it)
and whose checkpoint was cancelled meanwhile stops before its next step, writes nothing, and
says so. Real processes, SIGSTOP and SIGCONT, on both stores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from conftest import LOBSTER
from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)

# the resumed run: a slow step (the one it is stopped in), an effect step, the next gate
PIPELINE = ("exec --json --shell 'echo [1]' | approve --prompt 'Go?' "
            "| exec --json --shell 'touch started; sleep 1; echo [2]' "
            "| exec --json --shell 'touch effect; echo [3]' | approve --prompt 'Again?'")
LEASE = "2s"


def _env(cli, location: str) -> dict:
    env = {**cli.env, "LOBSTER_CLAIM_LEASE": LEASE}
    if location.startswith("postgresql://"):
        env.pop("LOBSTER_STATE_DIR", None)
        env["LOBSTER_STORE"] = location
    else:
        env["LOBSTER_STATE_DIR"] = location
    return env


def _tool(cli, env: dict, *argv: str) -> dict:
    proc = subprocess.run([LOBSTER, *argv], cwd=cli.work, env=env, capture_output=True,
                          text=True, timeout=60)
    return json.loads(proc.stdout)


def _wait_for(path, proc, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the step never started"
        time.sleep(0.02)


def test_a_resume_stopped_past_its_lease_and_cancelled_runs_nothing_after(cli, location):
    env = _env(cli, location)
    halted = _tool(cli, env, "run", "--mode", "tool", PIPELINE)
    approval_id = halted["requiresApproval"]["approvalId"]
    resume = subprocess.Popen([LOBSTER, "resume", "--id", approval_id, "--approve", "yes"],
                              cwd=cli.work, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(cli.work / "started", resume)
        resume.send_signal(signal.SIGSTOP)  # in the slow step; its lease runs out
        time.sleep(4)
        retry = _tool(cli, env, "resume", "--id", approval_id, "--approve", "yes")
        assert retry["error"]["code"] == "T432", retry
        cancelled = _tool(cli, env, "cancel", "--id", approval_id)
        assert cancelled.get("status") == "cancelled", cancelled
    finally:
        resume.send_signal(signal.SIGCONT)
    out, err = resume.communicate(timeout=60)
    assert not (cli.work / "effect").exists(), "the stopped holder ran its next step"
    envelope = json.loads(out)
    assert envelope["ok"] is False and envelope["error"]["code"] == "T437", (envelope, err)
    assert resume.returncode != 0
    token = halted["requiresApproval"]["resumeToken"]
    history = _tool(cli, env, "history", token, "--format", "json")
    history = history.get("checkpoint", history)
    assert history["state"] == "cancelled", history
    assert history["events"][-1]["event"] == "cancelled", history
    pending = _tool(cli, env, "pending", "--format", "json")
    entries = pending if isinstance(pending, list) else pending.get("pending", [])
    assert [e for e in entries if e.get("status") == "waiting"] == [], pending
