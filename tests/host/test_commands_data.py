"""The pure-data commands and renderers: the recorded conformance outputs, then every rule
of the reference one table at a time."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from vm.core import js, json_read, json_write
from vm.host.store import Store
from vm.host.commands import data, state_cmds, template
from vm.host.commands.base import Args, CommandError, Context

CASES = Path("/work/shared/conformance/cases")
ROWS = [
    {"id": 1, "name": "alpha", "team": "red", "score": 30, "active": True, "meta": {"lvl": 2}},
    {"id": 2, "name": "beta", "team": "blue", "score": 12, "active": False, "meta": {"lvl": 1}},
    {"id": 3, "name": "gamma", "team": "red", "score": 45, "active": True, "meta": {"lvl": 3}},
    {"id": 4, "name": "delta", "team": "green", "score": 12, "active": True},
    {"id": 5, "name": "eps", "team": "blue", "score": None, "active": False, "meta": {"lvl": 2}},
]


@pytest.fixture
def ctx(tmp_path) -> Context:
    return Context(env={}, cwd=str(tmp_path), store=Store(str(tmp_path)))


def run(name: str, items: list, ctx: Context, *positionals: str, **flags) -> list:
    fn = {"where": data.where, "pick": data.pick, "head": data.head, "sort": data.sort,
          "dedupe": data.dedupe, "groupBy": data.group_by, "map": data.map_items,
          "template": template.template}[name]
    return fn(Args(flags=flags, positionals=positionals), list(items), ctx)


def error_of(name: str, items: list, ctx: Context, *positionals: str, **flags) -> str:
    with pytest.raises(CommandError) as info:
        run(name, items, ctx, *positionals, **flags)
    return info.value.message


# ---- the recorded reference outputs ---------------------------------------------------

BOOL_FLAGS = {"desc", "json"}


def parse_stage(tokens: list[str]) -> tuple[str, Args]:
    """A test-only stage parser, enough for the recorded pipelines (greedy `--flag value`)."""
    name, rest, flags, positionals = tokens[0], tokens[1:], {}, []
    i = 0
    while i < len(rest):
        tok = rest[i]
        if tok.startswith("--"):
            flag = tok[2:]
            if flag in BOOL_FLAGS or i + 1 >= len(rest) or rest[i + 1].startswith("--"):
                flags[flag] = True
            else:
                flags[flag] = rest[i + 1]
                i += 1
        else:
            positionals.append(tok)
        i += 1
    return name, Args(flags=flags, positionals=tuple(positionals))


def split_pipeline(text: str) -> list[list[str]]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars="|")
    lexer.whitespace_split = True
    stages: list[list[str]] = [[]]
    for tok in lexer:
        if tok == "|":
            stages.append([])
        else:
            stages[-1].append(tok)
    return stages


def recorded_steps() -> list:
    return list(_recorded_steps())


def _recorded_steps():
    for case in ("008-where-operators", "010-sort", "012-map", "014-five-stage-data-pipeline",
                 "016-human-mode-render"):
        expected = json.loads((CASES / case / "expected.json").read_text())
        for n, step in enumerate(expected["steps"]):
            yield pytest.param(step, id=f"{case}[{n}]")


def run_recorded(pipeline: str, ctx: Context) -> tuple[list, str | None]:
    stages = split_pipeline(pipeline)
    exec_name, exec_args = parse_stage(stages[0])
    assert exec_name == "exec" and exec_args.get("json") is True
    echo = shlex.split(exec_args.get("shell"))
    assert echo[0] == "echo"
    items = json_read.json_loads(" ".join(echo[1:]))
    items = items if isinstance(items, list) else [items]
    rendered = None
    for tokens in stages[1:]:
        name, args = parse_stage(tokens)
        if name == "json":
            rendered, items = data.render_json(items), []
        elif name == "table":
            rendered, items = data.render_table(items), []
        else:
            fn = {"where": data.where, "pick": data.pick, "head": data.head, "sort": data.sort,
                  "map": data.map_items}[name]
            items = fn(args, items, ctx)
    return items, rendered


@pytest.mark.skipif(not CASES.is_dir(), reason="conformance cases not present")
@pytest.mark.parametrize("step", recorded_steps())
def test_recorded_reference_output(step, ctx):
    pipeline = step["argv"][-1]
    out = step.get("stdoutJson")
    if isinstance(out, dict) and out.get("ok") is False:
        with pytest.raises(CommandError) as info:
            run_recorded(pipeline, ctx)
        assert info.value.message == out["error"]["message"]
        return
    items, rendered = run_recorded(pipeline, ctx)
    if isinstance(out, dict):
        assert json.loads(json_write.json_compact(items)) == out["output"]
        assert json_write.json_compact(items) == json.dumps(out["output"], separators=(",", ":"))
    elif "stdout" in step:
        assert rendered == step["stdout"]
    else:
        text = rendered if rendered is not None else data.render_json(items)
        assert text == json.dumps(out, indent=2) + "\n"


# ---- where ----------------------------------------------------------------------------

def ids(items: list) -> list:
    return [item.get("id") for item in items]


@pytest.mark.parametrize("expr, expected", [
    ("score>20", [1, 3]),
    ("team=red", [1, 3]),
    ("team==red", [1, 3]),
    ("team!=red", [2, 4, 5]),
    ("active==true", [1, 3, 4]),
    ("active=false", [2, 5]),
    ("meta.lvl>=2", [1, 3, 5]),
    ("meta.lvl<=1", [2]),
    ("score<13", [2, 4, 5]),
    ("score==null", [5]),
    ("score!=null", [1, 2, 3, 4]),
    ("meta=null", [4]),
    ("meta.lvl=null", [4]),
    ("score > 29", [1, 3]),
    ("score   >=   30", [1, 3]),
    ("score=30", [1]),
    ("score=30.0", [1]),
    ("score=3e1", [1]),
    ("score=0x1e", [1]),
    ("score='30'", []),
    ("name=alpha ", []),
    ("id=Infinity", []),
    ("id<Infinity", [1, 2, 3, 4, 5]),
    ("name<b", [1]),
    ("name>=delta", [3, 4, 5]),
    ("name<5", []),
    ("name>5", []),
    ("score>=0", [1, 2, 3, 4, 5]),
    ("nope=null", [1, 2, 3, 4, 5]),
    ("nope<1", []),
    ("meta.lvl.x=null", [1, 2, 3, 4, 5]),
    ("meta=[object Object]", [1, 2, 3, 5]),
    ("id=1=1", []),
    ("team=>red", []),
])
def test_where(expr, expected, ctx):
    assert ids(run("where", ROWS, ctx, expr)) == expected


@pytest.mark.parametrize("items, expr, expected", [
    ([{"x": None}, {}, {"x": 0}, {"x": ""}, {"x": False}], "x=null", [{"x": None}, {}]),
    ([{"x": 0}, {"x": ""}, {"x": "0"}, {"x": False}, {"x": []}, {"x": None}], "x=0",
     [{"x": 0}, {"x": ""}, {"x": "0"}, {"x": False}, {"x": []}]),
    ([{"x": "5"}, {"x": 5}, {"x": [5]}, {"x": " 5 "}, {"x": "5a"}], "x=5",
     [{"x": "5"}, {"x": 5}, {"x": [5]}, {"x": " 5 "}]),
    ([{"x": 1}, {"x": True}, {"x": "1"}], "x=true", [{"x": 1}, {"x": True}, {"x": "1"}]),
    ([{"x": "10"}, {"x": "9"}, {"x": 9}], "x<10", [{"x": "9"}, {"x": 9}]),
    ([{"a": [1, 2]}, {"a": [3]}], "a.length=2", [{"a": [1, 2]}]),
    ([{"a": [1, 2]}, {"a": [3]}], "a.0=3", [{"a": [3]}]),
    ([{"s": "abc"}], "s.length=3", []),
    ([1, "x", None, [1]], "length=1", [[1]]),
    ([{"a": {"": 1}}], "a..x=null", [{"a": {"": 1}}]),
    ([{"a": {"": 1}}], "a.=1", [{"a": {"": 1}}]),
    ([{"x": "a b"}], "x=a b", [{"x": "a b"}]),
    ([{"x": "line"}], "x=line\nmore", []),
    ([{"x": "="}, {"x": "=="}], "x==", [{"x": "="}]),
    ([{"x": "=1"}, {"x": 1}], "x==1", [{"x": 1}]),
])
def test_where_js_semantics(items, expr, expected, ctx):
    if "\n" in expr:
        assert error_of("where", items, ctx, expr) == f"Invalid where expression: {expr}"
        return
    assert run("where", items, ctx, expr) == expected


@pytest.mark.parametrize("positionals, message", [
    ((), "where requires an expression (e.g. field=value)"),
    (("",), "where requires an expression (e.g. field=value)"),
    (("bad expression",), "Invalid where expression: bad expression"),
    (("score",), "Invalid where expression: score"),
    (("score>",), "Invalid where expression: score>"),
    (("a-b=1",), "Invalid where expression: a-b=1"),
    (("=1",), "Invalid where expression: =1"),
])
def test_where_errors(positionals, message, ctx):
    assert error_of("where", ROWS, ctx, *positionals) == message


def test_where_errors_even_without_items(ctx):
    assert error_of("where", [], ctx, "bad") == "Invalid where expression: bad"


# ---- pick -----------------------------------------------------------------------------

@pytest.mark.parametrize("items, spec, expected", [
    (ROWS[:2], "id", [{"id": 1}, {"id": 2}]),
    (ROWS[3:], "id,meta", [{"id": 4, "meta": js.UNDEFINED}, {"id": 5, "meta": {"lvl": 2}}]),
    (ROWS[:1], " name , id ,,", [{"name": "alpha", "id": 1}]),
    (ROWS[:1], "id,id", [{"id": 1}]),
    (ROWS[:1], "nope", [{"nope": js.UNDEFINED}]),
    ([1, "s", None, True], "id", [1, "s", None, True]),
    ([[10, 20]], "1,length,x", [{"1": 20, "length": 2, "x": js.UNDEFINED}]),
    ([[7]], "b,1,0", [{"0": 7, "1": js.UNDEFINED, "b": js.UNDEFINED}]),
    ([{"a": 1}], "__proto__,a", [{"a": 1}]),
    ([{"a": 1, "__proto__": 5}], "__proto__,a", [{"a": 1}]),
    ([{"b": 1, "2": 2, "a": 3, "10": 4}], "b,10,a,2", [{"2": 2, "10": 4, "b": 1, "a": 3}]),
    ([{"x": None}], "x", [{"x": None}]),
])
def test_pick(items, spec, expected, ctx):
    """A field the item lacks is there as undefined, in JavaScript's property order."""
    got = run("pick", items, ctx, spec)
    assert got == expected
    assert [list(x) for x in got if isinstance(x, dict)] == [
        list(x) for x in expected if isinstance(x, dict)]
    assert json_write.json_compact(got) == json_write.json_compact(expected)


