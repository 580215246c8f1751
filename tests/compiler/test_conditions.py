"""Conditions: when/condition text -> plain-data trees (lobsterc.syntax.expr) -> truth (vm.core.condition)."""

from __future__ import annotations

import math
import subprocess
import sys

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobsterc.diagnostics import CompileError
from lobsterc.syntax.expr import compile_condition, condition_refs
from lobsterc.syntax.source import Span
from vm.core.condition import MISSING, deep_equal, evaluate, js_number, same_value, truthy

RESULTS = {
    "info": {"id": "info", "json": {"n": 5, "s": "abc", "ok": True, "list": [1, 2], "obj": {"a": 1, "b": [2]},
                                    "ns": "5", "blank": " ", "hex": "0x10", "zero": 0, "nul": None, "f": 5.0}},
    "gate": {"id": "gate", "approved": True},
    "skip": {"id": "skip", "skipped": True},
    "r-1": {"id": "r-1", "response": {"decision": "approve"}},
}


def resolve(step_id: str, path: list[str]):
    if step_id not in RESULTS:
        raise KeyError(f"Unknown step reference: {step_id}.{'.'.join(path)}")
    value = RESULTS[step_id]
    for segment in path:
        if isinstance(value, dict) and segment in value:
            value = value[segment]
        elif isinstance(value, list) and segment.isdigit() and int(segment) < len(value):
            value = value[int(segment)]
        else:
            return MISSING
    return value


def run(value) -> bool:
    return evaluate(compile_condition(value, None), resolve)


TREES = [
    (None, ["const", True]),
    (True, ["const", True]),
    (False, ["const", False]),
    (" true ", ["const", True]),
    ("false", ["const", False]),
    ("$a.json", ["ref", "a", ["json"]]),
    ("$step.json.a.0", ["ref", "step", ["json", "a", "0"]]),
    ("!$a.ok", ["not", ["ref", "a", ["ok"]]]),
    ("$a.x == approve", ["cmp", "==", ["ref", "a", ["x"]], ["lit", "approve"]]),
    ("$a.x != 'it''s'", None),  # two adjacent strings: an error, checked below
    ("$a.x >= -1.5", ["cmp", ">=", ["ref", "a", ["x"]], ["lit", -1.5]]),
    ("$a.x == 19000000000000000000", ["cmp", "==", ["ref", "a", ["x"]], ["lit", 1.9e19]]),
    ('"a\\"b" == $a.x', ["cmp", "==", ["lit", 'a"b'], ["ref", "a", ["x"]]]),
    ("$a.x == null", ["cmp", "==", ["ref", "a", ["x"]], ["lit", None]]),
    ("$a.x == true-ish", ["cmp", "==", ["ref", "a", ["x"]], ["lit", "true-ish"]]),
    ("$a.b || $c.d && $e.f", ["or", ["ref", "a", ["b"]], ["and", ["ref", "c", ["d"]], ["ref", "e", ["f"]]]]),
    ("$a.b && $c.d && $e.f", ["and", ["and", ["ref", "a", ["b"]], ["ref", "c", ["d"]]], ["ref", "e", ["f"]]]),
    ("($a.b || $c.d) && !(1 < 2)", ["and", ["or", ["ref", "a", ["b"]], ["ref", "c", ["d"]]],
                                    ["not", ["cmp", "<", ["lit", 1], ["lit", 2]]]]),
    ("'\\n\\\\'", ["lit", "n\\"]),
]


@pytest.mark.parametrize("value,tree", [t for t in TREES if t[1] is not None])
def test_compiled_trees(value, tree) -> None:
    compiled = compile_condition(value, None)
    assert compiled == tree
    assert msgpack.unpackb(msgpack.packb(compiled)) == tree  # plain data: survives bytecode


EVALUATIONS = [
    ('$info.json.s == "abc"', True),
    ("$info.json.s != 'abc'", False),
    ("$info.json.n >= 5 && $info.json.n < 6", True),
    ("!$info.json.ok || $info.json.n > 100", False),
    ("($info.json.ok && $info.json.n == 5) || false", True),
    ("$info.json.ok", True),
    ("$info.json.s == abc", True),
    ("$info.json.list == $info.json.list", True),
    ("$info.json.obj == $info.json.obj", True),
    ("$info.json.n == 5.0", True),
    ("$info.json.f == 5", True),
    ('$info.json.n == "5"', False),  # no coercion
    ("$info.json.ns == 5", False),
    ("$info.json.ok == 1", False),
    ("$info.json.nul == null", True),
    ("$info.json.missing == null", False),  # undefined is not null
    ("$info.json.missing != null", True),
    ("$info.json.missing", False),
    ("!$info.json.missing", True),
    ("$skip.json", False),
    ("$skip.skipped == true", True),
    ("$gate.approved", True),
    ("$r-1.response.decision == approve", True),
    ("$info.json.list.1 == 2", True),
    ("$info.json.zero", False),
    ("$info.json.list", True),
    ("$info.json.ns > 4", True),  # numeric strings compare as numbers
    ("$info.json.ns <= '5'", True),
    ("$info.json.hex == 16", False),
    ("$info.json.hex > 15", True),
    ("$info.json.blank < 1", False),  # blank strings are not numbers
    ("$info.json.s > 1", False),
    ("$info.json.ok > 0", False),  # booleans never order
    ("$info.json.nul < 1", False),
    ("$info.json.missing >= 0", False),
    ("1 < 2", True),
    ("'abc' < 'abd'", False),  # strings that are not numbers never order
    ("-0 == 0", False),  # SameValue
    ("'' || 0", False),
    ("null", False),
    ("'x'", True),
]


