"""`lobster resume`: continue a run parked at a gate, by its token or approval id, and print
the envelope (as `--mode tool` does)."""

from __future__ import annotations

import sys

from vm.cli.common import NO_VALUE, flag, listener, print_json, timeout
from vm.service.protocol.envelope import RequestError, exit_code
from vm.service.protocol.options import Options
from vm.service.protocol.request import parse_response_json
from vm.service.protocol.resuming import Decision, resume

HELP = """\
usage: lobster resume (--token T | --id ID) (--approve yes|no | --response-json J | --cancel)
                      [--timeout T] [--events jsonl] [--checkpoint-ttl D]

Continue a run that stopped at a gate, and print its envelope (as `--mode tool` does).

which run:
  --token T          the resumeToken of the envelope that stopped
  --id ID            the approvalId of an approval request (8 hex digits), instead
the answer (exactly one):
  --approve yes|no   the decision on an approval request (also y/n, true/false); `no`
                     ends the run, cancelled
  --response-json J  the answer to an input request: JSON valid under its responseSchema
  --cancel           end the run without answering
options:
  --timeout T        stop the resumed run after T: milliseconds or a duration (30s)
  --events jsonl     every run event as one JSON line on stderr
  --checkpoint-ttl D the next checkpoint of the resumed run expires after D

A wrong answer is refused and the checkpoint stays; a token works once.
"""

NO_DECISION = "resume requires --approve yes|no, --response-json, or --cancel"


def cmd_resume(argv: list[str]) -> int:
    values: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word[2:].split("=", 1)[0] if word.startswith("--") else ""
        if name in ("token", "id", "approve", "decision", "response-json", "timeout", "events",
                    "checkpoint-ttl"):
            values[name], i = flag(argv, i, name)
            if values[name] is None and name in ("timeout", "events"):
                values[name] = NO_VALUE
        elif name == "cancel":
            if "=" in word:
                values["cancel"], i = word.split("=", 1)[1], i + 1
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                values["cancel"], i = argv[i + 1], i + 2
            else:
                values["cancel"], i = "true", i + 1
        else:
            i += 1
    try:
        envelope = _resume(values)
    except RequestError as exc:
        envelope = exc.envelope
    print_json(envelope)
    return exit_code(envelope)


def _resume(values: dict) -> dict:
    token, approval_id = values.get("token"), values.get("id")
    if not token and not approval_id:
        raise RequestError("resume requires --token or --id")
    approve = values.get("approve", values.get("decision")) or None  # '' is no decision
    chosen = [k for k in ("approve", "response-json", "cancel")
              if (values.get(k) if k != "approve" else approve) is not None]
    if len(chosen) > 1:
        raise RequestError("resume accepts only one of --approve, --response-json, or --cancel")
    if not chosen:
        raise RequestError(NO_DECISION)
    if approve is not None:
        answer = approve.strip().lower()
        if answer not in ("yes", "y", "no", "n", "true", "false"):
            raise RequestError("resume --approve must be yes or no")
        decision = Decision(approve=answer in ("yes", "y", "true"))
    elif values.get("response-json") is not None:
        decision = Decision(response=parse_response_json(
            values["response-json"], "resume --response-json"), has_response=True)
    else:
        cancel = values["cancel"].strip().lower()
        if cancel not in ("true", "false"):
            raise RequestError("resume --cancel must be true or false")
        if cancel == "false":
            raise RequestError(NO_DECISION)
        decision = Decision(cancel=True)
    on_event, _ = listener(values.get("events"), "resume", human=False)
    options = Options(mode="tool", log=sys.stderr.write,
                      timeout_ms=timeout(values.get("timeout"), "resume"), on_event=on_event)
    ttl = values.get("checkpoint-ttl")
    if approval_id:
        return resume(options, decision, approval_id=approval_id, checkpoint_ttl=ttl)
    return resume(options, decision, token=token, checkpoint_ttl=ttl)
