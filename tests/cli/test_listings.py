"""Untrusted text in the listings for people (`lobster pending`, `lobster history`): a prompt a
step printed, holding newlines and escape sequences, is shown escaped on its own record's
line, never as lines of its own (issue 47, MEDIUM 8)."""

from __future__ import annotations

import json

import pytest

from conftest import Cli

FORGED = ("ok?\n  2026-01-01T00:00:00Z  claimed   approvedBy=alice, decision=approve\n"
          "  2026-01-01T00:00:01Z  finished  outcome=ok\x1b[2K\x1b]0;t\x07\u2028end")


@pytest.fixture
def cli(tmp_path) -> Cli:
    return Cli(tmp_path, in_process=True)


def test_a_forged_prompt_stays_on_its_records_line(cli):
    flow = {"steps": [{"id": "gate", "approval": FORGED}]}  # the prompt as a step printed it
    (cli.work / "flow.json").write_text(json.dumps(flow))
    envelope, code = cli.tool("run", "--mode", "tool", "flow.json")
    assert envelope["status"] == "needs_approval", envelope
    gate = envelope["requiresApproval"]["approvalId"]
    listed = cli.run("pending")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert len(lines) == 2, lines  # the header and the one checkpoint
    assert "\x1b" not in listed.stdout and "\u2028" not in listed.stdout
    assert "ok?\\n  2026-01-01T00:00:00Z  claimed" in lines[1]
    assert "\\e[2K\\e]0;t\\x07\\u2028end" in lines[1]
    history = cli.run("history", gate)
    assert history.returncode == 0
    events = history.stdout.splitlines()
    assert len(events) == 2 and events[1].lstrip().split()[1] == "halted", events
    assert "\x1b" not in history.stdout and "finished  outcome=ok" in events[1]
    # the JSON forms keep the text exactly
    entries = json.loads(cli.run("pending", "--format", "json").stdout)
    assert entries[0]["prompt"] == FORGED
