"""LLM cost ledger of a run: usage of `llm.invoke` results, priced per million tokens, checked
against a workflow's `cost_limit`. The ledger is a typed record that lives in the frame.

What is billed follows the original: every live call llm.invoke pays for is billed once in
the workflow that made it and once in each caller up the `workflow:` chain, whatever the
stages after it do with its answer; a replay of an answer bills nothing unless its call is
still unbilled; any other item that reports usage (a step printing JSON) is billed as it says.

No `from __future__ import annotations`: the codec reads these records' annotations as objects.
"""

import json
import math
import threading
from collections.abc import Mapping
from typing import Any

from attrs import field

from vm.core import js
from vm.core.records import define, frozen

# USD per million tokens (input, output), list prices as published by the vendors in 2026.
PRICING: dict[str, dict[str, float]] = {
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4-turbo": {"input": 10.00, "output": 30.00},
    "gpt-3.5-turbo": {"input": 0.50, "output": 1.50},
    "claude-opus-4-20250514": {"input": 15.00, "output": 75.00},
    "claude-sonnet-4-5-20250514": {"input": 3.00, "output": 15.00},
    "claude-haiku-3-5": {"input": 0.80, "output": 4.00},
    "gemini-1.5-pro": {"input": 1.25, "output": 5.00},
    "gemini-1.5-flash": {"input": 0.075, "output": 0.30},
}
_INPUT = ("inputTokens", "input_tokens", "prompt_tokens")
_OUTPUT = ("outputTokens", "output_tokens", "completion_tokens")


INVALID_PRICING = ("[WARN] Ignoring invalid LOBSTER_LLM_PRICING_JSON; custom LLM pricing must be a "
                   "JSON object whose model entries have finite non-negative input and output rates.")


def pricing(env: Mapping[str, str]) -> tuple[dict, list[str]]:
    """The table, overridden by LOBSTER_LLM_PRICING_JSON; a bad override is ignored, once. An
    override is a JSON object whose keys are model ids (not blank) and whose entries have
    finite non-negative `input` and `output` rates, as the original requires."""
    raw = env.get("LOBSTER_LLM_PRICING_JSON") or ""
    if not raw:
        return PRICING, []
    try:
        override = json.loads(raw, parse_constant=_no_constant)
    except ValueError:
        return PRICING, [INVALID_PRICING]
    if not isinstance(override, dict) or not all(
            key.strip() and isinstance(entry, dict) and _rate(entry.get("input"))
            and _rate(entry.get("output")) for key, entry in override.items()):
        return PRICING, [INVALID_PRICING]
    return {**PRICING, **override}, []


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python reads them, JSON does not


