"""Workflow file loading: YAML 1.2 / JSON with positions, every reference validation text, schema."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobsterc.diagnostics import CompileError
from lobsterc.check.problems import load_checked as load_workflow_file
from lobsterc.check.problems import validated as load_workflow_text
from lobsterc.check.values import is_approval, is_input, step_kind
from lobsterc.load import Document as WorkflowFile
from lobsterc.load.fields import workflow_schema

CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "cases"


def error_of(text: str, name: str = "wf.lobster") -> tuple[str, int, int]:
    with pytest.raises(CompileError) as info:
        load_workflow_text(text, name)
    diag = info.value.first
    assert diag.code in ("E210", "E217") and diag.kind == "runtime_error"
    # a file is named absolute and resolved, as every location names it
    assert diag.span is not None and diag.span.source == os.path.realpath(name)
    return diag.message, diag.span.line, diag.span.col


# (yaml, message, line, column): the position is the offending value, or its step when missing.
S = "steps:\n  - id: s\n"  # line 1-2; a step with id s whose fields follow on line 3+
VALIDATION = [
    ("- 1\n", "Workflow file requires a non-empty steps array", 1, 1),
    ("42\n", "Workflow file must be a JSON/YAML object", 1, 1),
    ("name: x\n", "Workflow file requires a non-empty steps array", 1, 1),
    ("steps: []\n", "Workflow file requires a non-empty steps array", 1, 8),
    ("cost_limit: 5\nsteps: [{id: a, run: x}]\n", "Workflow cost_limit must be an object", 1, 13),
    ("cost_limit: {max_usd: -1}\nsteps: [{id: a, run: x}]\n", "Workflow cost_limit.max_usd must be a non-negative number", 1, 23),
    ("cost_limit: {}\nsteps: [{id: a, run: x}]\n", "Workflow cost_limit.max_usd must be a non-negative number", 1, 13),
    ("cost_limit: {max_usd: 1, action: halt}\nsteps: [{id: a, run: x}]\n", 'Workflow cost_limit.action must be "warn" or "stop"', 1, 34),
    ("steps:\n  - just text\n", "Workflow step must be an object", 2, 5),
    ("steps:\n  - run: x\n", "Workflow step requires an id", 2, 5),
    ("steps:\n  - id: 7\n    run: x\n", "Workflow step requires an id", 2, 9),
    ("steps:\n  - {id: a, run: x}\n  - {id: a, run: y}\n", "Duplicate workflow step id: a", 3, 10),
    (S + "    workflow: 5\n", "Workflow step s workflow must be a string (file path)", 3, 15),
    (S + "    workflow: '  '\n", "Workflow step s workflow path cannot be blank", 3, 15),
    (S + "    workflow: a.lobster\n    workflow_args: [1]\n", "Workflow step s workflow_args must be a plain object", 4, 20),
    (S + "    parallel: [1]\n", "Workflow step s parallel must be an object", 3, 15),
    (S + "    parallel: {branches: []}\n", "Workflow step s parallel requires a non-empty branches array", 3, 26),
    (S + "    parallel: {wait: some, branches: [{id: b, run: x}]}\n", 'Workflow step s parallel wait must be "all" or "any"', 3, 22),
    (S + "    parallel: {timeout_ms: 0, branches: [{id: b, run: x}]}\n",
     "Workflow step s parallel timeout_ms must be a positive integer between 1 and 2147483647", 3, 28),
    (S + "    parallel: {branches: [oops]}\n", "Workflow step s parallel branches must be objects", 3, 27),
    (S + "    parallel: {branches: [{run: x}]}\n", "Workflow step s parallel branch requires an id", 3, 27),
    (S + "    parallel: {branches: [{id: s, run: x}]}\n", "Workflow step s parallel branch id cannot match the step id", 3, 32),
    (S + "    parallel: {branches: [{id: b, run: x}, {id: b, run: y}]}\n", "Workflow step s duplicate parallel branch id: b", 3, 49),
    ("steps:\n  - {id: b, run: x}\n  - id: s\n    parallel: {branches: [{id: b, run: y}]}\n",
     "Duplicate workflow id across steps/parallel branches: b", 4, 32),
    ("steps:\n  - id: s\n    parallel: {branches: [{id: b, run: y}]}\n  - {id: b, run: x}\n", "Duplicate workflow step id: b", 4, 10),
    (S + "    parallel: {branches: [{id: b}]}\n", "Workflow step s parallel branch b requires run, command, or pipeline", 3, 27),
    (S + "    parallel: {branches: [{id: b, run: x, pipeline: y}]}\n",
     "Workflow step s parallel branch b can only define one of run, command, or pipeline", 3, 27),
    (S + "    parallel: {branches: [{id: b, run: 5, command: x}]}\n", "Workflow step s parallel branch b run must be a string", 3, 40),
    (S + "    parallel: {branches: [{id: b, run: x, command: [1]}]}\n", "Workflow step s parallel branch b command must be a string", 3, 52),
    (S + "    parallel: {branches: [{id: b, run: x, pipeline: 5}]}\n", "Workflow step s parallel branch b pipeline must be a string", 3, 53),
    (S + "    for_each: [1]\n", "Workflow step s for_each must be a string (step reference expression)", 3, 15),
    (S + "    for_each: $x.json\n", "Workflow step s for_each requires a non-empty steps array", 2, 5),
    (S + "    for_each: $x.json\n    batch_size: 0\n    steps: [{id: a, run: x}]\n", "Workflow step s batch_size must be a positive integer", 4, 17),
    (S + "    for_each: $x.json\n    pause_ms: -1\n    steps: [{id: a, run: x}]\n", "Workflow step s pause_ms must be a finite non-negative number", 4, 15),
    (S + "    for_each: $x.json\n    approval: true\n    steps: [{id: a, run: x}]\n",
     "Workflow step s for_each steps cannot define approval (use a separate step after the loop)", 4, 15),
    (S + "    for_each: $x.json\n    input: {prompt: p}\n    steps: [{id: a, run: x}]\n",
     "Workflow step s for_each steps cannot define input (use a separate step after the loop)", 4, 12),
    (S + "    for_each: $x.json\n    stdin: $x.json\n    steps: [{id: a, run: x}]\n",
     "Workflow step s for_each steps cannot define stdin (loop input comes from the for_each expression)", 4, 12),
    (S + "    for_each: $x.json\n    run: echo\n    steps: [{id: a, run: x}]\n",
     "Workflow step s for_each cannot also define run, command, pipeline, workflow, or parallel", 2, 5),
    (S + "    for_each: $x.json\n    item_var: 1\n    steps: [{id: a, run: x}]\n", "Workflow step s item_var must be a string", 4, 15),
    (S + "    for_each: $x.json\n    index_var: null\n    steps: [{id: a, run: x}]\n", "Workflow step s index_var must be a string", 4, 16),
    (S + "    for_each: $x.json\n    item_var: index\n    steps: [{id: a, run: x}]\n",
     "Workflow step s item_var and index_var cannot be the same", 2, 5),
    (S + "    for_each: $x.json\n    steps: [{run: x}]\n", "Workflow step s for_each sub-step requires an id", 4, 13),
    (S + "    for_each: $x.json\n    steps: [{id: item, run: x}]\n",
     "Workflow step s for_each sub-step id 'item' conflicts with loop variable", 4, 18),
    (S + "    for_each: $x.json\n    steps: [{id: a, run: x}, {id: a, run: y}]\n", "Workflow step s duplicate for_each sub-step id: a", 4, 35),
    (S + "    for_each: $x.json\n    steps: [{id: a, run: x, input: {prompt: p}}]\n",
     "Workflow step s for_each sub-step a input steps cannot define run, command, or pipeline", 4, 13),
    (S + "    for_each: $x.json\n    steps: [{id: a, run: 5}]\n", "Workflow step s for_each sub-step a run must be a string", 4, 26),
    (S + "    for_each: $x.json\n    steps: [{id: a, command: {}}]\n", "Workflow step s for_each sub-step a command must be a string", 4, 30),
    (S + "    for_each: $x.json\n    steps: [{id: a, pipeline: 5}]\n", "Workflow step s for_each sub-step a pipeline must be a string", 4, 31),
    (S + "    for_each: $x.json\n    steps: [{id: a, run: x, workflow: w.lobster}]\n",
     "Workflow step s for_each sub-step a cannot define workflow, parallel, or for_each", 4, 13),
    (S + "    for_each: $x.json\n    steps: [{id: a, run: ' '}]\n", "Workflow step s for_each sub-step a requires run, command, or pipeline", 4, 13),
    (S + "    for_each: $x.json\n    steps: [{id: a, run: x, pipeline: y}]\n",
     "Workflow step s for_each sub-step a can only define one of run, command, or pipeline", 4, 13),
    (S + "    stdin: x\n", "Workflow step s requires run, command, pipeline, workflow, parallel, for_each, approval, or input", 2, 5),
    (S + "    run: x\n    pipeline: y\n", "Workflow step s can only define one of run, command, pipeline, workflow, parallel, or for_each", 2, 5),
    (S + "    run: x\n    input: {prompt: p, responseSchema: {}}\n",
     "Workflow step s input steps cannot define run, command, pipeline, workflow, parallel, or for_each", 2, 5),
    (S + "    approval: true\n    input: {prompt: p, responseSchema: {}}\n", "Workflow step s cannot define both approval and input", 2, 5),
    (S + "    run: 5\n    command: x\n", "Workflow step s run must be a string", 3, 10),
    (S + "    run: x\n    command: 5\n", "Workflow step s command must be a string", 4, 14),
    (S + "    run: x\n    pipeline: 5\n", "Workflow step s pipeline must be a string", 4, 15),
    (S + "    approval: true\n    input: null\n", "Workflow step s input must be an object", 4, 12),
    (S + "    input: {responseSchema: {}}\n", "Workflow step s input.prompt must be a string", 3, 12),
    (S + "    input: {prompt: p}\n", "Workflow step s input.responseSchema must be an object", 3, 12),
    (S + "    input: {prompt: p, responseSchema: yes}\n", "Workflow step s input.responseSchema must be an object", 3, 40),
    (S + "    input: {prompt: p, responseSchema: {type: 5}}\n",
     "Workflow step s input.responseSchema is invalid: 5 is not valid under any of the given schemas at $.type", 3, 40),
    (S + "    input: {prompt: p, responseSchema: null}\n",
     "Workflow step s input.responseSchema is invalid: schema must be object or boolean", 3, 40),
    (S + "    approval: {initiated_by: 1}\n", "Workflow step s approval.initiated_by must be a string", 3, 30),
    (S + "    approval: {initiatedBy: true}\n", "Workflow step s approval.initiatedBy must be a string", 3, 29),
    (S + "    approval: {required_approver: [a]}\n", "Workflow step s approval.required_approver must be a string", 3, 35),
    (S + "    approval: {requiredApprover: 2}\n", "Workflow step s approval.requiredApprover must be a string", 3, 34),
    (S + "    approval: {require_different_approver: yes}\n", "Workflow step s approval.require_different_approver must be a boolean", 3, 44),
    (S + "    approval: {requireDifferentApprover: 'true'}\n", "Workflow step s approval.requireDifferentApprover must be a boolean", 3, 42),
    (S + "    run: x\n    timeout_ms: 2147483648\n", "Workflow step s timeout_ms must be a positive integer between 1 and 2147483647", 4, 17),
    (S + "    run: x\n    timeout_ms: 1.5\n", "Workflow step s timeout_ms must be a positive integer between 1 and 2147483647", 4, 17),
    (S + "    run: x\n    on_error: ignore\n", 'Workflow step s on_error must be "stop", "continue", or "skip_rest"', 4, 15),
    (S + "    run: x\n    retry: 3\n", "Workflow step s retry must be an object", 4, 12),
    (S + "    run: x\n    retry: {max: 0}\n", "Workflow step s retry.max must be a positive integer", 4, 18),
    (S + "    run: x\n    retry: {backoff: linear}\n", 'Workflow step s retry.backoff must be "fixed" or "exponential"', 4, 22),
    (S + "    run: x\n    retry: {delay_ms: .inf}\n", "Workflow step s retry.delay_ms must be a finite non-negative number", 4, 23),
    (S + "    run: x\n    retry: {max_delay_ms: -5}\n", "Workflow step s retry.max_delay_ms must be a finite non-negative number", 4, 27),
    (S + "    run: x\n    retry: {jitter: 1}\n", "Workflow step s retry.jitter must be a boolean", 4, 21),
]


@pytest.mark.parametrize("text,message,line,col", VALIDATION, ids=[m for _, m, _, _ in VALIDATION])
def test_validation_error_texts_and_positions(text: str, message: str, line: int, col: int) -> None:
    assert error_of(text) == (message, line, col)


def test_gates_inside_for_each_are_accepted() -> None:
    """Deliberate difference (SPEC 9.5): the reference rejects gates inside loops."""
    for sub in ("{id: a, run: x, approval: true}", "{id: a, approval: Go?}",
                "{id: a, input: {prompt: p, responseSchema: {type: string}}}"):
        text = S + f"    for_each: $x.json\n    steps: [{sub}]\n"
        assert load_workflow_text(text, "wf.lobster").data["steps"][0]["steps"][0]["id"] == "a"


def test_checks_run_in_reference_order() -> None:
    # a duplicate id is only reported after the step's other checks pass
    text = "steps:\n  - {id: a, run: x}\n  - {id: a, run: y, timeout_ms: 0}\n"
    assert error_of(text)[0].endswith("timeout_ms must be a positive integer between 1 and 2147483647")
    # file-level checks come before any step
    text = "cost_limit: {max_usd: x}\nsteps: [oops]\n"
    assert error_of(text)[0] == "Workflow cost_limit.max_usd must be a non-negative number"


def test_javascript_value_semantics_of_checks() -> None:
    ok = "cost_limit: {max_usd: '2.5'}\nsteps:\n  - {id: a, run: x, timeout_ms: 5.0, retry: {max: 2.0}}\n"
    assert load_workflow_text(ok, "wf.lobster").data["cost_limit"]["max_usd"] == "2.5"
    # a non-string run falls back to command; approval false/"" / arrays are not gates
    assert error_of("steps:\n  - {id: a, approval: false}\n")[0].endswith("approval, or input")
    assert error_of("steps:\n  - {id: a, approval: ''}\n")[0].endswith("approval, or input")


def test_yaml_12_core_schema_keeps_yes_no_on_off_as_strings() -> None:
    text = (
        "steps:\n  - id: a\n    run: x\n    stdin:\n"
        "      [yes, no, on, off, y, n, true, False, ~, null, 0o17, 0x1f, 017, 1_000, 1:20, .5, 1e3, -.inf, .nan, '1', !!str 5, 2001-12-14]\n"
    )
    wf = load_workflow_text(text, "wf.yaml")
    values = wf.data["steps"][0]["stdin"]
    assert values[:10] == ["yes", "no", "on", "off", "y", "n", True, False, None, None]
    assert values[10:16] == [15, 31, 17, "1_000", "1:20", 0.5]
    assert values[16] == 1000.0 and values[17] == -math.inf and math.isnan(values[18])
    assert values[19:] == ["1", "5", "2001-12-14"]
    assert wf.data["steps"][0]["stdin"][0] == "yes"


def test_yaml_booleans_in_gates_are_strings_not_true() -> None:
    wf = load_workflow_text("steps:\n  - id: a\n    approval: yes\n    when: on\n", "wf.lobster")
    step = wf.data["steps"][0]
    assert step["approval"] == "yes" and step["when"] == "on"


def test_spans_of_every_mapping_key_and_value() -> None:
    text = "name: demo\nsteps:\n  - id: a\n    run: echo hi\n    env: {K: v}\n    stdin: \"q\"\n    x-empty:\n"
    wf = load_workflow_text(text, "wf.lobster")
    pos = {path: (s.line, s.col) for path, s in wf.spans.items()}
    assert pos[("name",)] == (1, 7)
    assert pos[("steps",)] == (3, 3)
    assert pos[("steps", 0)] == (3, 5)
    assert pos[("steps", 0, "id")] == (3, 9)
    assert pos[("steps", 0, "run")] == (4, 10)
    assert pos[("steps", 0, "env")] == (5, 10)
    assert pos[("steps", 0, "env", "K")] == (5, 14)
    assert pos[("steps", 0, "stdin")] == (6, 12)
    assert pos[("steps", 0, "x-empty")] == (7, 12)  # an empty value points just after its key
    keys = {path: (s.line, s.col) for path, s in wf.key_spans.items()}
    assert keys[("name",)] == (1, 1)
    assert keys[("steps", 0, "run")] == (4, 5)
    assert keys[("steps", 0, "env", "K")] == (5, 11)
    run = wf.spans[("steps", 0, "run")]
    assert (run.end_line, run.end_col) == (4, 17)


def test_span_of_falls_back_to_nearest_ancestor() -> None:
    wf = load_workflow_text("steps:\n  - id: a\n    run: x\n", "wf.lobster")
    assert wf.span_of("steps", 0, "retry", "max") == wf.spans[("steps", 0)]
    assert wf.span_of() == wf.spans[()]
    assert isinstance(wf, WorkflowFile) and wf.path == "wf.lobster"


def test_json_files_with_positions(tmp_path: Path) -> None:
    path = tmp_path / "flow.json"
    path.write_text('{\n  "steps": [\n    {"id": "a", "run": "echo 1", "approval": "yes"}\n  ]\n}\n')
    wf = load_workflow_file(str(path))
    assert wf.data["steps"][0]["approval"] == "yes"
    span = wf.spans[("steps", 0, "run")]
    assert (span.line, span.col, span.end_col) == (3, 24, 32)
    assert wf.key_spans[("steps", 0, "run")].col == 17
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "steps": [\n    {"id": "a", "run": 5, "command": "x"}\n  ]\n}\n')
    with pytest.raises(CompileError) as info:
        load_workflow_file(str(bad))
    diag = info.value.first
    assert (diag.message, diag.span.line, diag.span.col) == ("Workflow step a run must be a string", 3, 24)


def test_json_is_strict_json() -> None:
    assert error_of("{'steps': []}", "wf.json")[1:] == (1, 2)
    assert error_of('{"steps": [1,]}', "wf.json")[1:] == (1, 14)
    assert error_of('{"steps": [NaN]}', "wf.json")[1:] == (1, 12)
    assert error_of('{"steps": [{"id": "a", "run": "x"}]} x', "wf.json")[1:] == (1, 38)


# A JSON file's message is JSON.parse's own, as Node 20 words it (the original passes it on
# bare); the location is where our scanner stopped.
JSON_SYNTAX = [
    ('{\n  "steps": [\n    {"id": "a",, }\n  ]\n}\n',
     "Expected double-quoted property name in JSON at position 30", 3, 16),
    ('{"steps": [', "Unexpected end of JSON input", 1, 12),
    ('{"steps": "abc', "Unterminated string in JSON at position 14", 1, 11),
]


@pytest.mark.parametrize("text,message,line,col", JSON_SYNTAX)
def test_json_syntax_errors_say_what_json_parse_says(text: str, message: str, line: int,
                                                     col: int) -> None:
    assert error_of(text, "wf.json") == (message, line, col)


SYNTAX = [
    ("wf.yaml", "steps:\n  - id: a\n   run: x\n", 3, 4),
    ("wf.yaml", "steps: [a, b\n", 2, 1),
    ("wf.yaml", "a: 1\na: 2\n", 2, 1),
    ("wf.yaml", "a: 1\n---\nb: 2\n", 2, 1),
    ("wf.yaml", "steps: *nope\n", 1, 8),
    ("wf.lobster", "steps:\n  - id: 'a\n", 3, 1),
]


@pytest.mark.parametrize("name,text,line,col", SYNTAX)
def test_syntax_errors_name_line_and_column(name: str, text: str, line: int, col: int) -> None:
    message, got_line, got_col = error_of(text, name)
    assert message.startswith("Workflow file parse error: ")
    assert message.endswith(f" at line {line}, column {col}")
    assert (got_line, got_col) == (line, col)


def test_file_level_errors(tmp_path: Path) -> None:
    wrong = tmp_path / "flow.toml"
    wrong.write_text("x")
    folder = tmp_path / "dir.lobster"
    folder.mkdir()
    for path, message in [
        (wrong, "Workflow file must end in .lobster, .yaml, .yml, or .json"),
        (folder, "Workflow path is not a file"),
    ]:
        with pytest.raises(CompileError) as info:
            load_workflow_file(str(path))
        assert info.value.first.message == message and info.value.first.code == "E210"


def test_yaml_anchors_and_aliases() -> None:
    text = "x-defaults: &env {A: b}\nsteps:\n  - id: a\n    run: x\n    env: *env\n"
    wf = load_workflow_text(text, "wf.yaml")
    assert wf.data["steps"][0]["env"] == {"A": "b"}
    assert wf.span_of("steps", 0, "env", "A").line == 5


def test_schema_catches_what_reference_checks_let_through() -> None:
    message, line, col = error_of("steps:\n  - id: a\n    run: x\n    env: {PORT: 8080}\n")
    assert message == "Workflow file is invalid at $.steps[0].env.PORT: 8080 is not of type 'string'"
    assert (line, col) == (4, 17)
    message, line, col = error_of("args: {who: world}\nsteps: [{id: a, run: x}]\n")
    assert message.startswith("Workflow file is invalid at $.args.who:") and (line, col) == (1, 13)


def test_schema_document_is_valid_draft_2020_12_and_describes_every_field() -> None:
    from jsonschema import Draft202012Validator

    schema = workflow_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) == {"name", "description", "args", "env", "cwd", "steps", "cost_limit",
                                         "checkpoint_ttl"}
    step = schema["$defs"]["step"]["properties"]
    assert {
        "id", "run", "command", "pipeline", "workflow", "workflow_args", "parallel", "for_each", "steps",
        "item_var", "index_var", "batch_size", "pause_ms", "approval", "input", "stdin", "env", "cwd",
        "when", "condition", "timeout_ms", "retry", "on_error",
    } <= set(step)
    assert "additionalProperties" not in schema["$defs"]["step"]  # unknown keys are allowed
    printed = json.dumps(schema, indent=2)
    assert json.loads(printed) == schema
    assert workflow_schema() is not workflow_schema()  # callers get their own copy


def test_unknown_keys_are_refused_with_a_suggestion() -> None:
    message, line, col = error_of("version: 3\nsteps:\n  - {id: a, run: x, depends_on: [b]}\n")
    assert (message, line, col) == ("Workflow file has unknown key: version", 1, 1)
    message, line, col = error_of("steps:\n  - id: a\n    run: x\n    timout_ms: 5\n")
    assert (message, line, col) == (
        "Workflow step a has unknown key: timout_ms (did you mean 'timeout_ms'?)", 4, 5)
    message, line, col = error_of("steps:\n  - id: a\n    run: x\n    retry: {max: 2, delay: 1}\n")
    assert (message, line, col) == (
        "Workflow step a retry has unknown key: delay (did you mean 'delay_ms'?)", 4, 21)


def test_keys_starting_x_dash_are_free() -> None:
    wf = load_workflow_text("x-version: 3\nsteps:\n  - {id: a, run: x, x-owner: ops, "
                            "retry: {x-note: y}, approval: {prompt: p, x-ui: z}}\n", "wf.lobster")
    assert wf.data["x-version"] == 3


STEP_KINDS = [
    ({"id": "a", "parallel": {"branches": []}, "workflow": "w"}, "parallel"),
    ({"id": "a", "workflow": "w.lobster", "approval": True}, "workflow"),
    ({"id": "a", "pipeline": "json", "run": "x"}, "pipeline"),
    ({"id": "a", "run": "echo", "approval": "ok?"}, "shell"),
    ({"id": "a", "command": "echo"}, "shell"),
    ({"id": "a", "for_each": "$x.json", "steps": []}, "for_each"),
    ({"id": "a", "input": {"prompt": "p"}}, "input"),
    ({"id": "a", "approval": True}, "approval"),
    ({"id": "a", "approval": "  "}, "noop"),
    ({"id": "a", "workflow": "  "}, "noop"),
]


@pytest.mark.parametrize("step,kind", STEP_KINDS)
def test_step_kind_precedence(step: dict, kind: str) -> None:
    assert step_kind(step) == kind


def test_gate_predicates() -> None:
    assert [is_approval(v) for v in (True, "x", {}, False, "", " ", [], None, 1)] == [True] * 3 + [False] * 6
    assert [is_input(v) for v in ({}, [], None, "x")] == [True, False, False, False]


@pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="conformance cases not beside the checkout")
def test_every_conformance_workflow_file_loads() -> None:
    files = [p for p in CONFORMANCE.glob("*/*") if p.suffix in (".lobster", ".yaml", ".yml")]
    files += [p for p in CONFORMANCE.glob("*/*.json") if p.name not in ("case.json", "expected.json")]
    assert files
    for path in files:
        assert load_workflow_file(str(path)).data["steps"]


def test_importing_the_loader_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, lobsterc.check.problems, lobsterc.load.build, lobsterc.syntax.expr; "
        "assert not [m for m in sys.modules if m.split('.')[0] in ('ruamel', 'jsonschema', 'lark')]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

_YAMLISH = st.sampled_from(list("steps:- id\n run{}[],\"'&*!|>%@`#?~ 0.1ax\t"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_YAMLISH, max_size=60), st.sampled_from(["wf.lobster", "wf.json"]))
def test_any_text_loads_or_raises_compile_error(text: str, name: str) -> None:
    try:
        load_workflow_text(text, name)
    except CompileError as exc:
        assert exc.first.code in ("E210", "E217") and exc.first.span is not None


def test_a_response_schema_checked_once_gives_the_same_verdict_again() -> None:
    bad = S + "    input: {prompt: p, responseSchema: {type: 5}}\n"
    first = error_of(bad)
    assert first == error_of(bad) and "is not valid under any of the given schemas" in first[0]
    # 1 and 1.0 and True are different schemas to the memo, as they are to JSON Schema
    for minimum in ("1", "1.0"):
        ok = S + f"    input: {{prompt: p, responseSchema: {{type: number, minimum: {minimum}}}}}\n"
        assert load_workflow_text(ok, "wf.lobster").data["steps"][0]["input"]["responseSchema"]["minimum"] == 1
    truthy = S + "    input: {prompt: p, responseSchema: {type: number, minimum: true}}\n"
    with pytest.raises(CompileError):
        load_workflow_text(truthy, "wf.lobster")


def test_response_schema_is_checked_in_the_dialect_answers_are_validated_in() -> None:
    # draft-07 (vm.core.schema), as at resume: tuple `items` is valid there (2020-12 would refuse it)
    ok = S + "    input: {prompt: p, responseSchema: {type: array, items: [{type: string}]}}\n"
    assert load_workflow_text(ok, "wf.lobster").data["steps"][0]["input"]["responseSchema"]["items"]


def test_every_problem_is_listed_and_the_first_is_the_one_a_load_reports() -> None:
    # each once: the schema does not repeat what the rules said of on_error and retry.max
    from lobsterc.check.problems import first_problem, iter_problems
    from lobsterc.load import parse_text

    text = ("steps:\n  - id: a\n    run: x\n    timout_ms: 5\n  - id: b\n    run: y\n"
            "    on_error: maybe\n  - id: c\n    run: z\n    retry: {max: 0}\n"
            "  - id: d\n    run: w\n    effects: write\n    env: {A: 1}\n")
    doc = parse_text(text, "wf.lobster")
    problems = [(d.code, d.message, d.span.line) for d in iter_problems(doc)]
    assert problems == [
        ("E217", "Workflow step a has unknown key: timout_ms (did you mean 'timeout_ms'?)", 4),
        ("E210", 'Workflow step b on_error must be "stop", "continue", or "skip_rest"', 7),
        ("E210", "Workflow step c retry.max must be a positive integer", 10),
        ("E210", "Workflow file is invalid at $.steps[3].env.A: 1 is not of type 'string'", 14),
    ]
    assert first_problem(doc).message == problems[0][1]
    assert error_of(text)[0] == problems[0][1]
