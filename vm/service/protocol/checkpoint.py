"""A parked checkpoint as a resume or a cancel finds it: named by token, approval id or state
key; its frame and program loaded and checked; ended in place by a cancel; and, when there is
no frame to take, what its record says became of it."""

from __future__ import annotations

import os
import time

from vm.core import bounds
from vm.host import token as tokens
from vm.host.store import StateStore, StoreError, lifecycle
from vm.host.store.base import SigningKeyError, approval_id_form
from vm.isa import codec
from vm.isa.codec import LoadError
from vm.isa.frame import Frame
from vm.isa.program import Program
from vm.service.protocol.envelope import RequestError, ok_envelope, unknown_approval_id
from vm.service.protocol.options import Options


def not_authentic() -> RequestError:
    """A frame or program this store did not write (T434)."""
    return RequestError("Resume state was not written by this state store (a frame or program "
                        "planted, edited or from an earlier version); refused: a cancel removes "
                        "it", "T434")


def corrupt(detail: object) -> RequestError:
    """A frame or program that does not load, or does not fit the other (T431)."""
    return RequestError(f"Resume state is corrupt: {detail}", "T431")


def iso_time(seconds: float) -> str:
    """Unix seconds -> `2026-12-03T19:04:05Z`; any stored time, however absurd, gives a date
    (clamped to 1970..9999: one bad record never breaks a listing)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(bounds.clamp_time(seconds)))


def keys_if_any(store: StateStore) -> list[bytes]:
    """Every key a frame or token of this store may be signed with, for what needs no key
    (a cancel, naming a checkpoint by its token): a key set that cannot be read is empty."""
    try:
        return store.keys()
    except StoreError:
        return []


def decoded_token(token: str | None) -> tokens.Token:
    """A resume token's shape, decoded (E501, or E502 when it is unsigned); its signature is
    checked by `verify_token`, with the key set read beside the frame it names."""
    try:
        return tokens.decode(token or "")
    except tokens.TokenError as exc:
        raise RequestError(exc.message, exc.code) from None


def verify_token(parsed: tokens.Token, keys: list[bytes]) -> None:
    """The token's signature matches one key of the store's key set (E502)."""
    try:
        tokens.verify(parsed, keys)
    except tokens.TokenError as exc:
        raise RequestError(exc.message, exc.code) from None


def refuse_expired(expires_at: float | None) -> None:
    if expires_at is not None and expires_at <= time.time():
        raise RequestError(f"This checkpoint expired at {iso_time(expires_at)}; it can only be "
                           "cancelled (or collected by `lobster gc`)", "T433")


def load(store: StateStore, parked) -> tuple[Frame, Program]:
    """The parked frame (its MAC already checked: the bytes this store wrote under this key)
    and its program, each checked: the program's content hash (the one the frame names), then
    the frame against its program. Refusals consume nothing."""
    try:
        frame = codec.load_frame(parked.blob)
        program = _program_of(store, frame.program_hash)
    except codec.NotAuthentic:
        raise not_authentic() from None
    except LoadError as exc:
        raise corrupt(exc) from None
    if program.hash != frame.program_hash:
        raise not_authentic()
    if frame.pending is None:
        raise corrupt("frame does not match its program")
    try:
        codec.check_frame(frame, program)
    except LoadError as exc:
        raise corrupt(exc) from None
    return frame, program


def _program_of(store: StateStore, program_hash: str) -> Program:
    """The program of that hash: the one this process verified already, else the store's
    (LoadError when it is missing, codec.NotAuthentic when the bytes are not that program)."""
    program = codec.known_program(program_hash)
    if program is None:
        program_blob = store.load_program_bytes(program_hash)
        if program_blob is None:
            raise LoadError(f"program {program_hash} is missing from the state directory")
        program = codec.load_program(program_blob)
    return program


def cancel_parked(store: StateStore, parked, approval_id: str | None, not_found: str) -> dict:
    """End a parked checkpoint. Nothing in it runs, so nothing limits this: a frame too large,
    unreadable or not authentic is cancelled too. Its approval id goes with it (the frame's
    own only when this store wrote the frame; an id left behind is collected by `gc`), and its
    record stays, `cancelled`, as a tombstone."""
    ids = {approval_id}
    frame = None
    if parked.authentic(keys_if_any(store)):
        try:
            frame = codec.load_frame(parked.blob)
            ids.add(frame.pending.approval_id)
        except (LoadError, AttributeError):
            frame = None
    before = lifecycle.cancel(store, parked.state_key, frame)
    if before.state not in (lifecycle.WAITING, lifecycle.EXPIRED):  # taken meanwhile
        return unparked(store, parked.state_key, False, not_found, approval_id)
    for halt_id in ids:
        store.remove_approval_id(halt_id)
    return ok_envelope("cancelled", [])


def unparked(store: StateStore, state_key: str, cancel: bool, not_found: str,
             approval_id: str | None) -> dict:
    """No frame to resume, and the checkpoint's record says why: being resumed right now (a
    live lease: T435), ended (finished, cancelled or expired: T436, the original's "not found"
    words, and how and when it ended in `error.checkpoint`), in doubt (T432; a cancel clears
    it) or never known (T430)."""
    current = lifecycle.status(store, state_key)
    if current.state == lifecycle.IN_DOUBT:
        if cancel:
            lifecycle.cancel(store, state_key)
            halted = current.event("halted") or {}
            claimant = current.claim.claimant if current.claim else None
            for halt_id in (approval_id, halted.get("approvalId"),
                            claimant.halt_id if claimant else None):
                if halt_id and approval_id_form(halt_id) == halt_id:
                    store.remove_approval_id(halt_id)
            return ok_envelope("cancelled", [])
        claimed = current.event("claimed") or {}
        if claimed:
            at, who = claimed.get("at"), claimed.get("by")
        elif current.claim is not None:
            claimant = current.claim.claimant
            at = current.claim.claimed_at
            who = f"{claimant.pid}@{claimant.host}" if claimant else None
        else:
            at, who = None, None
        when = iso_time(at) if isinstance(at, (int, float)) else "an unknown time"
        step = f" at step {current.step}" if current.step else ""
        error = RequestError(f"This checkpoint was claimed at {when} by "
                             f"{who or 'a resume whose record was lost'} and did not finish"
                             f"{step}: {current.reason} (its step may have run; `lobster "
                             "pending` lists it, `lobster history` shows it, a cancel clears "
                             "it)", "T432")
    elif current.state == lifecycle.CLAIMED:
        error = RequestError(not_found, "T435")
    elif current.state in lifecycle.ENDED:
        if approval_id and not _id_kept_by_the_original(store, state_key, current):
            error = unknown_approval_id(approval_id, "E505")
        else:
            error = RequestError(not_found, "T436")
    else:
        raise RequestError(not_found, "T430")
    error.envelope["error"]["checkpoint"] = {"stateKey": state_key, **current.summary()}
    raise error


def _id_kept_by_the_original(store: StateStore, state_key: str, current) -> bool:
    """Whether the original still finds the approval id of this ended checkpoint: it drops an
    id once its checkpoint ends, except a pipeline's whose `approve` was its last stage and
    was approved (its state is gone, its id not: `Pipeline resume state not found`)."""
    if tokens.origin_of(state_key) != "pipeline":
        return False
    halted, claimed = current.event("halted"), current.event("claimed")
    finished = current.event(lifecycle.FINISHED)
    if not (halted and claimed and finished) or claimed.get("decision") != "approve" \
            or finished.get("outcome") != "ok":
        return False
    if finished.get("lastStage") is True:  # the record says so (since stop 42)
        return True
    # a record written before says nothing: the program tells, while gc has not taken it
    program_hash = halted.get("programHash")
    if not isinstance(program_hash, str):
        return False
    try:
        program = _program_of(store, program_hash)
    except (LoadError, OSError, StoreError):
        return False
    return is_last_stage(program, halted.get("step"))


def is_last_stage(program: Program, step: str | None) -> bool:
    """Whether `step` (a halt's, as its record names it) is the program's last stage."""
    return bool(program.steps) and program.steps[-1].id == step


def store_problem(options: Options) -> str | None:
    """Why the state store cannot hold a checkpoint, or None: `lobster doctor` asks."""
    try:
        store = options.store()
        location = getattr(store, "location", "")
        if location and "://" not in location and os.path.exists(location) and not os.path.isdir(location):
            return f"the state directory {location} is not a directory"
        store.key()  # reads, or creates, the signing key: the store is there and writable
        keys = store.keys()
        lost = sum(not parked.authentic(keys) for parked in store.list_parked())
    except SigningKeyError as exc:
        return str(exc)
    except (OSError, StoreError) as exc:
        return f"the state store cannot be used: {getattr(exc, 'strerror', None) or exc}"
    if lost:
        return (f"{lost} checkpoint{'' if lost == 1 else 's'} in the state store at "
                f"{store.location} {'is' if lost == 1 else 'are'} signed by no key of its "
                "signing key set (a lost key, or a frame planted, edited or written by an "
                "earlier version): `lobster pending` lists them as unverifiable; restore the "
                "key, or cancel them")
    return None
