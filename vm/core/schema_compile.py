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
    """Ajv's compile throws here: what was warned before it stays warned. `fault`: why, when
    it is a reference ours would otherwise resolve (see `reference_fault`)."""

    def __init__(self, fault: Any = None) -> None:
        super().__init__()
        self.fault = fault


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


def reference_fault(schema: Any, keeps_schemas: bool = False) -> Any:
    """A `$ref` the original's Ajv cannot compile although it names something in the schema
    (so `referencing` resolves it), as a vm.core.schema.RefFault; else None. Ajv only meets
    the references its compile reaches (not those of an unused definition), and:
    - with `addUsedSchema: false` (the shared instance of `ask`, input requests and workflow
      inputs; not `keeps_schemas`, llm.invoke's own) it never finds the schema it compiles
      by its URI: only a `#` or `#/` where no `$id` changed the base reaches the whole schema,
      and that only when the schema has an `$id` (`""`, the schema's own `$id`, and `#` met
      by following other references do not);
    - it follows a reference to a schema that holds only a `$ref` at once, so a ring of
      those never ends (its stack overflows)."""
    if not isinstance(schema, dict) or not _has_ref(schema):
        return None
    try:
        _Compile(schema, [], keeps_schemas).walk(schema, "#")
    except _Stop as stop:
        return stop.fault
    return None


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


def _pointer(ref: str) -> tuple[str, ...]:
    """The JSON pointer of a `#/...` reference, unescaped and percent-decoded."""
    from urllib.parse import unquote

    return tuple(unquote(p.replace("~1", "/").replace("~0", "~")) for p in ref[1:].split("/")[1:])


def _normal_id(value: Any) -> str:
    """An `$id` as Ajv keeps it: without a trailing `#` or `#/`; "" for none."""
    if not isinstance(value, str):
        return ""
    for end in ("#/", "#"):
        if value.endswith(end):
            return value[:-len(end)]
    return value


def _ref_fault(root: Any, ref: str, why: str) -> Any:
    from vm.core.schema import RefFault, _refs

    path = next((where for found, where in _refs(root) if found == ref), ("$ref",))
    fault = RefFault(ref, path)
    fault.message = f"$ref {ref!r} cannot be resolved: {why}"
    return fault


def _has_ref(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or any(_has_ref(v) for k, v in schema.items()
                                       if k not in ("const", "enum", "default", "examples"))
    if isinstance(schema, list):
        return any(_has_ref(v) for v in schema)
    return False


class _Compile:
    def __init__(self, root: Any, out: list[str], keeps_schemas: bool = False) -> None:
        self.root, self.out, self.envs = root, out, set()
        self.keeps_schemas = keeps_schemas
        self.root_id = _normal_id(root.get("$id")) if isinstance(root, dict) else ""
        self.scopes = 0  # how many subschemas with an `$id` of their own the walk is inside

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
        scoped = s is not self.root and bool(_normal_id(s.get("$id")))
        self.scopes += scoped
        try:
            self._walk(s, at)
        finally:
            self.scopes -= scoped

    def _walk(self, s: dict, at: str) -> None:
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

    def _root_reachable(self, ref: str) -> None:
        """Stop at a reference to the whole schema the shared Ajv cannot resolve."""
        if not self.keeps_schemas and self._names_root(ref) and not (
                ref in ("#", "#/") and self.root_id):
            raise _Stop(_ref_fault(self.root, ref, "only `#` reaches the whole schema, and "
                                   "only when the schema has an $id (the original's Ajv does "
                                   "not keep the schemas it compiles)"))

    def _names_root(self, ref: str) -> bool:
        """Whether `ref`, read where the schema's own base holds, names the whole schema."""
        from urllib.parse import urldefrag, urljoin

        if ref in ("#", "#/"):
            return True
        uri, fragment = urldefrag(urljoin(self.root_id, ref))
        return uri == self.root_id and not fragment

    def _ring(self, ref: str) -> None:
        """Follow `ref` through schemas holding only a `$ref`, as Ajv's resolution does."""
        seen = set()
        while ref.startswith("#/") and ref not in seen:
            seen.add(ref)
            target = _pointer_target(self.root, _pointer(ref))
            if not isinstance(target, dict) or not isinstance(target.get("$ref"), str) \
                    or any(k in _RULES for k in target if k != "$ref"):
                return
            ref = target["$ref"]
            self._root_reachable(ref)
        if ref in seen:
            raise _Stop(_ref_fault(self.root, ref, "it leads back to itself through schemas "
                                   "that hold only a $ref (the original's Ajv overflows its "
                                   "stack)"))

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
        if not isinstance(ref, str):
            return
        if not self.scopes:
            self._root_reachable(ref)
        if ref in ("#", "#/"):
            return
        self._ring(ref)
        target: Any = None
        if ref.startswith("#/") or ref == "#":
            target = _pointer_target(self.root, _pointer(ref))
        if not isinstance(target, (dict, bool)):
            if ref.startswith("#/") or not self.resolves(ref):
                raise _Stop  # Ajv: can't resolve reference
            return  # resolved another way (an $id): not followed
        if not _has_ref(target):
            self.walk(target, ref)  # inlined, at the reference's own text
        elif ref not in self.envs:  # compiled once per root, as a function of its own
            self.envs.add(ref)
            self.walk(target, "#")