def _rate(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 \
        and value != float("inf")


def model_label(model: str | None) -> str:
    """A model id as the warnings show it: JSON, with the C1 controls and the line and
    paragraph separators escaped too; `"<missing>"` for no id or a blank one."""
    shown = json.dumps(model if model and model.strip() else "<missing>", ensure_ascii=False)
    return "".join(f"\\u{ord(c):04x}" if 0x7F <= ord(c) <= 0x9F or c in "\u2028\u2029" else c
                   for c in shown)


def _tokens(usage: Mapping, names: tuple[str, ...]) -> int:
    """A token count as the original reads it: the first of `names` present and not null
    (even one that is no count), taken as JavaScript's `Number` takes it ("20" is 20, true is
    1), floored; anything that is not a finite non-negative number counts nothing."""
    value = next((usage[name] for name in names
                  if usage.get(name) is not None and usage[name] is not js.UNDEFINED), 0)
    count = js.to_number(value)
    return math.floor(count) if math.isfinite(count) and count >= 0 else 0


# What llm.invoke made in this process, by identity: the mark lives here, never in the item, so
# a step that prints a replay-shaped object (or copies one) is billed, and cost_limit cannot be
# evaded by printing `"cached": true` (as the original, whose marks are in-process too). Both an
# item and its usage record are marked, so `pick usage` keeps what the call was.
_MARKS: dict[int, tuple[Any, Any]] = {}
_MARKS_KEPT = 4096  # a long-lived process (an MCP server) forgets the oldest marks
# The live calls a run has paid for, not yet billed at every level of `workflow:` nesting.
_CALLS: list["LiveCall"] = []
_CALLS_KEPT = 4096
_LOCK = threading.Lock()


class Replay:
    """The mark of an answer llm.invoke read from its cache or run state: no call was made."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key if isinstance(key, str) else None


class LiveCall:
    """One provider call llm.invoke paid for, in run `run` (its root scope). It is billed once
    in the workflow that made it and once more in every caller up the `workflow:` chain (as
    the original, whose composed runs bill their own steps while the caller bills the call
    again): `claimed` holds the nesting levels that billed it."""

    __slots__ = ("claimed", "key", "model", "run", "scope", "usage")

    def __init__(self, run: Any, key: str, model: str | None, usage: dict,
                 scope: Any = None) -> None:
        self.run, self.key, self.model, self.usage = run, key, model, dict(usage)
        self.scope = scope  # where it was made: a parallel branch's own scope, say
        self.claimed: set[int] = set()


def _mark(obj: Any, mark: Any) -> None:
    while len(_MARKS) >= _MARKS_KEPT:
        _MARKS.pop(next(iter(_MARKS)))
    _MARKS[id(obj)] = (obj, mark)


def _mark_of(obj: Any) -> Any:
    entry = _MARKS.get(id(obj))
    return entry[1] if entry is not None and entry[0] is obj else None


def mark_replay(item: Any) -> Any:
    """Record `item` (an answer from the cache or run state) as a replay; returns it."""
    with _LOCK:
        replay = Replay(item.get("cacheKey"))
        _mark(item, replay)
        if isinstance(item.get("usage"), dict):
            _mark(item["usage"], replay)
    return item


def mark_live(item: dict, key: str, scope: Any) -> dict:
    """Open the charge of a live call whose answer is `item`, in the run of `scope`: it is
    billed by the step that made it, whether or not the item reaches the step's result (a
    `pick output` or a `head --n 0` drops it; a validation retry never returns it)."""
    usage = item.get("usage")
    if not isinstance(usage, dict):
        return item
    model = item.get("model") if isinstance(item.get("model"), str) else None
    with _LOCK:
        call = LiveCall(run_of(scope), key, model, usage, scope)
        _mark(item, call)
        _mark(usage, call)
        if _cancelled(scope):  # a `wait: any` loser paying after the race: not the run's
            return item
        while len(_CALLS) >= _CALLS_KEPT:
            _CALLS.pop(0)
        _CALLS.append(call)
    return item


def _cancelled(scope: Any) -> bool:
    while scope is not None and not getattr(scope, "cancelled", False):
        scope = getattr(scope, "parent", None)
    return scope is not None


def drop_calls(scopes: list) -> None:
    """Forget the calls made in `scopes` (the losing branches of a `wait: any` step): the
    original keeps only the winner's spend, whenever a loser's call lands."""
    with _LOCK:
        _CALLS[:] = [call for call in _CALLS if not any(_within(call.scope, s) for s in scopes)]


def _within(scope: Any, outer: Any) -> bool:
    while scope is not None:
        if scope is outer:
            return True
        scope = getattr(scope, "parent", None)
    return False


def restore_marks(results: Any, ledger: "Ledger") -> None:
    """After a pause: mark as replays the answers among `results` of calls `ledger` billed
    before it (same cache key, model and billable tokens), as the original does at the same
    trusted boundary. Only these objects: JSON a step prints later stays billable."""
    billed = {tuple(json.loads(text)) for text in ledger.billed_calls}
    if not billed:
        return
    stack = [results]
    with _LOCK:
        while stack:
            value = stack.pop()
            if isinstance(value, list):
                stack.extend(value)
            elif isinstance(value, dict):
                key, usage, model = value.get("cacheKey"), value.get("usage"), value.get("model")
                if isinstance(key, str) and isinstance(usage, dict) and (
                        key, model if isinstance(model, str) else None,
                        *_billable(usage)) in billed:
                    replay = Replay(key)
                    _mark(value, replay)
                    _mark(usage, replay)
                stack.extend(value.values())


def run_of(scope: Any) -> Any:
    """The root of a run's scopes (a parallel step's branches run in nested ones)."""
    while getattr(scope, "parent", None) is not None:
        scope = scope.parent
    return scope


def _open_call(run: Any, level: int, key: str | None,
               cost: tuple[str | None, dict] | None = None) -> "LiveCall | None":
    """The oldest call of `run` not yet billed at `level`: under `key` (any key: None), and
    when `cost` is given, one that cost that (same model, same billable tokens)."""
    for call in _CALLS:
        if call.run is not run or level in call.claimed or key is not None and call.key != key:
            continue
        if cost is None or (call.model == cost[0] and _billable(call.usage) == _billable(cost[1])):
            return call
    return None


def _claim(call: "LiveCall", level: int) -> None:
    call.claimed.add(level)
    if 0 in call.claimed and call in _CALLS:  # the outermost workflow has it: nothing owes it
        _CALLS.remove(call)


def _call_text(call: LiveCall) -> str:
    return json.dumps([call.key, call.model, *_billable(call.usage)])


def carry_open(run: Any, ledgers: list["Ledger"]) -> None:
    """As a run stops (it may be parked and resumed elsewhere): its calls not yet billed at a
    level go into that level's ledger (`ledgers[level]`), out of this process's memory."""
    with _LOCK:
        for call in [c for c in _CALLS if c.run is run]:
            for level, ledger in enumerate(ledgers):
                if level not in call.claimed:
                    ledger.open_calls = (*ledger.open_calls, _call_text(call))
            _CALLS.remove(call)


def reopen(run: Any, ledgers: list["Ledger"]) -> None:
    """As a run starts or goes on: the calls `carry_open` kept, open again at their level."""
    with _LOCK:
        for level, ledger in enumerate(ledgers):
            for text in ledger.open_calls:
                key, model, tokens_in, tokens_out = json.loads(text)
                call = LiveCall(run, key, model, {"inputTokens": tokens_in,
                                                  "outputTokens": tokens_out})
                call.claimed = set(range(len(ledgers))) - {level}
                _CALLS.append(call)
            ledger.open_calls = ()


def _billable(usage: Mapping) -> tuple[int, int]:
    return _tokens(usage, _INPUT), _tokens(usage, _OUTPUT)


def usage_of(item: Any) -> tuple[int, int, str | None] | None:
    """(input tokens, output tokens, model) of an item that reports LLM usage; None for
    anything else."""
    if not isinstance(item, dict) or not isinstance(item.get("usage"), dict):
        return None
    model = item.get("model") if isinstance(item.get("model"), str) else None
    return (*_billable(item["usage"]), model)


@frozen
class CostLimit:
    """A workflow's `cost_limit`: past `max_usd`, `stop` fails the run and `warn` warns."""

    max_usd: float
    action: str = "warn"

    @classmethod
    def of(cls, spec: Mapping) -> "CostLimit":
        """From the COST_LIMIT payload {max_usd, action}."""
        return cls(float(spec["max_usd"]), spec.get("action") or "warn")


