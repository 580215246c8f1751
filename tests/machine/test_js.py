"""vm.core.js, json_write and json_read: JavaScript coercions, equality, ordering, paths and
JSON text, value by value."""

from __future__ import annotations

import json
import math
import pickle

import pytest
from hypothesis import given, strategies as st

from vm.core import js, json_read, json_write
from vm.core.js import UNDEFINED

NAN = math.nan
INF = math.inf


def same_number(a: float | int, b: float | int) -> bool:
    if isinstance(b, float) and b != b:
        return isinstance(a, float) and a != a
    return a == b and type(a) is type(b)


# ---- UNDEFINED, truthiness ------------------------------------------------------------

def test_undefined_is_a_falsy_singleton():
    assert repr(UNDEFINED) == "undefined"
    assert not UNDEFINED
    assert type(UNDEFINED)() is UNDEFINED
    assert pickle.loads(pickle.dumps(UNDEFINED)) is UNDEFINED
    assert UNDEFINED is not None


@pytest.mark.parametrize("value, expected", [
    (None, False), (UNDEFINED, False), (False, False), (True, True), (0, False), (0.0, False),
    (-0.0, False), (NAN, False), ("", False), ("0", True), (" ", True), ("false", True),
    ([], True), ({}, True), (1, True), (-1.5, True), (INF, True),
])
def test_truthy(value, expected):
    assert js.truthy(value) is expected


# ---- paths ----------------------------------------------------------------------------

ITEM = {"a": {"b": [10, {"c": "deep"}], "n": None}, "s": "héllo", "": {"x": 1}}


@pytest.mark.parametrize("path, expected", [
    ("a.b.0", 10),
    ("a.b.1.c", "deep"),
    ("a.b.2", UNDEFINED),
    ("a.b.01", UNDEFINED),
    ("a.b.-1", UNDEFINED),
    ("a.b.length", 2),
    ("a.n", None),
    ("a.n.x", UNDEFINED),
    ("a.missing", UNDEFINED),
    ("a.missing.x", UNDEFINED),
    ("s.length", UNDEFINED),
    ("s.0", UNDEFINED),
    (".x", 1),
    ("a..b", UNDEFINED),
    ("missing", UNDEFINED),
])
def test_get_path_is_wheres_strict_path(path, expected):
    assert js.get_path(ITEM, path) == expected if expected is not UNDEFINED \
        else js.get_path(ITEM, path) is UNDEFINED


@pytest.mark.parametrize("value, path", [(5, "a"), ("str", "length"), (None, "a"), (True, "x")])
def test_get_path_on_a_primitive_root_is_undefined(value, path):
    assert js.get_path(value, path) is UNDEFINED


@pytest.mark.parametrize("path, expected", [
    ("a.b.0", 10),
    ("a..b.0", 10),
    ("a.b.", [10, {"c": "deep"}]),
    ("", ITEM),
    ("s.length", 5),
    ("s.1", "é"),
    ("a.n.x", UNDEFINED),
    ("a.b.1.c.length", 4),
    ("a.missing.x", UNDEFINED),
])
def test_get_value_path_is_the_command_path(path, expected):
    got = js.get_value_path(ITEM, path)
    assert got is UNDEFINED if expected is UNDEFINED else got == expected


def test_string_properties_count_utf16_units():
    assert js.get_prop("a😀", "length") == 3
    assert js.get_prop("a😀", "1") == "\ud83d"
    assert js.utf16_len("😀😀") == 4


@pytest.mark.parametrize("key, expected", [
    ("0", True), ("7", True), ("4294967294", True), ("4294967295", False), ("01", False),
    ("-1", False), ("1.0", False), ("", False), ("a", False),
])
def test_is_array_index(key, expected):
    assert js.is_array_index(key) is expected


def test_js_object_puts_array_index_keys_first():
    assert list(js.js_object([("b", 1), ("10", 2), ("a", 3), ("2", 4), ("01", 5)])) == \
        ["2", "10", "b", "a", "01"]


