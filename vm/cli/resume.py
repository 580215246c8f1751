"""`lobster resume`: continue a run parked at a gate, by its token or any id `lobster pending`
lists, and print the envelope (as `--mode tool` does)."""

from __future__ import annotations

import sys

from vm.cli.common import check_store, listener, print_json, refuse, timeout
from vm.cli.flags import NO_VALUE, UsageError, parse
from vm.cli.specs import RESUME
from vm.host.store import StoreError
from vm.service.protocol.envelope import RequestError, exit_code, store_error
from vm.service.protocol.options import Options
from vm.service.protocol.request import parse_response_json
from vm.service.protocol.resuming import Decision, named_by_id, resume_js

NO_DECISION = "resume requires --approve yes|no, --response-json, or --cancel"


def cmd_resume(argv: list[str]) -> int:
    """Stray words are ignored, as the original ignores them; an unknown option is refused
    (SPEC 9.20). A value flag without its value counts as not given, except --timeout and
    --events, which are refused."""
    try:
        values, _ = parse(RESUME, argv)
    except UsageError as exc:
        return refuse(exc, tool=True)
    for name in ("id", "token"):  # the last word, its value missing: say so
        if values.get(name) == NO_VALUE:
            return print_json(RequestError(f"--{name} needs a value", "E001").envelope) or 2
    for name in list(values):
        if values[name] == NO_VALUE and name not in ("timeout", "events"):
            del values[name]
    if values.get("cancel") is True:
        values["cancel"] = "true"
    try:
        envelope = _resume(values)
    except RequestError as exc:
        envelope = exc.envelope
    print_json(envelope)
    return exit_code(envelope)


CANCEL_WORDS = {"1": True, "true": True, "yes": True, "y": True,
                "0": False, "false": False, "no": False, "n": False}


def _resume(values: dict) -> dict:
    # --cancel's value is read first, as the original reads it while it parses the words:
    # `--cancel false` (0, no, n) is no cancel, and no answer either
    cancel = False
    if "cancel" in values:
        cancel = CANCEL_WORDS.get(values["cancel"].strip().lower())
        if cancel is None:
            raise RequestError("resume --cancel must be true or false")
    token, approval_id = values.get("token"), values.get("id")
    if not token and not approval_id:
        raise RequestError("resume requires --token or --id")
    approve = values.get("approve") or None  # '' is no decision
    chosen = [k for k, given in (("approve", approve is not None),
                                 ("response-json", values.get("response-json") is not None),
                                 ("cancel", cancel)) if given]
    if len(chosen) > 1:
        raise RequestError("resume accepts only one of --approve, --response-json, or --cancel")
    if not chosen:
        raise RequestError(NO_DECISION)
    if approve is not None:
        answer = approve.lower()  # not trimmed: ' yes' is refused, as in the original
        if answer not in ("yes", "y", "no", "n", "true", "false"):
            raise RequestError("resume --approve must be yes or no")
        decision = Decision(approve=answer in ("yes", "y", "true"))
    elif values.get("response-json") is not None:
        decision = Decision(response=parse_response_json(
            values["response-json"], "resume --response-json"), has_response=True)
    else:
        decision = Decision(cancel=True)
    on_event, _ = listener(values.get("events"), "resume", human=False)
    options = Options(mode="tool", log=sys.stderr.write,
                      timeout_ms=timeout(values.get("timeout"), "resume"), on_event=on_event)
    ttl = values.get("checkpoint-ttl")
    try:
        check_store(options)  # "not found" only from a store that was asked
    except StoreError as exc:
        return store_error(exc)
    if approval_id:  # any id `lobster pending` lists
        approval_id, state_key = named_by_id(approval_id)
        return resume_js(options, decision, approval_id=approval_id, state_key=state_key,
                         checkpoint_ttl=ttl)
    return resume_js(options, decision, token=token, checkpoint_ttl=ttl)
