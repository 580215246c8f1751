"""Every stdlib command through the real VM, in process: `vm.service.protocol.handle` on a tool request."""

from __future__ import annotations

import json
import os
import sys

import pytest

from vm.service.protocol import Options, handle

ROWS = [
    {"id": 1, "name": "alpha", "team": "red", "score": 30},
    {"id": 2, "name": "beta", "team": "blue", "score": 12},
    {"id": 3, "name": "gamma", "team": "red", "score": 45},
    {"id": 4, "name": "delta", "team": "green", "score": 12},
    {"id": 2, "name": "beta", "team": "blue", "score": 12},
]
SRC = "exec --json cat rows.json"  # the rows above, from a file in the run's cwd
DEFAULT_SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject", "redraft"]},
        "feedback": {"type": "string", "description": "Feedback for redraft"},
    },
    "required": ["decision"],
}
STDLIB = ["exec", "where", "pick", "head", "sort", "dedupe", "groupBy", "map", "template",
          "json", "table", "approve", "ask", "state.get", "state.set", "diff.last",
          "commands.list"]
GATEWAY = ["apus.invoke", "clawd.invoke", "openclaw.invoke", "llm.invoke", "llm_task.invoke"]


@pytest.fixture
def run(tmp_path):
    (tmp_path / "rows.json").write_text(json.dumps(ROWS))

    def run(pipeline: str, **request) -> dict:
        options = Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path),
                          env=dict(os.environ), mode="tool")
        return handle({"action": "run", "pipeline": pipeline, **request}, options)

    return run


def ok(envelope: dict) -> list:
    assert envelope["ok"] is True and envelope["status"] == "ok", envelope
    return envelope["output"]


def error(envelope: dict) -> tuple[str, str]:
    assert envelope["ok"] is False, envelope
    return envelope["error"]["type"], envelope["error"]["message"]


def halted(envelope: dict, status: str) -> dict:
    assert envelope["ok"] is True and envelope["status"] == status, envelope
    assert envelope["output"] == []
    return envelope["requiresApproval" if status == "needs_approval" else "requiresInput"]


def emit(values) -> str:
    """An exec stage whose stdout is `values` as JSON (no shell involved)."""
    code = f"import json,sys; sys.stdout.write(json.dumps({values!r}))"
    return f"exec --json {sys.executable} -c \"{code}\""


# exec ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("pipeline, expected", [
    ("exec echo hi there", ["hi there"]),  # argv, no shell
    ("exec echo '$HOME' '*'", ["$HOME *"]),  # argv is never shell-interpreted
    ("exec --shell 'echo a; echo; echo b'", ["a", "b"]),  # lines; empty lines dropped
    ("exec 'echo one two | tr o 0'", ["0ne tw0"]),  # one positional with whitespace = shell
    ("exec --shell 'printf \"x\\r\\ny\\n\"'", ["x", "y"]),
    ("exec --json echo '[1, {\"a\": 2}, \"s\"]'", [1, {"a": 2}, "s"]),  # array -> items
    ("exec --json echo '{\"a\": 1}'", [{"a": 1}]),  # anything else -> one item
    ("exec --json echo '  7  '", [7]),
    ("exec --json --shell true", [None]),  # empty stdout -> null
    ("exec --shell 'echo warn >&2; echo out'", ["out"]),  # stderr of a success is dropped
    ("exec --shell 'printf \"%s\" \"$LOBSTER_TEST_VAR\"'", ["from-env"]),
])
def test_exec_forms(run, pipeline, expected, monkeypatch):
    monkeypatch.setenv("LOBSTER_TEST_VAR", "from-env")
    assert ok(run(pipeline)) == expected


@pytest.mark.parametrize("mode, expected", [
    ("json", ['[1,"x",{"k":2}]']),
    ("JSON", ['[1,"x",{"k":2}]']),  # case-insensitive
    ("jsonl", ["1", '"x"', '{"k":2}']),
    ("raw", ["1", "x", '{"k":2}']),
])
def test_exec_stdin_modes(run, mode, expected):
    items = emit([1, "x", {"k": 2}])
    assert ok(run(f"{items} | exec --stdin {mode} cat")) == expected


def test_exec_stdin_exact_bytes(run, tmp_path):
    items = emit([1, "x", {"k": 2}])
    for mode, expected in [("jsonl", '1\n"x"\n{"k":2}\n'), ("raw", '1\nx\n{"k":2}'),
                           ("json", '[1,"x",{"k":2}]')]:
        ok(run(f"{items} | exec --stdin {mode} --shell 'cat > got.txt'"))
        assert (tmp_path / "got.txt").read_text() == expected, mode
    ok(run("exec --stdin jsonl --shell 'cat > got.txt'"))
    assert (tmp_path / "got.txt").read_text() == ""  # no items, no trailing newline