# ---- Number() -------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ("", 0), ("   ", 0), ("\n\t", 0), ("42", 42), (" 42 ", 42), ("+5", 5), ("-5", -5),
    (".5", 0.5), ("5.", 5), ("1e3", 1000), ("1E-2", 0.01), ("0x10", 16), ("0X1f", 31),
    ("0b101", 5), ("0o17", 15), ("Infinity", INF), ("-Infinity", -INF), ("+Infinity", INF),
    ("infinity", NAN), ("inf", NAN), ("nan", NAN), ("NaN", NAN), ("-0x10", NAN), ("0x", NAN),
    ("1_000", NAN), ("12px", NAN), ("1e", NAN), ("e5", NAN), ("--1", NAN), ("\u00a05\ufeff", 5),
    ("\x1c5", NAN), ("0.1", 0.1), ("1e400", INF), ("9007199254740993", 9007199254740992.0),
    (True, 1), (False, 0), (None, 0), (UNDEFINED, NAN), ([], 0), ([7], 7), (["7"], 7),
    ([1, 2], NAN), ([None], 0), ({}, NAN), ({"a": 1}, NAN), (3, 3), (2.5, 2.5),
])
def test_to_number(value, expected):
    assert same_number(js.to_number(value), expected)


def test_to_number_keeps_negative_zero():
    z = js.to_number("-0")
    assert z == 0 and math.copysign(1, z) == -1


@pytest.mark.parametrize("text, expected", [
    ("10", 10), ("  10px", 10), ("-3.9", -3), ("+4", 4), ("0x1A", 26), ("-0x10", -16),
    ("abc", NAN), ("", NAN), ("1e3", 1), ("0", 0),
])
def test_js_parse_int(text, expected):
    assert same_number(js.js_parse_int(text), expected)


# ---- String() -------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (0, "0"), (-0.0, "0"), (1.0, "1"), (-1.5, "-1.5"), (100, "100"), (1e21, "1e+21"),
    (1e20, "100000000000000000000"), (123456789012345680000.0, "123456789012345680000"),
    (1.5e21, "1.5e+21"), (1e-6, "0.000001"), (1.5e-6, "0.0000015"), (1e-7, "1e-7"),
    (1.5e-7, "1.5e-7"), (0.1 + 0.2, "0.30000000000000004"), (2.0**60, "1152921504606847000"),
    (2**60, "1152921504606847000"), (1e16, "10000000000000000"), (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"), (NAN, "NaN"), (INF, "Infinity"),
    (-INF, "-Infinity"), (9007199254740991, "9007199254740991"), (0.000123, "0.000123"),
    (123.456, "123.456"), (-1e-7, "-1e-7"), (2**70, "1.1805916207174113e+21"),
])
def test_format_number(value, expected):
    assert js.format_number(value) == expected


@pytest.mark.parametrize("value, expected", [
    (None, "null"), (UNDEFINED, "undefined"), (True, "true"), (False, "false"), ("s", "s"),
    (3, "3"), (2.50, "2.5"), ([1, "a", None, UNDEFINED, [2, 3]], "1,a,,,2,3"), ([], ""),
    ({}, "[object Object]"), ({"a": 1}, "[object Object]"), ([{}], "[object Object]"),
])
def test_to_string(value, expected):
    assert js.to_string(value) == expected


# ---- == -------------------------------------------------------------------------------

OBJ: dict = {}
ARR: list = [1]


