"""Hostile input: a refused answer consumes nothing, the limits are where the README says, and
no input reaches the user as a traceback (the catalogue in tests/bad_inputs/ holds the cases;
these are the properties it cannot state)."""

from __future__ import annotations

import json

from vm.core import json_read
from vm.service import protocol
from vm.core.schema import schema_fault
from vm.core.schema_errors import first_error
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process

INPUT = """steps:
  - id: a
    input:
      prompt: Name?
      responseSchema:
        type: object
        required: [name]
        properties:
          name: {type: string}
"""


def test_refused_answers_leave_the_checkpoint_resumable(cli):
    (cli.work / "w.lobster").write_text(INPUT)
    halted, code = cli.tool("run", "--mode", "tool", "w.lobster")
    assert (code, halted["status"]) == (0, "needs_input")
    token = halted["requiresInput"]["resumeToken"]
    for bad in ("[" * 1000 + "]" * 1000, '{"name": "\\ud83d"}', '{"name": 5}', "{"):
        refused, code = cli.tool("resume", "--token", token, "--response-json", bad)
        assert code == 2 and refused["error"]["code"] in ("E001", "E007", "E009", "E512")
    request = json.dumps({"action": "resume", "token": token, "responseJson": '{"name": "x"}',
                          "dryRun": True})
    refused, code = cli.tool("tool", request)
    assert (code, refused["error"]["code"]) == (2, "E008")
    done, code = cli.tool("resume", "--token", token, "--response-json", '{"name": "x"}')
    assert (code, done["status"]) == (0, "ok")


def test_a_request_with_an_unknown_field_runs_nothing(cli):
    marker = cli.work / "ran"
    request = {"action": "run", "pipeline": f"exec --shell 'touch {marker}'", "dryRun": True}
    refused, code = cli.tool("tool", json.dumps(request))
    assert (code, refused["error"]["code"]) == (2, "E008")
    assert "'dryRun'" in refused["error"]["message"]
    assert not marker.exists()


def test_args_json_that_is_not_text_is_refused_before_anything_runs(cli):
    marker = cli.work / "ran"
    request = {"action": "run", "pipeline": f"exec --shell 'touch {marker}'",
               "argsJson": {"hosts": ["a"]}}
    refused, code = cli.tool("tool", json.dumps(request))
    assert (code, refused["error"]["code"]) == (2, "E001")
    assert not marker.exists()


def test_doctor_checks_the_state_directory(cli, tmp_path):
    ok, code = cli.tool("doctor")
    assert (code, ok["ok"]) == (0, True)
    (tmp_path / "file").write_text("x")
    bad, code = cli.tool("doctor", env={"LOBSTER_STATE_DIR": str(tmp_path / "file")})
    assert (code, bad["error"]["code"]) == (1, "T499")
    assert "is not a directory" in bad["error"]["message"]


def test_the_json_depth_limit_is_exact():
    at_limit = "[" * json_read.MAX_JSON_DEPTH + "]" * json_read.MAX_JSON_DEPTH
    assert json_read.json_loads(at_limit) is not None
    over = "[" + at_limit + "]"
    try:
        json_read.json_loads(over)
    except json_read.JSONTooDeep:
        pass
    else:
        raise AssertionError("nesting over the limit was accepted")
    # brackets inside strings are text, not nesting
    assert json_read.json_loads(json.dumps(["[" * 10000])) == ["[" * 10000]


def test_pipeline_text_limit_is_exact(tmp_path):
    options = protocol.Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path))
    text = "exec --json --shell 'echo [1]'"
    padded = text + " " * (protocol.MAX_PIPELINE_BYTES - len(text))
    assert protocol.run(padded, options)["ok"] is True
    refused = protocol.run(padded + " ", options)
    assert refused["error"]["code"] == "E105"


def test_an_unresolvable_ref_is_a_schema_fault_and_never_a_crash():
    schema = {"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}}
    fault = schema_fault(schema)
    assert fault is not None and "does not resolve" in fault.message
    assert fault.absolute_path == ("properties", "a", "$ref")
    assert schema_fault({"definitions": {"s": {"type": "string"}},
                         "properties": {"a": {"$ref": "#/definitions/s"}}}) is None
    where, message = first_error({"$ref": "#/definitions/missing"}, {"a": 1})
    assert where == "/" and "cannot be applied" in message


def test_handle_never_raises_on_odd_requests(tmp_path):
    options = protocol.Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path))
    odd = [None, [], "run", {"action": ["run"]}, {"action": "run", 1: 2},
           {"action": "run", "pipeline": "x", "timeoutMs": float("nan")},
           {"action": "run", "pipeline": "x", "maxStdoutBytes": float("inf")},
           {"action": "run", "pipeline": "exec --shell 'echo a\0b'"},
           {"action": "run", "pipeline": "x", "cwd": "a\0b"},
           {"action": "resume", "token": "x", "responseJson": "[" * 5000}]
    for request in odd:
        envelope = protocol.handle(request, options)
        assert envelope["ok"] is False and envelope["error"]["code"], request