def test_exec_without_stdin_closes_the_childs_stdin(run):
    assert ok(run(f"{emit([1, 2])} | exec --shell 'cat; echo end'")) == ["end"]


def test_exec_json_round_trip_through_a_child(run):
    assert ok(run(f"{SRC} | exec --stdin json --json cat")) == ROWS


@pytest.mark.parametrize("pipeline, message", [
    ("exec --shell 'echo err >&2; echo out; exit 4'", "exec failed (4): err"),
    ("exec --shell 'echo out; exit 5'", "exec failed (5): out"),
    ("exec --shell 'exit 6'", "exec failed (6): exit 6"),
    ("exec false", "exec failed (1): false"),
    ("exec --shell '  echo \"  padded  \" >&2; exit 2'", "exec failed (2): padded"),
    ("exec nosuchcommand_zz_lobster x", "exec command not found: nosuchcommand_zz_lobster"),
    ("exec --json echo '{bad'", "exec --json could not parse stdout as JSON: Expected property"
                                " name or '}' in JSON at position 1"),
    ("exec", "exec requires a command"),
    ("exec --stdin xml cat", "exec --stdin must be raw, json, or jsonl (got xml)"),
])
def test_exec_errors(run, pipeline, message):
    assert error(run(pipeline)) == ("runtime_error", message)


def test_exec_shell_not_found(run, monkeypatch):
    monkeypatch.setenv("LOBSTER_SHELL", "/nonexistent/shell")
    assert error(run("exec --shell 'echo hi'")) == \
        ("runtime_error", "exec shell not found; check LOBSTER_SHELL or ComSpec")


def test_exec_bool_flag_never_swallows_the_command(run):
    assert ok(run("exec --json echo '[1]'")) == [1]


# data commands ------------------------------------------------------------------------------
@pytest.mark.parametrize("stages, expected", [
    ("where team=red | pick id", [{"id": 1}, {"id": 3}]),
    ("where score>=30 | pick name", [{"name": "alpha"}, {"name": "gamma"}]),
    ("where team!=red | pick id", [{"id": 2}, {"id": 4}, {"id": 2}]),
    ("where name=beta | head --n 1 | pick id,name", [{"id": 2, "name": "beta"}]),
    ("pick id,missing | head --n 2", [{"id": 1}, {"id": 2}]),
    ("head --n 2 | pick id", [{"id": 1}, {"id": 2}]),
    ("head --n 0", []),
    ("sort --key score | pick id", [{"id": 2}, {"id": 4}, {"id": 2}, {"id": 1}, {"id": 3}]),
    ("sort --key score --desc | pick id", [{"id": 3}, {"id": 1}, {"id": 2}, {"id": 4}, {"id": 2}]),
    ("sort --key name | head --n 2 | pick name", [{"name": "alpha"}, {"name": "beta"}]),
    ("dedupe | pick id", [{"id": 1}, {"id": 2}, {"id": 3}, {"id": 4}]),
    ("dedupe --key team | pick id", [{"id": 1}, {"id": 2}, {"id": 4}]),
    ("groupBy --key team | pick key,count",
     [{"key": "red", "count": 2}, {"key": "blue", "count": 2}, {"key": "green", "count": 1}]),
    ("group_by --key team | map --unwrap count", [2, 2, 1]),
    ("groupBy --key team | head --n 1 | map --unwrap items", [[ROWS[0], ROWS[2]]]),
    ("head --n 1 | pick id | map --wrap row", [{"row": {"id": 1}}]),
    ("head --n 2 | map --unwrap name", ["alpha", "beta"]),
    ("head --n 1 | pick id,name | map 'label={{name}}-{{id}}' 'k=v'",
     [{"id": 1, "name": "alpha", "label": "alpha-1", "k": "v"}]),
    ("head --n 2 | template --text '{{name | upper}}: {{score}}'", ["ALPHA: 30", "BETA: 12"]),
    ("head --n 1 | template '#{{id}}' '{{team}}'", ["#1 red"]),
    ("head --n 1 | template --text '{{nope | default none}} {{ . | json | length }}'",
     ["none 64"]),
])
def test_data_commands_through_the_vm(run, stages, expected):
    assert ok(run(f"{SRC} | {stages}")) == expected


