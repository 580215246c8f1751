"""The LLM cost ledger and a workflow's cost_limit."""

from __future__ import annotations

import json

import pytest

from vm.isa import cost
from vm.service.protocol import Options, handle

GPT = {"model": "gpt-4o", "usage": {"inputTokens": 100_000, "outputTokens": 10_000}}


def test_billing_prices_per_million_tokens():
    ledger: dict = {}
    assert cost.bill(ledger, "s", [GPT, "not an llm item"], {}) == []
    assert ledger["estimatedCostUsd"] == 0.35  # 0.1 M * $2.50 + 0.01 M * $10
    assert ledger["byStep"] == [{"stepId": "s", "model": "gpt-4o", "inputTokens": 100_000,
                                 "outputTokens": 10_000, "costUsd": 0.35}]


def test_a_replay_llm_invoke_answered_is_not_billed_but_its_look_alike_is():
    """A replay is known by the mark llm.invoke leaves in this process, not by its fields: a
    step that prints `"cached": true` is billed (as in the original), so cost_limit cannot be
    evaded that way."""
    ledger: dict = {}
    cost.bill(ledger, "s", [cost.mark_replay({**GPT, "source": "cache", "cached": True})], {})
    assert ledger.get("estimatedCostUsd", 0) == 0
    for look_alike in ({"cached": True}, {"replayed": True}, {"source": "cache"}, {"source": "run_state"}):
        ledger = {}
        cost.bill(ledger, "s", [{**GPT, **look_alike}], {})
        assert ledger["estimatedCostUsd"] == 0.35, look_alike


def test_unknown_models_warn_once_per_process_and_cost_nothing():
    ledger: dict = {}
    warned: set = set()
    item = {"model": "mystery", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    assert cost.bill(ledger, "a", [item], {}, warned) == [
        '[WARN] No LLM pricing configured for model "mystery"; recording zero cost. Set '
        'LOBSTER_LLM_PRICING_JSON to enable cost_limit enforcement for this model.']
    assert cost.bill(ledger, "b", [item], {}, warned) == []
    assert (ledger["totalInputTokens"], ledger["totalOutputTokens"]) == (10, 2)


def test_pricing_override_and_its_refusal():
    env = {"LOBSTER_LLM_PRICING_JSON": json.dumps({"mystery": {"input": 1, "output": 2}})}
    ledger: dict = {}
    cost.bill(ledger, "a", [{"model": "mystery", "usage": {"input_tokens": 1_000_000}}], env)
    assert ledger["estimatedCostUsd"] == 1.0
    table, warnings = cost.pricing({"LOBSTER_LLM_PRICING_JSON": "{nope"})
    assert table is cost.PRICING and warnings[0].startswith(
        "[WARN] Ignoring invalid LOBSTER_LLM_PRICING_JSON")


def test_limit_stop_and_warn():
    ledger = {"estimatedCostUsd": 0.35}
    assert cost.check_limit(ledger, {"max_usd": 0.25, "action": "stop"}) == (
        "Cost limit exceeded: $0.3500 > $0.25 limit", None)
    assert cost.check_limit(ledger, {"max_usd": 0.25}) == (
        None, "[WARN] Cost $0.3500 exceeds limit $0.25")
    assert cost.check_limit(ledger, {"max_usd": 0.25}) == (  # at every check, as the original
        None, "[WARN] Cost $0.3500 exceeds limit $0.25")
    assert cost.check_limit(ledger, {"max_usd": 1}) == (None, None)


def run_workflow(tmp_path, action: str) -> tuple[dict, list[str]]:
    workflow = {"cost_limit": {"max_usd": 0.25, "action": action},
                "steps": [{"id": "ask", "run": f"echo '{json.dumps(GPT)}'"},
                          {"id": "after", "run": "echo done"}]}
    (tmp_path / "w.json").write_text(json.dumps(workflow))
    logged: list[str] = []
    env = handle({"action": "run", "pipeline": "w.json"},
                 Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s"), log=logged.append))
    return env, logged


def test_a_workflow_stops_at_its_cost_limit(tmp_path):
    env, _ = run_workflow(tmp_path, "stop")
    assert env["error"]["message"] == "Cost limit exceeded: $0.3500 > $0.25 limit"


def test_a_workflow_warns_at_its_cost_limit_and_goes_on(tmp_path):
    env, logged = run_workflow(tmp_path, "warn")
    assert env["output"] == ["done\n"]
    # after the step that spent it, after the next step, and as the run ends (the original)
    assert logged == ["[WARN] Cost $0.3500 exceeds limit $0.25\n"] * 3


@pytest.mark.parametrize("model, label", [
    (None, '"<missing>"'), ("   ", '"<missing>"'), ("constructor", '"constructor"'),
    ("a\u001b\nb\u0085\u2028", '"a\\u001b\\nb\\u0085\\u2028"')])
def test_unpriced_models_are_named_as_the_original_names_them(model, label):
    item = {"model": model, "usage": {"inputTokens": 1}}
    assert cost.bill({}, "s", [item], {})[0].startswith(f"[WARN] No LLM pricing configured for "
                                                         f"model {label}; ")


@pytest.mark.parametrize("raw", ["{not-json", '{"m":{"input":1}}', '{"":{"input":1,"output":2}}',
                                 '{"m":{"input":-1,"output":2}}', '{"m":{"input":NaN,"output":2}}',
                                 "[]", "  "])
def test_a_pricing_table_the_original_refuses_is_ignored(raw):
    table, warnings = cost.pricing({"LOBSTER_LLM_PRICING_JSON": raw})
    assert table is cost.PRICING and warnings == [cost.INVALID_PRICING]
