"""A line continuation (backslash-newline outside single quotes) in pipeline text is removed as
the shell removes it: whitespace between words, nothing inside a word (issue 46 item 4). The
words are held to what `sh` itself makes of the same text; a run, a workflow `pipeline:` step
and the places where the original differs (its `\\` word reaches an argv or a script) are
checked end to end. tests/oracle/test_line_continuation.py compares with the original."""

from __future__ import annotations

import json
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobsterc.syntax.parse import parse_pipeline


def words(text: str) -> list[str]:
    [stage] = parse_pipeline("exec " + text).stages
    return [word.text for word in stage.words]


def shell_words(text: str) -> list[str]:
    out = subprocess.run(["sh", "-c", "printf '<%s>' " + text], capture_output=True, text=True,
                         check=True).stdout
    return out[1:-1].split("><") if out else []


@pytest.mark.parametrize("text,expected", [
    ("a \\\n  b", ["a", "b"]),  # between words: whitespace
    ("a\\\nb", ["ab"]),  # inside a word: removed
    ("'a b'\\\n", ["a b"]),  # after the last word
    ("\"x\\\ny\" 'x\\\ny'", ["xy", "x\\\ny"]),  # removed in double quotes, kept in single ones
    ("a \\ b", ["a", "\\", "b"]),  # a backslash before anything else stays an ordinary char
    ("a\\\r\nb", ["a\\", "b"]),  # before a carriage return too (the shell: an escaped CR)
])
def test_a_continuation_is_read_as_the_shell_reads_it(text, expected):
    assert words(text) == expected


def test_positions_after_a_continuation_are_on_their_own_line():
    [first, second] = parse_pipeline("exec --json --shell 'echo [1]' \\\n  | sort").stages
    assert (second.name.span.line, second.name.span.col) == (2, 5)


PART = st.one_of(st.from_regex(r"[a-z0-9]{1,3}", fullmatch=True),
                 st.from_regex(r"'[a-z0-9 ]{0,3}'", fullmatch=True),
                 st.from_regex(r'"[a-z0-9 ]{0,3}"', fullmatch=True))


@st.composite
def continued_words(draw) -> str:
    text = draw(PART)
    for _ in range(draw(st.integers(0, 5))):
        text += draw(st.sampled_from((" ", " \\\n", "\\\n", " \\\n  ", "\\\n\\\n"))) + draw(PART)
    return text + draw(st.sampled_from(("", " \\\n", "\\\n")))


@settings(max_examples=60, deadline=None)
@given(text=continued_words())
def test_the_words_are_the_shells(text):
    expected = [w for w in shell_words(text) if w != ""]  # ours keeps ''; sh does too, and
    ours = [w for w in words(text) if w != ""]  # printf of none prints <>: compare non-empty
    assert ours == expected, repr(text)


def _run(cli, *argv: str) -> dict:
    proc = cli.run("run", "--mode", "tool", *argv)
    return json.loads(proc.stdout)


def test_a_multi_line_pipeline_runs(cli):
    pipeline = ("exec --json --shell 'echo [3,1,2]' \\\n  | sort \\\n  | head --n 2 \\\n"
                "  | state.set lines \\\n")
    envelope = _run(cli, pipeline)
    assert envelope["ok"] and envelope["output"] == [[1, 2]], envelope  # state.set's one item


def test_where_the_original_keeps_a_backslash_word_ours_follows_the_shell(cli):
    # the original: ["foo \\ bar"], ["foo\\ bar"], ["hi\\"] (its `\` reaches echo's argv or the
    # script); a shell script means what sh makes of it
    assert _run(cli, "exec echo foo \\\n  bar")["output"] == ["foo bar"]
    assert _run(cli, "exec echo foo\\\nbar")["output"] == ["foobar"]
    assert _run(cli, "exec --shell 'echo hi'\\\n")["output"] == ["hi"]
    assert _run(cli, "exec --json --shell 'echo [1]' |\\\n  sort")["output"] == [1]


def test_a_workflow_pipeline_step_takes_continuations(cli):
    (cli.work / "multi.lobster").write_text(
        "name: multi\nsteps:\n  - id: a\n    pipeline: |\n"
        "      exec --json --shell 'echo [2,1]' \\\n        | sort\n")
    envelope = _run(cli, "--file", "multi.lobster")
    assert envelope["ok"] and envelope["output"] == [1, 2], envelope
