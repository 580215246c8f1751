"""Deliberate differences (SPEC.md section 9): a divergence one of them matches is expected.
A bug of ours, or a difference section 9 does not list yet, belongs in known.py instead."""

from __future__ import annotations

import re
from typing import Callable

import attrs


@attrs.frozen
class Entry:
    """One explained divergence: `matches(case, step_index, original_step, our_step)`."""
    id: str
    title: str
    spec: str
    why: str
    matches: Callable[[dict, int, dict, dict], bool]


def message(step: dict) -> str | None:
    """The error message of a step: from its envelope, or from a human-mode `Error:` line."""
    env = step.get("stdoutJson")
    if isinstance(env, dict) and isinstance(env.get("error"), dict):
        return env["error"].get("message")
    m = re.search(r"^(?:Error|Parse error): (.*)$", step.get("stderr", ""), re.M)
    return m.group(1) if m else None


def status(step: dict) -> str | None:
    env = step.get("stdoutJson")
    return env.get("status") if isinstance(env, dict) else None


def pipeline_text(case: dict, i: int) -> str:
    return case["steps"][i].get("pipeline", case.get("pipeline")) or ""


OUR_COMMANDS_ONLY = {"apus.invoke", "group_by"}
ORIGINAL_COMMANDS = {
    "approve", "ask", "clawd.invoke", "commands.list", "dedupe", "diff.last", "email.triage",
    "exec", "gog.gmail.search", "gog.gmail.send", "groupBy", "head", "json", "llm.invoke",
    "llm_task.invoke", "map", "openclaw.agent", "openclaw.invoke", "pick", "sort", "state.get",
    "state.set", "table", "template", "where", "workflows.list", "workflows.run"}


def _typed_flags(case, i, ref, ours) -> bool:
    ours_msg = message(ours) or ""
    return bool(re.match(r"Unknown flag --\S* for \S+", ours_msg) or "needs a value" in ours_msg)


def _signed_tokens(case, i, ref, ours) -> bool:
    return ("token" in case["steps"][i]
            and message(ours) in ("Invalid token", "Invalid workflow token")
            and message(ref) != message(ours))


def _gates_in_loops(case, i, ref, ours) -> bool:
    """The original refused a gate in a loop or sub-workflow; ours accepted it, and then halted
    there or went on to whatever the rest of the file does."""
    refusals = ("cannot contain approval or input steps",
                "Sub-workflow approval/input gates are not supported", "for_each steps cannot define approval")
    ref_msg, ours_msg = message(ref) or "", message(ours) or ""
    return any(r in ref_msg for r in refusals) and not any(r in ours_msg for r in refusals)


def _help_without_lists(out: str) -> str:
    """The top-level help without what names commands: the `Commands:` list and the usage
    lines of subcommands only we have."""
    lines = out.split("\n")
    if "Commands:" in lines:
        k = lines.index("Commands:")
        lines = lines[:k + 1] + lines[k + 2:]
    return "\n".join(line for line in lines if not line.startswith("  lobster tool "))


def _help_text(case, i, ref, ours) -> bool:
    argv = ours.get("argv") or []
    return (argv in ([], ["help"]) or argv[:1] in (["help"], ["--help"], ["-h"])) \
        and ref.get("exitCode") == ours.get("exitCode")


def _command_set(case, i, ref, ours) -> bool:
    argv = ours.get("argv") or []
    if (argv in ([], ["help"]) or argv[:1] == ["--help"]) and ref.get("exitCode") == ours.get("exitCode") == 0:
        return _help_without_lists(ref.get("stdout") or "") == _help_without_lists(ours.get("stdout") or "")
    text = pipeline_text(case, i)
    if "commands.list" in text:
        return True
    m = re.match(r"Unknown command: (\S+)", message(ref) or "")
    return bool(m and m.group(1) in OUR_COMMANDS_ONLY)


def _literal_workflow_path(case, i, ref, ours) -> bool:
    return "workflow path must be a literal path" in (message(ours) or "")


