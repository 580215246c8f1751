"""The LLM cost ledger and a workflow's cost_limit."""

from __future__ import annotations

import json

import pytest

from vm.isa import cost
from vm.service.protocol import Options, handle

GPT = {"model": "gpt-4o", "usage": {"inputTokens": 100_000, "outputTokens": 10_000}}


def test_billing_prices_per_million_tokens():
    ledger = cost.Ledger()
    assert ledger.bill("s", [GPT, "not an llm item"], {}) == []
    assert ledger.summary()["estimatedCostUsd"] == 0.35  # 0.1 M * $2.50 + 0.01 M * $10
    assert ledger.summary()["byStep"] == [{"stepId": "s", "model": "gpt-4o", "inputTokens": 100_000,
                                 "outputTokens": 10_000, "costUsd": 0.35}]


def test_a_replay_llm_invoke_answered_is_not_billed_but_its_look_alike_is():
    """A replay is known by the mark llm.invoke leaves in this process, not by its fields: a
    step that prints `"cached": true` is billed (as in the original), so cost_limit cannot be
    evaded that way."""
    ledger = cost.Ledger()
    ledger.bill("s", [cost.mark_replay({**GPT, "source": "cache", "cached": True})], {})
    assert ledger.cost_usd == 0
    for look_alike in ({"cached": True}, {"replayed": True}, {"source": "cache"}, {"source": "run_state"}):
        ledger = cost.Ledger()
        ledger.bill("s", [{**GPT, **look_alike}], {})
        assert ledger.cost_usd == 0.35, look_alike


def test_unknown_models_warn_once_per_process_and_cost_nothing():
    ledger = cost.Ledger()
    warned: set = set()
    item = {"model": "mystery", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    assert ledger.bill("a", [item], {}, warned) == [
        '[WARN] No LLM pricing configured for model "mystery"; recording zero cost. Set '
        'LOBSTER_LLM_PRICING_JSON to enable cost_limit enforcement for this model.']
    assert ledger.bill("b", [item], {}, warned) == []
    assert (ledger.input_tokens, ledger.output_tokens) == (10, 2)


def test_pricing_override_and_its_refusal():
    env = {"LOBSTER_LLM_PRICING_JSON": json.dumps({"mystery": {"input": 1, "output": 2}})}
    ledger = cost.Ledger()
    ledger.bill("a", [{"model": "mystery", "usage": {"input_tokens": 1_000_000}}], env)
    assert ledger.cost_usd == 1.0
    table, warnings = cost.pricing({"LOBSTER_LLM_PRICING_JSON": "{nope"})
    assert table is cost.PRICING and warnings[0].startswith(
        "[WARN] Ignoring invalid LOBSTER_LLM_PRICING_JSON")


def test_limit_stop_and_warn():
    spent = 0.35
    assert cost.check_limit(spent, cost.CostLimit.of({"max_usd": 0.25, "action": "stop"})) == (
        "Cost limit exceeded: $0.3500 > $0.25 limit", None)
    assert cost.check_limit(spent, cost.CostLimit.of({"max_usd": 0.25})) == (
        None, "[WARN] Cost $0.3500 exceeds limit $0.25")
    ledger = cost.Ledger(limit=cost.CostLimit(0.25), cost_usd=spent)
    assert ledger.check() == ledger.check() == (  # at every check, as the original
        None, "[WARN] Cost $0.3500 exceeds limit $0.25")
    assert cost.check_limit(spent, cost.CostLimit.of({"max_usd": 1})) == (None, None)
    assert cost.check_limit(spent, None) == (None, None)


SPEND = f"echo '{json.dumps(GPT)}'"  # a step that reports $0.35 of model usage


def run_workflow(tmp_path, action: str, steps: list | None = None,
                 **files: dict) -> tuple[dict, list[str]]:
    """A workflow with `cost_limit: {max_usd: 0.25, action}`, its `steps` (by default one that
    spends $0.35, then one that prints `done`), and the other workflow `files` it calls."""
    workflow = {"cost_limit": {"max_usd": 0.25, "action": action},
                "steps": steps or [{"id": "ask", "run": SPEND}]}
    workflow["steps"].append({"id": "after", "run": "echo done"})
    (tmp_path / "w.json").write_text(json.dumps(workflow))
    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content))
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
    assert cost.Ledger().bill("s", [item], {})[0].startswith(f"[WARN] No LLM pricing configured for "
                                                         f"model {label}; ")


@pytest.mark.parametrize("raw", ["{not-json", '{"m":{"input":1}}', '{"":{"input":1,"output":2}}',
                                 '{"m":{"input":-1,"output":2}}', '{"m":{"input":NaN,"output":2}}',
                                 "[]", "  "])
def test_a_pricing_table_the_original_refuses_is_ignored(raw):
    table, warnings = cost.pricing({"LOBSTER_LLM_PRICING_JSON": raw})
    assert table is cost.PRICING and warnings == [cost.INVALID_PRICING]


STOPPED = "Cost limit exceeded: $0.3500 > $0.25 limit"
WARNED = "[WARN] Cost $0.3500 exceeds limit $0.25\n"


