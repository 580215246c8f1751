"""Parking a halted run: every limit checked first, then its program and signed frame saved
and the envelope that hands out its token (and approval id) returned."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vm.core import js, json_write
from vm.engine.run import CLAIM
from vm.host import token as tokens
from vm.host.store import StateStore, StoreError
from vm.host.store.base import ApprovalIdTaken
from vm.isa import codec
from vm.isa.frame import Frame, is_wait
from vm.isa.program import Program
from vm.service.protocol.envelope import (RequestError, check_envelope_size, ok_envelope,
                                          store_unwritable)
from vm.service.protocol.options import Options, Settings, checkpoint_ttl_ms

if TYPE_CHECKING:
    from vm.isa.ops import ApproverRules

SUBJECT_MAX_BYTES = 192_000
APPROVAL_ID_DRAWS = 16  # an id drawn and found taken as the frame is saved is drawn again
TOOL_ENVELOPE_MAX_BYTES = 512_000
CHECKED_KEY_S = 1.0  # a halt this soon after its run checked the signing key signs with it


def signing_key(store: StateStore) -> bytes:
    """The key a new checkpoint is signed with: a SigningKeyError (T451, T452) or a store that
    cannot be written (T450) is refused as a RequestError before anything runs."""
    try:
        return store.key()
    except OSError as exc:  # the state dir is a file, read-only, full...
        raise RequestError(store_unwritable(store.location, exc), "T450") from None


def park(program: Program, frame: Frame, options: Options, settings: Settings,
         checked: tuple[bytes, float] | None = None) -> dict:
    """Save the halted run and return its envelope. Every limit is checked first (the frame
    stores and loads again, the envelope fits maxStdoutBytes): a checkpoint is saved only when
    its token is handed out and resume or cancel can take it. `checked`: the signing key the
    run checked as it began, and when (time.monotonic); a halt within CHECKED_KEY_S of that
    signs with it, as if the run had been that much quicker, and a later one reads the key
    set again (a rotation meanwhile signs with the new key; gc retires an old key only when
    its successor is ten minutes old, so one used a second late still verifies)."""
    store = options.store()
    if checked is not None and time.monotonic() - checked[1] < CHECKED_KEY_S:
        key = checked[0]
    else:
        key = signing_key(store)  # the token and the frame's MAC: one key, read once
    pending = frame.pending
    state_key = tokens.new_state_key(frame.origin)
    kind = tokens.kind_for(frame.origin)
    ttl = settings.checkpoint_ttl_ms or program.checkpoint_ttl_ms or checkpoint_ttl_ms(options)
    for _ in range(APPROVAL_ID_DRAWS):
        if pending.kind == "approval":
            # the id goes into the frame: published before the frame is written, or with it
            # (a store that saves both in one statement only draws it here)
            pending.approval_id = store.new_approval_id(state_key, deferred=True)
        try:
            try:
                blob = codec.dump_frame(frame)
            except codec.Unstorable as exc:
                raise RequestError(f"lobster runtime checkpoint cannot be stored: {exc}",
                                   "T424") from None
            envelope = _cap_subject(_halt_envelope(pending, tokens.issue(kind, state_key, key)),
                                    options.env, frame)
            check_envelope_size(envelope, settings)
        except RequestError:
            store.remove_approval_id(pending.approval_id)
            raise
        claim = CLAIM.get()
        if claim is not None:  # a resumed run parks its next gate only while it holds its claim
            claim.check()
        try:
            store.park(state_key, blob, None if ttl is None else time.time() + ttl / 1000, key,
                       program.hash, lambda: codec.dump_program(program),
                       approval_id=pending.approval_id if pending.kind == "approval" else None)
        except ApprovalIdTaken:  # drawn, not published, and another checkpoint's: draw again
            continue
        break
    else:
        raise StoreError("no free approval id was found in "
                         f"{APPROVAL_ID_DRAWS} draws: the store holds too many")
    if options.report is not None:
        options.report(pending)  # the CLI renders a human-mode halt from it
    return envelope


def _halt_envelope(pending, token: str) -> dict:
    if pending.kind == "approval":
        request: dict[str, Any] = {"type": "approval_request", "prompt": pending.prompt,
                                   "items": pending.items}
        if pending.preview is not None:
            request["preview"] = pending.preview
        if is_wait(pending, "StepApprovalWait"):
            request.update(approver_fields(pending.approvers))
        request["resumeToken"] = token
        if pending.approval_id:
            request["approvalId"] = pending.approval_id
        return ok_envelope("needs_approval", [], approval=request)
    request = {"type": "input_request", "prompt": pending.prompt, "responseSchema": pending.schema}
    if is_wait(pending, "StepInputWait"):
        if pending.has_defaults:
            request["defaults"] = pending.defaults
        if pending.has_subject:
            request["subject"] = pending.subject
    elif pending.subject is not None:  # an `ask` stage's items, when it attaches them
        request["subject"] = pending.subject
    request["resumeToken"] = token
    return ok_envelope("needs_input", [], input_request=request)


def approver_fields(rules: ApproverRules) -> dict[str, Any]:
    """The approver rules in force, as an approval request shows them."""
    fields: dict[str, Any] = {}
    if rules.initiated_by:
        fields["initiatedBy"] = rules.initiated_by
    if rules.required_approver:
        fields["requiredApprover"] = rules.required_approver
    if rules.require_different_approver:
        fields["requireDifferentApprover"] = True
    return fields


def _cap_subject(envelope: dict, env: Mapping[str, str], frame: Frame) -> dict:
    """A workflow's input request must fit LOBSTER_MAX_TOOL_ENVELOPE_BYTES (default 512000,
    a value under 1024 means the default), its token counted as 220 bytes, as the reference:
    a subject over 192000 bytes of JSON becomes a 2000-character preview; if that does not fit
    either, only its size is given; if even that does not fit, the run fails."""
    request = envelope.get("requiresInput")
    if frame.origin != "workflow" or not request or "subject" not in request:
        return envelope
    raw = env.get("LOBSTER_MAX_TOOL_ENVELOPE_BYTES")
    cap = js.to_number(raw) if raw is not None else float("nan")
    cap = int(cap) if cap == cap and cap not in (float("inf"), float("-inf")) and cap >= 1024 \
        else TOOL_ENVELOPE_MAX_BYTES
    base = {k: v for k, v in request.items() if k not in ("subject", "resumeToken")}

    def fits(subject: Any) -> bool:
        probe = {"protocolVersion": 1, "ok": True, "status": "needs_input", "output": [],
                 "requiresApproval": None,
                 "requiresInput": {**base, "subject": subject, "resumeToken": "x" * 220}}
        return len(json_write.json_compact(probe).encode("utf-8")) <= cap

    subject = request["subject"]
    if fits(subject):
        return envelope
    text = json_write.json_compact(subject)
    size = len(text.encode("utf-8"))
    if size > SUBJECT_MAX_BYTES:
        subject = {"truncated": True, "bytes": size, "preview": text[:2000]}
    if not fits(subject):
        subject = {"truncated": True, "bytes": size,
                   "preview": "[subject omitted: envelope size limit]"}
        if not fits(subject):
            step = frame.pending.step if frame.pending is not None else ""
            raise RequestError(f"Workflow input step {step} needs_input envelope exceeds {cap} "
                               "bytes even after subject truncation", "T425")
    request["subject"] = subject
    return envelope
