"""How the original's Ajv reads `$id` and `$ref` in one schema: the base URI each `$id` makes,
the ids it files before it compiles (`_Ids`), and the schema a reference names from a base
(Ajv's resolveRef, resolveSchema and getJsonPointer, as observed; our own code). Used by
vm.core.schema_compile's model of the compile."""

from __future__ import annotations

from typing import Any

from vm.core.schema import KEYWORDS, _escape, _unescape

# keywords that constrain something (a schema of none of these is always valid to Ajv, and one
# holding only a `$ref` besides them is followed at once)
_RULES = frozenset(KEYWORDS - {"$schema", "$id", "title", "description", "default", "readOnly",
                                "writeOnly", "examples", "definitions", "contentMediaType",
                                "contentEncoding"}) | {"nullable", "id"}

def _normal_id(value: Any) -> str:
    """An `$id` as Ajv keeps it: without a trailing `#` or `#/`; "" for none."""
    if not isinstance(value, str):
        return ""
    for end in ("#/", "#"):
        if value.endswith(end):
            return value[:-len(end)]
    return value


def _join(base: str, ref: str) -> str:
    """A reference read against a base URI, as RFC 3986 resolves it (Ajv's resolveUrl: the
    reference without a trailing `#` or `#/`)."""
    from urllib.parse import urljoin

    ref = _normal_id(ref)
    if not ref:
        return base.partition("#")[0]
    document = base.partition("#")[0]
    if ref.startswith("#"):  # a fragment keeps the whole base (urljoin drops it for a urn:)
        return document + ref
    return urljoin(document, ref) if document else ref


def _full(uri: str) -> str:
    """A URI without its fragment, then `#` (Ajv's getFullPath)."""
    return uri.partition("#")[0] + "#"


# keys whose value is a map of subschemas, lists of subschemas, and values never walked: the
# walk Ajv makes to find every `$id` before it compiles (json-schema-traverse, all keys)
_MAPS = frozenset({"$defs", "definitions", "properties", "patternProperties", "dependencies"})
_LISTS = frozenset({"items", "allOf", "anyOf", "oneOf"})
_SKIPPED = frozenset({"default", "enum", "const", "required", "maximum", "minimum",
                      "exclusiveMaximum", "exclusiveMinimum", "multipleOf", "maxLength",
                      "minLength", "pattern", "format", "maxItems", "minItems", "uniqueItems",
                      "maxProperties", "minProperties"})
# pointer steps after which an `$id` does not move the base (Ajv's getJsonPointer)
_NO_SCOPE_CHANGE = frozenset({"properties", "patternProperties", "enum", "dependencies",
                              "definitions"})


class _Ring(Exception):
    """Resolving a reference came back to itself: Ajv recurses until its stack overflows."""


class _Env:
    """A schema as a compile meets it: with the base URI its references are read against."""

    __slots__ = ("base", "schema")

    def __init__(self, schema: Any, base: str) -> None:
        self.schema, self.base = schema, base


