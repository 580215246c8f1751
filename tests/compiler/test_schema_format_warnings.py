"""The lines the original's Ajv warns for each `format` keyword a schema compile reaches
(vm.core.schema.format_warnings / compile_notes), checked against what the original printed."""

from __future__ import annotations

import pytest

from vm.core import schema_compile as schema_mod
from vm.core.schema_compile import compile_notes, format_warnings


def _w(fmt: str, at: str = "#") -> list[str]:
    line = f'unknown format "{fmt}" ignored in schema at path "{at}"'
    return [line, line]  # once per rule group holding `format` (numbers, strings)


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "string", "format": "email"}, _w("email")),
    ({"type": "number", "format": "date-time"}, _w("date-time")),  # no format is known
    ({"format": "email", "anyOf": [{"format": "uuid"}]}, _w("uuid", "#/anyOf/0") + _w("email")),
    ({"format": "email", "properties": {"a": {"format": "uri"}}},
     _w("email") + _w("uri", "#/properties/a")),
    ({"anyOf": [{}, {"format": "x"}]}, []),  # a branch always valid: no branch compiled
    ({"if": {"format": "a"}}, []),  # `if` without then/else is ignored
    ({"definitions": {"a": {"format": "never"}}}, []),  # definitions only through a $ref
    ({"not": {"format": "d"}, "if": {"format": "a"}, "then": {"format": "b"},
      "else": {"format": "c"}},
     _w("d", "#/not") + _w("a", "#/if") + _w("b", "#/then") + _w("c", "#/else")),
    ({"items": [{"format": "i0"}], "additionalItems": {"format": "ai"},
      "contains": {"format": "c"}},
     _w("ai", "#/additionalItems") + _w("i0", "#/items/0") + _w("c", "#/contains")),
    ({"patternProperties": {"^x": {"format": "pp"}}, "additionalProperties": {"format": "ap"},
      "propertyNames": {"format": "pn"}, "dependencies": {"q": {"format": "dep"}, "r": ["s"]}},
     _w("pn", "#/propertyNames") + _w("ap", "#/additionalProperties")
     + _w("dep", "#/dependencies/q") + _w("pp", "#/patternProperties/%5Ex")),
    ({"properties": {"a~/ é%": {"format": "email"}, "2": {"format": "uri"}}},
     _w("uri", "#/properties/2") + _w("email", "#/properties/a~0~1%20%C3%A9%25")),
    ({"$ref": "#/definitions/a", "definitions": {"a": {"format": "email"}}, "format": "uri"},
     _w("email", "#/definitions/a") + _w("uri")),
    # a target holding a $ref is compiled once, as a function of its own (at "#")
    ({"properties": {"a": {"$ref": "#/definitions/x"}, "b": {"$ref": "#/definitions/x"}},
      "definitions": {"x": {"format": "email", "properties": {"y": {"$ref": "#/definitions/z"}}},
                      "z": {"format": "uri"}}},
     _w("email") + _w("uri", "#/definitions/z")),
    # the compile stops where it throws: after the number group's warning, at the pattern
    ({"format": "email", "pattern": "("}, _w("email")[:1]),
    ({"patternProperties": {"(": {"format": "p"}}, "properties": {"x": {"format": "x"}}},
     _w("x", "#/properties/x")),
    ({"format": "email", "$ref": "#/nope"}, []),
    ({"format": 1}, []),  # refused by the meta-schema before anything is compiled
])
def test_format_warnings(schema, expected) -> None:
    assert format_warnings(schema) == expected


def test_compile_notes_once_per_schema(monkeypatch) -> None:
    monkeypatch.setattr(schema_mod, "_compiled", set())
    lines: list[str] = []
    compile_notes({"type": "string", "format": "email"}, lines.append)
    compile_notes({"format": "email", "type": "string"}, lines.append)  # same stable JSON
    assert lines == [ln + "\n" for ln in _w("email")]
    compile_notes({"format": "email", "pattern": "("}, lines.append)  # fails: not memoized
    compile_notes({"format": "email", "pattern": "("}, lines.append)
    assert len(lines) == 4