@pytest.mark.parametrize("positionals", [(), ("",)])
def test_pick_requires_fields(positionals, ctx):
    assert error_of("pick", ROWS, ctx, *positionals) == "pick requires a comma-separated field list"


def test_pick_with_only_blank_fields_yields_empty_objects(ctx):
    assert run("pick", ROWS[:2], ctx, " , ") == [{}, {}]


# ---- head -----------------------------------------------------------------------------

SEQ = list(range(25))


@pytest.mark.parametrize("flags, positionals, expected", [
    ({}, (), SEQ[:10]),
    ({"n": "2"}, (), SEQ[:2]),
    ({"n": "0"}, (), []),
    ({"n": "100"}, (), SEQ),
    ({"n": "2.5"}, (), SEQ[:3]),
    ({"n": " 3 "}, (), SEQ[:3]),
    ({"n": "0x3"}, (), SEQ[:3]),
    ({"n": "1e1"}, (), SEQ[:10]),
    ({"n": ""}, (), []),
    ({"n": True}, (), SEQ[:1]),
    ({}, ("5",), SEQ[:10]),
])
def test_head(flags, positionals, expected, ctx):
    assert run("head", SEQ, ctx, *positionals, **flags) == expected


@pytest.mark.parametrize("n", ["-1", "abc", "Infinity", "1e400", "NaN"])
def test_head_rejects_bad_n(n, ctx):
    assert error_of("head", SEQ, ctx, n=n) == "head --n must be a non-negative number"


