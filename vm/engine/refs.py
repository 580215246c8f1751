"""Workflow references and templating: `${arg}`, `$step.path`, stdin values, injected env.

Order as in the reference: `${arg}` first (left verbatim when the arg does not exist, so a
shell's `${HOME}` survives), then `$id.path` (left verbatim when `id` has no result yet).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from vm.core import js, json_write
from vm.core.patterns import compiled
from vm.host.commands.base import CommandError

ARG = compiled(r"\$\{([A-Za-z0-9_-]+)\}")
REF = compiled(r"\$([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_]+)+)")
WHOLE_REF = compiled(r"^\$([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_]+)+)$")
_FALSE_DEFAULTS = ("approved", "skipped")


def lookup(result: Any, path: list[str]) -> Any:
    """Walk `path` into a step result as the original walks a reference: into an object by
    key, into an array by an integer index (no `length`), and never into a string, number or
    boolean (`$s.stdout.length` is undefined); js.UNDEFINED where it leads nowhere."""
    value = result
    for segment in path:
        if value is None or value is js.UNDEFINED:
            return js.UNDEFINED
        if isinstance(value, list):
            index = js.to_number(segment)  # "01", "1e0" and "-0" are indices too, as in JS
            if isinstance(index, float) and index.is_integer():
                index = int(index)
            if not (isinstance(index, int) and 0 <= index < len(value)):
                return js.UNDEFINED
            value = value[index]
        elif isinstance(value, dict):
            value = js.get_prop(value, segment)
        else:
            return js.UNDEFINED
    return value


def render_value(value: Any, last_segment: str) -> str:
    if value is js.UNDEFINED or value is None and last_segment in _FALSE_DEFAULTS:
        return "false" if last_segment in _FALSE_DEFAULTS else ""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return js.to_string(value)
    return json_write.json_compact(value)


def substitute_args(text: str, args: Mapping[str, Any]) -> str:
    return ARG.sub(lambda m: js.to_string(args[m[1]]) if m[1] in args else m[0], text)


def substitute_refs(text: str, results: Mapping[str, Any]) -> str:
    def one(m: re.Match) -> str:
        step = m[1]
        if step not in results:
            return m[0]
        path = m[2][1:].split(".")
        return render_value(lookup(results[step], path), path[-1])

    return REF.sub(one, text)


def render(text: str, args: Mapping[str, Any], results: Mapping[str, Any]) -> str:
    """A template string with args, then step references, substituted."""
    if "$" not in text:
        return text
    return substitute_refs(substitute_args(text, args), results)


def strict_ref(step: str, path: list[str], results: Mapping[str, Any]) -> Any:
    """A reference that must name a known step (stdin, for_each, conditions)."""
    if step not in results:
        raise CommandError(f"Unknown step reference: {step}.{'.'.join(path)}", code="T440")
    return lookup(results[step], path)


def resolve_input(value: Any, args: Mapping[str, Any], results: Mapping[str, Any]) -> Any:
    """A `stdin:` / `for_each:` value: one whole reference gives the raw value; any other
    string is a template; non-string YAML values pass through untemplated."""
    if not isinstance(value, str):
        return value
    m = WHOLE_REF.match(value.strip())
    if m:
        return strict_ref(m[1], m[2][1:].split("."), results)
    return render(value, args, results)


def env_name(arg: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", arg.upper()).strip("_")


def injected_env(args: Mapping[str, Any]) -> dict[str, str]:
    """`LOBSTER_ARGS_JSON` and one `LOBSTER_ARG_<NAME>` per arg: the complete injected set."""
    env = {"LOBSTER_ARGS_JSON": json_write.json_compact(dict(args))}
    for name, value in args.items():
        key = env_name(name)
        if key:
            env[f"LOBSTER_ARG_{key}"] = js.to_string(value)
    return env
