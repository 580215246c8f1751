"""Errors carry their detail (issue 21, item 6) without changing the original's message: JSON
that did not parse gets its position, `exec --json` output that was not JSON gets an excerpt,
an answer outside an enum gets the allowed values; in the envelope's additive `error.detail`
and in human mode's lines after the original's `Error:` line."""

from __future__ import annotations

import json

from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process

from vm.core.detail import EXCERPT_CHARS
from vm.service.protocol import Options, handle

PICK = """\
name: pick
steps:
  - id: q
    input:
      prompt: Pick a colour
      responseSchema:
        type: object
        properties:
          colour: {type: string, enum: [red, green, blue]}
        required: [colour]
"""


def test_args_json_gets_the_position(cli):
    envelope, code = cli.tool("run", "--mode", "tool", "--args-json", '{"a": 1,\n "b" 2}',
                              "exec --shell 'echo hi'")
    assert code == 2
    assert envelope["error"]["message"] == "run --args-json must be valid JSON"
    assert envelope["error"]["detail"] == {"line": 2, "column": 6, "char": "2",
                                           "reason": "Expecting ':' delimiter"}


def test_args_json_in_human_mode_adds_a_line_after_the_original_one(cli):
    proc = cli.run("run", "--args-json", '{"a":', "exec --shell 'echo hi'")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "run --args-json must be valid JSON",
        "  at line 1, column 6: the end of the text (Expecting value)"]


def test_a_literal_without_a_position_gets_no_detail(cli):
    envelope, _ = cli.tool("run", "--mode", "tool", "--args-json", '{"a": NaN}',
                           "exec --shell 'echo hi'")
    assert envelope["error"]["message"] == "run --args-json must be valid JSON"
    assert "detail" not in envelope["error"]


def test_response_json_gets_the_position(cli):
    envelope, code = cli.tool("resume", "--token", "t", "--response-json", "[1, }")
    assert code == 2
    assert envelope["error"]["message"] == "resume --response-json must be valid JSON"
    assert envelope["error"]["detail"] == {"line": 1, "column": 5, "char": "}",
                                           "reason": "Expecting value"}


def test_the_tool_request_and_its_response_json_get_the_position(cli):
    envelope, _ = cli.tool("tool", '{"action": "run",}')
    assert envelope["error"]["message"] == "tool request must be valid JSON"
    assert envelope["error"]["detail"]["column"] == 18
    request = {"action": "resume", "token": "t", "responseJson": '{"x": tru}'}
    envelope = handle(request, Options(mode="tool", state_dir=str(cli.state)))
    assert envelope["error"]["message"] == "responseJson must be valid JSON"
    assert envelope["error"]["detail"]["char"] == "t"


def test_exec_json_shows_a_glimpse_of_the_output(cli):
    envelope, code = cli.pipeline("exec --json --shell 'echo hello; echo world'")
    assert code == 1
    error = envelope["error"]
    assert error["message"].startswith("exec --json could not parse stdout as JSON: ")
    assert error["detail"] == {"excerpt": "hello\nworld", "chars": 11, "line": 1, "column": 1,
                               "char": "h", "reason": "Expecting value"}


def test_exec_json_excerpt_is_short(cli):
    envelope, _ = cli.pipeline("exec --json --shell 'printf \"[1,%0500d\" 0'")
    detail = envelope["error"]["detail"]
    assert len(detail["excerpt"]) == EXCERPT_CHARS and detail["chars"] == 503
    assert detail["excerpt"].startswith("[1,000")


def test_exec_json_in_human_mode_after_the_diagnostic(cli):
    proc = cli.run("run", "exec --json --shell 'echo nope'")
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("Error: exec --json could not parse stdout as JSON")
    assert lines[1].startswith("<pipeline>:1:1: error[T401]:")
    assert lines[-2:] == ['  output: "nope"', '  at line 1, column 1: "n" (Expecting value)']


def test_an_answer_outside_the_enum_lists_the_allowed_values(cli):
    (cli.work / "pick.lobster").write_text(PICK)
    halted, _ = cli.tool("run", "--mode", "tool", "--file", "pick.lobster")
    token = halted["requiresInput"]["resumeToken"]
    envelope, code = cli.tool("resume", "--token", token, "--response-json",
                              '{"colour": "pink"}')
    assert code == 2
    assert envelope["error"]["message"] == (
        "Workflow input step q response failed schema validation at /colour: must be equal to "
        "one of the allowed values")
    assert envelope["error"]["detail"] == {"path": "/colour", "allowed": ["red", "green", "blue"]}
    done, _ = cli.tool("resume", "--token", token, "--response-json", '{"colour": "red"}')
    assert done["status"] == "ok"  # the refusal left the checkpoint waiting


def test_other_schema_failures_add_nothing(cli):
    (cli.work / "pick.lobster").write_text(PICK)
    halted, _ = cli.tool("run", "--mode", "tool", "--file", "pick.lobster")
    envelope, _ = cli.tool("resume", "--token", halted["requiresInput"]["resumeToken"],
                           "--response-json", json.dumps({"colour": 3}))
    assert envelope["error"]["message"].endswith("at /colour: must be string")
    assert "detail" not in envelope["error"]
