"""vm.core.json_errors: JSON.parse's SyntaxError texts, text by text against what Node 20
prints, and generated malformed texts against a live `node`."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node_lines import NodeLines
from vm.core import json_read
from vm.core.json_errors import json_parse_message

EMOJI = "\U0001F600"  # two UTF-16 units: "\ud83d\ude00"

# (text, Node 20's e.message), each seen from `node -e` with JSON.parse(text)
NODE20 = [
    # the end of the text, white space only
    ("", "Unexpected end of JSON input"),
    ("   \n\t", "Unexpected end of JSON input"),
    ("[1,2,", "Unexpected end of JSON input"),
    ('{"a":', "Unexpected end of JSON input"),
    ('"\\', "Unexpected end of JSON input"),
    ("tr", "Unexpected end of JSON input"),
    # a character no value starts with: the text quoted, whole when under 21 units
    ("[1,]", "Unexpected token ']', \"[1,]\" is not valid JSON"),
    ("nope", "Unexpected token 'o', \"nope\" is not valid JSON"),
    ("trux", "Unexpected token 'x', \"trux\" is not valid JSON"),
    ("tr ", "Unexpected token ' ', \"tr \" is not valid JSON"),
    (" NaN", "Unexpected token 'N', \" NaN\" is not valid JSON"),
    ("[NaN]", "Unexpected token 'N', \"[NaN]\" is not valid JSON"),
    ('{"a":1,"b"}', "Unexpected token '}', \"{\"a\":1,\"b\"}\" is not valid JSON"),
    ("\x00", "Unexpected token '\x00', \"\x00\" is not valid JSON"),
    ("x" * 20, f"Unexpected token 'x', \"{'x' * 20}\" is not valid JSON"),
    # 21 units or more: at most 10 units either side, "..." where the text was cut
    ("x" * 21, f"Unexpected token 'x', \"{'x' * 10}\"... is not valid JSON"),
    ("[1,1,1,1,x" + "]" * 14, "Unexpected token 'x', \"[1,1,1,1,x]]]]]]]]]\"... is not valid JSON"),
    ("[1,1,1,1,1,x" + "]" * 10, "Unexpected token 'x', ...\"1,1,1,1,1,x]]]]]]]]]\"... is not valid JSON"),
    ("[1,1,1,1,1,x" + "]" * 9, "Unexpected token 'x', ...\"1,1,1,1,1,x]]]]]]]]]\" is not valid JSON"),
    # the four texts JavaScript makes of non-JSON values
    ("NaN", '"NaN" is not valid JSON'),
    ("undefined", '"undefined" is not valid JSON'),
    ("Infinity", '"Infinity" is not valid JSON'),
    ("[object Object]", '"[object Object]" is not valid JSON'),
    # a number or a string where neither may stand
    ("01", "Unexpected number in JSON at position 1"),
    ("-01", "Unexpected number in JSON at position 2"),
    ("tru1", "Unexpected number in JSON at position 3"),
    ('tr"', "Unexpected string in JSON at position 2"),
    # named expectations
    ("{", "Expected property name or '}' in JSON at position 1"),
    ("{a:1}", "Expected property name or '}' in JSON at position 1"),
    ('{"a":1,}', "Expected double-quoted property name in JSON at position 7"),
    ('{"1":1, 2:3}', "Expected double-quoted property name in JSON at position 8"),
    ('{"a" 1}', "Expected ':' after property name in JSON at position 5"),
    ('{"a"', "Expected ':' after property name in JSON at position 4"),
    ('{"a":1 "b":2}', "Expected ',' or '}' after property value in JSON at position 7"),
    ("[1 2]", "Expected ',' or ']' after array element in JSON at position 3"),
    ("[1,2", "Expected ',' or ']' after array element in JSON at position 4"),
    ("[1-]", "Expected ',' or ']' after array element in JSON at position 2"),
    ("1 2", "Unexpected non-whitespace character after JSON at position 2"),
    ("0-", "Unexpected non-whitespace character after JSON at position 1"),
    ("1e5.5", "Unexpected non-whitespace character after JSON at position 3"),
    ("[1]\xa0", "Unexpected non-whitespace character after JSON at position 3"),
    # strings
    ('"abc', "Unterminated string in JSON at position 4"),
    ('"a\\x"', "Bad escaped character in JSON at position 3"),
    ('"\\\xe9"', "Bad escaped character in JSON at position 2"),
    ('"a\tb"', "Bad control character in string literal in JSON at position 2"),
    ('["a\x00"]', "Bad control character in string literal in JSON at position 3"),
    ('"\\u12g4"', "Bad Unicode escape in JSON at position 5"),
    ('"\\u12', "Bad Unicode escape in JSON at position 5"),
    ('{"\\u00', "Bad Unicode escape in JSON at position 6"),
    # numbers
    ("-", "No number after minus sign in JSON at position 1"),
    ("-Infinity", "No number after minus sign in JSON at position 1"),
    ("1.", "Unterminated fractional number in JSON at position 2"),
    ("1.e", "Unterminated fractional number in JSON at position 2"),
    ("1e", "Exponent part is missing a number in JSON at position 2"),
    ("1e-x", "Exponent part is missing a number in JSON at position 3"),
    ("1Ex", "Exponent part is missing a number in JSON at position 2"),
    # a byte order mark, a line separator: no JSON white space
    ("\ufeff{}", "Unexpected token '\ufeff', \"\ufeff{}\" is not valid JSON"),
    ("\u2028[1]", "Unexpected token '\u2028', \"\u2028[1]\" is not valid JSON"),
    # UTF-16: an astral character counts two, and the token is its first half
    (EMOJI, f"Unexpected token '\ud83d', \"{EMOJI}\" is not valid JSON"),
    (f'"{EMOJI}\\x"', "Bad escaped character in JSON at position 4"),
    (f'"\\{EMOJI}"', f"Unexpected token '\ud83d', \"\"\\{EMOJI}\"\" is not valid JSON"),
    (f'"{EMOJI * 3}" x', "Unexpected non-whitespace character after JSON at position 9"),
    ("[1," + EMOJI + " " * 30 + "]", f"Unexpected token '\ud83d', \"[1,{EMOJI}        \"... is not valid JSON"),
    ("\ud800", "Unexpected token '\ud800', \"\ud800\" is not valid JSON"),
]


@pytest.mark.parametrize("text, message", NODE20)
def test_node_20_words(text: str, message: str) -> None:
    assert json_parse_message(text, line_column=False) == message


@pytest.mark.parametrize("text", ["[]", '{"a":[1,-0.5e+3,"\\u00e9\\ud83d"]}', " null ", "\t1\r\n",
                                  '"\\uD800"', '"\x7f"'])
def test_json_is_none(text: str) -> None:
    assert json_parse_message(text) is None


# Node 21 and later (V8 11.8+) follow a position with its line and column; a `\r\n` is one break
@pytest.mark.parametrize("text, message", [
    ("{", "Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
    ('{"a" : "}', "Unterminated string in JSON at position 9 (line 1 column 10)"),
    ('{\n  "a": 1,\n  "b": 2,,\n}\n',
     "Expected double-quoted property name in JSON at position 21 (line 3 column 10)"),
    ("[1,\r\n2,\r3\n,4 5]",
     "Expected ',' or ']' after array element in JSON at position 13 (line 4 column 4)"),
    (f'[\n"{EMOJI}" 1]',
     "Expected ',' or ']' after array element in JSON at position 7 (line 2 column 6)"),
    ("[1,]", "Unexpected token ']', \"[1,]\" is not valid JSON"),  # no position: no line
    ("", "Unexpected end of JSON input"),
])
def test_line_and_column_of_later_nodes(text: str, message: str) -> None:
    assert json_parse_message(text, line_column=True) == message


def test_json_loads_raises_with_v8_words_and_keeps_pythons_reading() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        json_read.json_loads("[1,]")
    assert str(info.value) == "Unexpected token ']', \"[1,]\" is not valid JSON"
    assert (info.value.msg, info.value.pos) == ("Expecting value", 3)  # error.detail's reading
    with pytest.raises(ValueError, match='^"NaN" is not valid JSON$'):
        json_read.json_loads("NaN")
    with pytest.raises(ValueError, match="^No number after minus sign in JSON at position 1$"):
        json_read.json_loads("-Infinity")


def test_a_long_text_is_read_without_recursion() -> None:
    deep = "[" * 5000 + "1," + "]" * 5000
    assert json_parse_message(deep) == "Unexpected token ']', ...\"[[[[[[[[1,]]]]]]]]]]\"... is not valid JSON"


# ---- generated texts against a live node ---------------------------------------------------

# Reads JSON-encoded texts, one a line; writes Node's version first, then for each text the
# SyntaxError's message, or null where JSON.parse takes the text.
NODE_ORACLE = """
const lines = require("readline").createInterface({ input: process.stdin });
process.stdout.write(JSON.stringify(process.versions.node) + "\\n");
lines.on("line", (line) => {
  let message = null;
  try { JSON.parse(JSON.parse(line)); } catch (error) { message = error.message; }
  process.stdout.write(JSON.stringify(message) + "\\n");
});
"""


@pytest.fixture(scope="module")
def node():
    """The oracle, and whether its messages carry " (line L column C)" (Node 21 and later)."""
    oracle = NodeLines(NODE_ORACLE)
    major = int(json.loads(oracle.readline()).split(".")[0])  # the script says its version first
    yield oracle, major >= 21
    oracle.close()


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(st.characters(blacklist_categories=("Cs",)), max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12)
# what a mutation may insert: JSON's own characters, and a few that trip it up
INSERTS = st.one_of(st.sampled_from(list('{}[]",:\\ \t\n\r-+.eE0123456789tfnu')
                                    + ["\ufeff", "\u2028", "\xa0", "\x00", "\x1f", EMOJI, "\ud83d",
                                       "NaN", "true", "'", "é"]),
                    st.characters())


@st.composite
def malformed(draw) -> str:
    """A JSON text, dumped one of several ways, then cut, grown or spliced a few times."""
    value = draw(VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from((None, 1, "\t"))))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(("delete", "insert", "truncate", "splice")))
        if how == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 3)):]
        elif how == "insert":
            text = text[:at] + draw(INSERTS) + text[at:]
        elif how == "truncate":
            text = text[:at]
        else:
            start = draw(st.integers(0, len(text)))
            text = text[:at] + text[start:start + draw(st.integers(1, 6))] + text[at:]
    return text


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(text=malformed())
def test_generated_texts_read_as_node_reads_them(node, text: str) -> None:
    oracle, line_column = node
    expected = json.loads(oracle.ask(text))
    assert json_parse_message(text, line_column=line_column) == expected
    if line_column:
        return  # json_loads writes Node 20's words (vm.core.json_errors.LINE_COLUMN)
    if expected is None:
        json_read.json_loads(text)  # what V8 takes, Python's reader takes too
    else:
        with pytest.raises(ValueError) as info:
            json_read.json_loads(text)
        assert str(info.value) == expected