# ---- sort -----------------------------------------------------------------------------

MIXED = [3, "10", 2, None, "b", 1, "a"]


@pytest.mark.parametrize("items, flags, expected", [
    (MIXED, {}, [1, "10", 2, 3, "a", "b", None]),
    (MIXED, {"desc": True}, [None, "b", "a", 3, 2, "10", 1]),
    ([3, 1, 2, 10], {}, [1, 2, 3, 10]),
    (["b", "B", "a", "é", "10", "9"], {}, ["10", "9", "B", "a", "b", "é"]),
    (["\uffff", "😀", "a"], {}, ["a", "😀", "\uffff"]),
    ([True, False, "s", "true"], {}, [False, "s", True, "true"]),
    ([[2], [1, 5], {"a": 1}, "[", "1,5"], {}, [[1, 5], "1,5", [2], "[", {"a": 1}]),
    ([None, 2, None, 1], {"desc": True}, [None, None, 2, 1]),
    ([2.5, -1, 0, 1e21], {}, [-1, 0, 2.5, 1e21]),
])
def test_sort_values(items, flags, expected, ctx):
    assert run("sort", items, ctx, **flags) == expected


@pytest.mark.parametrize("flags, expected", [
    ({"key": "score"}, [2, 4, 1, 3, 5]),
    ({"key": "score", "desc": True}, [5, 3, 1, 2, 4]),
    ({"key": "name"}, [1, 2, 4, 5, 3]),
    ({"key": "meta.lvl"}, [2, 1, 5, 3, 4]),
    ({"key": "meta.lvl", "desc": True}, [4, 3, 1, 5, 2]),
    ({"key": "nope"}, [1, 2, 3, 4, 5]),
    ({"key": "team"}, [2, 5, 4, 1, 3]),
    ({"key": "name.length"}, [5, 2, 1, 3, 4]),
    ({"key": ""}, [1, 2, 3, 4, 5]),
    ({"key": True}, [1, 2, 3, 4, 5]),
])
def test_sort_by_key(flags, expected, ctx):
    assert ids(run("sort", ROWS, ctx, **flags)) == expected


