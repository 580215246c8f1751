"""An envelope handed over as Python objects is JSON data: a value's undefined (a field `pick`
sets that an item lacks, `map --unwrap` of an absent field) is left out of its object, or
null in an array, at every exit of the embedding API (`handle`, `run`, `resume`,
`admin.resume_by_id`, `admin.cancel`) and of `lobster mcp` (its `call`, whose envelope is
the structured content). The CLI's forms (`run_js`, `resume_js`, `handle_js`) keep it: the
CLI writes the envelope with our JSON writer, which leaves it out as it writes
(tests/cli/test_e2e.py holds the CLI's text to that)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import vm
from vm.cli import mcp
from vm.core.js import UNDEFINED
from vm.service import admin
from vm.service.protocol import Decision, Options
from vm.service.protocol.request import handle_js
from vm.service.protocol.resuming import resume_js
from vm.service.protocol.running import run_js

UNWRAPPED = "exec --json echo '[{\"name\":1},true,{}]' | map --unwrap name"  # [1, u, u]
PICKED = "exec --json echo '[{\"a\":1},{}]' | pick b,a"  # [{b: u, a: 1}, {b: u, a: u}]
# halts on items holding undefined; the resumed run makes undefined again
GATED = f"{PICKED} | approve --prompt Go | map --unwrap b"
HALT_ITEMS = [{"a": 1}, {}]
RESUMED = [None, None]


@pytest.fixture
def options(tmp_path) -> Options:
    return Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path), env={}, mode="tool")


def holds_undefined(value: Any) -> bool:
    if value is UNDEFINED:
        return True
    if isinstance(value, dict):
        return any(holds_undefined(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_undefined(v) for v in value)
    return False


def data(envelope: dict) -> dict:
    """The envelope, checked to be JSON data: no undefined anywhere, and Python's own JSON
    writer takes it."""
    assert not holds_undefined(envelope), envelope
    json.dumps(envelope)
    return envelope


def output(envelope: dict) -> list:
    assert envelope["ok"] is True and envelope["status"] == "ok", envelope
    return data(envelope)["output"]


def halt(envelope: dict) -> dict:
    assert envelope["ok"] is True and envelope["status"] == "needs_approval", envelope
    request = data(envelope)["requiresApproval"]
    assert request["items"] == HALT_ITEMS
    return request


def test_the_cli_forms_keep_undefined_for_the_json_writer(options):
    """The pipelines below do make undefined: the CLI's envelope holds it as the run made it."""
    assert run_js(UNWRAPPED, options)["output"] == [1, UNDEFINED, UNDEFINED]
    parked = handle_js({"action": "run", "pipeline": GATED}, options)["requiresApproval"]
    assert parked["items"] == [{"b": UNDEFINED, "a": 1}, {"b": UNDEFINED, "a": UNDEFINED}]
    resumed = resume_js(options, Decision(approve=True), token=parked["resumeToken"])
    assert resumed["output"] == [UNDEFINED, UNDEFINED]


def test_handle_run_and_resume_hand_over_json_data(options):
    assert output(vm.handle({"action": "run", "pipeline": UNWRAPPED}, options)) == [1, None, None]
    assert output(vm.run(PICKED, options)) == [{"a": 1}, {}]
    parked = halt(vm.handle({"action": "run", "pipeline": GATED}, options))
    assert output(vm.handle({"action": "resume", "token": parked["resumeToken"],
                             "approve": True}, options)) == RESUMED
    parked = halt(vm.run(GATED, options))
    assert output(vm.resume(options, Decision(approve=True),
                            approval_id=parked["approvalId"])) == RESUMED


def test_a_run_with_an_event_listener_hands_over_json_data(tmp_path):
    """A listener takes the run through drive's other branch."""
    events: list = []
    options = Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path), env={},
                      mode="tool", on_event=events.append)
    assert output(vm.run(UNWRAPPED, options)) == [1, None, None]
    parked = halt(vm.handle({"action": "run", "pipeline": GATED}, options))
    assert output(vm.resume(options, Decision(approve=True),
                            token=parked["resumeToken"])) == RESUMED
    assert events


def test_the_admin_functions_hand_over_json_data(options):
    parked = halt(vm.run(GATED, options))
    assert output(admin.resume_by_id(options, Decision(approve=True),
                                     parked["approvalId"])) == RESUMED
    halt(vm.run(GATED, options))
    [entry] = admin.pending(options)
    assert output(admin.resume_by_id(options, Decision(approve=True),
                                     entry["stateKey"])) == RESUMED
    parked = halt(vm.run(GATED, options))
    assert data(admin.cancel(options, parked["approvalId"]))["status"] == "cancelled"


def test_an_mcp_tool_call_hands_over_json_data(options):
    """`call` is what the server runs for a tool call; its envelope is the structured content
    (tests/service/test_mcp.py takes the same through the real server)."""
    assert output(mcp.call("lobster_run", {"pipeline": UNWRAPPED}, options)) == [1, None, None]
    parked = halt(mcp.call("lobster_run", {"pipeline": GATED}, options))
    assert output(mcp.call("lobster_resume", {"approvalId": parked["approvalId"],
                                              "approve": True}, options)) == RESUMED
