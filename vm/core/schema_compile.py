"""What the original's Ajv writes while it compiles a JSON Schema (vm.core.schema's dialect):
with no formats added and strict mode off, a warning for each `format` keyword the compile
reaches. `compile_notes` writes them as the original's memoized compile would, once per schema
in a process."""

from __future__ import annotations

import json
from typing import Any

from vm.core.schema import RefFault, _escape, _meta_validator, schema_fault
from vm.core.schema_refs import _RULES, _full, _Ids, _join, _Ring

# Ajv's compile, as far as its logger shows it: with no formats added and strict mode off, each
# `format` keyword a compile reaches is warned about (`unknown format "x" ignored in schema at
# path "#/..."`) once for each of the two rule groups that hold `format` (numbers, strings).
# A compile walks a schema object's rule groups (no type, number, string, array, object), each
# in its keywords' order, and reaches only the subschemas that constrain something; it stops at
# the first thing it cannot compile (a `$ref` that resolves to nothing, a regex
# `new RegExp(p, "u")` refuses), after the warnings of what it reached before. What a `$ref`
# names is vm.core.schema_refs's.
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
        _Compile(schema, out).walk(schema, "#", top=True)
    except _Stop:
        pass
    return out


def reference_fault(schema: Any, keeps_schemas: bool = False) -> Any:
    """Why the original's Ajv cannot compile `schema`'s references (a vm.core.schema.RefFault),
    else None. Before it compiles, Ajv files every `$id` (two schemas with one id: refused);
    it then meets only the references its compile reaches (not those of an unused
    definition), each read against the base the `$id`s around it make (`_Ids`), and:
    - with `addUsedSchema: false` (the shared instance of `ask`, input requests and workflow
      inputs; not `keeps_schemas`, llm.invoke's own) it never finds the schema it compiles
      by its URI: only a `#` or `#/` where no `$id` changed the base reaches the whole schema,
      and that only when the schema has an `$id` (`""`, the schema's own `$id`, and `#` met
      by following other references do not); inside a subschema with an `$id`, `#` is that
      subschema;
    - it follows a reference to a schema that holds only a `$ref` at once, so a ring of
      those never ends (its stack overflows)."""
    if not isinstance(schema, dict):
        return None
    compile_ = _Compile(schema, [], keeps_schemas)
    root_id = compile_.ids.base
    if keeps_schemas and root_id and root_id in compile_.ids.paths:
        # an Ajv that keeps schemas files the root by its id too
        return RefFault(root_id, ("$id",), f'schema with key or id "{root_id}" already exists')
    if compile_.ids.ambiguous is not None:
        return RefFault(compile_.ids.ambiguous, ("$id",), f"reference "
                        f"{compile_.ids.ambiguous!r} resolves to more than one schema")
    if not _has_ref(schema):
        return None
    try:
        compile_.walk(schema, "#", top=True)
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


