"""The compiled schema (lobsterc.check.types) must give jsonschema's verdict and errors on every
instance; the schema file must be the field table's."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from lobsterc.check.types import compile_schema, without_refs, workflow_schema
from lobsterc.load.fields import SHAPES

WORKFLOW = without_refs(workflow_schema())
WORKFLOW_CHECK = compile_schema(WORKFLOW)
WORKFLOW_VALIDATOR = Draft202012Validator(WORKFLOW)

# the values the workflow schema cares about: its field names (the field table) and enum members,
# plus odd numbers
_KEYS = st.sampled_from(sorted({f.name for shape in SHAPES for f in shape.fields} | {"x"}))
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=3)
    | st.sampled_from([0.0, 1.0, 2.5, -1.5, 1e300, math.inf, -math.inf, math.nan])
    | st.sampled_from(["", "a", "all", "any", "stop", "continue", "skip_rest", "fixed",
                       "exponential", "write", "true", "s1"])
)
_JSONISH = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


def _words(error) -> str:
    """jsonschema's message, with a refused oneOf worded by the types its alternatives want."""
    if error.validator == "oneOf" and error.context:
        kinds = sorted({str(sub.schema.get("type")) for sub in error.context if "type" in sub.schema})
        if kinds:
            return f"{error.instance!r} must be one of the types {', '.join(kinds)}"
    return error.message


def _by_path(errors: list) -> list:
    return sorted(errors, key=lambda error: repr(error[0]))  # stable: a value's own order stays


def _agrees(check, validator, instance) -> None:
    assert check(instance) == validator.is_valid(instance), instance
    ours = [(path, message) for path, message, _ in check.errors(instance, ())]
    theirs = [(tuple(e.absolute_path), _words(e)) for e in validator.iter_errors(instance)]
    assert _by_path(ours) == _by_path(theirs), instance


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_JSONISH)
def test_any_value_gets_the_verdict_jsonschema_gives(instance) -> None:
    _agrees(WORKFLOW_CHECK, WORKFLOW_VALIDATOR, instance)


def _valid_workflow() -> dict:
    return {
        "name": "w",
        "args": {"n": {"default": 2, "description": "how many"}},
        "env": {"A": "1"},
        "cost_limit": {"max_usd": 1.5},
        "steps": [
            {"id": "a", "run": "echo hi", "timeout_ms": 100, "retry": {"max": 2, "backoff": "fixed"}},
            {"id": "b", "pipeline": "exec --json 'echo 1' | head 1", "when": "$a.exitCode == 0"},
            {"id": "c", "approval": {"prompt": "ok?", "items": [], "require_different_approver": True}},
            {"id": "d", "input": {"prompt": "why", "responseSchema": {"type": "object"}}},
            {"id": "e", "for_each": "$a.json", "steps": [{"id": "f", "run": "true"}], "batch_size": 2},
            {"id": "g", "parallel": {"wait": "all", "branches": [{"id": "h", "run": "true"}]}},
            {"id": "i", "workflow": "sub.lobster", "workflow_args": {"k": "v"}, "on_error": "continue"},
        ],
    }


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def test_the_valid_workflow_is_valid() -> None:
    assert WORKFLOW_VALIDATOR.is_valid(_valid_workflow())
    assert WORKFLOW_CHECK(_valid_workflow())


PATHS = list(_paths(_valid_workflow()))


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PATHS), _JSONISH, st.booleans())
def test_a_valid_workflow_with_one_value_replaced_or_removed(path, value, remove) -> None:
    document = _valid_workflow()
    if not path:
        document = value
    else:
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        if remove:
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
    _agrees(WORKFLOW_CHECK, WORKFLOW_VALIDATOR, document)


@pytest.mark.parametrize(
    ("schema", "instance", "valid"),
    [
        ({"type": "integer"}, 1.0, True),
        ({"type": "integer"}, 1.5, False),
        ({"type": "integer"}, True, False),
        ({"type": "number"}, False, False),
        ({"type": ["string", "null"]}, None, True),
        ({"enum": [1]}, True, False),
        ({"enum": [True]}, 1, False),
        ({"enum": [1]}, 1.0, True),
        ({"enum": [[1, {"a": None}]]}, [1.0, {"a": None}], True),
        ({"minimum": 0}, math.nan, True),
        ({"minimum": 0}, -1, False),
        ({"maximum": 0}, True, True),
        ({"minLength": 2}, "é", False),
        ({"minItems": 1}, [], False),
        ({"required": ["a"]}, [], True),
        ({"additionalProperties": False, "properties": {"a": {}}}, {"a": 1}, True),
        ({"additionalProperties": False, "properties": {"a": {}}}, {"b": 1}, False),
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1, False),
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1.5, True),
        (False, 0, False),
        (True, 0, True),
    ],
)
def test_keyword_edge_cases_as_jsonschema_has_them(schema, instance, valid) -> None:
    assert Draft202012Validator(schema).is_valid(instance) is valid
    assert compile_schema(schema)(instance) is valid
    _agrees(compile_schema(schema), Draft202012Validator(schema), instance)


@pytest.mark.parametrize("schema", [{"pattern": "a"}, {"anyOf": []}, {"$ref": "#/x"},
                                    {"patternProperties": {}, "additionalProperties": False}])
def test_unsupported_keywords_are_refused(schema) -> None:
    with pytest.raises(ValueError, match="not supported|not a schema|patternProperties"):
        compile_schema(schema)


def test_references_with_validating_siblings_are_not_inlined() -> None:
    with pytest.raises(ValueError, match="cannot inline"):
        without_refs({"$defs": {"a": {"type": "string"}}, "properties": {
            "x": {"$ref": "#/$defs/a", "minLength": 1}}})


def test_the_schema_file_is_the_field_tables() -> None:
    """lobsterc/workflow.schema.json is generated from lobsterc.load.fields; after a change to
    the table, regenerate it with `lobsterc schema > lobsterc/workflow.schema.json`."""
    import json
    from importlib import resources

    from lobsterc.load.fields import workflow_schema as generated

    text = (resources.files("lobsterc") / "workflow.schema.json").read_text(encoding="utf-8")
    assert text == json.dumps(generated(), indent=2, ensure_ascii=False) + "\n"