@pytest.mark.parametrize("stage, message", [
    ("where", "where requires an expression (e.g. field=value)"),
    ("where 'no operator'", "Invalid where expression: no operator"),
    ("pick", "pick requires a comma-separated field list"),
    ("head --n -1", "head --n must be a non-negative number"),
    ("groupBy", "groupBy requires --key"),
    ("map --wrap a --unwrap b", "map cannot use both --wrap and --unwrap"),
    ("template", "template requires --text or --file (or positional text)"),
    ("template --text '{{x | nosuch}}'", "Unknown template filter: nosuch"),
])
def test_data_command_errors(run, stage, message):
    assert error(run(f"{SRC} | {stage}")) == ("runtime_error", message)


def test_template_file_relative_to_cwd(run, tmp_path):
    (tmp_path / "t.txt").write_text("{{name}}!")
    assert ok(run(f"{SRC} | head --n 2 | template --file t.txt")) == ["alpha!", "beta!"]


# renderers in tool mode ---------------------------------------------------------------------
@pytest.mark.parametrize("renderer", ["json", "table"])
def test_renderers_output_nothing_in_tool_mode(run, renderer):
    envelope = run(f"{SRC} | {renderer}")
    assert envelope == {"protocolVersion": 1, "ok": True, "status": "ok", "output": [],
                        "requiresApproval": None, "requiresInput": None}


# approve ------------------------------------------------------------------------------------
def test_approve_defaults(run):
    request = halted(run(f"{SRC} | head --n 2 | approve"), "needs_approval")
    assert request["type"] == "approval_request"
    assert request["prompt"] == "Approve?"
    assert request["items"] == ROWS[:2]
    assert "preview" not in request


@pytest.mark.parametrize("values, flags, preview", [
    (["a", "b", "c"], "", "a\nb\nc"),  # strings joined by newline
    (["a", "b", "c", "d", "e", "f", "g"], "", "a\nb\nc\nd\ne"),  # default limit 5
    (["a", "b", "c"], "--limit 2", "a\nb"),
    (["a", "b", "c"], "--preview-limit 2", "a\nb"),
    (["a", "b", "c"], "--limit", "a"),  # bare --limit = 1
    (["a", "b", "c"], "--limit abc", "a\nb\nc"),  # non-numeric -> 5
    (["a", 1], "", '[\n  "a",\n  1\n]'),  # not all strings -> pretty JSON
    ([{"k": 1}, {"k": 2}], "--limit 1", '[\n  {\n    "k": 1\n  }\n]'),
])
def test_approve_preview(run, values, flags, preview):
    request = halted(run(f"{emit(values)} | approve --preview-from-stdin {flags} --prompt 'Ok?'"),
                     "needs_approval")
    assert request["prompt"] == "Ok?"
    assert request["items"] == values  # all items, not only the previewed ones
    assert request["preview"] == preview


def test_approve_preview_alias_and_empty_preview(run):
    request = halted(run(f"{emit(['x'])} | approve --previewFromStdin"), "needs_approval")
    assert request["preview"] == "x"
    request = halted(run("approve --preview-from-stdin"), "needs_approval")
    assert request["items"] == [] and "preview" not in request


def test_approve_request_key_order(run):
    request = halted(run(f"{emit(['x'])} | approve --preview-from-stdin"), "needs_approval")
    assert list(request) == ["type", "prompt", "items", "preview", "resumeToken", "approvalId"]


# ask ----------------------------------------------------------------------------------------
def test_ask_defaults(run):
    request = halted(run("ask"), "needs_input")
    assert request["type"] == "input_request"
    assert request["prompt"] == "Input required"
    assert request["responseSchema"] == DEFAULT_SCHEMA
    assert "subject" not in request
    assert list(request) == ["type", "prompt", "responseSchema", "resumeToken"]


def test_ask_schema(run):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    request = halted(run(f"ask --prompt 'How many?' --schema '{json.dumps(schema)}'"),
                     "needs_input")
    assert (request["prompt"], request["responseSchema"]) == ("How many?", schema)


def test_ask_subject_from_stdin(run):
    request = halted(run(f"{emit(['line one', {'k': 1}, 2])} | ask --subject-from-stdin"),
                     "needs_input")
    assert request["subject"] == {"text": 'line one\n{"k":1}\n2'}
    request = halted(run(f"{emit(['x' * 3000])} | ask --subjectFromStdin"), "needs_input")
    assert request["subject"] == {"text": "x" * 2000}


