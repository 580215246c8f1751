"""`lobsterc lint`: one test per rule with its exact message and position, then the output
formats and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lobsterc.tools.cli import main
from lobsterc.tools.lint import RULES, lint_file


def write(tmp_path: Path, text: str, name: str = "flow.lobster") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def found(path: str, **kw) -> list[tuple]:
    """(code, severity, message, line, col, end_col, help) of each diagnostic."""
    return [(d.code, d.severity, d.message, d.span.line if d.span else None,
             d.span.col if d.span else None, d.span.end_col if d.span else None, d.help)
            for d in lint_file(path, **kw)]


def only(path: str, code: str, **kw) -> list[tuple]:
    return [f for f in found(path, **kw) if f[0] == code]


# errors ---------------------------------------------------------------------------------------

def test_unknown_command_and_unknown_flag_all_reported_at_their_words(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    pipeline: where x=1 | sortt --key a | head --nn 3\n")
    assert found(path) == [
        ("E201", "error", "Unknown command: sortt", 3, 27, 32, "did you mean 'sort'?"),
        ("E202", "error", "Unknown flag --nn for head", 3, 48, 52, "did you mean '--n'?"),
    ]


def test_unknown_command_in_a_pipeline_file(tmp_path):
    path = write(tmp_path, "\nexec --json --shell 'ls' | wher a=1\n", "p.pipeline")
    assert found(path) == [
        ("E201", "error", "Unknown command: wher", 2, 28, 32, "did you mean 'where'?")]


def test_unknown_step_reference(tmp_path):
    path = write(tmp_path, "steps:\n  - id: build\n    run: make\n    timeout_ms: 5\n"
                           "  - id: ship\n    when: $biuld.json.ok\n    approval: true\n")
    # the whole reference, as the reference words it (and as run and --dry-run report it)
    assert found(path) == [("E211", "error", "Unknown step reference: biuld.json.ok", 6, 11, 25,
                            "did you mean 'build'?")]


def test_reference_to_a_later_step(tmp_path):
    path = write(tmp_path, "steps:\n  - id: notes\n    stdin: $deploy.json\n    approval: true\n"
                           "  - id: deploy\n    run: ./deploy\n    timeout_ms: 5\n")
    assert found(path) == [("E211", "error", "Unknown step reference: deploy.json", 3, 12, 24,
                            "'deploy' is a later step; a step can only read the steps before it")]


def test_duplicate_ids_are_all_reported_and_lint_goes_on(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    approval: true\n  - id: a\n    approval: true\n"
                           "  - id: a\n    stdin: $nope.json\n    approval: true\n")
    assert found(path) == [
        ("E210", "error", "Duplicate workflow step id: a", 4, 9, 10, "'a' is first defined on line 2"),
        ("E210", "error", "Duplicate workflow step id: a", 6, 9, 10, "'a' is first defined on line 2"),
        ("E211", "error", "Unknown step reference: nope.json", 7, 12, 22, None),
    ]


def test_a_repeated_step_keeps_its_own_id_in_later_findings(tmp_path):
    # lint reads the file as written: no copy with the repeat renamed to a~N
    path = write(tmp_path, "steps:\n  - id: a\n    run: echo 1\n  - id: a\n    run: echo 2\n"
                           "    on_error: maybe\n")
    assert [(f[0], f[2]) for f in found(path)] == [
        ("E210", "Duplicate workflow step id: a"),
        ("E210", 'Workflow step a on_error must be "stop", "continue", or "skip_rest"'),
    ]
    path = write(tmp_path, "steps:\n  - id: a\n    run: echo 1\n  - id: a\n    run: echo 2\n")
    assert [f[2] for f in only(path, "W302")] == ["shell step a has no timeout_ms"] * 2


def test_invalid_json_schema_points_at_the_keyword(tmp_path):
    path = write(tmp_path, "steps:\n  - id: ask\n    input:\n      prompt: Why?\n"
                           "      responseSchema:\n        type: object\n        required: yes\n")
    assert found(path) == [(
        "E213", "error", "Workflow step ask input.responseSchema is invalid: 'yes' is not of "
        "type 'array'", 7, 19, 22, "see https://json-schema.org/understanding-json-schema/")]


def test_invalid_condition(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    when: $x.y ==\n    approval: true\n")
    (code, severity, message, line, col, _, _), = found(path)
    assert (code, severity, message, line) == ("E212", "error", "Unsupported condition: $x.y ==", 3)


def test_one_structural_error_stops_the_file(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    approval: true\n    retry: 3\n")
    assert found(path) == [("E210", "error", "Workflow step a retry must be an object", 4, 12, 13,
                            None)]


# warnings -------------------------------------------------------------------------------------

def test_arg_spliced_into_a_shell_line(tmp_path):
    path = write(tmp_path, "args:\n  env:\n    default: prod\nsteps:\n  - id: a\n"
                           "    run: make deploy-${env}\n    timeout_ms: 9\n")
    assert found(path) == [(
        "W301", "warning", "arg 'env' is spliced into a shell line", 6, 22, 28,
        'use "$LOBSTER_ARG_ENV" instead: the shell then reads the value as data, never as code')]


def test_shell_variables_that_are_not_args_are_fine(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    run: echo ${HOME}\n    timeout_ms: 9\n")
    assert found(path) == []


def test_step_without_a_timeout(tmp_path):
    path = write(tmp_path, "steps:\n  - id: fetch\n    pipeline: exec --json curl x | pick a\n"
                           "  - id: local\n    pipeline: pick a\n")
    assert found(path) == [(
        "W302", "warning", "pipeline step fetch has no timeout_ms", 2, 9, 14,
        "add `timeout_ms: <milliseconds>`: a command that hangs holds the run until the caller's "
        "timeoutMs")]


def test_unused_arg(tmp_path):
    path = write(tmp_path, "args:\n  used: {default: 1}\n  spare: {default: 2}\n  env: {}\n"
                           "steps:\n  - id: a\n    run: echo $LOBSTER_ARG_ENV\n    timeout_ms: 9\n"
                           "  - id: b\n    pipeline: where n=${used}\n")
    assert found(path) == [("W303", "warning", "arg 'spare' is never used", 3, 3, 8,
                            "reference it as ${spare} or $LOBSTER_ARG_SPARE, or remove it")]


def test_args_json_uses_every_arg(tmp_path):
    path = write(tmp_path, "args:\n  spare: {default: 2}\nsteps:\n  - id: a\n"
                           "    run: echo \"$LOBSTER_ARGS_JSON\"\n    timeout_ms: 9\n")
    assert found(path) == []


def test_condition_that_is_always_true(tmp_path):
    path = write(tmp_path, "steps:\n  - id: gate\n    when: \"1 == 1\"\n    approval: true\n")
    assert found(path) == [("W304", "warning", "condition is always true", 3, 11, 19,
                            "remove `when`: step gate always runs")]


def test_unreachable_step(tmp_path):
    path = write(tmp_path, "steps:\n  - id: list\n    run: echo []\n    timeout_ms: 9\n"
                           "  - id: loop\n    condition: false\n    for_each: $list.json\n"
                           "    steps:\n      - id: inner\n        run: echo x\n"
                           "        timeout_ms: 9\n")
    assert found(path) == [("W305", "warning", "step loop never runs", 5, 9, 13,
                            "its condition is always false")]  # not `inner` again


def test_unknown_effects_value(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    effects: wrte\n    approval: true\n")
    assert found(path) == [("W307", "warning", "unknown effects value 'wrte'", 3, 14, 18,
                            "did you mean 'write'?")]


_HELP_308 = ("answers are validated as JSON Schema draft-07, which does not read this keyword: "
             "it constrains nothing")


def test_schema_keyword_the_dialect_ignores_is_named_with_its_pointer_and_still_compiles(tmp_path):
    path = write(tmp_path, "steps:\n  - id: ask\n    input:\n      prompt: Which?\n"
                           "      responseSchema:\n        type: array\n"
                           "        prefixItems: [{type: string}]\n"
                           "        items:\n          - {type: string, minContains: 1}\n"
                           "        properties:\n          a/b: {$defs: {}}\n")
    assert found(path) == [
        ("W308", "warning", "responseSchema keyword 'prefixItems' at / is ignored by the validator",
         7, 9, 20, _HELP_308),
        ("W308", "warning", "responseSchema keyword 'minContains' at /items/0 is ignored by the "
         "validator", 9, 28, 39, _HELP_308),
        ("W308", "warning", "responseSchema keyword '$defs' at /properties/a~1b is ignored by the "
         "validator", 11, 17, 22, _HELP_308),
    ]
    from lobsterc.generate.workflow import compile_workflow

    (site,) = compile_workflow(path).halts
    assert site.schema["prefixItems"] == [{"type": "string"}]  # kept, as the original keeps it


def test_draft07_schema_has_no_w308(tmp_path):
    path = write(tmp_path, "steps:\n  - id: ask\n    input:\n      prompt: Which?\n"
                           "      responseSchema: {type: array, items: [{type: string}], "
                           "additionalItems: false, definitions: {x: {const: 1}}}\n")
    assert found(path) == []


def test_side_effecting_step_without_approval(tmp_path):
    path = write(tmp_path, "steps:\n  - id: build\n    run: make\n    timeout_ms: 9\n"
                           "  - id: deploy\n    effects: write\n    run: ./deploy\n    timeout_ms: 9\n")
    assert found(path) == [(
        "W306", "warning", "step deploy can run without approval: build -> deploy", 5, 9, 15,
        "it is marked `effects: write`; put an approval step before it (a step's own "
        "`approval` is asked after the step has run)")]


def test_every_rule_has_a_stable_code():
    codes = [rule.code for rule in RULES]
    assert len(codes) == len(set(codes))
    assert all(code[0] in "EW" and code[1:].isdigit() for code in codes)


def test_all_errors_of_all_steps_at_once(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    pipeline: sortt\n  - id: b\n    pipeline: headd\n"
                           "  - id: c\n    stdin: $zz.json\n    approval: true\n")
    assert [f[:3] for f in found(path)] == [
        ("E201", "error", "Unknown command: sortt"), ("E201", "error", "Unknown command: headd"),
        ("E211", "error", "Unknown step reference: zz.json")]


def test_sub_workflow_errors_come_from_the_compiler(tmp_path):
    path = write(tmp_path, "steps:\n  - id: call\n    workflow: missing.lobster\n")
    # the resolved path, as the original names it
    assert found(path) == [("E210", "error", "Workflow step call workflow file not found: "
                            f"{tmp_path / 'missing.lobster'}", 3, 15, 30, None)]


# output and exit codes ------------------------------------------------------------------------

def test_text_format_renders_line_caret_and_help(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "steps:\n  - id: a\n    pipeline: sortt\n")
    assert main(["lint", "flow.lobster"]) == 1
    assert capsys.readouterr().out == (  # the file named absolute and resolved
        f"{tmp_path.resolve() / 'flow.lobster'}:3:15: error[E201]: Unknown command: sortt\n"
        "  3 |     pipeline: sortt\n"
        "    |               ^^^^^\n"
        "  help: did you mean 'sort'?\n"
        "1 error, 0 warnings\n")


def test_json_format(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "steps:\n  - id: a\n    pipeline: sortt\n")
    write(tmp_path, "steps:\n  - id: a\n    approval: true\n", "clean.lobster")
    assert main(["lint", "--format", "json", "flow.lobster", "clean.lobster"]) == 1
    assert json.loads(capsys.readouterr().out) == [{
        "file": str(tmp_path.resolve() / "flow.lobster"), "line": 3, "column": 15, "endLine": 3,
        "endColumn": 20,
        "severity": "error", "code": "E201", "message": "Unknown command: sortt",
        "help": "did you mean 'sort'?"}]


def test_clean_files_exit_0(tmp_path, capsys):
    path = write(tmp_path, "steps:\n  - id: a\n    approval: true\n")
    assert main(["lint", path]) == 0
    assert capsys.readouterr().out == ""
    assert main(["lint", "--format", "json", path]) == 0
    assert capsys.readouterr().out == "[]\n"


@pytest.mark.parametrize("argv", [["lint"], ["lint", "--format", "xml", "x.lobster"],
                                  ["lint", "does-not-exist.lobster"]])
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2


def test_warnings_alone_exit_1(tmp_path, capsys):
    path = write(tmp_path, "steps:\n  - id: a\n    run: echo\n")
    assert main(["lint", path]) == 1
    assert "warning[W302]" in capsys.readouterr().out


def test_step_reference_spliced_into_a_shell_line(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    run: echo x\n    timeout_ms: 9\n"
                           "  - id: b\n    run: |\n      echo start\n      rm $a.stdout\n"
                           "    timeout_ms: 9\n")
    assert found(path) == [(
        "W309", "warning", "step reference $a.stdout is spliced into a shell line", 8, 10, 19,
        "pass it through the step's `env:` (A_STDOUT: $a.stdout) and read \"$A_STDOUT\" in the "
        "shell: the shell then reads the value as data, never as code")]


def test_loop_variable_spliced_into_a_shell_line(tmp_path):
    path = write(tmp_path, "steps:\n  - id: a\n    run: echo '[1]'\n    timeout_ms: 9\n"
                           "  - id: l\n    for_each: $a.json\n    steps:\n      - id: s\n"
                           "        run: echo $item.json\n        timeout_ms: 9\n")
    assert [f[:5] for f in found(path)] == [
        ("W309", "warning", "step reference $item.json is spliced into a shell line", 9, 19)]


def test_references_in_exec_shell_text(tmp_path):
    path = write(tmp_path, "args:\n  host: {default: a}\nsteps:\n  - id: a\n    run: echo x\n"
                           "    timeout_ms: 9\n  - id: b\n    timeout_ms: 9\n"
                           "    pipeline: exec --shell 'ping ${host}' | exec 'cat $a.stdout'"
                           " | exec sh -c \"rm $a.json\" | exec echo $a.json\n")
    assert [f[:5] for f in found(path)] == [
        ("W310", "warning", "arg 'host' is spliced into the shell text of exec in step b", 9, 34),
        ("W310", "warning", "step reference $a.stdout is spliced into the shell text of exec in "
         "step b", 9, 55),
        ("W310", "warning", "step reference $a.json is spliced into the shell text of exec in "
         "step b", 9, 83)]


def test_references_through_env_are_fine(tmp_path):
    path = write(tmp_path, "args:\n  host: {default: a}\nsteps:\n  - id: a\n    run: echo x\n"
                           "    timeout_ms: 9\n  - id: b\n    timeout_ms: 9\n    env:\n"
                           "      OUT: $a.stdout\n      H: ${host}\n"
                           "    pipeline: exec --shell 'ping \"$H\" \"$OUT\"'\n"
                           "  - id: c\n    timeout_ms: 9\n    env: {OUT: $a.stdout}\n"
                           "    run: echo \"$OUT\" \"$LOBSTER_ARG_HOST\"\n")
    assert found(path) == []
