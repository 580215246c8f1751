"""The pipeline grammar: every quoting and escape rule, every parse error, and the property
that any text either parses or raises our CompileError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobsterc.diagnostics import CompileError
from lobsterc.syntax.parse import decode_word, parse_pipeline
from lobsterc.syntax.source import Source


def stages(text: str) -> list[list[str]]:
    return [[s.name.text, *(w.text for w in s.words)] for s in parse_pipeline(text).stages]


@pytest.mark.parametrize("text, expected", [
    ("a", [["a"]]),
    ("a b c", [["a", "b", "c"]]),
    ("a | b", [["a"], ["b"]]),
    ("a|b", [["a"], ["b"]]),
    ("  a\t b \r\n c  ", [["a", "b", "c"]]),
    ("a |", [["a"]]),  # a trailing empty stage is dropped
    ("a | b |  ", [["a"], ["b"]]),
    ("x 'a | b'", [["x", "a | b"]]),  # a pipe inside quotes is text
    ('x "a | b"', [["x", "a | b"]]),
    ("a\\|b", [["a\\"], ["b"]]),  # backslash outside quotes is an ordinary char
    ("x a\\ b", [["x", "a\\", "b"]]),
    # single quotes: literal, except \' which stands for a quote (not POSIX)
    ("x 'it\\'s'", [["x", "it's"]]),
    ("x 'a\\\\nb'", [["x", "a\\\\nb"]]),
    ("x 'a\\nb'", [["x", "a\\nb"]]),
    ("x '$HOME \"q\"'", [["x", '$HOME "q"']]),
    # double quotes: \" \\ \$ \` unescape; backslash-newline vanishes; others are kept
    ('x "a\\"b"', [["x", 'a"b']]),
    ('x "a\\\\b"', [["x", "a\\b"]]),
    ('x "\\$HOME"', [["x", "$HOME"]]),
    ('x "\\`id\\`"', [["x", "`id`"]]),
    ('x "a\\\nb"', [["x", "ab"]]),
    ('x "a\\nb"', [["x", "a\\nb"]]),  # JSON escapes survive inside double quotes
    ('x "{\\"k\\":\\"v\\\\n\\"}"', [["x", '{"k":"v\\n"}']]),
    ("x \"it's\"", [["x", "it's"]]),
    # quotes concatenate mid-token
    ("ab'cd ef'gh", [["abcd efgh"]]),
    ("x a\"b c\"'d e'f", [["x", "ab cd ef"]]),
    ("'exec' --json", [["exec", "--json"]]),
    # deliberate difference (SPEC 9.2): an empty quoted argument is an argument
    ("x '' b", [["x", "", "b"]]),
    ('x "" b', [["x", "", "b"]]),
    ("x --k=", [["x", "--k="]]),
])
def test_tokens(text, expected):
    assert stages(text) == expected


@pytest.mark.parametrize("text, message, column", [
    ("", "Empty pipeline", 1),
    ("   \t ", "Empty pipeline", 1),
    ("echo 'unterminated", "Unclosed quote", 6),
    ('echo "unterminated', "Unclosed quote", 6),
    ("ab'cd", "Unclosed quote", 3),
    ("x 'it\\'", "Unclosed quote", 3),
    ('x "a\\"', "Unclosed quote", 3),
    ("a | | b", "Empty command stage", 5),
    ("| a", "Empty command stage", 1),
    ("|", "Empty command stage", 1),
    ("a || b", "Empty command stage", 4),  # the pipe that closes the empty stage
])
def test_parse_errors(text, message, column):
    with pytest.raises(CompileError) as info:
        parse_pipeline(text)
    diag = info.value.first
    assert (diag.message, diag.kind, diag.span.line, diag.span.col) == (message, "parse_error", 1,
                                                                          column)


def test_spans_point_at_words():
    pipeline = parse_pipeline("exec --json | where 'a = 1'")
    where = pipeline.stages[1]
    assert (where.name.span.col, where.name.span.end_col) == (15, 20)
    assert (where.words[0].span.col, where.words[0].span.end_col, where.words[0].quoted) == (21, 28, True)
    assert where.span.col == 15


def test_multi_line_positions():
    pipeline = parse_pipeline("exec --json\n  | where x=1")
    assert (pipeline.stages[1].name.span.line, pipeline.stages[1].name.span.col) == (2, 5)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab -|'\"\\$`=\n\t{}x")), max_size=30) | st.text(max_size=20))
def test_any_text_parses_or_raises_compile_error(text):
    try:
        pipeline = parse_pipeline(text)
    except CompileError as exc:
        assert exc.first.message in ("Empty pipeline", "Unclosed quote", "Empty command stage")
        assert exc.first.kind == "parse_error"
        return
    assert pipeline.stages and all(stage.name is not None for stage in pipeline.stages)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab -|'\"\\\n\r\tx")), max_size=30))
def test_every_word_span_covers_the_text_it_was_decoded_from(text):
    try:
        pipeline = parse_pipeline(text)
    except CompileError:
        return
    starts = Source("<pipeline>", text).line_starts

    def offset(line, col):
        return starts[line - 1] + col - 1

    for stage in pipeline.stages:
        for word in (stage.name, *stage.words):
            raw = text[offset(word.span.line, word.span.col):offset(word.span.end_line, word.span.end_col)]
            assert decode_word(raw) == (word.text, word.quoted)