@pytest.mark.parametrize("text,expected", EVALUATIONS)
def test_evaluation(text: str, expected: bool) -> None:
    assert run(text) is expected


def test_both_sides_of_and_or_are_always_evaluated() -> None:
    seen: list[str] = []

    def tracking(step_id: str, path: list[str]):
        seen.append(step_id)
        return resolve(step_id, path)

    evaluate(compile_condition("$skip.json && $info.json", None), tracking)
    evaluate(compile_condition("$gate.approved || $info.json", None), tracking)
    assert seen == ["skip", "info", "gate", "info"]
    with pytest.raises(KeyError, match="Unknown step reference: nope.json"):
        run("!$nope.json || true")  # strict refs, even under ! and behind a true side


def test_semantic_helpers() -> None:
    assert deep_equal({"a": [1, {"b": 2}], "c": None}, {"c": None, "a": [1, {"b": 2}]})
    assert not deep_equal({"a": 1}, {"a": 1, "b": 2})
    assert not deep_equal([1, 2], [2, 1])
    assert same_value(math.nan, math.nan) and not same_value(0.0, -0.0)
    assert not same_value(True, 1) and not same_value(None, MISSING) and same_value(MISSING, MISSING)
    assert [truthy(v) for v in ("", 0, -0.0, math.nan, None, MISSING, [], {}, "0", 1)] == [False] * 6 + [True] * 4
    assert js_number(" 12 ") == 12 and js_number("1e3") == 1000 and js_number("0b11") == 3
    assert js_number("-Infinity") == -math.inf and math.isnan(js_number("1_0")) and math.isnan(js_number("-0x1"))
    assert math.isnan(js_number("inf")) and js_number(".5") == 0.5 and js_number("5.") == 5


def test_condition_refs() -> None:
    tree = compile_condition("$b.x == $a.y || !$b.z && ($c-1.json > 1)", None)
    assert condition_refs(tree) == ["b", "a", "c-1"]
    assert condition_refs(["const", True]) == []


ERRORS = [
    ("abc", 1),
    ("approve == $a.x", 1),
    ("$a.x == 1 == 2", 11),
    ("$a.x = 1", 6),
    ("$a", 1),
    ("$a.x &", 6),
    ("$a.x ==", 8),
    ("($a.x", 6),
    ("$a.x $b.y", 6),
    ("'unterminated", 1),
    ("$a.x == 1.", 10),
    ("$a.x.", 5),
    ("!abc", 2),
    ("$a.x != 'it''s'", 13),
]


@pytest.mark.parametrize("text,column", ERRORS)
def test_unsupported_condition_points_at_the_offending_token(text: str, column: int) -> None:
    # the value sits at line 4, column 11 of its file, unquoted
    span = Span("wf.lobster", 4, 11, 4, 11 + len(text))
    with pytest.raises(CompileError) as info:
        compile_condition(text, span)
    diag = info.value.first
    assert diag.code == "E212" and diag.kind == "runtime_error"
    assert diag.message == f"Unsupported condition: {text.strip()}"
    assert (diag.span.line, diag.span.col) == (4, 11 + column - 1)


def test_error_columns_inside_quoted_and_padded_values() -> None:
    text = "  $a.x ="  # when: "  $a.x =" -> the value starts after the quote
    span = Span("wf.lobster", 2, 11, 2, 11 + len(text) + 2)
    with pytest.raises(CompileError) as info:
        compile_condition(text, span)
    assert info.value.first.message == "Unsupported condition: $a.x ="
    assert info.value.first.span.col == 11 + 1 + 7
    multi = Span("wf.lobster", 2, 11, 3, 5)
    with pytest.raises(CompileError) as info:
        compile_condition("$a.x\n==", multi)
    assert info.value.first.span == multi


def test_empty_expression_and_bad_types() -> None:
    for value in ("", "   "):
        with pytest.raises(CompileError, match="^Unsupported condition: $"):
            compile_condition(value, None)
    for value in (1, 0, [], {"a": 1}, 1.5):
        with pytest.raises(CompileError) as info:
            compile_condition(value, Span("f", 1, 1, 1, 2))
        assert info.value.first.message == "Unsupported condition type" and info.value.first.code == "E212"


def test_deep_nesting_is_refused_not_crashing() -> None:
    with pytest.raises(CompileError, match="nested deeper"):
        compile_condition("!" * 500 + "$a.b", None)
    assert run("!" * 100 + "$info.json.ok") is True
    assert run("(" * 500 + "$info.json.ok" + ")" * 500) is True  # parentheses add no depth


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("$ab_-.019 ()!&|=<>'\"\\tnulrfx\n")), max_size=40) | st.text(max_size=30))
def test_any_text_compiles_or_raises_compile_error(text: str) -> None:
    try:
        tree = compile_condition(text, Span("f", 1, 1, 1, 1 + len(text)))
    except CompileError as exc:
        assert exc.first.code == "E212"
        return
    assert msgpack.unpackb(msgpack.packb(tree)) == tree
    try:
        evaluate(tree, resolve)
    except KeyError:
        pass  # unknown step ids are the resolver's error


def test_vm_condition_never_imports_lark_or_lobsterc() -> None:
    code = "import sys, vm.core.condition; assert not any(m == 'lark' or m.startswith(('lark.', 'lobsterc')) for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
