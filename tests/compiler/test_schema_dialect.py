"""One JSON Schema dialect for input gates: draft-07, and what it would ignore is found."""

from __future__ import annotations

import pytest

from vm.core.schema import ignored_keywords, schema_error
from vm.core.schema_errors import all_errors, first_error


def test_prefix_items_is_ignored_by_the_dialect():
    schema = {"type": "array", "prefixItems": [{"type": "integer"}]}
    assert ignored_keywords(schema) == [("/", "prefixItems")]
    assert first_error(schema, ["x"]) is None  # as the original's Ajv: not checked
    assert schema_error(schema) is None


def test_ignored_keywords_are_found_in_nested_schemas_not_in_property_names():
    schema = {
        "type": "object",
        "properties": {"prefixItems": {"type": "string"},
                       "a/b": {"type": "array", "items": {"$defs": {}}}},
        "anyOf": [{"unevaluatedProperties": False}],
        "items": [{"type": "string"}, {"dependentRequired": {}}],
        "not": {"minContains": 1},
    }
    assert sorted(ignored_keywords(schema)) == [
        ("/anyOf/0", "unevaluatedProperties"),
        ("/items/1", "dependentRequired"),
        ("/not", "minContains"),
        ("/properties/a~1b/items", "$defs"),
    ]


def test_draft07_schema_is_clean():
    schema = {"type": "object", "required": ["env"], "properties": {
        "env": {"enum": ["prod", "staging"]}, "n": {"type": "integer", "minimum": 1}},
        "additionalProperties": False, "definitions": {"x": {"const": 1}}}
    assert ignored_keywords(schema) == []
    assert first_error(schema, {"env": "prd"}) == ("/env", "must be equal to one of the allowed values")


# Error order and wording, as the original (2026.9.13, Ajv) gives them; each expectation was
# recorded from the original: `llm.invoke --output-schema` lists every error, an input gate
# reports the first one.
_MIXED = {"type": "object", "maxProperties": 2, "required": ["zz"], "properties": {
    "s": {"maxLength": 2, "pattern": "^z", "enum": ["a"]},
    "n": {"maximum": 3, "multipleOf": 2, "not": {"type": "number"}},
    "arr": {"minItems": 5, "uniqueItems": True, "items": {"type": "integer"}},
    "e": {"const": "w", "anyOf": [{"type": "number"}, {"type": "boolean"}]}}}


def _listed(schema, value) -> str:
    return "; ".join(f"{pointer} {message}" for pointer, message in all_errors(schema, value))


def test_every_error_comes_in_the_originals_order():
    assert _listed(_MIXED, {"s": "abcdef", "n": 15, "arr": [1, 1, "x"], "e": "q"}) == (
        "/ must NOT have more than 2 properties; / must have required property 'zz'; "
        "/s must be equal to one of the allowed values; /s must NOT have more than 2 characters; "
        "/s must match pattern \"^z\"; /n must NOT be valid; /n must be <= 3; "
        "/n must be multiple of 2; /arr must NOT have fewer than 5 items; /arr/2 must be integer; "
        "/arr must NOT have duplicate items (items ## 1 and 0 are identical); "
        "/e must be equal to constant; /e must be number; /e must be boolean; "
        "/e must match a schema in anyOf")


def test_property_names_extra_properties_and_one_of_are_listed_like_ajv():
    schema = {"type": "object", "additionalProperties": False,
              "propertyNames": {"maxLength": 1, "pattern": "^[a-y]"},
              "properties": {"b": {"uniqueItems": True}, "zz": {"type": "string"}},
              "patternProperties": {"^y": {"type": "number"}},
              "oneOf": [{"required": ["q"]}, {"type": "array"}]}
    value = {"zz": 1, "b": [{"q": 1}, {"q": 1}], "x": 3, "y": "s", "www": 1}
    assert _listed(schema, value) == (
        "/ must have required property 'q'; / must be array; "
        "/ must match exactly one schema in oneOf; / must NOT have more than 1 characters; "
        "/ must match pattern \"^[a-y]\"; / property name must be valid; "
        "/ must NOT have more than 1 characters; / property name must be valid; "
        "/ must NOT have additional properties; / must NOT have additional properties; "
        "/b must NOT have duplicate items (items ## 0 and 1 are identical); /zz must be string; "
        "/y must be number")


