"""The LLM cost ledger and a workflow's cost_limit."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vm.isa import cost
from vm.service.protocol import Options, handle

GPT = {"model": "gpt-4o", "usage": {"inputTokens": 100_000, "outputTokens": 10_000}}


def gpt(**fields) -> dict:
    """A fresh $0.35 item: the marks llm.invoke leaves are on the objects, the usage one too."""
    return {**GPT, "usage": dict(GPT["usage"]), **fields}


def test_billing_prices_per_million_tokens():
    ledger = cost.Ledger()
    assert ledger.bill("s", [GPT, "not an llm item"], {}) == []
    assert ledger.summary()["estimatedCostUsd"] == 0.35  # 0.1 M * $2.50 + 0.01 M * $10
    assert ledger.summary()["byStep"] == [{"stepId": "s", "model": "gpt-4o", "inputTokens": 100_000,
                                 "outputTokens": 10_000, "costUsd": 0.35}]


@pytest.mark.parametrize("usage, billed", [
    ({"input_tokens": 10, "output_tokens": "20"}, (10, 20)),  # as JavaScript's Number reads it
    ({"prompt_tokens": " 7 ", "completion_tokens": True}, (7, 1)),
    ({"inputTokens": "0x10", "outputTokens": "1e2"}, (16, 100)),
    ({"inputTokens": [5], "outputTokens": 2.9}, (5, 2)),
    ({"inputTokens": -3, "outputTokens": "abc"}, (0, 0)),
    ({"inputTokens": {}, "outputTokens": [1, 2]}, (0, 0)),
    # the first spelling there and not null is the one read, even if it is no count
    ({"inputTokens": "x", "input_tokens": 50, "outputTokens": None, "output_tokens": 4}, (0, 4)),
])
def test_token_counts_are_read_as_the_original_reads_them(usage, billed):
    assert cost.usage_of({"model": "gpt-4o", "usage": usage}) == (*billed, "gpt-4o")


def test_a_replay_llm_invoke_answered_is_not_billed_but_its_look_alike_is():
    """A replay is known by the mark llm.invoke leaves in this process, not by its fields: a
    step that prints `"cached": true` is billed (as in the original), so cost_limit cannot be
    evaded that way."""
    ledger = cost.Ledger()
    ledger.bill("s", [cost.mark_replay(gpt(source="cache", cached=True))], {})
    assert ledger.cost_usd == 0
    for look_alike in ({"cached": True}, {"replayed": True}, {"source": "cache"}, {"source": "run_state"}):
        ledger = cost.Ledger()
        ledger.bill("s", [gpt(**look_alike)], {})
        assert ledger.cost_usd == 0.35, look_alike


def test_unknown_models_warn_once_per_process_and_cost_nothing():
    ledger = cost.Ledger()
    warned: set = set()
    item = {"model": "mystery", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    assert ledger.bill("a", [item], {}, warned) == [(
        '[WARN] No LLM pricing configured for model "mystery"; recording zero cost. Set '
        'LOBSTER_LLM_PRICING_JSON to enable cost_limit enforcement for this model.')]
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


def test_the_spend_of_a_caller_waiting_on_a_sub_workflow_parked_at_a_gate_survives_the_pause(
        tmp_path):
    """The caller's ledger waits in the call record of the saved frame: $0.20 before the
    pause and the sub-workflow's output of $0.20 after it pass the $0.25 limit together."""
    small = "echo '" + json.dumps({"model": "gpt-4o", "usage": {"inputTokens": 80_000}}) + "'"
    child = {"steps": [{"id": "gate", "approval": "go on?", "run": "echo x"},
                       {"id": "ask", "run": small}]}
    halted, _ = run_workflow(tmp_path, "stop", [{"id": "first", "run": small},
                                                {"id": "sub", "workflow": "c.json"}],
                             **{"c.json": child})
    assert halted["status"] == "needs_approval"
    done = handle({"action": "resume", "token": halted["requiresApproval"]["resumeToken"],
                   "approve": True},
                  Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s")))
    assert done["error"]["message"] == "Cost limit exceeded: $0.4000 > $0.25 limit"


# live llm.invoke calls ---------------------------------------------------------------------
RUN = object()  # stands for a run's root scope


def test_a_live_answer_bills_its_call_once_at_what_the_call_cost():
    item = cost.mark_live(gpt(), "k", RUN)
    ledger = cost.Ledger()
    ledger.bill("a", [{"usage": item["usage"]}], {}, run=RUN)  # `pick usage` dropped the model
    assert ledger.summary()["byStep"][0]["model"] == "gpt-4o" and ledger.cost_usd == 0.35
    ledger.bill("b", [item], {}, run=RUN)  # the same answer handed on: billed already
    ledger.bill("c", [gpt()], {}, run=RUN)  # a copy printed by a step is always billed
    assert ledger.settle("d", {}, set(), RUN, 0) == []
    assert [c.step for c in ledger.charges] == ["a", "c"] and ledger.cost_usd == 0.7


def test_a_call_no_item_billed_is_settled_and_a_matching_copy_settles_it():
    cost.mark_live(gpt(), "k", RUN)  # its answer was dropped (`pick output`, `head --n 0`)
    ledger = cost.Ledger()
    ledger.settle("a", {}, set(), RUN, 0)
    assert [(c.step, c.cost_usd) for c in ledger.charges] == [("a", 0.35)]
    cost.mark_live(gpt(), "k", RUN)
    ledger.bill("b", [gpt()], {}, run=RUN)  # a JSON round trip of it: billed, and settles it
    ledger.settle("b", {}, set(), RUN, 0)
    assert ledger.cost_usd == 0.7
    cost.mark_live(gpt(), "k", object())  # another run's call is not this run's to bill
    ledger.settle("c", {}, set(), RUN, 0)
    assert ledger.cost_usd == 0.7


def test_a_call_made_in_a_sub_workflow_is_billed_there_and_again_by_its_caller():
    item = cost.mark_live(gpt(), "k", RUN)
    child, caller = cost.Ledger(), cost.Ledger()
    child.bill("ask", [item], {}, run=RUN, level=1)
    child.settle("ask", {}, set(), RUN, 1)
    caller.settle("sub", {}, set(), RUN, 0)
    caller.bill("after", [item], {}, run=RUN)
    assert (child.cost_usd, caller.cost_usd) == (0.35, 0.35)
    assert caller.charges[0].step == "sub"


def test_a_replay_bills_a_call_under_its_key_still_unbilled():
    """Two identical calls racing a cold cache: each paid, the replay standing in for one."""
    cost.mark_live(gpt(), "k", RUN)
    ledger = cost.Ledger()
    ledger.bill("a", [cost.mark_replay(gpt(cacheKey="k"))], {}, run=RUN)
    ledger.bill("b", [cost.mark_replay(gpt(cacheKey="k"))], {}, run=RUN)
    assert [c.step for c in ledger.charges] == ["a"]


class Adapter(BaseHTTPRequestHandler):
    """An LLM adapter that answers every call with $0.35 of gpt-4o usage."""

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        body = json.dumps({"ok": True, "result": {"output": {"text": "hi"}, **GPT}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def llm_env(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Adapter)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    monkeypatch.setenv("OPENCLAW_URL", f"http://127.0.0.1:{server.server_address[1]}")
    for name in ("OPENCLAW_TOKEN", "LOBSTER_LLM_PROVIDER", "LOBSTER_RUN_STATE_KEY"):
        monkeypatch.delenv(name, raising=False)
    yield
    server.shutdown()
    server.server_close()


LLM = "llm.invoke --prompt hi --disable-cache"


@pytest.mark.parametrize("pipeline", [f"{LLM} | pick output", f"{LLM} | head --n 0",
                                      f"{LLM} | pick usage", f"{LLM} | json"])
def test_a_call_is_billed_whatever_the_stages_after_it_do(tmp_path, llm_env, pipeline):
    """Issue 18 item 3: the original bills the call itself, not the items that come out."""
    _, logged = run_workflow(tmp_path, "warn", [{"id": "ask", "pipeline": pipeline}])
    assert logged == [WARNED] * 3


def test_an_answer_handed_to_a_later_step_is_not_billed_again(tmp_path, llm_env):
    _, logged = run_workflow(tmp_path, "warn", [
        {"id": "ask", "pipeline": LLM}, {"id": "again", "pipeline": "head", "stdin": "$ask.json"}])
    assert logged == [WARNED] * 4
    _, logged = run_workflow(tmp_path, "warn", [  # printed by a shell step: a copy, billed
        {"id": "ask", "pipeline": LLM}, {"id": "again", "run": "cat", "stdin": "$ask.stdout"}])
    assert logged == [WARNED] + ["[WARN] Cost $0.7000 exceeds limit $0.25\n"] * 3


def test_a_for_each_bills_a_call_whose_answer_it_drops(tmp_path, llm_env):
    env, _ = run_workflow(tmp_path, "stop", [
        {"id": "list", "run": "echo '[1,2]'"},
        {"id": "each", "for_each": "$list.json", "steps": [
            {"id": "ask", "pipeline": f"{LLM} | pick output"}]}])
    assert env["error"]["message"] == STOPPED


@pytest.mark.parametrize("child_steps, billed", [
    ([{"id": "s1", "run": SPEND}, {"id": "s2", "run": "echo x"}], False),  # printed, not output
    ([{"id": "s1", "run": "echo x"}, {"id": "s2", "run": SPEND}], True),  # its output
    ([{"id": "s1", "run": SPEND}, {"id": "s2", "run": SPEND}], True),  # the output only
    ([{"id": "s1", "pipeline": LLM}, {"id": "s2", "run": "echo x"}], True),  # a live call
    ([{"id": "s1", "pipeline": f"{LLM} | pick output"}], True),
    ([{"id": "s1", "pipeline": LLM}, {"id": "s2", "run": "cat", "stdin": "$s1.stdout"}], True),
])
def test_a_caller_bills_a_sub_workflows_output_and_live_calls_only(tmp_path, llm_env,
                                                                    child_steps, billed):
    """Issue 18 item 3, as the original: usage a sub-workflow's other steps print is its own
    spend; its caller bills its output and each LLM call made in it, each once."""
    env, logged = run_workflow(tmp_path, "warn", [{"id": "sub", "workflow": "c.json"}],
                               **{"c.json": {"steps": child_steps}})
    assert env["output"] == ["done\n"]
    assert logged == ([WARNED] * 3 if billed else [])


def test_a_step_that_fails_after_paying_is_billed(tmp_path, llm_env):
    """Its spend is settled as it fails, so `action: stop` stops before the next step."""
    env, _ = run_workflow(tmp_path, "stop", [
        {"id": "ask", "pipeline": f"{LLM} | exec --shell 'exit 3'", "on_error": "continue"},
        {"id": "next", "run": "touch ran"}])
    assert env["error"]["message"] == STOPPED
    assert not (tmp_path / "ran").exists()


def resume(tmp_path, halted: dict, **decision) -> tuple[dict, list[str]]:
    request = halted.get("requiresApproval") or halted["requiresInput"]
    logged: list[str] = []
    env = handle({"action": "resume", "token": request["resumeToken"], **decision},
                 Options(cwd=str(tmp_path), state_dir=str(tmp_path / "s"), log=logged.append))
    return env, logged


def test_an_answer_billed_before_a_pause_is_not_billed_again_after_it(tmp_path, llm_env):
    """As the original, whose resume state names the calls it billed; printed copies are."""
    halted, logged = run_workflow(tmp_path, "warn", [
        {"id": "ask", "pipeline": LLM}, {"id": "gate", "approval": "go on?"},
        {"id": "again", "pipeline": "pick model,usage,cacheKey", "stdin": "$ask.json"},
        {"id": "printed", "run": "cat", "stdin": "$ask.stdout"}])
    assert halted["status"] == "needs_approval" and logged == [WARNED] * 2
    done, logged = resume(tmp_path, halted, approve=True)
    assert done["output"] == ["done\n"]
    assert logged == [WARNED] + ["[WARN] Cost $0.7000 exceeds limit $0.25\n"] * 3


def test_a_call_paid_before_a_pipeline_parked_at_ask_is_billed_after_the_resume(tmp_path,
                                                                               llm_env):
    halted, logged = run_workflow(tmp_path, "stop", [
        {"id": "ask", "pipeline": f"{LLM} | pick output | ask --prompt ok"}])
    assert halted["status"] == "needs_input" and logged == []
    done, _ = resume(tmp_path, halted, responseJson=json.dumps({"decision": "approve"}))
    assert done["error"]["message"] == STOPPED


def test_a_wait_any_loser_that_paid_is_not_billed(tmp_path, llm_env):
    env, logged = run_workflow(tmp_path, "stop", parallel(
        {"id": "a", "run": "sleep 0.3; echo hi"},
        {"id": "b", "pipeline": f"{LLM} | exec --shell 'sleep 2'"}, wait="any"))
    assert env["output"] == ["done\n"] and logged == []


def test_a_sub_workflows_own_stop_ends_the_run_whatever_the_callers_policy(tmp_path):
    child = {"cost_limit": {"max_usd": 0.1, "action": "stop"},
             "steps": [{"id": "ask", "run": SPEND}, {"id": "last", "run": "echo x"}]}
    env, _ = run_workflow(tmp_path, "warn", [
        {"id": "sub", "workflow": "c.json", "on_error": "continue"}], **{"c.json": child})
    assert env["error"]["message"] == "Cost limit exceeded: $0.3500 > $0.10 limit"