@pytest.mark.parametrize("schema, message", [
    ("nope", "ask --schema must be valid JSON"),
    ("[1]", "ask --schema must decode to a JSON schema object"),
    ('"str"', "ask --schema must decode to a JSON schema object"),
    ('{"type": "bogus"}', "ask response schema is invalid"),
])
def test_ask_bad_schema(run, schema, message):
    assert error(run(f"ask --schema '{schema}'")) == ("runtime_error", message)


def test_ask_bad_schema_is_reported_before_anything_runs(run, tmp_path):
    assert error(run("exec --shell 'touch ran.txt' | ask --schema nope"))[1] == \
        "ask --schema must be valid JSON"
    assert not (tmp_path / "ran.txt").exists()


# state --------------------------------------------------------------------------------------
def test_state_set_then_get(run, tmp_path):
    assert ok(run(f"{emit([1, 2])} | state.set '_Demo KEY_'")) == [[1, 2]]
    assert ok(run("state.get '_Demo KEY_'")) == [[1, 2]]
    assert ok(run("state.get demo_key")) == [[1, 2]]  # the same normalised key
    assert ok(run("state.get 'DEMO   key'")) == [[1, 2]]
    assert [p.name for p in (tmp_path / "state").rglob("demo_key.json")] == ["demo_key.json"]
    assert ok(run(f"{emit([{'a': 1}])} | state.set one")) == [{"a": 1}]  # a single item
    assert ok(run("state.get one")) == [{"a": 1}]
    assert ok(run("state.set nothing")) == [[]]  # no items -> the empty array
    assert ok(run("state.get nothing")) == [[]]
    assert ok(run("state.get never-set")) == [None]


@pytest.mark.parametrize("stored, message", [
    (b'{"a":', "Unexpected end of JSON input"),
    (b'{"a":1,}', "Expected double-quoted property name in JSON at position 7"),
    (b"[1] x", "Unexpected non-whitespace character after JSON at position 4"),
    (b"\xff[1", "Unexpected token '\ufffd', \"\ufffd[1\" is not valid JSON"),  # as Node decodes
])
def test_a_damaged_value_is_reported_in_json_parse_words(run, tmp_path, stored, message):
    assert ok(run(f"{emit([1])} | state.set k")) == [1]
    (tmp_path / "state" / "values" / "k.json").write_bytes(stored)
    assert error(run("state.get k"))[1] == message
    assert ok(run(f"{emit([2])} | diff.last --key k"))[0]["before"] is None  # starts over


@pytest.mark.parametrize("pipeline, message", [
    ("state.get", "state.get requires a key"),
    ("state.set", "state.set requires a key"),
    ("state.set '!!!'", "state key is empty/invalid"),
    ("diff.last", "diff.last requires --key"),
])
def test_state_errors(run, pipeline, message):
    assert error(run(pipeline)) == ("runtime_error", message)


def test_diff_last(run):
    first = ok(run(f"{emit([1, 2])} | diff.last --key seen"))
    assert first == [{"kind": "diff.last", "key": "seen", "changed": True, "before": None,
                      "after": [1, 2]}]
    again = ok(run(f"{emit([1, 2])} | diff.last --key seen"))
    assert again == [{"kind": "diff.last", "key": "seen", "changed": False, "before": [1, 2],
                      "after": [1, 2]}]
    changed = ok(run(f"{emit([{'b': 1, 'a': 2}])} | diff.last seen"))
    assert changed == [{"kind": "diff.last", "key": "seen", "changed": True, "before": [1, 2],
                        "after": {"b": 1, "a": 2}}]
    # key order does not count as a change
    same = ok(run(f"{emit([{'a': 2, 'b': 1}])} | diff.last seen"))
    assert same[0]["changed"] is False


# a field `pick` sets that the item lacks (undefined) --------------------------------------
PICKED = f"{emit([{'a': 1}, {}])} | pick b,a"


def test_an_undefined_field_is_left_out_of_every_value_stored_or_handed_on(run, tmp_path):
    # the envelope is JSON data (json.dumps takes it), as the original's JSON text leaves it
    assert json.dumps(ok(run(PICKED))) == '[{"a": 1}, {}]'
    assert ok(run(f"{PICKED} | groupBy --key b")) == [{"items": [{"a": 1}, {}], "count": 2}]
    assert ok(run(f"{PICKED} | state.set k")) == [[{"a": 1}, {}]]
    assert json.loads((tmp_path / "state" / "values" / "k.json").read_text()) == [{"a": 1}, {}]
    first = ok(run(f"{PICKED} | diff.last --key d"))[0]
    again = ok(run(f"{PICKED} | diff.last --key d"))[0]
    assert (first["changed"], again["changed"]) == (True, False)  # {b: undefined} is {}
    assert ok(run(f"{PICKED} | exec --stdin jsonl --shell cat")) == ['{"a":1}', "{}"]
    assert ok(run(f"{PICKED} | exec --stdin json --shell cat")) == ['[{"a":1},{}]']
    request = halted(run(f"{PICKED} | approve --preview-from-stdin"), "needs_approval")
    assert request["items"] == [{"a": 1}, {}]
    assert request["preview"] == '[\n  {\n    "a": 1\n  },\n  {}\n]'


