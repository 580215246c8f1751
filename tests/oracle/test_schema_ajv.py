"""Our JSON Schema dialect against the library the original compiles and applies schemas with
(its own install's Ajv, with its shared instance's options), on generated schemas: whether a
schema compiles, and the first error each value gets. The schemas are drawn where the two
readings are easiest to tell apart: `$ref`s with keywords beside them, `$id`s that move the
base of the references under them, types with and without keywords of their own group.

Skips with the reason when the original (LOBSTER_REFERENCE) or Node is not available."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from differential.compare import reference_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vm.core.schema import SchemaRecursion, schema_error
from vm.core.schema_errors import first_error

REF, WHY = reference_command()
pytestmark = [pytest.mark.slow,  # docs/testing.md
              pytest.mark.skipif(REF is None, reason=WHY or "")]

DRIVER = Path(__file__).with_name("ajv_driver.cjs")


@pytest.fixture(scope="module")
def ajv():
    modules = Path(os.path.realpath(REF[0])).parents[3]  # node_modules/@clawdbot/lobster/dist/x
    if not (modules / "ajv").is_dir():
        modules = Path(REF[0]).resolve().parent.parent  # node_modules/.bin/lobster
    proc = subprocess.Popen(["node", str(DRIVER), str(modules)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)

    def ask(schema, values):
        proc.stdin.write(json.dumps([schema, values]) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    yield ask
    proc.stdin.close()
    proc.wait(timeout=10)


DEFINITIONS = {"n": {"type": "number", "maximum": 10}, "s": {"type": "string", "minLength": 2},
               "o": {"type": "object", "required": ["k"]},
               "r": {"$ref": "#/definitions/n", "minimum": 1}}
VALUES = [1, 7, 20, 2.5, "x", "abcd", {}, {"k": 1}, None, [1]]
IDS = ["http://x/y", "http://x/z", "z", "w/", "#foo", "sub/q"]
REFS = ["#", "#/", "", "#foo", "z", "http://x/z", "http://x/y#", "#/definitions/d",
        "#/properties/a", "#/properties", "http://x/z#/definitions/d", "w/q", "#/items"]


BRANCHES = [[{"minimum": 5}, {"type": "string"}],
            [{"type": "object", "required": ["k"]}, {"$ref": "#/definitions/s"}],
            [{"minimum": 0}, {"type": "number"}], [{"anyOf": [{"maxLength": 1}, {"enum": [7]}]}]]


def _beside_a_ref():
    keywords = st.fixed_dictionaries({}, optional={
        "$ref": st.sampled_from([f"#/definitions/{d}" for d in DEFINITIONS]),
        "type": st.sampled_from(["number", "integer", "string", "object", ["string"]]),
        "minimum": st.sampled_from([0, 5]), "maxLength": st.just(3),
        "required": st.just(["z"]), "enum": st.just([1, "ab", 20]),
        "not": st.just({"type": "string"}),
        "anyOf": st.sampled_from(BRANCHES), "oneOf": st.sampled_from(BRANCHES)})
    return st.fixed_dictionaries({"definitions": st.just(DEFINITIONS), "properties":
                                  st.fixed_dictionaries({"a": keywords, "b": keywords})})


def _scoped(depth: int):
    children = st.deferred(lambda: _scoped(depth - 1)) if depth else st.just({})
    return st.fixed_dictionaries({}, optional={
        "$id": st.sampled_from(IDS), "$ref": st.sampled_from(REFS),
        "type": st.sampled_from(["string", "object", "number"]),
        "properties": st.dictionaries(st.sampled_from(["a", "b"]), children, max_size=2),
        "definitions": st.dictionaries(st.sampled_from(["d", "e"]), children, max_size=2),
        "items": children})


def _ours(schema, values):
    refused = schema_error(schema)
    if refused is not None:
        return refused, []
    out = []
    for value in values:
        try:
            found = first_error(schema, value)
        except SchemaRecursion as exc:
            found = ("/", str(exc))
        out.append(None if found is None else list(found))
    return None, out


@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_beside_a_ref(), st.lists(st.sampled_from(VALUES), min_size=2, max_size=2))
def test_keywords_beside_a_ref_and_combinators_give_ajv_s_first_error(ajv, schema, pair):
    values = [{"a": a, "b": b} for a, b in (pair, pair[::-1])]
    theirs = ajv(schema, values)
    refused, ours = _ours(schema, values)
    assert (refused is None) == (theirs["compiled"] is None), (schema, refused, theirs)
    assert ours == theirs["first"], (schema, values)


def _subschemas(schema):
    if isinstance(schema, dict):
        yield schema
        for key in ("properties", "definitions"):
            for sub in (schema.get(key) or {}).values():
                yield from _subschemas(sub)
        if "items" in schema:
            yield from _subschemas(schema["items"])


@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_scoped(3))
def test_references_resolve_under_the_ids_around_them_as_ajv_resolves_them(ajv, schema):
    values = [1, "x", {"a": 1, "b": {"a": "y"}}]
    theirs = ajv(schema, values)
    refused, ours = _ours(schema, values)
    if refused is not None and "would resolve it to another schema" in refused \
            and any("$id" in s and "$ref" in s for s in _subschemas(schema)):
        return  # refused on purpose (docs/differences.md): draft-07 would apply it otherwise
    assert (refused is None) == (theirs["compiled"] is None), (schema, refused, theirs)
    if refused is None:
        assert ours == theirs["first"], schema