@pytest.mark.parametrize("a, b, expected", [
    (None, UNDEFINED, True), (None, None, True), (UNDEFINED, UNDEFINED, True),
    (None, 0, False), (None, False, False), (None, "", False), (UNDEFINED, 0, False),
    ("5", 5, True), (5, "5", True), (0, "", True), ("", 0, True), (0, " \n", True),
    (True, 1, True), (True, "1", True), (False, "0", True), (False, "", True), (True, 2, False),
    (1, 1.0, True), (0, -0.0, True), (NAN, NAN, False), ("a", "a", True), ("a", "A", False),
    ("0x10", 16, True), ("1e3", 1000, True), (OBJ, OBJ, True), ({}, {}, False),
    (ARR, ARR, True), ([1], [1], False), ([1], 1, True), ([1], "1", True), ([1, 2], "1,2", True),
    ([], "", True), ([], 0, True), ([], False, True), ({}, "[object Object]", True),
    (True, "true", False), ("null", None, False), ("undefined", UNDEFINED, False),
    (False, [], True), (INF, "Infinity", True),
])
def test_loose_eq(a, b, expected):
    assert js.loose_eq(a, b) is expected
    assert js.loose_eq(b, a) is expected


# ---- < <= > >= ------------------------------------------------------------------------

@pytest.mark.parametrize("a, op, b, expected", [
    (1, "<", 2, True), (2, "<", 1, False), (2, "<=", 2, True), (3, ">", 2, True),
    (2, ">=", 3, False), ("10", "<", "9", True), ("10", "<", 9, False), (10, ">", "9", True),
    ("a", "<", "b", True), ("B", "<", "a", True), ("abc", "<", "abd", True), ("", "<", "a", True),
    (None, "<", 1, True), (None, ">=", 0, True), (UNDEFINED, "<", 1, False),
    (UNDEFINED, ">=", 0, False), (UNDEFINED, "<=", UNDEFINED, False), (NAN, "<=", NAN, False),
    ("abc", "<", 1, False), ("abc", ">=", 1, False), (True, ">", 0, True), (False, "<", True, True),
    ([2], ">", 1, True), ([1, 2], "<", 3, False), ([], "<", 1, True), ({}, "<", 1, False),
    ({}, "<=", "[object Object]", True), ("\uffff", "<", "😀", False), ("😀", "<", "\uffff", True),
    (-INF, "<", INF, True), ("2", ">", "10", True), (12, "<", 13, True), (None, "<", 13, True),
])
def test_compare(a, op, b, expected):
    assert js.compare(a, op, b) is expected


def test_compare_rejects_an_unknown_operator():
    with pytest.raises(ValueError, match="unknown comparison operator: =="):
        js.compare(1, "==", 2)


# ---- JSON.stringify -------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (None, "null"), (True, "true"), (1, "1"), (1.0, "1"), (-0.0, "0"), (2.5, "2.5"),
    (1e21, "1e+21"), (1e16, "10000000000000000"), (1e-7, "1e-7"), (0.00001, "0.00001"),
    (NAN, "null"), (INF, "null"), ("é\n\"\\\u0001", '"é\\n\\"\\\\\\u0001"'), ("\u2028", '"\u2028"'),
    ("\ud800", '"\\ud800"'), ("a😀", '"a😀"'), ([], "[]"), ({}, "{}"),
    ([1, UNDEFINED, None], "[1,null,null]"), ({"a": UNDEFINED, "b": 1}, '{"b":1}'),
    ({"a": UNDEFINED}, "{}"), ({"b": 1, "a": [2.0, {"c": 0.5}]}, '{"b":1,"a":[2,{"c":0.5}]}'),
    ("version 1.0", '"version 1.0"'), ((1, 2), "[1,2]"), (2**60, "1152921504606847000"), ([2**60], "[1152921504606847000]"),
])
def test_json_compact(value, expected):
    assert json_write.json_compact(value) == expected


@pytest.mark.parametrize("value, expected", [
    ([], "[]"), ({}, "{}"), (1.0, "1"), ([1], "[\n  1\n]"),
    ({"a": [], "b": {}, "c": {"d": 2.0}}, '{\n  "a": [],\n  "b": {},\n  "c": {\n    "d": 2\n  }\n}'),
    ({"a": UNDEFINED}, "{}"), ({"a": UNDEFINED, "b": [UNDEFINED]}, '{\n  "b": [\n    null\n  ]\n}'),
    ([{"id": 1, "name": "alpha"}], '[\n  {\n    "id": 1,\n    "name": "alpha"\n  }\n]'),
])
def test_json_pretty(value, expected):
    assert json_write.json_pretty(value) == expected