def test_sort_mixed_keys_with_missing_ones(ctx):
    items = [{"k": "b"}, {"k": 2}, {}, {"k": 10}, {"k": None}, {"k": "1"}]
    assert run("sort", items, ctx, key="k") == \
        [{"k": "1"}, {"k": 2}, {"k": 10}, {"k": "b"}, {}, {"k": None}]


keyed_items = st.lists(st.fixed_dictionaries({"k": st.one_of(st.none(), st.integers(-5, 5),
                                                             st.text("ab", max_size=2))}),
                       max_size=30).map(lambda xs: [dict(x, i=i) for i, x in enumerate(xs)])


@given(keyed_items, st.booleans())
def test_sort_is_a_stable_permutation(items, desc):
    ctx = Context(env={}, cwd=".", store=Store("."))
    flags = {"key": "k", "desc": True} if desc else {"key": "k"}
    out = run("sort", items, ctx, **flags)
    assert sorted(x["i"] for x in out) == list(range(len(items)))
    for a, b in zip(out, out[1:]):
        c = data._js_compare(a["k"], b["k"])
        assert (-c if desc else c) <= 0
        if c == 0:
            assert a["i"] < b["i"]


@given(st.lists(st.one_of(st.integers(-3, 3), st.sampled_from(["a", "10", "2", "b"]), st.none(),
                          st.floats(-3, 3, width=16), st.booleans(), st.sampled_from([[], {}, [1]])),
                max_size=12))