def parallel(*branches: dict, wait: str = "all") -> list:
    return [{"id": "p", "parallel": {"wait": wait, "branches": list(branches)}}]


@pytest.mark.parametrize("branch", [
    {"id": "a", "run": SPEND},
    {"id": "a", "pipeline": "exec --json --shell 'cat spend.json'"},
])
def test_a_parallel_branch_is_billed_as_the_step_outside_parallel(tmp_path, branch):
    """The defect of issue 18: a branch's spend was billed in a frame thrown away at the join,
    so `action: stop` let the run end ok. The original bills every joined branch's result."""
    (tmp_path / "spend.json").write_text(json.dumps(GPT))
    env, _ = run_workflow(tmp_path, "stop", parallel(branch, {"id": "b", "run": "echo hi"}))
    assert env["error"]["message"] == STOPPED


def test_every_parallel_branch_is_billed_once_then_the_limit_is_checked(tmp_path):
    env, logged = run_workflow(tmp_path, "warn", parallel({"id": "a", "run": SPEND},
                                                          {"id": "b", "run": SPEND}))
    assert env["output"] == ["done\n"]
    assert logged == ["[WARN] Cost $0.7000 exceeds limit $0.25\n"] * 3  # step, after, the end


def test_wait_any_bills_the_winner_and_not_the_losers(tmp_path):
    env, _ = run_workflow(tmp_path, "stop", parallel(
        {"id": "a", "run": SPEND}, {"id": "b", "run": "sleep 2; echo hi"}, wait="any"))
    assert env["error"]["message"] == STOPPED
    env, logged = run_workflow(tmp_path, "stop", parallel(
        {"id": "a", "run": f"sleep 2; {SPEND}"}, {"id": "b", "run": "echo hi"}, wait="any"))
    assert env["output"] == ["done\n"] and logged == []


def test_a_for_each_bills_every_iteration_and_stops_at_the_first_past_the_limit(tmp_path):
    each = [{"id": "list", "run": "echo '[1,2,3]'"},
            {"id": "each", "for_each": "$list.json", "steps": [
                {"id": "ask", "run": f"echo ran >> ran; {SPEND}"}]}]
    env, _ = run_workflow(tmp_path, "stop", each)
    assert env["error"]["message"] == STOPPED
    assert (tmp_path / "ran").read_text().count("\n") == 1
    env, logged = run_workflow(tmp_path, "warn", [dict(each[0], run="echo '[1,2]'"), each[1]])
    assert env["output"] == ["done\n"]
    assert logged == [WARNED, "[WARN] Cost $0.7000 exceeds limit $0.25\n",  # each sub-step,
                      *["[WARN] Cost $0.7000 exceeds limit $0.25\n"] * 3]  # each, after, end


def test_a_sub_workflow_spend_counts_against_the_caller_once_as_its_step_ends(tmp_path):
    """Its steps bill the run's ledger, its output is not billed a second time, and the
    caller's limit is checked when the `workflow:` step ends (not inside the sub-workflow)."""
    child = {"steps": [{"id": "ask", "run": SPEND}]}
    env, logged = run_workflow(tmp_path, "warn", [{"id": "sub", "workflow": "c.json"}],
                               **{"c.json": child})
    assert env["output"] == ["done\n"]
    assert logged == [WARNED] * 3  # after sub, after `after`, as the run ends
    env, _ = run_workflow(tmp_path, "stop", [{"id": "sub", "workflow": "c.json"}],
                          **{"c.json": child})
    assert env["error"]["message"] == STOPPED


def test_a_sub_workflow_is_held_to_its_own_limit_and_its_caller_to_the_callers(tmp_path):
    """As the original: the sub-workflow checks its own cost_limit after its steps and as it
    ends; the caller sees the spend once the `workflow:` step ends."""
    child = {"cost_limit": {"max_usd": 0.1, "action": "warn"},
             "steps": [{"id": "ask", "run": SPEND}]}
    env, logged = run_workflow(tmp_path, "warn", [{"id": "sub", "workflow": "c.json"}],
                               **{"c.json": child})
    assert env["output"] == ["done\n"]
    assert logged == ["[WARN] Cost $0.3500 exceeds limit $0.10\n"] * 2 + [WARNED] * 3
    child["steps"].append({"id": "last", "run": "echo x"})
    child["cost_limit"]["action"] = "stop"
    env, _ = run_workflow(tmp_path, "warn", [{"id": "sub", "workflow": "c.json"}],
                          **{"c.json": child})
    assert env["error"]["message"] == "Cost limit exceeded: $0.3500 > $0.10 limit"


def test_the_spend_of_a_sub_workflow_parked_at_a_gate_survives_the_pause(tmp_path):
    """The caller's ledger waits in the call record of the saved frame."""
    child = {"steps": [{"id": "ask", "run": SPEND},
                       {"id": "gate", "approval": "go on?", "run": "echo x"}]}
    halted, _ = run_workflow(tmp_path, "stop", [{"id": "sub", "workflow": "c.json"}],
                             **{"c.json": child})
    assert halted["status"] == "needs_approval"
    done = handle({"action": "resume", "token": halted["requiresApproval"]["resumeToken"],
                   "approve": True},
                  Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s")))
    assert done["error"]["message"] == STOPPED
