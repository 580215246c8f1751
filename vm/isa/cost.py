"""LLM cost ledger of a run: usage of `llm.invoke` results, priced per million tokens, checked
against a workflow's `cost_limit`. The ledger is a typed record that lives in the frame.

No `from __future__ import annotations`: the codec reads these records' annotations as objects.
"""

import json
from collections.abc import Mapping
from typing import Any

from attrs import field

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
    for name in names:
        value = usage.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            return int(value)
    return 0


# Replays llm.invoke answered from its cache or run state in this process, by identity: the
# mark lives here, never in the item, so a step that prints a replay-shaped object (or copies
# one) is billed, and cost_limit cannot be evaded by printing `"cached": true` (as the
# original, whose marks are in-process too). Each entry is dropped when it is billed.
_REPLAYS: dict[int, Any] = {}


_REPLAYS_KEPT = 4096  # a long-lived process (an MCP server) forgets the oldest unbilled marks


def mark_replay(item: Any) -> Any:
    """Record `item` (an answer from the cache or run state) as a replay; returns it."""
    while len(_REPLAYS) >= _REPLAYS_KEPT:
        _REPLAYS.pop(next(iter(_REPLAYS)))
    _REPLAYS[id(item)] = item
    return item


def _is_replay(item: Any) -> bool:
    return _REPLAYS.get(id(item)) is item


def usage_of(item: Any) -> tuple[int, int, str | None] | None:
    """(input tokens, output tokens, model) of a billable LLM result; None for anything else,
    and for a replay llm.invoke answered in this process (`mark_replay`)."""
    if not isinstance(item, dict) or not isinstance(item.get("usage"), dict):
        return None
    if _is_replay(item):
        return None
    usage = item["usage"]
    model = item.get("model") if isinstance(item.get("model"), str) else None
    return _tokens(usage, _INPUT), _tokens(usage, _OUTPUT), model


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

    def bill(self, step_id: str, items: list, env: Mapping[str, str],
             warned: set | None = None) -> list[str]:
        """Add every billable item's usage; returns the warnings to show. `warned` holds the
        model ids already warned about in this process (the original warns once per model and
        process, a resumed run again)."""
        table = pricing(env)[0]  # a bad table was reported as the run started
        warned = set() if warned is None else warned
        warnings: list[str] = []
        for item in items:
            usage = usage_of(item)
            _REPLAYS.pop(id(item), None)
            if usage is None:
                continue
            tokens_in, tokens_out, model = usage
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
        return warnings

    def absorb(self, step_id: str, other: "Ledger") -> None:
        """Take the charges of a sub-workflow's ledger as the spend of its `workflow:` step."""
        for charge in other.charges:
            self.input_tokens += charge.input_tokens
            self.output_tokens += charge.output_tokens
            self.cost_usd = round(self.cost_usd + charge.cost_usd, 6)
            self.charges = (*self.charges, Charge(step_id, charge.model, charge.input_tokens,
                                                  charge.output_tokens, charge.cost_usd))

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
