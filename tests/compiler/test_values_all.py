"""The values generator yields every problem of a step, each at its own place, and the first of
them is still the original's first error; a check that needs an earlier value to be valid is
skipped when it is not, so one mistake is reported once (lobsterc.check.values)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lobsterc.tools.lint import lint_file
from lobsterc.check.problems import first_problem, iter_problems
from lobsterc.check.values import value_problems
from lobsterc.load import parse_text

MANY_IN_ONE_STEP = """\
steps:
  - id: a
    run: echo hi
    timeout_ms: 0
    on_error: maybe
    retry: {max: 0, backoff: linear, jitter: 3}
    approval: {initiated_by: 5, require_different_approver: "yes"}
"""

FILE_AND_STEPS = """\
cost_limit: {max_usd: -1, action: shout}
steps:
  - id: a
    parallel: 5
    on_error: maybe
  - id: b
    for_each: 7
    timeout_ms: -3
"""

LOOP = """\
steps:
  - id: loop
    for_each: $x.json
    batch_size: 0
    pause_ms: -1
    item_var: 3
    index_var: 3
    steps:
      - id: s1
        run: 5
      - id: item
        run: echo
"""

BRANCHES = """\
steps:
  - id: p
    parallel:
      wait: some
      timeout_ms: 0
      branches:
        - id: p
          run: x
        - {id: q}
        - id: r
          run: a
          pipeline: b
"""

INPUTS = """\
steps:
  - id: ask
    input: {prompt: 5, responseSchema: 7}
    timeout_ms: 1.5
  - id: ask
    input: {prompt: p, responseSchema: {type: nope}}
