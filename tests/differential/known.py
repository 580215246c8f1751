"""Known divergences not accepted as deliberate (DIVERGENCES.md D entries): each has an
xfail(strict) case; generated runs tolerate a match, so only a new divergence fails them."""

from __future__ import annotations

import json
import re

from .allowlist import Entry, message, pipeline_text, status


def _renderer_in_tool_stdout(case, i, ref, ours) -> bool:
    out = ref.get("stdout") or ""
    start = out.rfind('{\n  "protocolVersion": 1')
    if start <= 0 or not isinstance(ours.get("stdoutJson"), dict):
        return False
    try:
        tail = json.loads(out[start:])
    except ValueError:
        return False
    return tail.get("status") == ours["stdoutJson"].get("status")


def _human_pipeline_halt(case, i, ref, ours) -> bool:
    if case.get("kind") != "pipeline" or case["steps"][i].get("action", "run") != "run":
        return False
    ours_text = json.dumps(ours.get("stdoutJson")) + (ours.get("stdout") or "")
    ref_text = json.dumps(ref.get("stdoutJson")) + (ref.get("stdout") or "")
    return (re.search(r'"status": "needs_(approval|input)"', ours_text) is not None
            and "resumeToken" not in ref_text and ref.get("exitCode") == 0)


def _input_request(step: dict) -> dict | None:
    env = step.get("stdoutJson")
    req = env.get("requiresInput") if isinstance(env, dict) else None
    return req if isinstance(req, dict) else None


def _args_json_object(case, i, ref, ours) -> bool:
    return message(ours) == "run --args-json must be a JSON object" and message(ref) != message(ours)




def _condition_error_order(case, i, ref, ours) -> bool:
    return ((message(ref) or "").startswith("Unknown step reference: ")
            and (message(ours) or "").startswith("Unsupported condition: "))


def _missing_cwd(case, i, ref, ours) -> bool:
    return ("shell not found; check LOBSTER_SHELL" in (message(ref) or "")
            and "cwd not usable" in (message(ours) or ""))


def _argv_quoting(case, i, ref, ours) -> bool:
    argv, words, k = ours["argv"], [], 1
    while argv[:1] == ["run"] and k < len(argv):
        if argv[k] in ("--mode", "--args-json", "--file"):
            k += 2
            continue
        words.append(argv[k])
        k += 1
    return len(words) > 1 and any(" " in w for w in words)


def _args_json_for_pipelines(case, i, ref, ours) -> bool:
    return (message(ours) == "run --args-json must be valid JSON" and message(ref) is None
            and case.get("kind") == "pipeline")


def _retry_of_unknown_command(case, i, ref, ours) -> bool:
    a, b = ref.get("stderr", ""), ours.get("stderr", "")
    return re.search(r"\[RETRY\] .*: Unknown command: ", a) is not None and "[RETRY]" not in b


def _dry_run_unknown_condition(case, i, ref, ours) -> bool:
    return ("--dry-run" in ours["argv"] and "[skipped — condition: false]" in ref.get("stderr", "")
            and "[depends on step output — unknown at plan time]" in ours.get("stderr", ""))


ENTRIES: tuple[Entry, ...] = (
    Entry("D01", "tool mode: renderers write into stdout before the envelope",
          "candidate deliberate (needs a SPEC §9 item)",
          "In `--mode tool` the original's `json`/`table` write their rendering to the same "
          "stdout as the envelope (a bug the reference doc names); ours prints the envelope only.",
          _renderer_in_tool_stdout),
    Entry("D02", "human mode: a pipeline halt prints the request item, without a token",
          "bug of ours (or candidate deliberate: needs a SPEC §9 item)",
          "The original prints `[{type: approval_request|input_request, ...}]`; ours prints "
          "`{status, output, requiresApproval|requiresInput}` with a resume token.",
          _human_pipeline_halt),
    Entry("D04", "--args-json that is not a JSON object", "candidate deliberate (needs a SPEC §9 item)",
          "The original spreads an array or string into an object (`[1]` -> `{\"0\": 1}`) and runs; "
          "ours refuses with parse_error `run --args-json must be a JSON object`.", _args_json_object),
    Entry("D12", "a malformed condition that names an unknown step", "candidate deliberate "
          "(SPEC §9.10 checks syntax before running; needs a word there)",
          "`when: \"$a.json ==\"` on step a: the original resolves references first "
          "(`Unknown step reference: a.json`); ours reports the syntax (`Unsupported condition: ...`).",
          _condition_error_order),
    Entry("D13", "a cwd that does not exist", "candidate deliberate (needs a SPEC §9 item)",
          "The original misreports the spawn failure as `workflow shell not found; check "
          "LOBSTER_SHELL or ComSpec`; ours says `exec cwd not usable: <path>: No such file or directory`.",
          _missing_cwd),
    Entry("D17", "pipeline given as several CLI arguments", "candidate deliberate (needs a SPEC §9 item)",
          "`lobster run exec --shell \"echo hi\"`: the original joins argv with spaces and loses the "
          "quoting (`exec --shell echo hi`); ours keeps each argument whole.", _argv_quoting),
    Entry("D19", "--args-json that is not JSON, with an inline pipeline", "candidate deliberate "
          "(needs a SPEC §9 item)",
          "The original ignores `--args-json` for pipelines and runs; ours refuses with "
          "`run --args-json must be valid JSON` (exit 2).", _args_json_for_pipelines),
    Entry("D23", "retry of a pipeline step whose command is unknown", "candidate deliberate "
          "(SPEC §9.10 finds it before running; needs a word there)",
          "The original retries the step (`[RETRY] Step 's0' failed (attempt 1/2): Unknown command: "
          "nosuch. ...` on stderr); ours does not retry it and prints nothing. The envelopes agree.",
          _retry_of_unknown_command),
    Entry("D28", "dry run: a condition on output only a run has", "candidate deliberate "
          "(needs a SPEC §9 item)",
          "The original evaluates it against nothing and prints `[skipped — condition: false]`; "
          "ours says `when: ... [depends on step output — unknown at plan time]` and plans the step.",
          _dry_run_unknown_condition),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