def test_sort_fast_paths_agree_with_the_comparator(values):
    ctx = Context(env={}, cwd=".", store=Store("."))
    pairs = [(v, i) for i, v in enumerate(values)]
    assert run("sort", values, ctx) == [v for v, _ in data._sort_mixed(pairs, False)]
    assert run("sort", values, ctx, desc=True) == [v for v, _ in data._sort_mixed(pairs, True)]


# ---- dedupe ---------------------------------------------------------------------------

@pytest.mark.parametrize("items, flags, expected", [
    ([1, "1", 1, 1.0, True, None, None, "a", "a"], {}, [1, "1", True, None, "a"]),
    ([{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1, "b": 2}], {}, [{"a": 1, "b": 2}, {"b": 2, "a": 1}]),
    ([[1, 2], [1, 2], [2, 1]], {}, [[1, 2], [2, 1]]),
    (ROWS, {"key": "team"}, [ROWS[0], ROWS[1], ROWS[3]]),
    (ROWS, {"key": "meta"}, [ROWS[0], ROWS[1], ROWS[2], ROWS[3]]),
    (ROWS, {"key": "nope"}, [ROWS[0]]),
    ([{"k": None}, {}, {"k": None}, {"j": 1}], {"key": "k"}, [{"k": None}, {}]),
    ([{"k": 1}, {"k": 1}], {"key": ""}, [{"k": 1}]),
    ([{"k": 1}, {"k": 2}], {"key": True}, [{"k": 1}, {"k": 2}]),
])
def test_dedupe(items, flags, expected, ctx):
    assert run("dedupe", items, ctx, **flags) == expected


# ---- groupBy --------------------------------------------------------------------------

def test_group_by_team(ctx):
    assert run("groupBy", ROWS, ctx, key="team") == [
        {"key": "red", "items": [ROWS[0], ROWS[2]], "count": 2},
        {"key": "blue", "items": [ROWS[1], ROWS[4]], "count": 2},
        {"key": "green", "items": [ROWS[3]], "count": 1},
    ]


@pytest.mark.parametrize("items, key, expected", [
    ([{"k": 1}, {"k": "1"}, {"k": 1.0}], "k",
     [{"key": 1, "items": [{"k": 1}, {"k": 1.0}], "count": 2},
      {"key": "1", "items": [{"k": "1"}], "count": 1}]),
    ([{"k": None}, {}, {}], "k",
     [{"key": None, "items": [{"k": None}], "count": 1},
      {"key": js.UNDEFINED, "items": [{}, {}], "count": 2}]),
    ([{"m": {"l": 1}}, {"m": {"l": 1}}], "m.l",
     [{"key": 1, "items": [{"m": {"l": 1}}, {"m": {"l": 1}}], "count": 2}]),
    ([{"true": "x"}, {}], True,
     [{"key": "x", "items": [{"true": "x"}], "count": 1},
      {"key": js.UNDEFINED, "items": [{}], "count": 1}]),
    ([{"k": 1}], " k ", [{"key": 1, "items": [{"k": 1}], "count": 1}]),
])
def test_group_by(items, key, expected, ctx):
    got = run("groupBy", items, ctx, key=key)
    assert got == expected
    assert json_write.json_compact(got) == json_write.json_compact(expected)


@pytest.mark.parametrize("flags", [{}, {"key": ""}, {"key": "  "}])
def test_group_by_requires_a_key(flags, ctx):
    assert error_of("groupBy", ROWS, ctx, **flags) == "groupBy requires --key"


# ---- map ------------------------------------------------------------------------------

