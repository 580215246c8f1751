"""Whether a new input schema is at least as strict as the old one: a structural check of the
common draft-07 keywords, where anything it cannot judge counts as looser."""

from __future__ import annotations

from typing import Any


_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_EQUAL = ("pattern", "format", "const", "multipleOf", "uniqueItems", "$schema", "title",
          "description", "default", "examples")


def schema_at_least(new: Any, old: Any) -> bool:
    """True when every answer `new` accepts, `old` accepts too, as far as a structural check
    of the common draft-07 keywords can tell; anything it cannot judge counts as looser."""
    if new == old or old in (None, True, {}):
        return True
    if new is False:
        return True
    if not isinstance(new, dict) or not isinstance(old, dict):
        return False
    for key, value in old.items():
        if key in _EQUAL and key in ("title", "description", "default", "examples", "$schema"):
            continue
        mine = new.get(key)
        if key == "type":
            want = {value} if isinstance(value, str) else set(value)
            have = {mine} if isinstance(mine, str) else set(mine or ())
            if not have or not have <= want | ({"integer"} if "number" in want else set()):
                return False
        elif key == "required":
            if not set(value) <= set(mine or ()):
                return False
        elif key == "enum":
            if mine is None or any(v not in value for v in mine):
                if not ("const" in new and new["const"] in value):
                    return False
        elif key in _LOWER:
            if mine is None or mine < value:
                return False
        elif key in _UPPER:
            if mine is None or mine > value:
                return False
        elif key == "properties":
            props = mine or {}
            extra_closed = new.get("additionalProperties") is False
            for name, sub in value.items():
                if name in props:
                    if not schema_at_least(props[name], sub):
                        return False
                elif not extra_closed:
                    return False
        elif key == "additionalProperties":
            if value is False:
                if mine is not False:
                    return False
            elif mine is not False and not schema_at_least(mine if mine is not None else True,
                                                           value):
                return False
        elif key == "items":
            if not schema_at_least(mine if mine is not None else True, value):
                return False
        elif key in _EQUAL:
            if mine != value:
                return False
        elif mine != value:
            return False
    return True
