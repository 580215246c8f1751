"""Deliberate differences (SPEC.md section 9): a divergence one of them matches is expected.
A bug of ours, or a difference section 9 does not list yet, belongs in known.py instead."""

from __future__ import annotations

import json
import re
from typing import Callable

import attrs

from .normalise import comparable


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
ORIGINAL_COMMANDS_ONLY = {"email.triage", "gog.gmail.search", "gog.gmail.send", "openclaw.agent",
                          "workflows.list", "workflows.run"}
ORIGINAL_COMMANDS = {
    "approve", "ask", "clawd.invoke", "commands.list", "dedupe", "diff.last", "email.triage",
    "exec", "gog.gmail.search", "gog.gmail.send", "groupBy", "head", "json", "llm.invoke",
    "llm_task.invoke", "map", "openclaw.agent", "openclaw.invoke", "pick", "sort", "state.get",
    "state.set", "table", "template", "where", "workflows.list", "workflows.run"}


def _typed_flags(case, i, ref, ours) -> bool:
    ours_msg = message(ours) or ""
    return bool(re.match(r"Unknown flag --\S* for \S+", ours_msg) or "needs a value" in ours_msg
                or re.match(r"\S+ takes (no|one) positional arguments? \(got ", ours_msg))


def _login_shell_flag(case, i, ref, ours) -> bool:
    """A shell named by LOBSTER_SHELL (not PowerShell or cmd) gets `-lc` from the original and
    `-c` from ours: the fake shell's echo of its arguments differs in that flag only."""
    a = json.dumps(comparable(ref), ensure_ascii=False)
    b = json.dumps(comparable(ours), ensure_ascii=False)
    return "<-lc>" in a and a.replace("<-lc>", "<-c>") == b


def _signed_tokens(case, i, ref, ours) -> bool:
    return ("token" in case["steps"][i]
            and message(ours) in ("Invalid token", "Invalid workflow token")
            and message(ref) != message(ours))


def _gates_in_loops(case, i, ref, ours) -> bool:
    """The original refused a gate in a loop or sub-workflow; ours accepted it, and then halted
    there or went on to whatever the rest of the file does."""
    refusals = ("cannot contain approval or input steps",
                "Sub-workflow approval/input gates are not supported", "for_each steps cannot define approval",
                "requestInput is not supported in this pipeline context")
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
    # the original prints its help for a `-h`/`--help` anywhere among the words
    return (argv in ([], ["help"]) or argv[:1] == ["help"] or "--help" in argv or "-h" in argv) \
        and ref.get("exitCode") == ours.get("exitCode")