def _checked_before_running(case, i, ref, ours) -> bool:
    """Ours refused before anything ran (a compile-time `E` code), with the error the original
    gives when it reaches that stage; the original stopped earlier (an earlier stage failed or
    halted) or never looked (unknown keys)."""
    ours_msg, ref_msg = message(ours) or "", message(ref) or ""
    env = ours.get("stdoutJson")
    code = env.get("error", {}).get("code", "") if isinstance(env, dict) else ""
    if ours_msg == ref_msg:
        return False
    for same in ("workflow file not found", "Unknown step reference"):
        if same in ref_msg and same in ours_msg:
            return False
    if re.search(r"unknown (key|field|reference part)|unexpected positional argument|did you mean|"
                 r"^Workflow file is invalid at |has unknown key: |^Unknown step result field: |"
                 r" takes no positional arguments \(got | takes one positional argument \(got |"
                 r"^exec --shell takes no other words ", ours_msg, re.I):
        return True
    m = re.match(r"Unknown command: (\S+)$", ours_msg)
    if m:
        return m.group(1) not in ORIGINAL_COMMANDS and m.group(1) in pipeline_text(case, i)
    early = re.match(r"(?!run |resume |graph )(\S+ requires |Invalid where expression|\S+ --\S+ must be |"
                     r"Unknown template filter|Workflow step \S+ workflow file not found|"
                     r"Unknown step reference: |Workflow step \S+ halted for approval inside pipeline)",
                     ours_msg)
    return bool(early) and (code.startswith("E") or status(ref) in ("needs_approval", "needs_input")
                            or not isinstance(env, dict))


ENTRIES: tuple[Entry, ...] = (
    Entry("A1", "typed command signatures", "SPEC §9.1",
          "An unknown flag, or a flag without its value, is a compile error; the original "
          "ignores an unknown flag (taking the next token as its value). Against 2026.9.13 the "
          "rest of §9.1 and all of §9.2 are no longer differences: its boolean flags do not "
          "swallow a token and it keeps `''` (regression cases 022, 023).", _typed_flags),
    Entry("A4", "tokens are signed", "SPEC §9.4",
          "A token the store did not sign (hand-made base64 JSON with a plausible stateKey) is "
          "`Invalid token` in ours; the original decodes it and looks the state up "
          "(`Pipeline resume state not found`, `Resume state not found`).", _signed_tokens),
    Entry("A5", "approval and input gates inside for_each and sub-workflows", "SPEC §9.5",
          "The frame holds loop and call stacks, so such a gate halts and resumes; the original "
          "rejects the file or fails the step.", _gates_in_loops),
    Entry("A8", "our command set", "SPEC §9.8 and §5",
          "The stdlib is the list of SPEC §5 (no email.triage, gog.*, openclaw.agent, "
          "workflows.*) with `apus.invoke` added and `group_by` as an alias, so commands.list "
          "and the commands that exist differ.", _command_set),
    Entry("A9", "a workflow: path is literal", "SPEC §9.9",
          "Sub-workflows are compiled into the caller's program, so `workflow: ${w}.lobster` is "
          "refused; the original templates the path at run time.", _literal_workflow_path),
    Entry("A11", "help texts in our own words", "README deliberate difference 11 (for SPEC §9)",
          "`lobster`, `lobster help` and `lobster help COMMAND` print help written for this "
          "project (usage lines, flags with their help from the command signatures, side "
          "effects); the original's prose is its own and is not copied. Exit codes agree, and "
          "`help nosuch` agrees exactly.", _help_text),
    Entry("A10", "checked before running", "SPEC §9.10 (and §4: unknown commands are reported "
          "before anything runs)",
          "The file is checked against its JSON Schema (`env: {A: 5}` is an error; the original "
          "drops non-string env values), and unknown keys, reference parts, stray positional "
          "arguments, unknown commands and missing required flags are reported before the "
          "first stage runs; the original ignores them or fails at the stage, after earlier "
          "stages ran or halted (so its error can be an earlier stage's).",
          _checked_before_running),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
