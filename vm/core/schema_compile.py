"""What the original's Ajv writes while it compiles a JSON Schema (vm.core.schema's dialect):
with no formats added and strict mode off, a warning for each `format` keyword the compile
reaches. `compile_notes` writes them as the original's memoized compile would, once per schema
in a process."""

from __future__ import annotations

import json
from typing import Any

from vm.core.schema import KEYWORDS, _escape, _meta_validator, _pointer_target, schema_fault

# Ajv's compile, as far as its logger shows it: with no formats added and strict mode off, each
# `format` keyword a compile reaches is warned about (`unknown format "x" ignored in schema at
# path "#/..."`) once for each of the two rule groups that hold `format` (numbers, strings).
# A compile walks a schema object's rule groups (no type, number, string, array, object), each
# in its keywords' order, and reaches only the subschemas that constrain something; it stops at
# the first thing it cannot compile (a `$ref` that resolves to nothing, a regex
# `new RegExp(p, "u")` refuses), after the warnings of what it reached before.
_RULES = frozenset(KEYWORDS - {"$schema", "$id", "title", "description", "default", "readOnly",
                                "writeOnly", "examples", "definitions", "contentMediaType",
                                "contentEncoding"}) | {"nullable", "id"}
_compiled: set[str] = set()  # the schemas this process compiled, as the original caches them


class _Stop(Exception):
    """Ajv's compile throws here: what was warned before it stays warned."""


def format_warnings(schema: Any) -> list[str]:
    """The lines Ajv's logger writes while the original compiles `schema` once (none for a
    schema its meta-schema refuses: that is checked before anything is compiled)."""
    if not isinstance(schema, (dict, bool)) or next(
            iter(_meta_validator().iter_errors(schema)), None) is not None:
        return []
    out: list[str] = []
    try:
        _Compile(schema, out).walk(schema, "#")
    except _Stop:
        pass
    return out


def compile_notes(schema: Any, log) -> None:
    """Write to `log` what the original's compile of `schema` warns, unless this process
    compiled a schema of the same stable JSON already (the original memoizes compiles; a
    compile that fails is not memoized)."""
    key = json.dumps(schema, sort_keys=True)
    if '"format"' not in key or key in _compiled:
        return  # (no `format` keyword, no warning: nor the schema validator's import)
    lines = format_warnings(schema)
    if schema_fault(schema) is None:
        _compiled.add(key)
    for line in lines:
        log(line + "\n")


def _js_keys(obj: dict) -> list[str]:
    """An object's keys as JavaScript orders them: array indices first, ascending."""
    def index(k: str) -> bool:
        return k.isdigit() and (k == "0" or k[0] != "0") and int(k) < 2 ** 32 - 1

    return sorted((k for k in obj if index(k)), key=int) + [k for k in obj if not index(k)]


def _fragment(name: str) -> str:
    """encodeURIComponent of the JSON-pointer-escaped name (a lone surrogate: Ajv throws)."""
    from urllib.parse import quote

    try:
        return quote(_escape(name).encode("utf-8"), safe="-_.!~*'()")
    except UnicodeEncodeError:
        raise _Stop from None