def _undescribed(value):
    """A JSON value without its "description" fields (texts written in our own words)."""
    if isinstance(value, dict):
        return {k: _undescribed(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_undescribed(v) for v in value]
    return value


def _unknown_mode(case, i, ref, ours) -> bool:
    argv = ours.get("argv") or []
    modes = [argv[k + 1] for k, w in enumerate(argv[:-1]) if w == "--mode"]
    modes += [w.split("=", 1)[1] for w in argv if w.startswith("--mode=")]
    return (any(m not in ("tool", "human") for m in modes) and ours.get("exitCode") == 2
            and "error[E020]: run --mode must be tool or human" in (ours.get("stderr") or ""))


def _front_door(case, i, ref, ours) -> bool:
    """SPEC 9.20: what the original runs as a pipeline and answers `Unknown command: X` (or
    ignores, as resume and doctor ignore an unknown option), ours refuses as a usage error
    (exit 2) with E025-E028."""
    env = ours.get("stdoutJson")
    code = env["error"].get("code") if isinstance(env, dict) and isinstance(
        env.get("error"), dict) else None
    said = re.match(r"lobster: error\[(E02[5-8])\]: ", ours.get("stderr") or "")
    code = code or (said.group(1) if said else None)
    if (ours.get("argv") or [""])[0] == "resume" and re.fullmatch(
            r"--(id|token) needs a value", message(ours) or "") \
            and message(ref) == "resume requires --token or --id":
        return True  # the flag as the last word: ours names it (docs/differences.md)
    return ours.get("exitCode") == 2 and code in ("E025", "E026", "E027", "E028") and (
        (message(ref) or "").startswith("Unknown command: ") or ref.get("exitCode") == 0
        or (ours.get("argv") or [""])[0] == "resume")


def _command_set(case, i, ref, ours) -> bool:
    argv = ours.get("argv") or []
    if (argv in ([], ["help"]) or argv[:1] == ["--help"]) and ref.get("exitCode") == ours.get("exitCode") == 0:
        return _help_without_lists(ref.get("stdout") or "") == _help_without_lists(ours.get("stdout") or "")
    if argv[:1] == ["help"] and len(argv) > 1 and argv[1] in OUR_COMMANDS_ONLY | ORIGINAL_COMMANDS_ONLY:
        return True
    text = pipeline_text(case, i)
    if "commands.list" in text:
        return True
    if "workflows.list" in text:  # the same workflows and schemas, described in our words
        return ref.get("exitCode") == ours.get("exitCode") and \
            _undescribed(ref.get("stdoutJson")) == _undescribed(ours.get("stdoutJson"))
    m = re.match(r"Unknown command: (\S+)", message(ref) or "")
    return bool(m and m.group(1) in OUR_COMMANDS_ONLY)


def _literal_workflow_path(case, i, ref, ours) -> bool:
    return "workflow path must be a literal path" in (message(ours) or "")


PRICING_WARNING = ("[WARN] Ignoring invalid LOBSTER_LLM_PRICING_JSON; custom LLM pricing must be "
                   "a JSON object whose model entries have finite non-negative input and output "
                   "rates.\n")


def _checked_before_running(case, i, ref, ours) -> bool:
    """Ours refused before anything ran (a compile-time `E` code), with the error the original
    gives when it reaches that stage; the original stopped earlier (an earlier stage failed or
    halted) or never looked (unknown keys)."""
    ours_msg, ref_msg = message(ours) or "", message(ref) or ""
    env = ours.get("stdoutJson")
    code = env.get("error", {}).get("code", "") if isinstance(env, dict) else ""
    if ours_msg == ref_msg:
        # the same error, ours found before the run started: the original had started it and
        # printed its start-of-run warning (an invalid LOBSTER_LLM_PRICING_JSON) first
        found_first = code.startswith("E") or re.search(  # human mode: our rendering's code
            r"^\S+:\d+:\d+: error\[E\d+\]: ", ours.get("stderr") or "", re.M) is not None
        theirs, mine = comparable(ref).get("stderr") or "", comparable(ours).get("stderr") or ""
        if found_first and theirs == mine and ref.get("exitCode") == ours.get("exitCode"):
            # the original's earlier stages rendered (a `table`) before the failing one ran
            return bool(ref.get("stdout")) and not ours.get("stdout")
        return found_first and theirs == PRICING_WARNING + mine
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
    early = re.match(r"(?!run |resume |graph )(\S+ requires |Invalid where expression|\S+ --\S+ must (?:be|decode to) |"
                     r"Unknown template filter|Workflow step \S+ workflow file not found|Unsupported condition type|"
                     r"(?:Workflow step \S+ (?:for_each sub-step \S+ )?(?:stdin|for_each): )?"
                     r"Unknown step reference: |Workflow step \S+ halted for approval inside pipeline|"
                     r"Workflow step \S+ halted before completion at pipeline stage ask)",
                     ours_msg)
    return bool(early) and (code.startswith("E") or status(ref) in ("needs_approval", "needs_input")
                            or not isinstance(env, dict))


def _same_envelope(a, b) -> bool:
    """Two envelopes equal once run-made values (tokens, approval ids) and our additive error
    fields are set aside."""
    def strip(v):
        if isinstance(v, dict):
            return {k: ("<made>" if k in ("resumeToken", "approvalId") else strip(x))
                    for k, x in v.items() if k not in ("code", "location", "checkpoint")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v
    return strip(a) == strip(b)


def _renderer_in_tool_stdout(case, i, ref, ours) -> bool:
    """The original's stdout is a rendering followed by an envelope equal to ours."""
    out = ref.get("stdout") or ""
    k = out.rfind('{\n  "protocolVersion": 1')
    tail = _loads(out[k:]) if k > 0 else None
    return (isinstance(tail, dict) and isinstance(ours.get("stdoutJson"), dict)
            and _same_envelope(tail, ours["stdoutJson"]) and ref.get("exitCode") == ours.get("exitCode")
            and ref.get("stderr") == ours.get("stderr"))


def _loads(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


RESUME_HINT = re.compile(r"lobster: to continue: lobster resume .*\n?")


def _human_halt_is_resumable(case, i, ref, ours) -> bool:
    """Human mode, a halt: stdout and the exit code are the original's, and stderr is the
    original's plus one line, the exact `lobster resume` command that continues the run."""
    if (ours.get("argv") or [""])[0] in ("resume", "tool") or "--mode" in (ours.get("argv") or []):
        return False
    a, b = comparable(ref), comparable(ours)
    hint = RESUME_HINT.findall(b.get("stderr", ""))
    return (len(hint) == 1 and a.get("exitCode") == b.get("exitCode") == 0
            and a.get("stdout") == b.get("stdout") and a.get("stdoutJson") == b.get("stdoutJson")
            and RESUME_HINT.sub("", b.get("stderr", "")) == a.get("stderr"))


def _args_json_value(ours: dict) -> str | None:
    argv = ours.get("argv") or []
    for k, word in enumerate(argv):
        if word == "--args-json" and k + 1 < len(argv):
            return argv[k + 1]
        if word.startswith("--args-json="):
            return word.split("=", 1)[1]
    return None


def _args_json_refused(case, i, ref, ours) -> bool:
    """Ours refuses an --args-json the original spreads (JSON, not an object) or ignores (not
    JSON, with an inline pipeline); the original ran or failed otherwise."""
    raw = _args_json_value(ours)
    msg = message(ours) or (ours.get("stderr") or "").split("\n")[0]
    if raw is None or ours.get("exitCode") != 2 or msg == message(ref):
        return False
    try:
        value = json.loads(raw)
    except ValueError:
        return msg == "run --args-json must be valid JSON"
    return msg == "run --args-json must be a JSON object" and not isinstance(value, dict)


def _condition_syntax_first(case, i, ref, ours) -> bool:
    a, b = message(ref) or "", message(ours) or ""
    m = re.fullmatch(r"Unknown step reference: ([\w-]+)\S*", a)
    return bool(m and b.startswith("Unsupported condition: ") and "$" + m.group(1) in b)


def _missing_cwd(case, i, ref, ours) -> bool:
    """A cwd that does not exist (the original: `workflow shell not found`) or is not a
    directory (the original: `spawn ENOTDIR`), named by ours; the same prefix before it (a
    parallel branch's `Parallel branch failed: `)."""
    theirs, mine = message(ref) or "", message(ours) or ""
    for said, why in (("workflow shell not found; check LOBSTER_SHELL or ComSpec", "No such file or directory"),
                      ("spawn ENOTDIR", "Not a directory")):
        m = re.fullmatch(rf"(.*)exec cwd not usable: .+: {why}", mine)
        if m and theirs == m.group(1) + said:
            return True
    return False


def _argv_quoting(case, i, ref, ours) -> bool:
    """`lobster run` (or the bare pipeline fallback) with the pipeline as several argv words,
    one of them holding a space."""
    argv, words = ours.get("argv") or [], []
    k = 1 if argv[:1] == ["run"] else 0
    if argv[:1] in (["resume"], ["graph"], ["help"], ["doctor"], ["version"]):
        return False
    while k < len(argv):
        if argv[k] in ("--mode", "--args-json", "--file"):
            k += 2
            continue
        words.append(argv[k])
        k += 1
    return len(words) > 1 and any(" " in w for w in words) and ref.get("stderr") == ours.get("stderr")


def _unknown_command_not_retried(case, i, ref, ours) -> bool:
    """The original retried a stage whose command does not exist; ours refused the file with
    that command before running."""
    m = re.search(r"^\[RETRY\] Step '[^']+' failed \(attempt \d+/\d+\): Unknown command: (\S+)\. ",
                  ref.get("stderr", ""), re.M)
    return bool(m) and message(ours) == f"Unknown command: {m.group(1)}" and "[RETRY]" not in ours.get("stderr", "")


def _plan_blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = [[]]
    for line in text.rstrip("\n").split("\n"):
        if re.match(r"  \d+\. ", line):
            blocks.append([])
        blocks[-1].append(line)
    return blocks


def _sub_step_skipped(ref_line: str, our_line: str) -> bool:
    """A for_each sub-step the original plans as skipped (its condition reads the item) and
    ours plans as it would run."""
    m = re.fullmatch(r"(\s+\d+\. \S+)  \[skipped — condition: false\]", ref_line)
    return bool(m) and our_line.startswith(m.group(1) + "  [") and "skipped" not in our_line


def _dry_run_unknown_output(case, i, ref, ours) -> bool:
    """A dry-run plan that differs only where a condition reads step output: the original
    prints the step as skipped (or, when its guess made the condition true, as running with no
    `when:` line), ours plans it and says the output is unknown at plan time."""
    if "--dry-run" not in (ours.get("argv") or []) or ref.get("exitCode") != ours.get("exitCode"):
        return False
    a, b = _plan_blocks(ref.get("stderr", "")), _plan_blocks(ours.get("stderr", ""))
    if len(a) != len(b) or a[0] != b[0]:
        return False
    differ = False
    for x, y in zip(a[1:], b[1:]):
        if x == y:
            continue
        if len(x) == len(y) and all(u == v or _sub_step_skipped(u, v) for u, v in zip(x, y)):
            differ = True
            continue
        unknown = [ln for ln in y if ln.endswith("[depends on step output — unknown at plan time]")]
        if len(unknown) == 1 and [ln for ln in y if ln not in unknown] == x:
            differ = True  # the original guessed the condition true (`!$a.json.x`): no when line
            continue
        head = re.match(r"(  \d+\. \S+)  \[skipped — condition: false\]$", x[0])
        if not (head and len(x) == 1 and y[0].startswith(head.group(1) + "  [")
                and any(ln.endswith("[depends on step output — unknown at plan time]") for ln in y)):
            return False
        differ = True
    return differ


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
    Entry("A7", "a plain shell, not a login shell", "SPEC §9.7",
          "Shell lines run with `-c`, also in a shell LOBSTER_SHELL names (PowerShell and cmd get "
          "their own flags, as in the original); the original runs other shells with `-lc`.",
          _login_shell_flag),
    Entry("A8", "our command set", "SPEC §9.8 and §5",
          "The stdlib has every command of the original (email.triage, gog.gmail.*, "
          "openclaw.agent and workflows.* included) plus `apus.invoke`, and accepts `group_by` "
          "as an alias of groupBy; commands.list entries carry our own descriptions and extra "
          "fields (flags, aliases, positionals, our effect class), and workflows.list describes "
          "the same built-in workflows and argument schemas in our own words.", _command_set),
    Entry("A20", "an unknown --mode is refused", "SPEC §9.18 (docs/differences.md 18)",
          "`lobster run --mode X` with X other than tool or human is a usage error (E020, exit "
          "2); the original runs it in human mode.", _unknown_mode),
    Entry("A21", "the command line is checked before the pipeline fallback", "SPEC §9.20",
          "An unknown option (with `did you mean`), a word written as a path that names no "
          "file, a word close to a subcommand, and stray words after a FILE are usage errors "
          "(E025-E028, exit 2); the original runs them as a pipeline (`Unknown command: X`) "
          "or ignores them.", _front_door),
    Entry("A9", "a workflow: path is literal", "SPEC §9.9",
          "Sub-workflows are compiled into the caller's program, so `workflow: ${w}.lobster` is "
          "refused; the original templates the path at run time.", _literal_workflow_path),
    Entry("A11", "help texts in our own words", "SPEC §9.11 (docs/differences.md 11)",
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
          "stages ran or halted (so its error can be an earlier stage's, and a warning it prints as "
          "a run starts, an invalid LOBSTER_LLM_PRICING_JSON, comes before the same error).",
          _checked_before_running),
    Entry("A12", "tool mode: stdout is one JSON document", "SPEC §9.12 (docs/differences.md 12)",
          "In `--mode tool` the original's `json`/`table` renderers print into the same stdout "
          "before the envelope (the reference doc calls it a bug); ours prints the envelope only. "
          "The envelopes must agree.", _renderer_in_tool_stdout),
    Entry("A13", "human mode: a halt names its resume command", "SPEC §9.13",
          "At an approval or input halt in human mode, stdout is exactly the original's (the "
          "request item, the rendering before the gate, or a workflow file's paused status); "
          "ours also saves the checkpoint and prints `lobster: to continue: lobster resume ...` "
          "as one more stderr line.", _human_halt_is_resumable),
    Entry("A14", "--args-json is refused, never spread or ignored", "SPEC §9.14 (docs/differences.md 14)",
          "JSON that is not an object (`[1]`, the original spreads it to `{\"0\": 1}`) and text "
          "that is not JSON (the original ignores it with an inline pipeline) are parse_error, "
          "exit 2, in ours.", _args_json_refused),
    Entry("A15", "a condition's syntax is judged before its references", "SPEC §9.10 (docs/differences.md 10)",
          "`when: \"$a.json ==\"`: the original resolves references first (`Unknown step "
          "reference: a.json`); ours reports `Unsupported condition: $a.json ==` before running.",
          _condition_syntax_first),
    Entry("A16", "a cwd that does not exist is named", "SPEC §9.15 (docs/differences.md 15)",
          "The original misreports the spawn failure as `workflow shell not found; check "
          "LOBSTER_SHELL or ComSpec` (a cwd that is a file as `spawn ENOTDIR`); ours says `exec "
          "cwd not usable: <path>: No such file or directory` (`Not a directory`).", _missing_cwd),
    Entry("A17", "argv words keep their quoting", "SPEC §9.16 (docs/differences.md 16)",
          "`lobster run exec --shell \"echo hi\"`: the original joins argv with spaces and loses "
          "the quoting (reference doc 1.4 calls it a loss); ours keeps each argument whole.",
          _argv_quoting),
    Entry("A18", "an unknown command is not retried", "SPEC §9.10 (docs/differences.md 10)",
          "A `pipeline:` step naming an unknown command is a compile error in ours, so nothing "
          "runs or is retried; the original retries the step (`[RETRY] ... Unknown command: X`).",
          _unknown_command_not_retried),
    Entry("A19", "a dry run does not guess step output", "SPEC §9.17 (docs/differences.md 17)",
          "A condition on output only a run has: the original plans the step as `[skipped — "
          "condition: false]` (or as running, with no `when:` line, when its guess is true); "
          "ours plans it with `when: ... [depends on step output — unknown at plan time]`. The "
          "rest of the plan must agree.", _dry_run_unknown_output),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