@pytest.mark.parametrize("items, positionals, flags, expected", [
    (ROWS[:3], ("label={{name}}/{{team}}", "lvl={{meta.lvl}}", "whole={{meta}}"), {},
     [dict(ROWS[0], label="alpha/red", lvl="2", whole='{"lvl":2}'),
      dict(ROWS[1], label="beta/blue", lvl="1", whole='{"lvl":1}'),
      dict(ROWS[2], label="gamma/red", lvl="3", whole='{"lvl":3}')]),
    (ROWS[:2], (), {"unwrap": "meta"}, [{"lvl": 2}, {"lvl": 1}]),
    ([1, "two", None], (), {"wrap": "value"}, [{"value": 1}, {"value": "two"}, {"value": None}]),
    ([1, "two"], ("kind=num", "label=#{{.}}"), {},
     [{"value": 1, "kind": "num", "label": "#1"}, {"value": "two", "kind": "num", "label": "#two"}]),
    ([1, {"a": 1}, None, [2]], (), {"unwrap": "a"}, [js.UNDEFINED, 1, js.UNDEFINED, js.UNDEFINED]),
    ([{"a": None}, {}], (), {"unwrap": "a"}, [None, js.UNDEFINED]),
    ([{}], ("x={{a}}",), {}, [{"x": ""}]),
    ([[5, 6]], (), {"unwrap": "1"}, [6]),
    ([{"a": 1}], ("b={{a}}", "noequals", "=x", " c =v=w", "d="), {},
     [{"a": 1, "b": "1", "c": "v=w", "d": ""}]),
    ([{"a": 1}], ("x={{a}}",), {"wrap": "w"}, [{"w": {"a": 1}, "x": "1"}]),
    ([[1, 2]], ("n={{length}}", "t={{this}}"), {}, [{"value": [1, 2], "n": "2", "t": "[1,2]"}]),
    ([{"a": None, "b": True, "c": 1.5, "s": "x"}], ("v={{a}}{{b}}{{c}}{{s}}{{missing}}{{ s }}",), {},
     [{"a": None, "b": True, "c": 1.5, "s": "x", "v": "true1.5xx"}]),
    ([{"a": "x"}], ("v={{a | upper}}",), {}, [{"a": "x", "v": ""}]),
    ([{"a": "x"}], ("a={{a}}{{a}}",), {}, [{"a": "xx"}]),
    ([{"b": 1}], ("2=two",), {}, [{"2": "two", "b": 1}]),
    ([1], (), {"wrap": ""}, [1]),
    ([{"a": 1}], (), {"wrap": True, "unwrap": True}, [{"a": 1}]),
    ([{"a": 1}], (), {"wrap": "a", "unwrap": ""}, [{"a": {"a": 1}}]),
])
def test_map(items, positionals, flags, expected, ctx):
    got = run("map", items, ctx, *positionals, **flags)
    assert got == expected
    assert json_write.json_compact(got) == json_write.json_compact(expected)


def test_map_leaves_its_input_unchanged(ctx):
    items = [{"a": 1}]
    run("map", items, ctx, "b=2")
    assert items == [{"a": 1}]


def test_map_refuses_wrap_and_unwrap_together(ctx):
    assert error_of("map", ROWS, ctx, wrap="a", unwrap="b") == "map cannot use both --wrap and --unwrap"
    assert error_of("map", [], ctx, wrap="a", unwrap="b") == "map cannot use both --wrap and --unwrap"


# ---- renderers ------------------------------------------------------------------------

PICKED = [{"id": r["id"], "name": r["name"], "meta": r.get("meta")} for r in ROWS[:3]]


@pytest.mark.parametrize("items, expected", [
    (PICKED, 'id   name   meta     \n---  -----  ---------\n1    alpha  {"lvl":2}\n'
             '2    beta   {"lvl":1}\n3    gamma  {"lvl":3}\n'),
    (["plain", 2], "plain\n2\n"),
    ([], "(no results)\n"),
    ([None, True, [1, 2], {"a": 1}, 1.5, "a\nb"], '\ntrue\n[1,2]\n{"a":1}\n1.5\na\nb\n'),
    ([{"a": 1}, {"b": "x\ny", "a": None}], "a    b  \n---  ---\n1       \n     x y\n"),
    ([{"long column": True}], "long column\n-----------\ntrue       \n"),
    ([{"a": "😀"}, {"a": "é"}], "a  \n---\n😀 \né  \n"),
    ([{}, {}], "\n\n\n\n"),
    ([{"a": 1}, "s", [9]], '{"a":1}\ns\n[9]\n'),
    ([{"a": 1}] * 20 + ["str"], "a  \n---\n" + "1  \n" * 20 + "   \n"),
    ([{"a": 1}] * 20 + [{"b": 2}], "a  \n---\n" + "1  \n" * 20 + "   \n"),
    ([{"length": 1}] * 20 + ["abcd", [1, 2]], "length\n------\n" + "1     \n" * 20 + "4     \n2     \n"),
    ([{"b": js.UNDEFINED}], "b  \n---\n   \n"),
    ([{"b": js.UNDEFINED, "a": 1}, {"c": [js.UNDEFINED, {"x": js.UNDEFINED}]}],
     "b    a    c        \n---  ---  ---------\n     1             \n          [null,{}]\n"),
])
def test_render_table(items, expected):
    assert data.render_table(items) == expected


