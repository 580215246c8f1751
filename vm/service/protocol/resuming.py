"""Resuming: the decision a resume brings, checked against the parked halt (its schema, its
approver rules) before anything is taken; then the checkpoint claimed, the run stepped on, and
the claim ended by what became of it. A cancel ends the checkpoint instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from attrs import evolve

from vm.core.records import define
from vm.engine import machine
from vm.host import token as tokens
from vm.host.children import Scope
from vm.host.store import StoreError, lifecycle
from vm.engine.run import CLAIM
from vm.host.store.base import STATE_KEY, Fenced, approval_id_form
from vm.isa.frame import Frame, is_wait
from vm.isa.program import Program
from vm.service.protocol.checkpoint import (cancel_parked, decoded_token, is_last_stage, load,
                                            not_authentic, refuse_expired, unparked,
                                            verify_token)
from vm.service.protocol.envelope import (RequestError, as_json_data, internal_error, ok_envelope,
                                          store_error, unknown_approval_id)
from vm.service.protocol.options import (Options, Settings, checkpoint_ttl_ms, claim_lease_s,
                                         request_ttl_ms)
from vm.service.protocol.running import drive

if TYPE_CHECKING:
    from vm.service.messages import Envelope


@define
class Decision:
    """The answer a resume brings: `approve` (an approval), `response` with `has_response`
    (an input; the response may be null), or `cancel`."""

    approve: bool | None = None
    response: Any = None
    has_response: bool = False
    cancel: bool = False


def resume(options: Options, decision: Decision, *, token: str | None = None,
           approval_id: str | None = None, scope: Scope | None = None,
           checkpoint_ttl: str | int | None = None, state_key: str | None = None) -> Envelope:
    """Continue a parked run, named by its token, its approval id or its state key (what
    `lobster pending` lists for any gate): check, load, check the decision, claim, step on.
    The resumed run is bounded by the options, as `run` is; `checkpoint_ttl` is as for `run`,
    for the checkpoint the resumed run may reach next. The envelope is JSON data, for an
    embedder (`as_json_data`)."""
    return cast("Envelope", as_json_data(resume_js(
        options, decision, token=token, approval_id=approval_id, scope=scope,
        checkpoint_ttl=checkpoint_ttl, state_key=state_key)))


def resume_js(options: Options, decision: Decision, *, token: str | None = None,
              approval_id: str | None = None, scope: Scope | None = None,
              checkpoint_ttl: str | int | None = None, state_key: str | None = None) -> dict:
    """`resume`, its envelope as the run made it (undefined included, as `run_js`'s): for
    the CLI, which writes it with our JSON writer, and for a cancel, whose envelope holds no
    value of the run."""
    try:
        settings = Settings.of(options, request_ttl_ms(checkpoint_ttl, "checkpoint_ttl"))
        return resume_settled(options, settings, scope or Scope(), decision, token=token,
                              approval_id=approval_id, state_key=state_key)
    except RequestError as exc:
        return exc.envelope
    except Exception as exc:  # noqa: BLE001 - the last resort, as in `handle`
        return internal_error(exc)


def named_by_id(ident: str) -> tuple[str | None, str | None]:
    """(approval_id, state_key): how `resume` names the checkpoint any id `lobster pending`
    lists names. A state key (any gate, input gates included, which have no approval id) is
    the state key; anything else the approval id, refused (if it is none) as an unknown
    approval id, in the original's words."""
    key = (ident or "").strip()
    if approval_id_form(key) is None and STATE_KEY.fullmatch(key) and "_resume_" in key:
        return None, key
    return ident, None


def cancel_state(options: Options, state_key: str) -> dict:
    """Cancel the checkpoint parked under `state_key` (as `lobster pending` lists it), or clear
    its claim record when its resume did not finish: a resume with `cancel: true`."""
    return resume_settled(options, Settings.of(options), Scope(), Decision(cancel=True),
                          state_key=state_key)


def resume_settled(options: Options, settings: Settings, scope: Scope, decision: Decision, *,
                   token: str | None = None, approval_id: str | None = None,
                   state_key: str | None = None) -> dict:
    """`resume` under settings already read, of the checkpoint a token, an approval id or a
    state key names."""
    try:
        store = options.store()
        parsed = keys = None
        if approval_id:
            state_key = store.lookup_approval_id(approval_id)
            if state_key is None:
                raise unknown_approval_id(approval_id)
            origin = tokens.origin_of(state_key)
        elif state_key:
            origin = tokens.origin_of(state_key)
        else:
            parsed = decoded_token(token)
            state_key, origin = parsed.state_key, parsed.origin
        not_found = ("Resume state not found" if decision.cancel
                     else f"{origin.capitalize()} resume state not found")
        # the frame is read first and the token checked after, under the key set read with
        # it (one round trip to a database store, one look at the key files): reading is
        # harmless, the state key is well formed, and a forged token still stops here (E502)
        parked = store.read_parked(state_key)
        if parsed is not None:
            keys = store.verification_keys()
            verify_token(parsed, keys)
        if parked is None:
            return unparked(store, state_key, decision.cancel, not_found, approval_id)
        if decision.cancel:
            return cancel_parked(store, parked, approval_id, not_found)
        if keys is None:
            keys = store.verification_keys()
        if not parked.authentic(keys):  # first: expiry is not covered
            raise not_authentic()
        refuse_expired(parked.expires_at)
        checkpoint_ttl_ms(options)  # a bad TTL is refused before anything runs
        frame, program = load(store, parked)
        _compile_notes(frame, program, options)
        approved_by = _check_decision(frame, program, decision, options.env)
        if scope.cancelled:  # the caller gave up before anything was taken: it still waits
            raise RequestError("the resume was cancelled before it began; the checkpoint still "
                               "waits", "T422")
        taken = lifecycle.claim(store, parked, frame, decision=_decision_name(decision),
                                approved_by=approved_by or _approver(options.env),
                                lease_s=claim_lease_s(options),
                                via=_via(token, approval_id),
                                step=_step_reached(program, frame))
        if taken is None:
            return unparked(store, state_key, decision.cancel, not_found, approval_id)
        return _run_claimed(taken, program, frame, decision, approved_by, options,
                            evolve(settings, cwd=frame.cwd, mode=frame.mode), scope)
    except RequestError as exc:
        return exc.envelope
    except StoreError as exc:
        return store_error(exc)


def _run_claimed(taken: lifecycle.Claim, program: Program, frame: Frame, decision: Decision,
                 approved_by: str | None, options: Options, settings: Settings,
                 scope: Scope) -> dict:
    """Step a claimed checkpoint forward, and end its claim by what became of the run: the
    next state durable (a checkpoint saved, or the final envelope made) is `finished`; a store
    that failed to take that next state, an exception, an interrupt, or a caller who cancelled
    the run while it ran leave it `in_doubt`, with why and the step reached."""
    if decision.approve is False:
        taken.finish("cancelled")
        return ok_envelope("cancelled", [])
    taken.progress = lambda: _step_reached(program, frame)
    # a pipeline that halted at its last stage: the original keeps such a checkpoint's approval
    # id once the run ends (checkpoint.py, _id_kept_by_the_original), so its record says so
    last_stage = frame.origin == "pipeline" \
        and is_last_stage(program, program.halts[frame.pending.halt].id)
    taken.scope = scope
    held = CLAIM.set(taken)
    try:
        machine.apply_decision(frame, decision.response, approved_by)
        envelope = drive(program, frame, options, settings, scope)
    except Fenced as exc:  # the claim was lost: nothing more is written, and it says so
        return _fenced(taken, exc)
    except RequestError as exc:  # a limit at the end (T423, T424, T425): the run's final answer
        taken.finish("error", exc.envelope["error"].get("code"))
        raise
    except StoreError as exc:
        taken.doubt(f"its next checkpoint could not be saved: {exc}", _step_reached(program,
                                                                                     frame))
        envelope = store_error(exc)
        envelope["error"]["checkpoint"] = lifecycle.status(taken.store, taken.state_key).summary()
        return envelope
    except BaseException as exc:  # a bug, KeyboardInterrupt, SystemExit: the run stops here
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        taken.doubt(f"the resume was interrupted ({what[:300]})", _step_reached(program, frame))
        raise
    finally:
        CLAIM.reset(held)
    try:
        return _settle(taken, program, frame, envelope, scope, last_stage)
    except Fenced as exc:
        return _fenced(taken, exc)


def _fenced(taken: lifecycle.Claim, exc: Fenced) -> dict:
    """The envelope of a resume that lost its claim (T437), with the checkpoint as it is."""
    envelope = store_error(exc)
    envelope["error"]["checkpoint"] = lifecycle.status(taken.store, taken.state_key).summary()
    return envelope


def _settle(taken: lifecycle.Claim, program: Program, frame: Frame, envelope: dict,
            scope: Scope, last_stage: bool) -> dict:
    """End the claim by what became of the run (Fenced when it is no longer this one's)."""
    if taken.lost is not None:  # lost while its last step ran (its children were killed)
        raise taken.fenced()
    if not envelope.get("ok") and scope.cancelled:
        taken.doubt(f"the resume was cancelled by its caller while it ran "
                    f"({envelope['error'].get('code')}: {envelope['error']['message'][:300]})",
                    _step_reached(program, frame))
        envelope["error"]["checkpoint"] = lifecycle.status(taken.store, taken.state_key).summary()
        return envelope
    if envelope.get("ok"):
        halt = envelope.get("requiresApproval") or envelope.get("requiresInput")
        next_key = None
        if halt:
            try:
                next_key = tokens.decode(halt["resumeToken"]).state_key
            except tokens.TokenError:
                next_key = None
        taken.finish(envelope["status"], None, next_key, (halt or {}).get("approvalId"),
                     last_stage=last_stage)
    else:
        taken.finish("error", envelope["error"].get("code"))
    return envelope


def _via(token: str | None, approval_id: str | None) -> str:
    """How the resume named its checkpoint, for the claim record."""
    return "approvalId" if approval_id else "token" if token else "stateKey"


def _decision_name(decision: Decision) -> str:
    if decision.cancel:
        return "cancel"
    if decision.has_response:
        return "input"
    return "approve" if decision.approve else "reject"


def _approver(env: Mapping[str, str]) -> str | None:
    """Who answers, as the environment says (recorded in the checkpoint's history)."""
    return (env.get("LOBSTER_APPROVAL_APPROVED_BY") or "").strip() or None


def _step_reached(program: Program, frame: Frame) -> str | None:
    """The step the frame is in (the last instruction it ran), for a record in doubt."""
    step = program.step_at(max(frame.pc - 1, 0))
    return step.id if step is not None else None


def _compile_notes(frame: Frame, program: Program, options: Options) -> None:
    """What the original's schema compiles warn before it takes the decision: a workflow file's
    input schemas as it loads the file again, a pipeline's pending `ask` schema."""
    from vm.service.protocol.running import load_notes

    if frame.origin == "workflow":
        load_notes(program, options.log)
    if frame.pending.kind == "input":
        from vm.core.schema_compile import compile_notes

        compile_notes(frame.pending.schema, options.log)


def _check_decision(frame: Frame, program: Program, decision: Decision,
                    env: Mapping[str, str]) -> str | None:
    """An invalid decision is a parse_error and leaves the checkpoint untouched. Returns the
    approver's identity for an approval that needs one."""
    pending = frame.pending
    workflow = frame.origin == "workflow"
    if pending.kind == "approval":
        if decision.approve is None:
            raise RequestError("Workflow resume requires --approve yes|no for approval requests"
                               if workflow else "approval resumes require approved=true|false, "
                               "not response", "E510")
        if not decision.approve:
            return None
        return _check_approver(pending, env)
    if not decision.has_response:
        raise RequestError("Workflow resume requires --response-json for input requests"
                           if workflow else "pipeline input resumes require response", "E511")
    from vm.core.schema_errors import SchemaRecursion, error_detail, first_error

    try:
        problem = first_error(pending.schema, decision.response)
    except SchemaRecursion as exc:  # as the original: its stack overflows, a parse_error
        raise RequestError(str(exc), "E512") from None
    if problem is not None:
        where, message = problem
        # an `ask` stage inside a workflow `pipeline:` step is named by that step, as the
        # original names it
        step = program.halts[pending.halt].step or ""
        what = f"Workflow input step {step}" if step else "pipeline input"
        raise RequestError(f"{what} response failed schema validation at {where}: {message}",
                           "E512", detail=error_detail(pending.schema, decision.response))
    return None


def _check_approver(pending, env: Mapping[str, str]) -> str | None:
    approved_by = _approver(env)
    if is_wait(pending, "StepApprovalWait"):  # only a workflow step's approval has rules
        rules = pending.approvers
        required, different = rules.required_approver, rules.require_different_approver
        initiated = rules.initiated_by
    else:
        required = different = initiated = None
    who = f"Workflow step {pending.step} approval"
    if (required or different) and not approved_by:
        raise RequestError(f"{who} requires approver identity; set LOBSTER_APPROVAL_APPROVED_BY",
                           "E513")
    if required and approved_by != required:
        raise RequestError(f"{who} requires approver '{required}', got '{approved_by}'", "E513")
    if different and not initiated:  # fail closed: anyone could be the initiator
        raise RequestError(f"{who} requires an approver other than its initiator, but no "
                           "initiator was recorded (set LOBSTER_APPROVAL_INITIATED_BY or "
                           "initiated_by when running); refused", "E513")
    if different and approved_by == initiated:
        raise RequestError(f"{who} must be granted by someone other than '{initiated}'", "E513")
    return approved_by