def test_an_undefined_field_is_a_table_column_until_a_halt_stores_the_run(run, tmp_path):
    # the original keeps a step's items in memory (the table lists `b`), and persists a
    # paused run as JSON: after the resume `b` is gone
    steps = (f"steps:\n  - id: s\n    pipeline: {json.dumps(PICKED)}\nGATE"
             "  - id: t\n    pipeline: table\n    stdin: $s.json\n")
    (tmp_path / "straight.lobster").write_text(steps.replace("GATE", ""))
    (tmp_path / "paused.lobster").write_text(steps.replace("GATE", "    approval: ok\n"))
    assert ok(run("straight.lobster")) == ["b    a  \n---  ---\n     1  \n        \n"]
    request = halted(run("paused.lobster"), "needs_approval")
    assert request["items"] == [{"a": 1}, {}]
    options = Options(state_dir=str(tmp_path / "state"), cwd=str(tmp_path), env=dict(os.environ),
                      mode="tool")
    resumed = handle({"action": "resume", "token": request["resumeToken"], "approve": True},
                     options)
    assert ok(resumed) == ["a  \n---\n1  \n   \n"]


def test_an_approval_a_step_prints_reads_undefined_fields_as_absent(run, tmp_path):
    # `items ?? []`, and the preview only when truthy: undefined is neither
    picked = f"{emit([{'prompt': 'p?'}])} | pick prompt,items,preview"
    (tmp_path / "w.lobster").write_text(
        f"steps:\n  - id: s\n    pipeline: {json.dumps(picked)}\n    approval: true\n")
    request = halted(run("w.lobster"), "needs_approval")
    assert (request["prompt"], request["items"], "preview" in request) == ("p?", [], False)


# commands.list ------------------------------------------------------------------------------
def test_commands_list(run):
    commands = ok(run("commands.list"))
    names = [c["name"] for c in commands]
    assert names == sorted(names)
    for name in STDLIB:
        assert name in names
    for command in commands:
        assert {"name", "description", "flags", "sideEffects"} <= set(command), command
        assert isinstance(command["description"], str) and command["description"]
        assert isinstance(command["flags"], list)
    by_name = {c["name"]: c for c in commands}
    assert by_name["exec"]["sideEffects"] == "local_exec"
    assert "group_by" in by_name["groupBy"].get("aliases", [])
    assert {f["name"] for f in by_name["approve"]["flags"]} >= {"prompt", "emit",
                                                                 "preview-from-stdin", "limit"}


def test_commands_list_has_the_gateway_bridge(run):
    # SPEC section 5: the stdlib includes apus.invoke (aliases clawd.invoke, openclaw.invoke)
    # and llm.invoke (alias llm_task.invoke)
    names = [c["name"] for c in ok(run("commands.list"))]
    for name in GATEWAY:
        assert name in names


# compile errors: nothing runs ---------------------------------------------------------------
def test_unknown_command(run, tmp_path):
    envelope = run("exec --shell 'touch ran.txt' | nosuch --x 1")
    assert error(envelope) == ("runtime_error", "Unknown command: nosuch")
    assert envelope["error"]["location"] == {"file": "<pipeline>", "line": 1, "column": 32}
    assert not (tmp_path / "ran.txt").exists()


def test_unknown_flag_is_a_compile_error_and_nothing_runs(run, tmp_path):
    envelope = run("exec --shell 'touch ran.txt' | head --bogus 3")
    assert envelope["ok"] is False
    assert envelope["error"]["message"] == "Unknown flag --bogus for head"
    location = envelope["error"]["location"]
    assert (location["line"], location["column"]) == (1, 37)
    assert not (tmp_path / "ran.txt").exists()


def test_unclosed_quote_is_a_parse_error(run):
    envelope = run("exec 'oops")
    assert error(envelope) == ("parse_error", "Unclosed quote")
    assert envelope["error"]["location"]["line"] == 1