def test_top_level_undefined_has_no_json_text():
    with pytest.raises(ValueError):
        json_write.json_compact(UNDEFINED)
    with pytest.raises(ValueError):
        json_write.json_pretty(UNDEFINED)


@pytest.mark.parametrize("value, expected", [
    ({"a": UNDEFINED, "b": 1}, {"b": 1}),
    ([UNDEFINED, {"x": [UNDEFINED, {"y": UNDEFINED}]}], [None, {"x": [None, {}]}]),
    ((1, UNDEFINED), [1, None]),
    (UNDEFINED, UNDEFINED),
    ("s", "s"),
])
def test_without_undefined_keeps_what_json_keeps(value, expected):
    got = json_write.without_undefined(value)
    assert got == expected
    if isinstance(value, (dict, list)):
        assert json_write.json_compact(got) == json_write.json_compact(value)


def test_without_undefined_returns_a_value_without_undefined_itself():
    value = [{"a": [1, {"b": None}]}, "s", 2.5]
    assert json_write.without_undefined(value) is value
    held = [{"a": 1}, {"b": UNDEFINED}]
    assert json_write.without_undefined(held)[0] is held[0] and held[1] == {"b": UNDEFINED}


# ---- JSON.parse -----------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("1.0", 1), ("1e3", 1000), ("-0.0", 0), ("2.5", 2.5), ("[1.50, 2E0]", [1.5, 2]),
    ("12345678901234567890", 12345678901234567890.0), ("9007199254740993", 9007199254740992.0),
    ("9007199254740991", 9007199254740991), ("1e400", INF), (" \n[] ", []), ('"\\ud83d\\ude00"', "😀"),
    ('{"a":1,"a":2}', {"a": 2}), ("null", None), (b'{"x":"\xc3\xa9"}', {"x": "é"}),
])
def test_json_loads(text, expected):
    got = json_read.json_loads(text)
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)


def test_json_loads_puts_index_keys_first_as_js_does():
    loaded = json_read.json_loads('{"b":1,"2":2,"1":3,"a":{"9":0,"z":1,"0":2}}')
    assert list(loaded) == ["1", "2", "b", "a"]
    assert list(json_read.json_loads('{"a":{"z":1,"0":2}}')["a"]) == ["0", "z"]


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a":-Infinity}', "", "[1,]", "{'a':1}", "01"])
def test_json_loads_rejects_what_json_parse_rejects(text):
    with pytest.raises(ValueError):
        json_read.json_loads(text)


# ---- properties -----------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


def _path_walked(value, path):
    """The command path segment by segment, as get_value_path reads a dotted one."""
    for key in path.split("."):
        if not key:
            continue
        if value is None or value is UNDEFINED:
            return UNDEFINED
        value = js.get_prop(value, key)
    return value


@pytest.mark.slow
@given(st.one_of(json_values, st.just(UNDEFINED), st.text(max_size=3)),
       st.sampled_from(["", "a", "b", "length", "0", "1", "01", "__proto__", "é"]))
def test_a_one_key_path_reads_as_the_path_walked(value, key):
    got, walked = js.get_value_path(value, key), _path_walked(value, key)
    assert got is walked or (got == walked and type(got) is type(walked))


@given(json_values)
def test_json_round_trip(value):
    assert json_read.json_loads(json_write.json_compact(value)) == value
    assert json_read.json_loads(json_write.json_pretty(value)) == value


@given(json_values)
def test_compact_and_pretty_agree_with_python_json_on_the_parsed_value(value):
    text = json_write.json_compact(value)
    assert json.loads(text) == json.loads(json_write.json_pretty(value))


