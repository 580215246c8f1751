"""Templates: placeholders, every filter with its JavaScript edge cases, the map-style plain
substitution, and the `template` command's sources and errors."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, strategies as st

from vm.core import js, json_write
from vm.host.store import Store
from vm.host.commands import template as tpl
from vm.host.commands.base import Args, CommandError, Context

ITEM = {
    "name": "alpha", "n": 5, "f": 3.14159, "neg": -2.5, "half": 2.5, "zero": 0, "empty": "",
    "nul": None, "yes": True, "tags": ["a", "b"], "mixed": [1, None, [2, 3], {"k": 1}],
    "meta": {"lvl": 2}, "s": "abcdef", "pad": "  x  ", "line": "a|b", "dash": "a-b-c",
    "quote": 'say "hi"', "ts": 1700000000000, "tss": "1700000000000", "iso": "2024-01-15",
    "uni": "héllo😀", "nested": {"list": [{"v": "deep"}]}, "big": 1e21, "tiny": 1e-7,
}


@pytest.fixture
def ctx(tmp_path) -> Context:
    return Context(env={}, cwd=str(tmp_path), store=Store(str(tmp_path)))


def render(text: str, item=ITEM) -> str:
    return tpl.render_template(text, item)


# ---- placeholders ---------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("{{name}}", "alpha"),
    ("Hi {{ name }}!", "Hi alpha!"),
    ("{{\nname\n}}", "alpha"),
    ("{{n}}/{{f}}/{{yes}}/{{nul}}/{{missing}}", "5/3.14159/true//"),
    ("{{meta}}", '{"lvl":2}'),
    ("{{tags}}", '["a","b"]'),
    ("{{meta.lvl}}", "2"),
    ("{{nested.list.0.v}}", "deep"),
    ("{{nested..list.0.v}}", "deep"),
    ("{{tags.length}}", "2"),
    ("{{s.length}}", "6"),
    ("{{s.0}}", "a"),
    ("{{n.x}}", ""),
    ("{{nul.x}}", ""),
    ("{{big}} {{tiny}}", "1e+21 1e-7"),
    ("{{.}}", None),
    ("{{this}}", None),
    ("{{ }}", None),
    ("{{}}", "{{}}"),
    ("{{name}}}", "alpha}"),
    ("{{{name}}}", "}"),
    ("{name}", "{name}"),
    ("no placeholders", "no placeholders"),
    ("{{name}}{{name}}", "alphaalpha"),
])
def test_placeholders(text, expected):
    assert render(text) == (json_write.json_compact(ITEM) if expected is None else expected)


@pytest.mark.parametrize("item, expected", [
    ("str", "str"), (7, "7"), (1.0, "1"), (None, ""), (False, "false"), ([1, "a"], '[1,"a"]'),
])
def test_whole_item(item, expected):
    assert render("{{.}}", item) == expected


# ---- filters --------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    # upper / lower / trim / string: String(v ?? "")
    ("{{name | upper}}", "ALPHA"),
    ("{{name|upper}}", "ALPHA"),
    ("{{ name  |   upper  }}", "ALPHA"),
    ("{{n | upper}}", "5"),
    ("{{meta | upper}}", "[OBJECT OBJECT]"),
    ("{{tags | upper}}", "A,B"),
    ("{{missing | upper}}", ""),
    ("{{nul | lower}}", ""),
    ("{{yes | upper}}", "TRUE"),
    ("{{name | upper | lower}}", "alpha"),
    ("[{{pad | trim}}]", "[x]"),
    ("{{n | string}}", "5"),
    ("{{missing | string}}", ""),
    ("{{mixed | string}}", "1,,2,3,[object Object]"),
    # truncate
    ("{{s | truncate 3}}", "abc..."),
    ("{{s | truncate 6}}", "abcdef"),
    ("{{s | truncate 0}}", "..."),
    ("{{s | truncate -0}}", "..."),
    ("{{s | truncate 0.9}}", "..."),
    ("{{s | truncate abc}}", "abcdef"),
    ("{{s | truncate -2}}", "abcd..."),
    ("{{s | truncate -10}}", "..."),
    ("{{s | truncate 2px}}", "ab..."),
    ("{{s | truncate 0x2}}", "ab..."),
    ("{{s | truncate}}", "abcdef"),
    ("{{uni | truncate 6}}", "héllo\ud83d..."),
    ("{{n | truncate 0}}", "..."),
    ("{{missing | truncate 0}}", ""),
    # replace
    ("{{dash | replace - _}}", "a_b_c"),
    ('{{dash | replace "-" "_"}}', "a_b_c"),
    ("{{dash | replace '-' ''}}", "abc"),
    ("{{dash | replace -}}", "abc"),
    ('{{s | replace "" "."}}', ".a.b.c.d.e.f."),
    ("{{s | replace}}", "abcdef"),
    ('{{s | replace b "$&$&"}}', "abbcdef"),
    ('{{s | replace b "$$"}}', "a$cdef"),
    ('{{s | replace b "[$`]"}}', "a[a]cdef"),
    ('{{s | replace b "[$\']"}}', "a[cdef]cdef"),
    ('{{s | replace b "$1$"}}', "a$1$cdef"),
    ('{{line | replace "|" "/"}}', "a/b"),
    ("{{line | replace '|' ' | '}}", "a | b"),
    ('{{quote | replace "\\"" "\'"}}', "say 'hi'"),
    ('{{n | replace 5 6}}', "6"),
    ("{{dash | replace a-b X Y}}", "X-c"),
    # split / first / last / length / join
    ('{{line | split "|"}}', '["a","b"]'),
    ("{{dash | split -}}", '["a","b","c"]'),
    ("{{tags | split}}", '["a","b"]'),
    ("{{name | split ''}}", '["a","l","p","h","a"]'),
    ("{{missing | split}}", '[""]'),
    ('{{line | split "|" | first}}', "a"),
    ('{{line | split "|" | last}}', "b"),
    ("{{tags | first}}", "a"),
    ("{{tags | last}}", "b"),
    ("{{name | first}}", "alpha"),
    ("{{meta | last}}", '{"lvl":2}'),
    ("{{tags | length}}", "2"),
    ("{{name | length}}", "5"),
    ("{{uni | length}}", "7"),
    ("{{n | length}}", "0"),
    ("{{missing | length}}", "0"),
    ("{{meta | length}}", "0"),
    ("{{tags | join}}", "a, b"),
    ("{{tags | join -}}", "a-b"),
    ("{{tags | join ''}}", "ab"),
    ("{{mixed | join}}", "1, , 2,3, [object Object]"),
    ("{{name | join -}}", "alpha"),
    ("{{missing | join}}", ""),
    ('{{dash | split - | join " + "}}', "a + b + c"),
    # json
    ("{{meta | json}}", '{\n  "lvl": 2\n}'),
    ("{{tags | json}}", '[\n  "a",\n  "b"\n]'),
    ("{{name | json}}", '"alpha"'),
    ("{{missing | json}}", ""),
    ("{{nul | json}}", "null"),
    ("{{f | json}}", "3.14159"),
    # default
    ("{{missing | default n/a}}", "n/a"),
    ('{{missing | default "not set"}}', "not set"),
    ("{{nul | default x}}", "x"),
    ("{{empty | default x}}", "x"),
    ("{{zero | default x}}", "0"),
    ("{{yes | default x}}", "true"),
    ("{{missing | default}}", ""),
    ("{{tags | default x}}", '["a","b"]'),
    # round
    ("{{f | round 2}}", "3.14"),
    ("{{f | round}}", "3"),
    ("{{f | round 0}}", "3"),
    ("{{f | round abc}}", "3"),
    ("{{f | round 2.9}}", "3.14"),
    ("{{half | round}}", "3"),
    ("{{neg | round}}", "-3"),
    ("{{n | round 3}}", "5"),
    ("{{big | round 2}}", "1e+21"),
    ("{{name | round}}", "alpha"),
    ("{{nul | round}}", "0"),
    ("{{yes | round}}", "1"),
    ("{{empty | round}}", "0"),
    ("{{missing | round}}", ""),
    ("{{tags | round}}", '["a","b"]'),
    ("{{f | round 100}}", "3.14159"),
    ("{{tiny | round 7}}", "1e-7"),
    ("{{f | round 2 | json}}", "3.14"),
    # date
    ("{{ts | date}}", "2023-11-14T22:13:20.000Z"),
    ("{{tss | date}}", "2023-11-14T22:13:20.000Z"),
    ('{{ts | date "YYYY-MM-DD"}}', "2023-11-14"),
    ("{{ts | date YYYY/MM/DD}}", "2023/11/14"),
    ('{{ts | date "DD.MM.YYYY HH:mm:ss"}}', "14.11.2023 22:13:20"),
    ('{{ts | date "YYYY YYYY MM"}}', "2023 YYYY 11"),
    ('{{ts | date ""}}', "2023-11-14T22:13:20.000Z"),
    ("{{iso | date}}", "2024-01-15T00:00:00.000Z"),
    ('{{iso | date "DD/MM"}}', "15/01"),
    ("{{name | date}}", "alpha"),
    ("{{missing | date}}", "undefined"),
    ("{{nul | date}}", "null"),
    ("{{yes | date}}", "true"),
    ("{{meta | date}}", "[object Object]"),
    ("{{zero | date}}", "1970-01-01T00:00:00.000Z"),
    ("{{n | date}}", "1970-01-01T00:00:00.005Z"),
])
def test_filters(text, expected):
    assert render(text) == expected


@pytest.mark.parametrize("value, expected", [
    (-1, "1969-12-31T23:59:59.999Z"),
    (1.7, "1970-01-01T00:00:00.001Z"),
    (-1.7, "1969-12-31T23:59:59.999Z"),
    (8.64e15, "+275760-09-13T00:00:00.000Z"),
    (-8.64e15, "-271821-04-20T00:00:00.000Z"),
    (8.64e15 + 1, "8640000000000001"),
    (253402300800000, "+010000-01-01T00:00:00.000Z"),
    (253402300799999, "9999-12-31T23:59:59.999Z"),
    (-62167219200000, "0000-01-01T00:00:00.000Z"),
    (-62198755200000, "-000001-01-01T00:00:00.000Z"),
    (951782400000, "2000-02-29T00:00:00.000Z"),
    (" 42 ", "1970-01-01T00:00:00.042Z"),
    ("2024-01-15T10:20:30Z", "2024-01-15T10:20:30.000Z"),
    ("2024-01-15T10:20:30.5Z", "2024-01-15T10:20:30.500Z"),
    ("2024-01-15T10:20:30.123456Z", "2024-01-15T10:20:30.123Z"),
    ("2024-01-15T10:00:00+02:00", "2024-01-15T08:00:00.000Z"),
    ("2024-01-15T10:00-05:30", "2024-01-15T15:30:00.000Z"),
    ("2024-01", "2024-01-01T00:00:00.000Z"),
    ("2024", "1970-01-01T00:00:02.024Z"),
    ("+002024-03-01", "2024-03-01T00:00:00.000Z"),
    ("2024-01-15T24:00:00Z", "2024-01-16T00:00:00.000Z"),
    ("2023-02-31", "2023-03-03T00:00:00.000Z"),
    ("Mon, 15 Jan 2024 10:00:00 GMT", "2024-01-15T10:00:00.000Z"),
    ("15 Jan 2024 10:00:00 +0100", "2024-01-15T09:00:00.000Z"),
    ("2024-13-01", "2024-13-01"),
    ("2024-01-15T25:00:00Z", "2024-01-15T25:00:00Z"),
    ("2024-01-15T24:00:01Z", "2024-01-15T24:00:01Z"),
    ("not a date", "not a date"),
    ("", ""),
])
def test_date_values(value, expected):
    assert render("{{v | date}}", {"v": value}) == expected


@pytest.fixture
def local_tz(monkeypatch):
    def use(tz: str) -> None:
        monkeypatch.setenv("TZ", tz)
        time.tzset()

    yield use
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("tz, value, expected", [
    ("UTC0", "2024-01-15T10:00:00", "2024-01-15T10:00:00.000Z"),
    ("EST5EDT,M3.2.0,M11.1.0", "2024-01-15T10:00:00", "2024-01-15T15:00:00.000Z"),
    ("EST5EDT,M3.2.0,M11.1.0", "2024-07-15T10:00", "2024-07-15T14:00:00.000Z"),
    ("EST5EDT,M3.2.0,M11.1.0", "2024-07-15 10:00", "2024-07-15T14:00:00.000Z"),
    ("EST5EDT,M3.2.0,M11.1.0", "2024-07-15", "2024-07-15T00:00:00.000Z"),
    ("EST5EDT,M3.2.0,M11.1.0", "2024-07-15T10:00Z", "2024-07-15T10:00:00.000Z"),
    ("UTC0", "-000000-01-01", "2001-01-01T00:00:00.000Z"),
    ("UTC0", [1, 2, 3], "2003-01-02T00:00:00.000Z"),
    ("EST5EDT,M3.2.0,M11.1.0", "Jan 2 2024", "2024-01-02T05:00:00.000Z"),
    ("EST5EDT,M3.2.0,M11.1.0", "7/4/24 3:30 PM", "2024-07-04T19:30:00.000Z"),
])
def test_date_without_offset_is_local_time(local_tz, tz, value, expected):
    local_tz(tz)
    assert render("{{v | date}}", {"v": value}) == expected


@pytest.mark.parametrize("text, message", [
    ("{{name | nope}}", "Unknown template filter: nope"),
    ("{{name | upper | Upper}}", "Unknown template filter: Upper"),
    ("{{name | }}", "Unknown template filter: "),
    ("{{name | | upper}}", "Unknown template filter: "),
    ("{{f | round -1}}", "toFixed() digits argument must be between 0 and 100"),
    ("{{f | round 101}}", "toFixed() digits argument must be between 0 and 100"),
    ("ok {{name}} {{name | bad arg}}", "Unknown template filter: bad"),
])
def test_filter_errors(text, message):
    with pytest.raises(CommandError) as info:
        render(text)
    assert info.value.message == message


def test_a_failing_filter_on_a_null_value_is_still_unknown():
    with pytest.raises(CommandError, match="Unknown template filter: x"):
        render("{{missing | x}}")


def test_round_on_a_non_number_ignores_bad_digits():
    assert render("{{name | round -1}}") == "alpha"


@pytest.mark.parametrize("expr, expected", [
    ('line | split "|" | first', ["line", 'split "|"', "first"]),
    ("a|b|c", ["a", "b", "c"]),
    ("a | replace '|' \"|\"", ["a", "replace '|' \"|\""]),
    ('a | replace "\\"|" x', ["a", 'replace "\\"|" x']),
    ('a | "unterminated |', ["a", '"unterminated |']),
    ("a|", ["a", ""]),
    ("", [""]),
])
def test_split_filter_chain(expr, expected):
    assert tpl.split_filter_chain(expr) == expected


@pytest.mark.parametrize("expr, expected", [
    ("upper", ["upper"]),
    ("  truncate   80  ", ["truncate", "80"]),
    ('replace "a b" c', ["replace", "a b", "c"]),
    ("replace 'it\\'s' x", ["replace", "it's", "x"]),
    ('replace "\\\\" "\\n"', ["replace", "\\", "n"]),
    ('replace a"b c', ["replace", 'a"b', "c"]),
    ('replace "" x', ["replace", "", "x"]),
    ('join "open', ["join", "open"]),
    ("split\t,", ["split\t,"]),
    ("", [""]),
    ('"upper"', ["upper"]),
])
def test_parse_filter(expr, expected):
    assert tpl.parse_filter(expr) == expected


def test_a_quoted_filter_name_works():
    assert render('{{name | "upper"}}') == "ALPHA"


@pytest.mark.parametrize("x, digits, expected", [
    (1.005, 2, "1.00"), (1.5, 0, "2"), (2.5, 0, "3"), (-2.5, 0, "-3"), (-0.4, 0, "-0"),
    (-0.0, 0, "0"), (0.125, 2, "0.13"), (1e21, 2, "1e+21"), (123.456, 1, "123.5"),
    (0.000001, 7, "0.0000010"), (10, 3, "10.000"),
])
def test_to_fixed(x, digits, expected):
    assert tpl.to_fixed(x, digits) == expected


@given(st.integers(-10**6, 10**6), st.integers(0, 6))
def test_round_of_a_decimal_string_is_exact(n, digits):
    value = n / 10**digits
    rounded = render("{{v | round %d}}" % digits, {"v": value})
    assert js.to_number(rounded) == js.to_number(js.format_number(value))


@given(st.integers(-8_640_000_000_000_000, 8_640_000_000_000_000))
def test_date_round_trips_through_iso(ms):
    iso = render("{{v | date}}", {"v": ms})
    assert render("{{v | date}}", {"v": iso}) == iso
    assert tpl.parse_date(iso) == ms


# ---- map's plain substitution ---------------------------------------------------------

@pytest.mark.parametrize("text, item, expected", [
    ("{{name}}/{{meta.lvl}}", ITEM, "alpha/2"),
    ("{{meta}}", ITEM, '{"lvl":2}'),
    ("#{{.}}", 1, "#1"),
    ("#{{this}}", "two", "#two"),
    ("{{.}}", None, ""),
    ("{{.}}", [1, None], "[1,null]"),
    ("{{nul}}|{{missing}}|{{yes}}|{{f}}", ITEM, "||true|3.14159"),
    ("{{name | upper}}", ITEM, ""),
    ("{{ name }}", ITEM, "alpha"),
    ("{{s.length}}", ITEM, "6"),
    ("{{big}}", ITEM, "1e+21"),
    ("plain", ITEM, "plain"),
])
def test_render_plain(text, item, expected):
    assert tpl.render_plain(text, item) == expected


# ---- the command ----------------------------------------------------------------------

def run(ctx: Context, items: list, *positionals: str, **flags) -> list:
    return tpl.template(Args(flags=flags, positionals=positionals), items, ctx)


def test_template_text(ctx):
    assert run(ctx, [{"n": 1}, {"n": 2}], text="#{{n}}") == ["#1", "#2"]


def test_template_positionals_are_joined(ctx):
    assert run(ctx, [{"n": 1}], "PR", "{{n}}:", "done") == ["PR 1: done"]


def test_template_text_wins_over_file_and_positionals(ctx, tmp_path):
    (tmp_path / "t.txt").write_text("file {{n}}")
    assert run(ctx, [{"n": 1}], "pos", text="text {{n}}", file="t.txt") == ["text 1"]


def test_template_file_is_read_relative_to_the_cwd(ctx, tmp_path):
    (tmp_path / "t.txt").write_text("Hello {{name | upper}}\n")
    assert run(ctx, [{"name": "ann"}], file="t.txt") == ["Hello ANN\n"]
    assert run(ctx, [{"name": "bo"}], file=str(tmp_path / "t.txt")) == ["Hello BO\n"]


def test_an_empty_text_or_file_falls_through(ctx, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    assert run(ctx, [1], "pos {{.}}", text="", file="empty.txt") == ["pos 1"]


def test_template_without_items_renders_nothing(ctx):
    assert run(ctx, [], text="{{x | nosuchfilter}}") == []


@pytest.mark.parametrize("flags, positionals", [
    ({}, ()),
    ({"text": ""}, ()),
    ({"text": True}, ()),
    ({"file": True}, ()),
    ({"text": ""}, ("",)),
])
def test_template_requires_a_source(ctx, flags, positionals):
    with pytest.raises(CommandError) as info:
        run(ctx, [1], *positionals, **flags)
    assert info.value.message == "template requires --text or --file (or positional text)"


def test_template_missing_file(ctx):
    with pytest.raises(CommandError) as info:
        run(ctx, [1], file="nope.txt")
    assert info.value.message == "ENOENT: no such file or directory, open 'nope.txt'"


def test_template_file_is_a_directory(ctx, tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(CommandError) as info:
        run(ctx, [1], file="d")
    assert info.value.message == "EISDIR: illegal operation on a directory, read"