def _has_ref(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or any(_has_ref(v) for k, v in schema.items()
                                       if k not in ("const", "enum", "default", "examples"))
    if isinstance(schema, list):
        return any(_has_ref(v) for v in schema)
    return False


class _Compile:
    def __init__(self, root: Any, out: list[str]) -> None:
        self.root, self.out, self.envs = root, out, set()

    def valid(self, schema: Any) -> bool:  # Ajv's alwaysValidSchema
        if isinstance(schema, bool):
            return schema
        return isinstance(schema, dict) and not any(k in _RULES for k in schema)

    def regex(self, source: str) -> None:
        from vm.core import js_regex

        try:
            js_regex.compiled(source)
        except (js_regex.JsRegexSyntaxError, js_regex.JsRegexUnsupported):
            raise _Stop from None

    def walk(self, s: Any, at: str) -> None:
        if not isinstance(s, dict) or self.valid(s):
            return
        if "id" in s:
            raise _Stop  # Ajv: keyword "id" is not supported
        if "$ref" in s:
            self.ref(s["$ref"])
            if not any(k in _RULES for k in s if k != "$ref"):
                return
        for key in ("not", "anyOf", "oneOf", "allOf", "if"):
            self.applicator(s, key, at)
        for key in ("format", "pattern", "format"):  # the number group, then the string group
            if key == "format" and isinstance(s.get(key), str):
                self.out.append(f'unknown format "{s[key]}" ignored in schema at path "{at}"')
            elif key == "pattern" and isinstance(s.get(key), str):
                self.regex(s[key])
        items = s.get("items")
        if isinstance(items, list) and isinstance(s.get("additionalItems"), dict) \
                and not self.valid(s["additionalItems"]):
            self.walk(s["additionalItems"], f"{at}/additionalItems")
        if isinstance(items, list):
            for i, sub in enumerate(items):
                self.walk(sub, f"{at}/items/{i}")
        elif "items" in s:
            self.walk(items, f"{at}/items")
        if "contains" in s:
            self.walk(s["contains"], f"{at}/contains")
        self.objects(s, at)

    def applicator(self, s: dict, key: str, at: str) -> None:
        value = s.get(key)
        if value is None:
            return
        if key == "not":
            self.walk(value, f"{at}/not")
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            if key == "anyOf" and any(self.valid(sub) for sub in value):
                return
            for i, sub in enumerate(value):
                self.walk(sub, f"{at}/{key}/{i}")
        elif key == "if":
            clauses = [k for k in ("then", "else") if k in s and not self.valid(s[k])]
            if clauses:
                self.walk(value, f"{at}/if")
                for k in clauses:
                    self.walk(s[k], f"{at}/{k}")

    def objects(self, s: dict, at: str) -> None:
        patterns = s.get("patternProperties")
        patterns = [k for k in _js_keys(patterns) if k != "__proto__"] \
            if isinstance(patterns, dict) else []
        if "propertyNames" in s:
            self.walk(s["propertyNames"], f"{at}/propertyNames")
        if "additionalProperties" in s and not self.valid(s["additionalProperties"]):
            for source in patterns:
                self.regex(source)
            self.walk(s["additionalProperties"], f"{at}/additionalProperties")
        deps = s.get("dependencies")
        if isinstance(deps, dict):
            for name in _js_keys(deps):
                if name != "__proto__" and not isinstance(deps[name], list):
                    self.walk(deps[name], f"{at}/dependencies/{_fragment(name)}")
        props = s.get("properties")
        if isinstance(props, dict):
            for name in _js_keys(props):
                if name != "__proto__" and not self.valid(props[name]):
                    self.walk(props[name], f"{at}/properties/{_fragment(name)}")
        if patterns and not all(self.valid(s["patternProperties"][p]) for p in patterns):
            for source in patterns:
                self.regex(source)
                self.walk(s["patternProperties"][source],
                          f"{at}/patternProperties/{_fragment(source)}")

    def resolves(self, ref: str) -> bool:
        from referencing import Registry
        from referencing.exceptions import Unresolvable
        from referencing.jsonschema import DRAFT7

        try:
            Registry().with_resource("", DRAFT7.create_resource(self.root)).resolver().lookup(ref)
        except Unresolvable:
            return False
        return True

    def ref(self, ref: Any) -> None:
        if not isinstance(ref, str) or ref in ("#", "#/"):
            return
        target: Any = None
        if ref.startswith("#/") or ref == "#":
            pointer = tuple(p.replace("~1", "/").replace("~0", "~")
                            for p in ref[1:].split("/")[1:])
            from urllib.parse import unquote

            target = _pointer_target(self.root, tuple(unquote(p) for p in pointer))
        if not isinstance(target, (dict, bool)):
            if ref.startswith("#/") or not self.resolves(ref):
                raise _Stop  # Ajv: can't resolve reference
            return  # resolved another way (an $id): not followed
        if not _has_ref(target):
            self.walk(target, ref)  # inlined, at the reference's own text
        elif ref not in self.envs:  # compiled once per root, as a function of its own
            self.envs.add(ref)
            self.walk(target, "#")