"""


def values_of(text: str) -> list[tuple[str, int, int]]:
    doc = parse_text(text, "wf.lobster")
    return [(d.message, d.span.line, d.span.col) for d in value_problems(doc)]


def test_every_bad_value_of_a_step_is_reported_at_its_own_place() -> None:
    step = "Workflow step a"
    assert values_of(MANY_IN_ONE_STEP) == [  # the reference's order: approval before limits
        (f"{step} approval.initiated_by must be a string", 7, 30),
        (f"{step} approval.require_different_approver must be a boolean", 7, 61),
        (f"{step} timeout_ms must be a positive integer between 1 and 2147483647", 4, 17),
        (f'{step} on_error must be "stop", "continue", or "skip_rest"', 5, 15),
        (f"{step} retry.max must be a positive integer", 6, 18),
        (f'{step} retry.backoff must be "fixed" or "exponential"', 6, 30),
        (f"{step} retry.jitter must be a boolean", 6, 46),
    ]


def test_the_files_own_values_then_each_step() -> None:
    assert values_of(FILE_AND_STEPS) == [
        ("Workflow cost_limit.max_usd must be a non-negative number", 1, 23),
        ('Workflow cost_limit.action must be "warn" or "stop"', 1, 35),
        ("Workflow step a parallel must be an object", 4, 15),
        ('Workflow step a on_error must be "stop", "continue", or "skip_rest"', 5, 15),
        ("Workflow step b for_each must be a string (step reference expression)", 7, 15),
        ("Workflow step b timeout_ms must be a positive integer between 1 and 2147483647",
         8, 17),
    ]


def test_a_step_whose_kind_is_unknown_is_not_told_it_has_none() -> None:
    # `parallel: 5` and `for_each: 7` leave no kind; "requires run, command, ..." would be a
    # second report of the same mistake
    assert not any("requires run" in message for message, _, _ in values_of(FILE_AND_STEPS))
    both = "steps:\n  - id: a\n    workflow: 3\n    run: echo\n"
    assert values_of(both) == [("Workflow step a workflow must be a string (file path)", 3, 15)]


def test_loop_fields_and_sub_steps_each_report() -> None:
    loop = "Workflow step loop"
    assert values_of(LOOP) == [
        (f"{loop} batch_size must be a positive integer", 4, 17),
        (f"{loop} pause_ms must be a finite non-negative number", 5, 15),
        (f"{loop} item_var must be a string", 6, 15),
        (f"{loop} index_var must be a string", 7, 16),
        # no "item_var and index_var cannot be the same": neither is a variable name
        (f"{loop} for_each sub-step s1 run must be a string", 10, 14),
        (f"{loop} for_each sub-step s1 requires run, command, or pipeline", 9, 9),
    ]
    same = LOOP.replace("item_var: 3", "item_var: i").replace("index_var: 3", "index_var: i")
    assert (f"{loop} item_var and index_var cannot be the same", 7, 16) in values_of(same)


def test_parallel_fields_and_every_branch_report() -> None:
    step = "Workflow step p parallel"
    assert values_of(BRANCHES) == [
        (f'{step} wait must be "all" or "any"', 4, 13),
        (f"{step} timeout_ms must be a positive integer between 1 and 2147483647", 5, 19),
        (f"{step} branch id cannot match the step id", 7, 15),
        (f"{step} branch q requires run, command, or pipeline", 9, 11),
        (f"{step} branch r can only define one of run, command, or pipeline", 10, 11),
    ]
    no_branches = "steps:\n  - id: p\n    parallel: {branches: 3, wait: some}\n"
    assert [m for m, _, _ in values_of(no_branches)] == [
        "Workflow step p parallel requires a non-empty branches array",
        'Workflow step p parallel wait must be "all" or "any"',
    ]


def test_an_object_of_the_wrong_type_skips_its_fields() -> None:
    text = "steps:\n  - id: a\n    run: x\n    retry: [max, 0]\n    input: 5\n"
    assert [m for m, _, _ in values_of(text)] == [
        "Workflow step a input must be an object",
        "Workflow step a retry must be an object",
    ]
    assert [m for m, _, _ in values_of("cost_limit: 5\nsteps: [{id: a, run: x}]\n")] == [
        "Workflow cost_limit must be an object"]


def test_a_step_without_an_id_is_skipped_and_later_steps_still_checked() -> None:
    text = "steps:\n  - run: x\n    timeout_ms: 0\n  - id: b\n    run: y\n    on_error: no\n"
    assert values_of(text) == [
        ("Workflow step requires an id", 2, 5),
        ('Workflow step b on_error must be "stop", "continue", or "skip_rest"', 6, 15),
    ]


def test_input_fields_and_a_repeated_id_of_a_step_with_problems() -> None:
    found = [m for m, _, _ in values_of(INPUTS)]
    assert found[:3] == [
        "Workflow step ask input.prompt must be a string",
        "Workflow step ask input.responseSchema must be an object",
        "Workflow step ask timeout_ms must be a positive integer between 1 and 2147483647",
    ]
    assert found[3].startswith("Workflow step ask input.responseSchema is invalid: ")
    # the first step had problems; its id still counts as taken
    assert found[4:] == ["Duplicate workflow step id: ask"]


def test_the_first_problem_of_a_load_is_the_first_value_problem() -> None:
    for text in (MANY_IN_ONE_STEP, FILE_AND_STEPS, LOOP, BRANCHES, INPUTS):
        doc = parse_text(text, "wf.lobster")
        assert first_problem(doc) == next(value_problems(doc))


def test_the_schema_does_not_say_again_what_a_rule_said() -> None:
    # the approval object's own "not valid" would repeat approval.initiated_by's problem
    doc = parse_text(MANY_IN_ONE_STEP, "wf.lobster")
    assert list(iter_problems(doc)) == list(value_problems(doc))
    # a schema problem elsewhere in the step is still reported
    doc = parse_text(MANY_IN_ONE_STEP + "    env: {A: 1}\n", "wf.lobster")
    assert [d.message for d in iter_problems(doc)][-1] == (
        "Workflow file is invalid at $.steps[0].env.A: 1 is not of type 'string'")


def test_lint_reports_every_value_problem(tmp_path: Path) -> None:
    for text, count in ((MANY_IN_ONE_STEP, 7), (FILE_AND_STEPS, 6), (LOOP, 6), (BRANCHES, 5)):
        path = tmp_path / "wf.lobster"
        path.write_text(text)
        found = lint_file(str(path))
        assert len(found) == count, [d.message for d in found]
        assert {d.code for d in found} == {"E210"}
        assert found == sorted(found, key=lambda d: (d.span.line, d.span.col))
    # lint leaves repeated ids and responseSchemas to its own, more detailed, reports
    path.write_text(INPUTS)
    messages = [(d.code, d.message) for d in lint_file(str(path))]
    assert ("E210", "Duplicate workflow step id: ask") in messages
    assert sum(code == "E213" for code, _ in messages) == 1
    assert ("E210", "Workflow step ask input.prompt must be a string") in messages


@pytest.mark.skipif(not os.environ.get("LOBSTER_REFERENCE"), reason="needs the original")
@pytest.mark.parametrize("text", [MANY_IN_ONE_STEP, FILE_AND_STEPS, LOOP, BRANCHES, INPUTS])
def test_the_first_is_the_originals_first_error(text: str, tmp_path: Path) -> None:
    path = tmp_path / "wf.lobster"
    path.write_text(text)
    ref = subprocess.run([os.environ["LOBSTER_REFERENCE"], "run", "--file", str(path)],
                         cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, check=False)
    assert ref.returncode != 0
    first = next(value_problems(parse_text(text, str(path))))
    assert ref.stderr.splitlines()[0] == f"Error: {first.message}"