def _ref_fault(root: Any, ref: str, why: str | None = None) -> Any:
    """A RefFault at the first `$ref` of that text: `why` it cannot be resolved, or (None)
    that it names nothing."""
    from vm.core.schema import _refs

    path = next((where for found, where in _refs(root) if found == ref), ("$ref",))
    return RefFault(ref, path, None if why is None else f"$ref {ref!r} cannot be resolved: {why}")


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
        self.ids = _Ids(root, keeps_schemas)
        # the base URI the walk reads references against (Ajv's it.baseId): the schema's
        # `$id`, else "#"; each subschema with an `$id` of its own moves it
        self.base = self.ids.base or "#"
        # the base the validator that applies answers reads the same reference against
        # (draft-07's: an `$id` beside a `$ref` is ignored; `#name` ids are anchors)
        self.draft7_base = _draft7_id(root) or ""
        # the validator's registry of the schema and the URI it files the schema under, made
        # on the first reference met
        self._draft7_registry: Any = None
        self._draft7_root = ""

    def valid(self, schema: Any) -> bool:  # Ajv's alwaysValidSchema
        if isinstance(schema, bool):
            return schema
        return isinstance(schema, dict) and not any(k in _RULES for k in schema)

    def regex(self, source: str) -> None:
        from vm.core import js_regex

        try:
            js_regex.compiled(source)
        except js_regex.JsRegexSyntaxError:
            raise _Stop from None

    def walk(self, s: Any, at: str, top: bool = False) -> None:
        """Compile `s`, met at `at`; `top`: the schema a compile starts at (the whole schema,
        or one a reference compiles as a function of its own, whose base is known)."""
        if not isinstance(s, dict) or self.valid(s):
            return
        base, draft7_base = self.base, self.draft7_base
        if not top and isinstance(s.get("$id"), str) and s["$id"]:
            self.base = _join(base, s["$id"])
            if _draft7_id(s):
                self.draft7_base = _draft7_join(draft7_base, s["$id"])
        try:
            self._walk(s, at)
        finally:
            self.base, self.draft7_base = base, draft7_base

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

    def ref(self, ref: Any) -> None:
        """Ajv's `$ref` keyword: `#` where the base is the schema's own calls the whole schema;
        any other reference is resolved (`_Ids.lookup`) and its schema inlined when it holds no
        reference, else compiled once (per schema and base) as a function of its own."""
        if not isinstance(ref, str) or (ref in ("#", "#/") and self.base == self.ids.base):
            return
        try:
            env = self.ids.lookup(self.base, ref)
        except _Ring:
            raise _Stop(_ref_fault(self.root, ref, "it leads back to itself through schemas "
                                   "that hold only a $ref (the original's Ajv overflows its "
                                   "stack)")) from None
        if env is None:
            document, _, fragment = _join(self.base, ref).partition("#")
            if document + "#" == _full(self.ids.base) and not fragment:
                raise _Stop(_ref_fault(self.root, ref, "only `#` reaches the whole schema, and "
                                       "only when the schema has an $id (the original's Ajv "
                                       "does not keep the schemas it compiles)"))
            raise _Stop(_ref_fault(self.root, ref))
        draft7_base = self._applies(ref, env.schema)
        if draft7_base is None:
            raise _Stop(_ref_fault(self.root, ref, "the draft-07 validator that applies "
                                   "answers would resolve it to another schema than the "
                                   "original's Ajv (as through an $id beside a $ref, which "
                                   "draft-07 ignores)"))
        if not _has_ref(env.schema):
            self.walk(env.schema, ref)  # inlined, at the reference's own text
        elif (id(env.schema), env.base) not in self.envs:  # compiled once, as a function
            self.envs.add((id(env.schema), env.base))
            base, self.base = self.base, env.base or _full(self.ids.base)  # Ajv: || rootId
            outer, self.draft7_base = self.draft7_base, draft7_base
            try:
                self.walk(env.schema, "#", top=True)
            finally:
                self.base, self.draft7_base = base, outer

    def _applies(self, ref: str, schema: Any) -> str | None:
        """Whether the validator that applies an accepted schema (jsonschema's, with
        `referencing`, draft-07's reading of `$id`) resolves `ref` to the same `schema` as
        Ajv: then the base it reads that schema's own references against, else None (the
        schema is refused rather than applied otherwise)."""
        from referencing import Registry
        from referencing.exceptions import Unresolvable
        from referencing.jsonschema import DRAFT7

        ref = ref[:-1] if ref.endswith("#/") else ref
        if self._draft7_registry is None:
            resource = DRAFT7.create_resource(self.root)
            self._draft7_root = resource.id() or ""
            self._draft7_registry = Registry().with_resource(self._draft7_root, resource)
        resolver = self._draft7_registry.resolver(  # as the validator's, in scope
            base_uri=self.draft7_base or self._draft7_root)
        seen: set[int] = set()
        try:
            resolved = resolver.lookup(ref)
            while True:  # Ajv follows a chain of schemas holding only a `$ref` at once
                contents = resolved.contents
                if contents is schema or id(contents) in seen or not isinstance(contents, dict) \
                        or not isinstance(contents.get("$ref"), str) \
                        or any(k in _RULES for k in contents if k != "$ref"):
                    break
                seen.add(id(contents))
                resolved = resolved.resolver.lookup(contents["$ref"])
        except Unresolvable:
            return None
        if resolved.contents is not schema:
            return None
        base = self.draft7_base if ref.startswith("#") \
            else _draft7_join(self.draft7_base, ref).partition("#")[0]
        own = _draft7_id(schema)
        return _draft7_join(base, own) if own else base


def _draft7_id(schema: Any) -> str | None:
    """A schema's `$id` as draft-07 reads it: not beside a `$ref`, not a `#name` anchor."""
    if isinstance(schema, dict) and "$ref" not in schema and isinstance(schema.get("$id"), str) \
            and schema["$id"] and not schema["$id"].startswith("#"):
        return schema["$id"]
    return None


def _draft7_join(base: str, ref: str) -> str:
    from urllib.parse import urljoin

    return urljoin(base, ref) if base else ref