class _Dict(dict):
    pass


class _List(list):
    pass


_SIZED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text()
    | st.sampled_from([UNDEFINED, "\ud800", "a\udfffb", "\u2028", "\x7f\x00", _Dict(a=[1.5]),
                       _List([2**60, {"b": 1}])]),
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=5) | st.integers(), children, max_size=4),
    max_leaves=16,
)


@given(_SIZED)
def test_json_pretty_size_is_the_byte_length_of_the_pretty_text(value):
    if value is UNDEFINED:
        with pytest.raises(ValueError):
            json_write.json_pretty_size(value)
        return
    assert json_write.json_pretty_size(value) == len(json_write.json_pretty(value).encode("utf-8"))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_number_round_trips(f):
    assert float(js.format_number(f)) == f or f == 0


@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_numeric_compare_matches_python_on_numbers(a, b):
    assert js.compare(a, "<", b) is (a < b)
    assert js.loose_eq(a, b) is (a == b)


# ---- the nesting guard of JSON.parse --------------------------------------------------------
def _depth(value) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


# strings made of what could confuse a reader of the text: brackets, quotes, backslashes
_TRICKY = st.text(alphabet='[]{}"\\a\u00e9\U0001f600', max_size=6)
_VALUES = st.recursive(
    st.none() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
    max_leaves=30)


@given(_VALUES, st.integers(0, 6))
def test_depth_over_reads_the_nesting_and_skips_strings(value, limit):
    text = json.dumps(value, ensure_ascii=False)
    assert json_read.json_depth_over(text, limit) == (_depth(value) > limit)


def test_depth_over_the_bound_is_refused_and_at_it_is_parsed():
    at = "[" * json_read.MAX_JSON_DEPTH + "]" * json_read.MAX_JSON_DEPTH
    assert json_read.json_loads(at) is not None
    with pytest.raises(json_read.JSONTooDeep):
        json_read.json_loads("[" + at + "]")
    # brackets inside strings do not count, escaped quotes do not end a string
    hidden = json.dumps(["\\\"" + "[" * 500, {"k[[": "]]\\"}])
    assert json_read.json_loads(hidden)[0].endswith("[")


@given(_SIZED.filter(lambda v: v is not UNDEFINED), st.booleans(), st.booleans())
def test_plain_dumps_is_json_dumps_with_its_options(value, ascii_only, sort_keys):
    def spelled(o):
        return f"<{type(o).__name__}>"

    def expected():
        return json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only,
                          sort_keys=sort_keys, default=spelled)

    try:
        want = expected()
    except TypeError:  # keys of mixed types cannot be sorted: refused alike
        with pytest.raises(TypeError):
            json_write.plain_dumps(value, ascii_only, sort_keys, default=spelled)
        return
    assert json_write.plain_dumps(value, ascii_only, sort_keys, default=spelled) == want


def test_plain_dumps_refuses_what_json_dumps_refuses_in_its_words():
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        json_write.plain_dumps({"a": {1}})
    assert json_write.plain_dumps({"é": float("nan")}) == '{"\\u00e9":NaN}'


def _prefix_depth(text: str, limit: int) -> bool:
    """json_depth_over's answer as the running count of brackets gives it (strings skipped),
    for any text: the reading the quick passes over paired brackets must agree with."""
    data = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"").replace(b'\\"', b"")
    shape = bytes(b for b in data if b in b'"[]{}').replace(b'""', b"")
    shape = b"".join(shape.split(b'"')[::2])
    depth = top = 0
    for byte in shape:
        depth += 1 if byte in b"[{" else -1
        top = max(top, depth)
    return top > limit


@given(st.text(alphabet='[]{}"\\ ax', max_size=40), st.integers(0, 5), st.integers(0, 8))
def test_depth_over_agrees_with_the_running_count_on_any_text(text, limit, deep):
    for candidate in (text, "[" * deep + text + "]" * deep, "{" * deep + text):
        padded = candidate + " [" * 300  # past the count under which nothing is read
        assert json_read.json_depth_over(padded, limit) == _prefix_depth(padded, limit)