# The original's `pick` sets every listed field (`out[f] = item[f]`): a field the item lacks is
# an own property holding undefined. JSON leaves it out; what lists keys (the table) shows it.
PICK_THEN = [
    ("pick b | table", "b  \n---\n   \n3  \n   \n"),
    ("pick a,missing | table", "a    missing\n---  -------\n1           \n2           \n            \n"),
    ("pick b | sort --key b | table", "b  \n---\n3  \n   \n   \n"),
    ("pick b | where b=null | table", "b  \n---\n   \n   \n"),
    ("pick b | dedupe | table", "b  \n---\n   \n3  \n"),
    ("pick b | dedupe --key b | table", "b  \n---\n   \n3  \n"),
    ("pick b | groupBy --key b | table",
     "key  items      count\n---  ---------  -----\n     [{},{}]    2    \n3    [{\"b\":3}]  1    \n"),
    ("pick b | map x={{b}} | table", "b    x  \n---  ---\n        \n3    3  \n        \n"),
    ("pick b | map --wrap w | table", 'w      \n-------\n{}     \n{"b":3}\n{}     \n'),
    ("pick b | pick c,b | table", "c    b  \n---  ---\n        \n     3  \n        \n"),
    ("pick b | json", '[\n  {},\n  {\n    "b": 3\n  },\n  {}\n]\n'),
    ("pick b | groupBy --key b | json",
     '[\n  {\n    "items": [\n      {},\n      {}\n    ],\n    "count": 2\n  },\n  {\n    "key": 3,'
     '\n    "items": [\n      {\n        "b": 3\n      }\n    ],\n    "count": 1\n  }\n]\n'),
]


def _rendered(stages: str, items: list, ctx) -> str:
    """`items` through `stages` ("cmd --flag v word | ... | renderer"), rendered."""
    *commands, renderer = [shlex.split(stage) for stage in stages.split(" | ")]
    for name, *words in commands:
        flags = {words[i][2:]: words[i + 1] for i in range(len(words)) if words[i].startswith("--")}
        positionals = tuple(w for i, w in enumerate(words)
                            if not w.startswith("--") and not (i and words[i - 1].startswith("--")))
        items = run(name, items, ctx, *positionals, **flags)
    return data.render(renderer[0], items)


@pytest.mark.parametrize("stages, expected", PICK_THEN)
def test_what_follows_a_pick_of_an_absent_field(stages, expected, ctx):
    assert _rendered(stages, [{"a": 1}, {"a": 2, "b": 3}, {}], ctx) == expected