@frozen
class Charge:
    """One billed item: the step that produced it and what it cost."""

    step: str
    model: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float


@define
class Ledger:
    """The spend of a run so far, and the limit it is held to (None: no cost_limit)."""

    limit: CostLimit | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # rounded to 1e-6 after every charge, as the original
    charges: tuple[Charge, ...] = field(default=())
    # The live calls billed here, each `[cache key, model, input, output]` as JSON text: what
    # survives a pause of the marks on their answers (`restore_marks`), as the original's
    # resume state carries the calls it billed, so a step after the pause that hands on an
    # answer from before it does not bill the call again.
    billed_calls: tuple[str, ...] = field(default=(), metadata={"additive": True})
    # The live calls this workflow level had not billed when the run paused (a pipeline parked
    # at `ask` after paying), in the same form: billed after the resume, as the original.
    open_calls: tuple[str, ...] = field(default=(), metadata={"additive": True})

    def bill(self, step_id: str, items: list, env: Mapping[str, str],
             warned: set | None = None, run: Any = None, level: int = 0) -> list[str]:
        """Add the usage the items report; returns the warnings to show. `warned` holds the
        model ids already warned about in this process (the original warns once per model and
        process, a resumed run again); `run` and `level` say whose live calls these are
        and at which `workflow:` nesting level they are billed.

        As the original: an answer of a live call bills that call, at what the call cost,
        unless it was billed here already; a replay (or an answer billed already) bills a call
        under its key still unbilled here, else nothing; any other item reporting usage is a
        copy, always billed at what it says, which settles a call it matches."""
        table = pricing(env)[0]  # a bad table was reported as the run started
        warned = set() if warned is None else warned
        warnings: list[str] = []
        replays: list[str | None] = []
        copies: list[dict] = []
        with _LOCK:
            for item in items:
                if usage_of(item) is None:
                    continue
                mark = _mark_of(item) or _mark_of(item["usage"])
                if isinstance(mark, LiveCall) and level not in mark.claimed:
                    self._claim(mark, level)
                    self._charge(step_id, mark.model, mark.usage, table, warned, warnings)
                elif mark is not None:
                    replays.append(mark.key)
                else:
                    copies.append(item)
            for key in replays:
                call = _open_call(run, level, key) if key is not None else None
                if call is not None:
                    self._claim(call, level)
                    self._charge(step_id, call.model, call.usage, table, warned, warnings)
            for item in copies:
                model = usage_of(item)[2]
                key = item.get("cacheKey") if isinstance(item.get("cacheKey"), str) else None
                call = _open_call(run, level, key or None, (model, item["usage"]))
                if call is not None:
                    self._claim(call, level)
                self._charge(step_id, model, item["usage"], table, warned, warnings)
        return warnings

    def settle(self, step_id: str, env: Mapping[str, str], warned: set, run: Any,
               level: int) -> list[str]:
        """Bill the live calls of `run` no item billed at `level` (their answers were dropped
        or reshaped, or they were made in a sub-workflow that returned) to `step_id`."""
        table = pricing(env)[0]
        warnings: list[str] = []
        with _LOCK:
            while (call := _open_call(run, level, None)) is not None:
                self._claim(call, level)
                self._charge(step_id, call.model, call.usage, table, warned, warnings)
        return warnings

    def _claim(self, call: LiveCall, level: int) -> None:
        _claim(call, level)
        self.billed_calls = (*self.billed_calls, _call_text(call))

    def _charge(self, step_id: str, model: str | None, usage: Mapping, table: dict,
                warned: set, warnings: list[str]) -> None:
        tokens_in, tokens_out = _billable(usage)
        key = model if model and model.strip() else None
        price = table.get(key) if key is not None else None
        if not isinstance(price, dict):
            label = model_label(key)
            if label not in warned:
                warned.add(label)
                warnings.append(f"[WARN] No LLM pricing configured for model {label}; "
                                "recording zero cost. Set LOBSTER_LLM_PRICING_JSON to enable "
                                "cost_limit enforcement for this model.")
            cost = 0.0
        else:
            cost = (tokens_in * price["input"] + tokens_out * price["output"]) / 1_000_000
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        self.cost_usd = round(self.cost_usd + cost, 6)
        self.charges = (*self.charges,
                        Charge(step_id, model, tokens_in, tokens_out, round(cost, 6)))

    def check(self) -> tuple[str | None, str | None]:
        """(error, warning) of the limit against the spend so far (see `check_limit`)."""
        return check_limit(self.cost_usd, self.limit)

    def summary(self) -> dict[str, Any]:
        """The original's `_meta.cost` shape."""
        return {"totalInputTokens": self.input_tokens, "totalOutputTokens": self.output_tokens,
                "estimatedCostUsd": self.cost_usd,
                "byStep": [{"stepId": c.step, "model": c.model, "inputTokens": c.input_tokens,
                            "outputTokens": c.output_tokens, "costUsd": c.cost_usd}
                           for c in self.charges]}


def check_limit(spent: float, limit: CostLimit | None) -> tuple[str | None, str | None]:
    """(error, warning): past the limit, `stop` is an error and `warn` (the default) a
    warning, each time the limit is checked (after every step, and as the run ends)."""
    if limit is None or spent <= limit.max_usd:
        return None, None
    if limit.action == "stop":
        return f"Cost limit exceeded: ${spent:.4f} > ${limit.max_usd:.2f} limit", None
    return None, f"[WARN] Cost ${spent:.4f} exceeds limit ${limit.max_usd:.2f}"