# ---- json_array_kept: an array's items tested as they are parsed -----------------------

_SPACE = st.text(alphabet=" \t\n\r", max_size=3)


def _keep(value) -> bool:
    return js.truthy(value) and not isinstance(value, str)


# strings and items whose commas are not between two of the array's items
_COMMA_BAIT = st.sampled_from([",", '","', "],[", "},{", '\\",', " , ", ""]) | st.text(",[]{}\" ")
_bait_items = _COMMA_BAIT | st.lists(_COMMA_BAIT, max_size=3) | st.dictionaries(
    _COMMA_BAIT, _COMMA_BAIT | st.lists(st.integers(0, 3), max_size=3), max_size=3)


@st.composite
def _array_texts(draw):
    """An array's JSON text with white space anywhere JSON allows it (and str.strip's own
    around it), sometimes damaged: cut short, or a character put in."""
    items = draw(st.lists(json_values | _bait_items, max_size=12))
    gap = lambda: draw(_SPACE)  # noqa: E731
    inner = ",".join(gap() + json_write.json_compact(v) + gap() for v in items)
    text = draw(st.sampled_from(["", "\x0b", "\u00a0 "])) + "[" + gap() + inner + "]" + \
        draw(st.sampled_from(["", "\n", " \x1c"]))
    damage = draw(st.sampled_from(["none", "cut", "insert"]))
    if damage == "cut":
        text = text[:draw(st.integers(0, max(len(text) - 1, 0)))]
    elif damage == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from([",", "]", "[", "x", '"', "{", ", ]"])) + text[at:]
    return items, damage, text


@given(_array_texts(), st.sampled_from([1, 2, 3, 5, 8, 13, 40, json_read.ARRAY_BATCH]))
def test_array_kept_is_the_parsed_array_filtered_or_declines(case, batch):
    """Whatever the batch (how many characters are read as one array): a few characters puts
    its last comma inside strings and items, and past the end of one item or many."""
    items, damage, text = case
    kept = json_read.json_array_kept(text, _keep, batch)
    try:
        whole = json_read.json_loads(text.strip())
    except ValueError:
        assert kept is None  # the caller reads it whole, and reports that error
        return
    if kept is None:
        assert damage != "none" or not isinstance(whole, list)
    else:
        assert isinstance(whole, list) and kept == [v for v in whole if _keep(v)]
    if damage == "none":
        assert whole == items and kept == [v for v in items if _keep(v)]


def test_array_kept_declines_what_is_not_a_whole_array_and_a_keep_that_raises():
    for text in ("", "  ", "{}", "1", "[1,]", "[1] [2]", "[1 2]", "[01]", "[NaN]"):
        assert json_read.json_array_kept(text, _keep) is None, text
    # the array closed before a comma: read as one batch, `1]` must not pass for items
    for text in ("[1],2]", "[1, 2] ,3]", '["a,b"],[3]]', "[[1],2],3]"):
        for batch in (1, 2, 3, 4, 8, 64):
            assert json_read.json_array_kept(text, _keep, batch) is None, (text, batch)

    def fails(value):
        raise TypeError("no")

    assert json_read.json_array_kept("[1, 2]", fails) is None
    assert json_read.json_array_kept(" [] \n", fails) == []


def test_array_kept_gives_what_json_parse_gives():
    text = '[{"b": 1, "2": 0, "1": 0}, 12345678901234567890, 1.0, [3]]'
    kept = json_read.json_array_kept(text, lambda v: True)
    assert kept == json_read.json_loads(text)
    assert list(kept[0]) == ["1", "2", "b"] and kept[1] == 12345678901234567000.0
    assert kept[2] == 1 and type(kept[2]) is int
    assert json_read.json_array_kept("[" * 300 + "]" * 300, lambda v: True) is None  # too deep