class _Ids:
    """The `$id`s of one schema as the original's Ajv files them before it compiles (an
    instance that does not keep the schemas it compiles holds only these; one that keeps
    them, `keeps`, also finds the schema itself by its own `$id`, or by "" without one), and
    its resolution of a reference against them: `lookup` is Ajv's resolveRef, None where it
    throws "can't resolve reference", _Ring where its resolution never ends."""

    def __init__(self, root: Any, keeps: bool) -> None:
        self.root = root
        self.base = _normal_id(root.get("$id")) if isinstance(root, dict) else ""
        self.keeps = keeps
        self.paths: dict[str, str] = {}  # an absolute id -> where its schema is ("...#/ptr")
        self.local: dict[str, Any] = {}  # a `#name` id with no base -> its schema
        self.ambiguous: str | None = None  # an id given to two schemas: Ajv refuses them
        self._seen: set[str] = set()
        self._resolving: list[str] = []
        prefix = _full(self.base)
        if isinstance(root, dict):
            for key, value in root.items():
                self._file(key, value, "", self.base, prefix)

    def _file(self, key: str, value: Any, at: str, base: str, prefix: str) -> None:
        if key in _MAPS and isinstance(value, dict):
            for name, sub in value.items():
                self._visit(sub, f"{at}/{key}/{_escape(name)}", base, prefix)
        elif key in _LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                self._visit(sub, f"{at}/{key}/{i}", base, prefix)
        elif key not in _SKIPPED and not isinstance(value, list):
            self._visit(value, f"{at}/{key}", base, prefix)

    def _visit(self, schema: Any, at: str, base: str, prefix: str) -> None:
        if not isinstance(schema, dict):
            return
        if isinstance(schema.get("$id"), str):
            base = self._add(schema, schema["$id"], base, prefix + at)
        for key, value in schema.items():
            self._file(key, value, at, base, prefix)

    def _add(self, schema: dict, given: str, base: str, where: str) -> str:
        uri = _normal_id(_join(base, given) if base else given)
        if uri in self._seen and self.ambiguous is None:
            self.ambiguous = uri
        self._seen.add(uri)
        if uri != _normal_id(where):
            if uri.startswith("#"):
                if uri in self.local and self.local[uri] != schema and self.ambiguous is None:
                    self.ambiguous = uri
                self.local[uri] = schema
            else:
                self.paths[uri] = where
        return uri

    def lookup(self, base: str, ref: str) -> _Env | None:
        uri = _join(base, ref)
        env = self._resolve(uri)
        if env is None and uri in self.local:
            env = _Env(self.local[uri], base)
        return env

    def _resolve(self, uri: str) -> _Env | None:
        while uri in self.paths:
            uri = self.paths[uri]
        if self.keeps and uri == self.base:
            return _Env(self.root, self.base)
        return self._schema_at(uri)

    def _schema_at(self, uri: str) -> _Env | None:  # Ajv's resolveSchema
        """The schema `uri` names. A schema holding only a `$ref` is followed at once, hop by
        hop (a loop, where Ajv recurses): the last of them stands when a hop resolves to
        nothing; a hop back to a URI still being resolved is a _Ring."""
        fallback, pushed = None, 0
        try:
            while True:
                if uri in self._resolving:
                    raise _Ring
                self._resolving.append(uri)
                pushed += 1
                located = self._locate(uri)
                if located is None:
                    return fallback
                env, follow = located
                found = None if env.schema is self.root else env
                if follow is None:
                    return found or fallback
                fallback, uri = found or fallback, follow
        finally:
            del self._resolving[len(self._resolving) - pushed:]

    def _locate(self, uri: str) -> tuple[_Env, str | None] | None:
        document, _, fragment = uri.partition("#")
        if self.root and document + "#" == _full(self.base):
            return self._pointer(fragment, _Env(self.root, self.base))
        found = self.paths.get(_normal_id(document + "#"))
        if found is None:
            return None
        env = self._schema_at(found)
        if env is None or not isinstance(env.schema, dict):
            return None
        return self._pointer(fragment, env)

    def _pointer(self, fragment: str, env: _Env) -> tuple[_Env, str | None] | None:
        """Ajv's getJsonPointer: the schema at `fragment` under `env`, and the URI of its
        `$ref` when it holds only that (to be followed); None when nothing is there."""
        if not fragment.startswith("/"):
            return None
        schema, base = env.schema, env.base
        for part in fragment[1:].split("/"):
            part = _unescape(part)
            if isinstance(schema, dict) and part in schema:
                schema = schema[part]
            elif isinstance(schema, list) and part.isdigit() and int(part) < len(schema) \
                    and (part == "0" or part[0] != "0"):
                schema = schema[int(part)]
            else:
                return None
            if part not in _NO_SCOPE_CHANGE and isinstance(schema, dict) \
                    and isinstance(schema.get("$id"), str) and schema["$id"]:
                base = _join(base, schema["$id"])
        follow = None
        if isinstance(schema, dict) and isinstance(schema.get("$ref"), str) \
                and schema["$ref"] and not any(k in _RULES for k in schema if k != "$ref"):
            follow = _join(base, schema["$ref"])
        return _Env(schema, base), follow