def test_nested_errors_follow_the_schemas_property_order():
    schema = {"type": "object", "required": ["z"], "properties": {
        "a": {"type": "string"}, "b": {"type": "object", "properties": {"c": {"type": "string"}}},
        "d": {"type": "array", "items": {"type": "number"}}}}
    assert _listed(schema, {"a": 1, "b": {"c": None}, "d": [1, "x"]}) == (
        "/ must have required property 'z'; /a must be string; /b/c must be string; "
        "/d/1 must be number")


def test_the_first_error_is_a_keyword_of_no_type_before_one_of_the_values_type():
    schema = {"maxLength": 2, "enum": ["a"], "uniqueItems": True, "items": {"type": "integer"},
              "not": {"type": "number"}}
    for value in ("abcdef", [1, 1, "x"], {"a": [2, 2]}):
        assert first_error(schema, value) == ("/", "must be equal to one of the allowed values")


def test_an_enum_is_non_empty_and_unique_as_ajv_holds_it():
    assert schema_error({"enum": []}) is not None
    assert schema_error({"properties": {"a": {"enum": ["x", "x"]}}}) is not None
    assert schema_error({"enum": [1, 1.0]}) is not None
    assert schema_error({"enum": [1, True]}) is None
    assert schema_error({"anyOf": [{"enum": [None]}]}) is None


def test_infinity_is_an_integer_as_ajv_checks_one():
    inf = float("inf")
    assert first_error({"type": "integer"}, inf) is None
    assert first_error({"type": "integer"}, -inf) is None
    assert first_error({"type": "integer", "maximum": 5}, inf) == ("/", "must be <= 5")
    assert first_error({"multipleOf": 2}, inf) == ("/", "must be multiple of 2")
    assert first_error({"type": "integer"}, 1.5) == ("/", "must be integer")


def test_the_whole_schema_is_reached_as_the_shared_ajv_reaches_it():
    # `ask`, input requests and workflow inputs share an Ajv that does not keep the schemas
    # it compiles: only `#` (or `#/`) reaches the whole schema, and only under an $id
    recursive = {"type": "object", "properties": {"child": {"$ref": "#"}}}
    assert "only `#` reaches the whole schema" in schema_error(recursive)
    assert schema_error({**recursive, "$id": "http://example.com/tree"}) is None
    assert schema_error({"$id": "http://x/y", "properties": {"a": {"$ref": "http://x/y#"}}})
    assert schema_error({"properties": {"a": {"$ref": ""}}})
    # inside a subschema with its own $id, `#` is that subschema
    assert schema_error({"properties": {"a": {"$id": "http://x/z", "type": "object",
                                              "properties": {"b": {"$ref": "#"}}}}}) is None
    # a definition no compile reaches is never resolved
    assert schema_error({"definitions": {"d": {"$ref": "#"}}}) is None
    # llm.invoke's Ajv keeps its schemas: there the recursion resolves
    assert schema_error(recursive, keeps_schemas=True) is None


