"""Known divergences not (yet) accepted as deliberate: one entry per DIVERGENCES.md item.

Each has an xfail(strict) regression case under cases/; the generated runs tolerate a match so
that only a new divergence fails them. Delete an entry once its divergence is fixed, or move it
to allowlist.py once SPEC section 9 lists it.
"""

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
    items = ref.get("stdoutJson")
    return (case.get("kind") == "pipeline" and isinstance(items, list) and len(items) == 1
            and isinstance(items[0], dict)
            and items[0].get("type") in ("approval_request", "input_request")
            and status(ours) in ("needs_approval", "needs_input"))


def _empty_subject(case, i, ref, ours) -> bool:
    req = (ours.get("stdoutJson") or {}).get("requiresInput") if isinstance(ours.get("stdoutJson"), dict) else None
    ref_req = (ref.get("stdoutJson") or {}).get("requiresInput") if isinstance(ref.get("stdoutJson"), dict) else None
    return (isinstance(req, dict) and req.get("subject") == {"text": ""}
            and isinstance(ref_req, dict) and "subject" not in ref_req)


def _args_json_object(case, i, ref, ours) -> bool:
    return message(ours) == "run --args-json must be a JSON object" and message(ref) != message(ours)


def _dry_run_text(case, i, ref, ours) -> bool:
    return "[DRY RUN] Would execute" in ref.get("stderr", "") and "--dry-run" in ours["argv"]


def _graph_text(case, i, ref, ours) -> bool:
    return ours["argv"][:1] == ["graph"] and ref.get("exitCode") == ours.get("exitCode") == 0


def _help_text(case, i, ref, ours) -> bool:
    argv = ours["argv"]
    return argv in ([], ["help"]) or argv[:1] == ["help"] or "--help" in argv or "-h" in argv


def _reference_message(case, i, ref, ours) -> bool:
    a, b = message(ref) or "", message(ours) or ""
    return (a.startswith("Unknown step reference: ") and b.startswith("Unknown step reference: ")
            and a.startswith(b + "."))


def _sub_workflow_path(case, i, ref, ours) -> bool:
    a, b = message(ref) or "", message(ours) or ""
    return "workflow file not found: " in a and "workflow file not found: " in b


def _ask_in_workflow_pipeline(case, i, ref, ours) -> bool:
    return (status(ref) == "needs_input"
            and "halted before completion at pipeline stage ask" in (message(ours) or ""))


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
    Entry("D03", "ask --subject-from-stdin with no input items", "bug of ours",
          "The original leaves `subject` out; ours sends `{\"text\": \"\"}`.", _empty_subject),
    Entry("D04", "--args-json that is not a JSON object", "candidate deliberate (needs a SPEC §9 item)",
          "The original spreads an array or string into an object (`[1]` -> `{\"0\": 1}`) and runs; "
          "ours refuses with parse_error `run --args-json must be a JSON object`.", _args_json_object),
    Entry("D05", "dry-run plan header", "bug of ours",
          "The original prints `[DRY RUN] Would execute 1 step:` / `N steps:` and a blank line; "
          "ours prints `N step(s):` and no blank line.", _dry_run_text),
    Entry("D06", "graph text (mermaid, dot, ascii)", "bug of ours",
          "Node details differ (`run: ` / `pipeline: ` prefixes, `approval gate`) and the "
          "original separates nodes from edges with a blank line.", _graph_text),
    Entry("D07", "help texts", "bug of ours (the product name in the banner may be a "
          "deliberate rename, see BRIEF)",
          "`lobster`, `lobster help` and `lobster help <command>` print different texts.", _help_text),
    Entry("D08", "`Unknown step reference` in a condition names the id only", "bug of ours",
          "The original says `Unknown step reference: zz.json`; ours `Unknown step reference: zz`.",
          _reference_message),
    Entry("D09", "sub-workflow not found: the path in the message", "bug of ours (SPEC §9.9 "
          "keeps the path literal, not the message)",
          "The original names the resolved absolute path; ours the path as written.", _sub_workflow_path),
    Entry("D10", "ask (tool mode, no --emit) inside a workflow pipeline step", "bug of ours "
          "(SPEC §9: inside a workflow `pipeline:` step `ask` pauses)",
          "The original pauses with needs_input and resumes the stage; ours fails with "
          "`Workflow step X halted before completion at pipeline stage ask`.", _ask_in_workflow_pipeline),
)


def explain(case: dict, i: int, ref: dict, ours: dict) -> Entry | None:
    for entry in ENTRIES:
        if entry.matches(case, i, ref, ours):
            return entry
    return None