# The original's `map --unwrap k` yields `item[k]`, undefined for an item without `k` (or one
# that is no object): a bare undefined item. JSON shows null; `map x=..` spreads it into
# {value: undefined, ...} and `map --wrap w` into {w: undefined}, both left out of JSON; the
# comparisons (where, sort, dedupe, groupBy) tell it from null as JavaScript does.
UNWRAP_THEN = [
    ("map --unwrap name | table", "1\n\n\n\n"),
    ("map --unwrap name | map x={{a}} | table",
     "value  x  \n-----  ---\n1         \n          \n          \n          \n"),
    ("map --unwrap name | map --wrap w | table", "w  \n---\n1  \n   \n   \n   \n"),
    ("map --unwrap name | map --wrap w | json",
     '[\n  {\n    "w": 1\n  },\n  {},\n  {\n    "w": null\n  },\n  {}\n]\n'),
    ("map --unwrap name | map x={{.}} | json",
     '[\n  {\n    "value": 1,\n    "x": "1"\n  },\n  {\n    "x": ""\n  },\n  {\n    "value": null,'
     '\n    "x": ""\n  },\n  {\n    "x": ""\n  }\n]\n'),
    ("map --unwrap name | template <{{.}}> | json", '[\n  "<1>",\n  "<>",\n  "<>",\n  "<>"\n]\n'),
    ("map --unwrap name | where a!=1 | json", "[\n  1,\n  null,\n  null,\n  null\n]\n"),
    ("map --unwrap name | sort | json", "[\n  1,\n  null,\n  null,\n  null\n]\n"),
    ("map --unwrap name | sort --desc true | json", "[\n  null,\n  null,\n  null,\n  1\n]\n"),
    ("map --unwrap name | sort --key a | json", "[\n  1,\n  null,\n  null,\n  null\n]\n"),
    ("map --unwrap name | dedupe | json", "[\n  1,\n  null,\n  null\n]\n"),
    ("map --unwrap name | dedupe --key a | json", "[\n  1\n]\n"),
    ("map --unwrap name | groupBy --key a | json",
     '[\n  {\n    "items": [\n      1,\n      null,\n      null,\n      null\n    ],\n'
     '    "count": 4\n  }\n]\n'),
    ("map --unwrap name | pick a | json", "[\n  1,\n  null,\n  null,\n  null\n]\n"),
    ("map --unwrap name | head --n 2 | map --wrap w | json",
     '[\n  {\n    "w": 1\n  },\n  {}\n]\n'),
    ("map --unwrap name | json", "[\n  1,\n  null,\n  null,\n  null\n]\n"),
]


@pytest.mark.parametrize("stages, expected", UNWRAP_THEN)
def test_what_follows_an_unwrap_of_an_absent_field(stages, expected, ctx):
    assert _rendered(stages, [{"name": 1}, True, {"name": None}, {}], ctx) == expected


def test_a_lone_undefined_item_is_stored_as_the_text_undefined(ctx):
    """As the original stores it (no JSON text): state.get refuses it as JSON.parse does, and
    diff.last reads it as nothing stored."""
    assert state_cmds.state_set(Args(positionals=("k",)), [js.UNDEFINED], ctx) == [js.UNDEFINED]
    with pytest.raises(CommandError, match=r"""Unexpected token 'u', "undefined\n" is not"""):
        state_cmds.state_get(Args(positionals=("k",)), [], ctx)
    for _ in range(2):
        got = state_cmds.diff_last(Args(positionals=("k",)), [js.UNDEFINED], ctx)
        assert got == [{"kind": "diff.last", "key": "k", "changed": True, "before": None,
                        "after": js.UNDEFINED}]


@pytest.mark.parametrize("items, expected", [
    ([], "[]\n"),
    ([{"id": 1, "name": "alpha"}, {"id": 2, "name": "beta"}],
     '[\n  {\n    "id": 1,\n    "name": "alpha"\n  },\n  {\n    "id": 2,\n    "name": "beta"\n  }\n]\n'),
    ([1.0, "é", None, {}], '[\n  1,\n  "é",\n  null,\n  {}\n]\n'),
])
def test_render_json(items, expected):
    assert data.render_json(items) == expected


_WHERE_ALPHABET = "ab.9_ =!<>x\n\r\t\u2028\u2029\xa0\ufeff\u3000\x85-"


@given(st.text(alphabet=_WHERE_ALPHABET, max_size=12))
def test_where_parts_reads_what_where_re_matches(expr):
    from vm.host.commands.data import WHERE_RE, where_parts

    match = WHERE_RE.match(expr)
    assert where_parts(expr) == (match.groups() if match else None)


@pytest.mark.parametrize("expr", ["a==", "a= ", "a=\n", "a =\u2028b", "a<=\xa0", "x.y >= 3",
                                  "a=b\n", "=1", "a", "a!", "a!=\ufeff", "a=\ufeff\n"])
def test_where_parts_on_the_edges(expr):
    from vm.host.commands.data import WHERE_RE, where_parts

    match = WHERE_RE.match(expr)
    assert where_parts(expr) == (match.groups() if match else None)
