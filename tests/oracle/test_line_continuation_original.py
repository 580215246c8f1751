"""A line continuation (backslash-newline) in a multi-line pipeline, as a shell script writes
one, against the original (issue 46 item 4). Ours removes it as the shell does; the original
leaves a `\\` word that the commands below ignore, so on them both agree, between any two
words, around a `|`, and inside quotes (double quotes: removed by both; single quotes: kept,
then read by `sh`). Where the original passes the `\\` on (an argv of `exec`, a word glued to
it), ours differs on purpose: tests/compiler/test_line_continuation.py and docs/differences.md."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from differential.compare import reference_command, run_both

pytestmark = pytest.mark.slow  # docs/testing.md

REF, WHY = reference_command()
needs_reference = pytest.mark.skipif(REF is None, reason=f"differential tests skipped: {WHY}")

CONTINUATIONS = (" \\\n", " \\\n  ", "\t\\\n\t")
# the first stage: a shell line whose quoted script may hold a continuation itself ({c})
SOURCES = (
    ["exec", "--json", "--shell", "'echo [3,1,3,2]'"],
    ["exec", "--shell", "--json", '"echo{c}[5,4]"'],
    ["exec", "--json", "--shell", "'echo{c} [1,2,2]'"],
    ["exec", "--json", "--shell", "\"echo '[{\\\"a\\\":2,\\\"b\\\":1},{\\\"a\\\":1,\\\"b\\\":2}]'\""],
)
# later stages the original runs the same with a stray `\` word after them
STAGES = (["sort"], ["dedupe"], ["head", "--n", "2"], ["sort", "--key", "a"],
          ["state.set", "line-k"], ["map", "--wrap", "v"])
VALUE_FLAGS = {"--shell", "--n", "--key", "--wrap"}


def _may_continue(before: str, after: str) -> bool:
    """Where the original's `\\` word is ignored: before a flag (not after one that takes a
    value, and not right after `exec`, whose first positional would be its argv), and after a
    stage's last word; elsewhere it would be a value or a positional."""
    return after.startswith("--") and before not in VALUE_FLAGS and before != "exec"


@st.composite
def continued_pipeline(draw) -> str:
    stages = [draw(st.sampled_from(SOURCES))]
    stages += draw(st.lists(st.sampled_from(STAGES), min_size=0, max_size=3))
    gap = st.sampled_from((" ",) * 2 + CONTINUATIONS)
    text = []
    for index, words in enumerate(stages):
        if index:
            text.append(draw(st.sampled_from((" | ", " \\\n| ", " \\\n  | "))))
        for position, word in enumerate(words):
            if position:
                text.append(draw(gap) if _may_continue(words[position - 1], word) else " ")
            text.append(word.replace("{c}", draw(st.sampled_from(CONTINUATIONS))))
    if draw(st.booleans()):
        text.append(draw(st.sampled_from(CONTINUATIONS)))  # a continuation after the last word
    return "".join(text)


def _case(pipeline: str) -> dict:
    return {"kind": "pipeline", "pipeline": pipeline, "steps": [{"action": "run"}]}


@needs_reference
@pytest.mark.parametrize("pipeline", [
    "exec --json --shell 'echo [1,2]' \\\n  | sort",  # the case
    "exec --json \\\n  --shell 'echo [3,1]' \\\n  | sort \\\n  | head --n 1",
    "exec --shell \"echo a \\\n  b\"",  # removed inside double quotes by both
    "exec --shell 'echo a \\\n  b'",  # kept inside single quotes, then the shell removes it
])
def test_the_written_cases_agree(pipeline):
    outcome = run_both(_case(pipeline), REF)
    assert outcome.agrees, outcome.report()


@needs_reference
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pipeline=continued_pipeline())
def test_generated_continuations_agree(pipeline):
    outcome = run_both(_case(pipeline), REF)
    assert outcome.agrees, f"{pipeline!r}\n{outcome.report()}"
