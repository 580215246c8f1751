"""vm.core.js_regex: JavaScript `u`-mode regexes through regress, case by case against what
Node 20 does with `new RegExp(p, "u")`, and generated patterns and texts against a live `node`:
whether each matches, and V8's words where one is refused."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node_lines import NodeLines
from vm.core import js_regex
from vm.core.js_regex import JsRegexSyntaxError

EMOJI = "\U0001F600"

# (pattern, text, what `.test(text)` gives in Node 20)
TESTS = [
    ("^[a-z]+$", "abc", True),
    ("^[a-z]+$", "abc\n", False),           # `$` only at the end
    ("^\\d+$", "123", True),
    ("^\\d+$", "\u0661\u0662\u0663", False),  # \d is [0-9]
    ("^\\w+$", "\xe9t\xe9", False),          # \w is ASCII
    ("\\bx", "\xe9x", True),                 # \b is ASCII: é is not a word character
    ("^\\s$", "\xa0", True), ("^\\s$", "\ufeff", True), ("^\\s$", "\u2028", True),
    ("^\\s$", "\x85", False), ("^\\S$", "\x85", True),
    ("^.$", "\n", False), ("^.$", "\r", False), ("^.$", "\u2029", False), ("^.$", "\x85", True),
    ("^.$", EMOJI, True),                    # one character with `u`
    ("^\\uD83D\\uDE00$", EMOJI, True), ("^\\u{1F600}$", EMOJI, True), ("^[😀-😂]$", "😁", True),
    ("^\\p{L}+$", "h\xe9llo", True), ("^\\p{L}+$", "h3", False),
    ("^\\p{Lu}$", "\xc9", True), ("^\\p{Letter}$", "\u4e2d", True),
    ("^\\p{gc=Nd}+$", "\u0661\u0662", True), ("^\\p{General_Category=Decimal_Number}$", "x", False),
    ("^\\P{L}$", "1", True), ("^[\\P{L}]$", "a", False), ("^[^\\p{N}a]$", "b", True),
    ("^\\p{digit}$", "7", True), ("^\\p{Any}$", EMOJI, True), ("^\\p{ASCII}+$", "\x7f", True),
    ("^\\p{White_Space}$", "\x85", True), ("^\\p{M}$", "\u0301", True),
    ("^(?<y>\\d{4})-\\k<y>$", "2024-2024", True), ("^(?<y>\\d{4})-\\k<y>$", "2024-2025", False),
    ("(?<$a>x)\\k<$a>", "xx", True),
    ("^(a)|\\1b$", "b", True),               # a group that has not matched: empty
    ("^\\1(a)$", "a", True),                 # a later group: empty
    ("^(a\\1)$", "a", True),                 # its own group: empty
    ("[]", "a", False), ("^[^]$", "\n", True),
    ("(?<=a|bc)x", "bcx", True), ("(?<!a|bc)x", "bcx", False),
    ("^a{2,}?$", "aaa", True), ("^a{0,99999999999}$", "aaa", True),
    ("^[\\d-]+$", "1-2", True), ("^[\\-]$", "-", True), ("^\\/$", "/", True),
    ("^\\cJ$", "\n", True), ("^\\0$", "\x00", True), ("^[\\b]$", "\b", True),
    ("^\\x41$", "A", True), ("^\\$$", "$", True), ("(?:^)*x", "x", True),
]

# (pattern, V8's reason)
REFUSED = [
    ("\\a", "Invalid escape"), ("\\-", "Invalid escape"), ("\\Z", "Invalid escape"),
    ("\\A", "Invalid escape"), ("(?P<n>a)", "Invalid group"), ("(?i:a)", "Invalid group"),
    ("(?#c)", "Invalid group"), ("a*+", "Nothing to repeat"), ("a{1}{2}", "Nothing to repeat"),
    ("{", "Lone quantifier brackets"), ("}", "Lone quantifier brackets"),
    ("]", "Lone quantifier brackets"), ("a{", "Incomplete quantifier"),
    ("a{,3}", "Incomplete quantifier"), ("a{2,1}", "numbers out of order in {} quantifier"),
    ("(?=a)*", "Invalid quantifier"), ("(?<=a)*", "Invalid quantifier"),
    ("\\k<x>", "Invalid named capture referenced"), ("\\k", "Invalid named reference"), ("(?<a>x)\\k<b>", "Invalid named capture referenced"),
    ("(?<a>.)(?<a>.)", "Duplicate capture group name"), ("(?<1a>x)", "Invalid capture group name"),
    ("[\\d-z]", "Invalid character class"), ("[b-a]", "Range out of order in character class"),
    ("\\p{letter}", "Invalid property name"), ("\\p{Lu=x}", "Invalid property name"),
    ("\\p{L", "Invalid property name"), ("\\1", "Invalid escape"), ("(a)\\2", "Invalid escape"),
    ("\\00", "Invalid decimal escape"), ("[\\1]", "Invalid class escape"),
    ("\\x1", "Invalid escape"), ("\\u12", "Invalid Unicode escape"),
    ("\\u{110000}", "Invalid Unicode escape"), ("(?:", "Unterminated group"),
    ("a)", "Unmatched ')'"), ("[a", "Unterminated character class"), ("\\", "\\ at end of pattern"),
]


@pytest.mark.parametrize(("pattern", "text", "expected"), TESTS)
def test_node_20_matches(pattern: str, text: str, expected: bool) -> None:
    assert js_regex.test(pattern, text) is expected


@pytest.mark.parametrize(("pattern", "reason"), REFUSED)
def test_node_20_refuses(pattern: str, reason: str) -> None:
    with pytest.raises(JsRegexSyntaxError) as info:
        js_regex.compiled(pattern)
    assert str(info.value) == f"Invalid regular expression: /{pattern}/u: {reason}"
    assert isinstance(info.value, ValueError)


# what the translation to Python's `re` could not apply, and regress does (Node 20's answers)
NOW_READ = [
    ("(?<=a+)b", "aaab", True), ("(?<=a+)b", "b", False), ("(?<!x|yz+)b", "yzzb", False),
    ("^\\p{Script=Ethiopic}$", "\u1200", True), ("^\\p{Script=Greek}+$", "\u03b1\u03b2", True),
    ("^\\p{Script=Greek}$", "a", False), ("^\\p{scx=Grek}$", "\u0342", True),
    ("^\\p{Alpha}+$", "h\xe9", True), ("^\\p{Emoji}$", EMOJI, True),
    ("^(a)(?<=\\1)$", "a", True), ("^(?:(a)|b)+$", "ab", True),
    ("^(?:(a)|b)\\1$", "b", True),  # a group of an earlier iteration is cleared: empty
]


@pytest.mark.parametrize(("pattern", "text", "expected"), NOW_READ)
def test_what_the_translation_could_not_apply_is_read_as_node_reads_it(
        pattern: str, text: str, expected: bool) -> None:
    assert js_regex.test(pattern, text) is expected


def test_a_lone_surrogate_in_the_text_is_no_crash() -> None:
    assert js_regex.test("^a.$", "a\udead") is True


# ---- generated patterns and texts against a live node --------------------------------------

# Reads [pattern, [texts]] lines; answers V8's message where new RegExp(pattern, "u") throws, else
# the .test() of each text.
NODE_ORACLE = """
const lines = require("readline").createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const [pattern, texts] = JSON.parse(JSON.parse(line));
  let answer = null;
  try { const rx = new RegExp(pattern, "u"); answer = texts.map((t) => rx.test(t)); }
  catch (e) { answer = e.message; }
  process.stdout.write(JSON.stringify(answer) + "\\n");
});
"""


@pytest.fixture(scope="module")
def node():
    oracle = NodeLines(NODE_ORACLE)
    yield oracle
    oracle.close()


# characters the texts are made of: ASCII, line ends, JavaScript's other white space, Arabic
# digits, accented and combining letters, astral ones (Unicode 14, which Python and Node share)
ALPHABET = list("ab AZ09_-.\n\r\t$") + ["\u2028", "\xa0", "\ufeff", "\x85", "\u0661", "\xe9",
                                         "\u0301", "\u4e2d", "\xc9", EMOJI, "\U0001D7D8", "\U00010400"]
PIECES = st.sampled_from(
    ["a", "b", "Z", "0", "9", "_", "-", " ", "é", "中", EMOJI, ".", "\\d", "\\D", "\\w", "\\W",
     "\\s", "\\S", "\\b", "\\B", "^", "$", "\\n", "\\r", "\\t", "\\u2028", "\\u{1F600}",
     "\\uD83D\\uDE00", "\\x41", "\\p{L}", "\\p{Lu}", "\\P{L}", "\\p{Nd}", "\\p{N}", "\\p{M}",
     "\\p{P}", "\\p{Zs}", "\\p{White_Space}", "\\p{Script=Latin}", "\\p{sc=Arab}",
     "\\p{ASCII}", "\\p{gc=Ll}", "\\p{Letter}",
     "[a-z]", "[^a-z]", "[\\d_]", "[^\\s]", "[\\p{L}\\d]", "[^\\P{N}]", "[😀-😂]", "[]", "[^]",
     "[\\-.]", "\\.", "\\$", "\\-", "\\a", "{", "}", "]", "\\k<n>", "\\1", "(?P<x>a)", "\\Z",
     "(", ")", "[", "\\p{Script=Greek}", "\\p{Alpha}", "\\p{Foo}", "[z-a]", "\\00", "\\c1",
     "\\u12", "[\\d-z]", "\\k<zz>"])
QUANTIFIERS = st.sampled_from(["", "", "", "*", "+", "?", "{2}", "{1,}", "{0,2}", "*?", "+?",
                               "{2,1}", "*+"])


@st.composite
def js_patterns(draw, depth: int = 0) -> str:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["piece"] * 6 + (["group"] if depth < 2 else [])))
        if kind == "piece":
            atom = draw(PIECES)
        else:
            opener = draw(st.sampled_from(["(", "(?:", "(?<n>", "(?=", "(?!", "(?<=", "(?<!",
                                           "(?<=a+", "(?<!\\p{L}*"]))
            inner = draw(js_patterns(depth + 1))
            atom = opener + inner + ")"
        out.append(atom + draw(QUANTIFIERS))
        if draw(st.integers(0, 5)) == 0:
            out.append("|")
    return "".join(out)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=js_patterns(), texts=st.lists(st.text(st.sampled_from(ALPHABET), max_size=6),
                                             min_size=1, max_size=6))
def test_generated_patterns_match_as_node_matches_them(node, pattern: str, texts) -> None:
    expected = json.loads(node.ask(json.dumps([pattern, texts])))
    try:
        ours = [js_regex.test(pattern, text) for text in texts]
    except JsRegexSyntaxError as exc:
        ours = str(exc)  # V8's words, through the table of regress's errors
    assert isinstance(ours, str) == isinstance(expected, str), pattern
    # the words where a pattern holds one error, or only errors regress finds in V8's order (a
    # duplicate name, a quantified \\b: found before all else here, see js_regex)
    if pattern.count("(?<n>") < 2 and not re.search(r"\\[bB][*+?{]", pattern):
        assert ours == expected, pattern


PROPERTIES = ["L", "Letter", "LC", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd",
              "digit", "Nl", "No", "P", "punct", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S",
              "Sm", "Sc", "Sk", "So", "Z", "Zs", "Zl", "Zp", "C", "Cc", "cntrl", "Cf", "Cs", "Co",
              "gc=Lu", "General_Category=Other_Letter", "Any", "ASCII", "Assigned", "AHex",
              "ASCII_Hex_Digit", "Hex_Digit", "White_Space", "space", "Pattern_White_Space",
              "Noncharacter_Code_Point", "Join_Control", "Regional_Indicator", "RI",
              "Script=Latin", "sc=Grek", "Script=Cyrillic", "Script=Arabic", "sc=Hani",
              "Script=Hiragana", "sc=Kana", "Script=Hangul", "Script=Devanagari", "sc=Hebr",
     "Script=Ethiopic", "sc=Thai", "Alphabetic", "Emoji", "ID_Start", "Lowercase"]


@pytest.mark.slow
def test_property_sets_are_nodes_on_a_sample_of_code_points(node) -> None:
    """Every \\p{..} against Node's, on every 11th BMP code point and every 241st astral one
    (those the two Unicode versions assign differently left out: Cn in one only)."""
    sample = [chr(cp) for cp in [*range(0, 0x10000, 11), *range(0x10000, 0x110000, 241),
                                 0x85, 0x200C, 0x1F1E6, 0xFFFE, 0x10FFFF]
              if not 0xD800 <= cp <= 0xDFFF]  # (no text holds a lone surrogate: refused before)
    node_cn = json.loads(node.ask(json.dumps(["^\\p{Cn}$", sample])))
    ours_cn = [js_regex.test("^\\p{Cn}$", c) for c in sample]
    sample = [c for c, a, b in zip(sample, node_cn, ours_cn) if a == b]
    assert len(sample) > 9000
    for name in PROPERTIES:
        for pattern in (f"^\\p{{{name}}}$", f"^[^\\p{{{name}}}]$"):
            expected = json.loads(node.ask(json.dumps([pattern, sample])))
            differ = [hex(ord(c)) for c, e in zip(sample, expected)
                      if js_regex.test(pattern, c) != e]
            assert differ == [], (pattern, differ[:10])


def test_schemas_read_their_regexes_as_javascripts() -> None:
    """vm.core.schema: a regex new RegExp refuses makes the schema invalid in V8's words; an
    answer is held to JavaScript's reading; a schema stored before is refused, not a crash."""
    from vm.core.schema import schema_error
    from vm.core.schema_errors import all_errors, first_error

    assert schema_error({"type": "string", "pattern": "^\\p{L}+$"}) is None
    assert schema_error({"pattern": "\\a"}) == "Invalid regular expression: /\\a/u: Invalid escape"
    assert schema_error({"patternProperties": {"\\a": {}}}) is None  # never compiled by Ajv
    assert schema_error({"patternProperties": {"\\a": {}}, "additionalProperties": False})
    assert schema_error({"definitions": {"x": {"pattern": "("}}}) is None
    assert schema_error({"definitions": {"x": {"pattern": "("}}, "$ref": "#/definitions/x"})
    assert first_error({"pattern": "^[a-z]+$"}, "abc\n") == ("/", 'must match pattern "^[a-z]+$"')
    assert first_error({"pattern": "^\\p{L}+$"}, "h\xe9") is None
    assert all_errors({"patternProperties": {"^\\d$": {"type": "string"}},
                       "additionalProperties": False}, {"\u0661": 1, "1": 2}) == [
        ("/", "must NOT have additional properties"), ("/1", "must be string")]
    assert first_error({"pattern": "\\a"}, "x")[1].startswith("the response schema cannot be")
    assert schema_error({"pattern": "(?<=a+)b"}) is None  # refused before as unsupported
    assert first_error({"pattern": "^\\p{Script=Greek}+$"}, "\u03b1x") == (
        "/", 'must match pattern "^\\p{Script=Greek}+$"')