def test_a_ring_of_schemas_holding_only_a_ref_is_refused_where_a_compile_meets_it():
    ring = {"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}}
    assert schema_error(ring) is None  # unused
    used = {**ring, "properties": {"x": {"$ref": "#/definitions/a"}}}
    assert "leads back to itself" in schema_error(used)
    assert "leads back to itself" in schema_error(used, keeps_schemas=True)
    assert "leads back to itself" in schema_error({"items": {"$ref": "#/items"}})
    # a schema that constrains something besides its $ref ends the chain: a real recursion
    assert schema_error({"not": {"$ref": "#/definitions/a"}, "definitions": {
        "a": {"type": "string", "$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}}) \
        is None


def test_references_are_read_against_the_base_the_ids_around_them_make():
    # inside a subschema with an $id, `#` and `#/...` are that subschema (as Ajv reads them)
    scoped = {"$id": "http://x/z", "type": "object", "properties": {"b": {"$ref": "#"}},
              "definitions": {"d": {"type": "string"}}}
    assert schema_error({"properties": {"a": scoped}}) is None
    assert schema_error({"properties": {"a": {**scoped, "properties": {
        "b": {"$ref": "#/definitions/d"}}}}}) is None
    assert schema_error({"properties": {"a": {**scoped, "properties": {
        "b": {"$ref": "#/properties/a"}}}}})  # the subschema has no property a
    # a subschema holding only a $ref that names itself through its own $id: a ring
    assert "leads back to itself" in schema_error(
        {"properties": {"a": {"$id": "http://x/z", "$ref": "#"}}})
    # `#/` is `#`, where the whole schema is reachable
    assert schema_error({"$id": "http://x/y", "properties": {"a": {"$ref": "#/"}}}) is None
    assert schema_error({"properties": {"a": {"$ref": "#/"}}})
    # a relative $id resolves against its parent's base, and is found by that URI
    assert schema_error({"$id": "http://x/y", "properties": {
        "a": {"$id": "z", "type": "string"}, "c": {"$ref": "z"}}}) is None
    assert schema_error({"properties": {"a": {"$id": "z", "type": "string"},
                                        "c": {"$ref": "z"}}}) is None


def test_two_schemas_with_one_id_are_refused_and_unused_references_never_resolved():
    twice = {"properties": {"a": {"$id": "http://x/z", "type": "string"},
                            "b": {"$id": "http://x/z", "type": "number"}}}
    assert "more than one schema" in schema_error(twice)
    assert schema_error({"definitions": {"d": {"$ref": "#/nope"}}}) is None
    assert "does not resolve" in schema_error({"properties": {"a": {"$ref": "#/nope"}}})


def test_keywords_beside_a_ref_apply_with_the_type_error_where_ajv_reports_it():
    schema = {"definitions": {"n": {"type": "number", "maximum": 10}}, "properties": {
        "a": {"$ref": "#/definitions/n", "minimum": 5},
        "b": {"$ref": "#/definitions/n", "type": "integer"},
        "c": {"type": "object", "required": ["z"], "enum": [1, "ab"]}}}
    assert first_error(schema, {"a": 1}) == ("/a", "must be >= 5")  # draft-07 ignores it
    assert first_error(schema, {"a": 20}) == ("/a", "must be <= 10")
    assert first_error(schema, {"b": 2.5}) == ("/b", "must be integer")  # its own type first
    # one type with keywords of its group: the type error waits for that group's turn
    allowed = "must be equal to one of the allowed values"
    assert first_error(schema, {"c": "abcd"}) == ("/c", allowed)
    assert first_error(schema, {"a": 7, "b": 3}) is None


def test_a_schema_whose_ref_never_ends_fails_each_answer_as_javascript_does():
    from vm.core.schema_errors import SchemaRecursion

    endless = {"$id": "http://x/z", "$ref": "#", "type": "string"}
    assert schema_error(endless) is None  # Ajv compiles it
    with pytest.raises(SchemaRecursion, match="Maximum call stack size exceeded"):
        first_error(endless, "x")


def test_long_reference_chains_and_a_root_id_with_a_fragment_compile_as_in_ajv():
    chain = {f"d{i}": {"$ref": f"#/definitions/d{i + 1}"} for i in range(200)}
    chain["d200"] = {"type": "string"}
    assert schema_error({"$ref": "#/definitions/d0", "definitions": chain}) is None
    assert first_error({"$ref": "#/definitions/d0", "definitions": chain}, 1) == (
        "/", "must be string")
    long = {f"d{i}": {"$ref": f"#/definitions/d{i + 1}"} for i in range(3000)}
    long["d3000"] = {"type": "string"}  # Ajv's compile overflows its stack: refused, no crash
    assert schema_error({"$ref": "#/definitions/d0", "definitions": long}) == \
        "Maximum call stack size exceeded"
    fragment = {"$id": "http://x/y#/definitions/d",
                "properties": {"a": {"$ref": "#/definitions/d"}},
                "definitions": {"d": {"type": "string"}}}
    assert schema_error(fragment) is None and first_error(fragment, {"a": 1}) == (
        "/a", "must be string")


def test_an_ajv_that_keeps_schemas_refuses_a_subschema_with_the_root_s_id():
    clash = {"$id": "http://x/z", "properties": {"a": {"$id": "http://x/z"}}}
    assert schema_error(clash) is None  # the shared instance keeps nothing
    refused = schema_error(clash, keeps_schemas=True)
    assert refused == 'schema with key or id "http://x/z" already exists'


def test_a_failed_any_of_or_one_of_is_reported_by_its_first_failing_branch():
    assert first_error({"anyOf": [{"minimum": 5}, {"type": "string"}]}, 1) == (
        "/", "must be >= 5")
    assert first_error({"oneOf": [{"type": "string", "minLength": 3}, {"maximum": 0}]}, 5) == (
        "/", "must be string")
    assert first_error({"oneOf": [{"minimum": 0}, {"type": "number"}]}, 1) == (
        "/", "must match exactly one schema in oneOf")  # two branches match: itself
