"""Waits end at the run's deadline or cancellation (a trap, not a sleep), and an approval that
needs a different approver fails closed when no initiator was recorded."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from vm.host.children import Scope
from vm.service.protocol import Options, handle

HOUR_MS = 3_600_000


def _workflow(cli, text: str) -> str:
    (cli.work / "w.lobster").write_text(text)
    return "w.lobster"


@pytest.mark.parametrize("steps", [
    pytest.param("steps:\n  - id: flaky\n    run: exit 3\n"
                 f"    retry: {{max: 3, delay_ms: {HOUR_MS}}}\n", id="retry-delay"),
    pytest.param("steps:\n  - id: items\n    run: echo '[1, 2, 3]'\n  - id: loop\n"
                 f"    for_each: $items.json\n    pause_ms: {HOUR_MS}\n    steps:\n"
                 "      - id: s\n        run: echo hi\n", id="for-each-pause"),
])
def test_a_wait_past_the_deadline_is_a_timeout_trap(cli, steps):
    wf = _workflow(cli, steps)
    envelope, code = cli.tool(
        "tool", json.dumps({"action": "run", "pipeline": wf, "timeoutMs": 1000}))
    assert code == 1 and envelope["error"]["code"] == "T420", envelope
    assert envelope["error"]["message"] == "lobster runtime timed out"


def test_waits_end_when_the_run_is_cancelled(tmp_path: Path):
    marker = tmp_path / "started"
    (tmp_path / "loop.lobster").write_text(
        "steps:\n  - id: items\n    run: echo '[1, 2, 3]'\n  - id: loop\n    for_each: $items.json\n"
        f"    pause_ms: {HOUR_MS}\n    steps:\n      - id: s\n        run: touch started\n"
        "  - id: flaky\n    run: exit 3\n"
        f"    retry: {{max: 3, delay_ms: {HOUR_MS}}}\n")
    (tmp_path / "retry.lobster").write_text(
        f"steps:\n  - id: flaky\n    run: touch started; exit 3\n"
        f"    retry: {{max: 3, delay_ms: {HOUR_MS}}}\n")
    for name in ("loop.lobster", "retry.lobster"):
        marker.unlink(missing_ok=True)
        scope, result = Scope(), {}
        options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s"), env={"PATH": "/usr/bin:/bin"})
        thread = threading.Thread(target=lambda: result.update(
            handle({"action": "run", "pipeline": name, "timeoutMs": HOUR_MS}, options,
                   scope=scope)), daemon=True)
        thread.start()
        while not marker.exists() and thread.is_alive():
            time.sleep(0.01)
        scope.cancel()
        thread.join(120)
        assert not thread.is_alive(), f"{name}: still waiting after its run was cancelled"
        assert result["error"]["code"] == "T422", result
        assert result["error"]["message"] == "lobster run cancelled"


GATE = ("steps:\n  - id: gate\n    approval:\n      prompt: ship?\n"
        "      require_different_approver: true\n")


def test_require_different_approver_without_an_initiator_refuses(cli):
    wf = _workflow(cli, GATE)
    envelope, _ = cli.tool("run", "--mode", "tool", wf)
    assert envelope["status"] == "needs_approval", envelope
    approval = envelope["requiresApproval"]
    assert "initiatedBy" not in approval
    token = approval["resumeToken"]
    refused, code = cli.tool("resume", "--mode", "tool", "--token", token, "--approve", "yes",
                             env={"LOBSTER_APPROVAL_APPROVED_BY": "mallory"})
    assert code == 2 and refused["error"]["code"] == "E513", refused
    assert refused["error"]["message"] == (
        "Workflow step gate approval requires an approver other than its initiator, but no "
        "initiator was recorded (set LOBSTER_APPROVAL_INITIATED_BY or initiated_by when "
        "running); refused")
    # the checkpoint is untouched: a rejection still ends it
    done, code = cli.tool("resume", "--mode", "tool", "--token", token, "--approve", "no")
    assert code == 0 and done["status"] == "cancelled", done


def test_require_different_approver_with_an_initiator_still_works(cli):
    wf = _workflow(cli, GATE)
    envelope, _ = cli.tool("run", "--mode", "tool", wf,
                           env={"LOBSTER_APPROVAL_INITIATED_BY": "alice"})
    token = envelope["requiresApproval"]["resumeToken"]
    same, _ = cli.tool("resume", "--mode", "tool", "--token", token, "--approve", "yes",
                       env={"LOBSTER_APPROVAL_APPROVED_BY": "alice"})
    assert same["error"]["code"] == "E513"
    done, code = cli.tool("resume", "--mode", "tool", "--token", token, "--approve", "yes",
                          env={"LOBSTER_APPROVAL_APPROVED_BY": "bob"})
    assert code == 0 and done["status"] == "ok", done
