"""One JSON Schema dialect for input gates: draft-07, and what it would ignore is found."""

from __future__ import annotations

from vm.schema import first_error, ignored_keywords, schema_error


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
