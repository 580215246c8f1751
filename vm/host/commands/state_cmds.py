"""`state.get`, `state.set`, `diff.last`: values that persist in the state directory."""

from __future__ import annotations

from vm.core import js, json_write
from vm.host.commands.base import Args, CommandError, Context
from vm.host.store import StateStore, StoreError


def _store(ctx: Context) -> StateStore:
    return ctx.store


def _single_or_all(items: list):
    return items[0] if len(items) == 1 else list(items)


def state_get(args: Args, items: list, ctx: Context) -> list:
    key = args.positionals[0]
    try:
        return [_store(ctx).get_value(key, strict=True)]
    except StoreError as exc:
        raise CommandError(str(exc)) from None


def state_set(args: Args, items: list, ctx: Context) -> list:
    key = args.positionals[0]
    value = _single_or_all(items)
    try:
        _store(ctx).set_value(key, value)
    except StoreError as exc:
        raise CommandError(str(exc)) from None
    return [value]


def _key_sorted(value) -> str:
    """The reference's stableStringify: JSON with each object's keys sorted (an undefined
    property left out, an undefined array item null; a lone undefined has no JSON text and
    equals no stored value)."""
    if value is js.UNDEFINED:
        return "undefined"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_write.json_compact(k)}:{_key_sorted(value[k])}"
                              for k in sorted(value) if value[k] is not js.UNDEFINED) + "}"
    if isinstance(value, list):
        return "[" + ",".join("null" if v is js.UNDEFINED else _key_sorted(v)
                              for v in value) + "]"
    return json_write.json_compact(value)


def diff_last(args: Args, items: list, ctx: Context) -> list:
    key = args.get("key")
    if not isinstance(key, str):
        key = args.positionals[0]
    after = _single_or_all(items)
    store = _store(ctx)
    try:
        before = store.get_value(key)
        store.set_value(key, after)
    except StoreError as exc:
        raise CommandError(str(exc)) from None
    changed = _key_sorted(before) != _key_sorted(after)
    return [{"kind": "diff.last", "key": key, "changed": changed, "before": before, "after": after}]
