"""Source positions: spans agree with position() everywhere, including out-of-range offsets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lobsterc.syntax.source import Source, excerpt


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab\n\r", max_size=15), st.integers(-3, 18), st.integers(-3, 18))
def test_span_is_the_position_of_both_ends(text, start, end):
    source = Source("f", text)
    span = source.span(start, end)
    assert (span.line, span.col) == source.position(start)
    assert (span.end_line, span.end_col) == source.position(max(start, end))


def test_positions_lines_and_excerpts():
    source = Source("f.lobster", "one\ntwo words\n")
    assert source.position(0) == (1, 1)
    assert source.position(8) == (2, 5)
    assert source.line_starts == (0, 4, 14)
    assert source.line_text(2) == "two words" and source.line_text(9) == ""
    span = source.span(8, 13)
    assert str(span) == "f.lobster:2:5"
    assert excerpt(source, span).splitlines() == ["  2 | two words", "    |     ^^^^^"]
