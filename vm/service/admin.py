"""Checkpoints seen from outside a run: what waits, what expired and what is in doubt
(`pending`), ending one (`cancel`), and removing what no checkpoint needs (`gc`). The embedding
API behind `lobster pending`, `lobster cancel` and `lobster gc` (vm/cli/pending.py, cancel.py,
gc.py)."""

from __future__ import annotations

import json
import time
from typing import Any

from vm.core import bounds
from vm.isa import codec
from vm.isa.codec import LoadError
from vm.service.protocol.checkpoint import iso_time, keys_if_any
from vm.service.protocol.envelope import (PROTOCOL_VERSION, RequestError, store_error,
                                          unknown_approval_id, unknown_field)
from vm.service.protocol.options import Options, tombstone_s
from vm.service.protocol.resuming import Decision, cancel_state, named_by_id, resume, resume_js
from vm.host.store import StateStore, StoreError, lifecycle
from vm.host.store.base import STATE_KEY, SigningKeyError, approval_id_form, key_id

GC_GRACE_S = 24 * 3600  # an expired checkpoint is kept this long before gc removes it
GC_RECENT_S = 600  # a program saved (or cache entry written) this recently is never removed
GC_CACHE_AGE_S = 30 * 24 * 3600  # cache entries older than this are removed
GC_TEMP_AGE_S = 60  # temporary files of interrupted writes older than this are removed
# A superseded key is kept at least this long after its successor was made: a halt that read
# it before the rotation has saved its frame by then (PostgreSQL processes re-read the
# signing key every 60 s), so gc sees every frame it signed.
KEY_RETIRE_S = GC_RECENT_S


# pending ------------------------------------------------------------------------------------
def pending(options: Options, now: float | None = None) -> list[dict[str, Any]]:
    """Every checkpoint that waits (status "waiting", or "expired" once past its expiry, or
    "unverifiable" when no key of the store's key set signed it: the key was lost; `error`
    says why), then every claimed one that has not ended: "claimed" (its resume holds a live
    lease) or "in_doubt" (its resume failed, was cut off, or stopped renewing its lease:
    `reason` and `step` say why and where). Oldest first within each group. Times are ISO
    8601 UTC; a stored time however absurd shows as a date."""
    store = options.store()
    now = time.time() if now is None else now
    sources: dict[str, str | None] = {}
    entries = []
    keys, problem = _key_state(store)
    for parked in store.list_parked():
        entry = {"status": "waiting", "approvalId": None, "stateKey": parked.state_key,
                 "kind": None, "prompt": None, "step": None, "source": None,
                 "createdAt": iso_time(parked.created_at),
                 "ageSeconds": max(0, int(now - parked.created_at)),
                 "expiresAt": None if parked.expires_at is None else iso_time(parked.expires_at)}
        if parked.expires_at is not None and parked.expires_at <= now:
            entry["status"] = "expired"
        if not parked.authentic(keys):
            entry["status"] = "unverifiable"
            entry["error"] = (problem or "not signed by any key of this store (its key was "
                              "lost, or it was planted, edited or written by an earlier "
                              "version)") + "; it can only be cancelled"
        try:
            frame = codec.load_frame(parked.blob)
        except LoadError as exc:
            entry.setdefault("error", f"unreadable frame: {exc}")
            entries.append(entry)
            continue
        halt = frame.pending
        if halt is not None:
            entry.update(approvalId=halt.approval_id, kind=halt.kind, prompt=halt.prompt,
                         step=halt.step or None)
        entry["source"] = _source_name(store, frame.program_hash, sources)
        entries.append(entry)
    for status in lifecycle.unsettled(store, now):
        entries.append(_unsettled_entry(status, now))
    return entries


def _key_state(store: StateStore) -> tuple[list[bytes], str | None]:
    """The key set, and what is wrong with it (lost while checkpoints wait, or unusable)."""
    try:
        return store.verification_keys(), None
    except SigningKeyError as exc:
        return [], str(exc)


def key_problem(options: Options) -> dict[str, str] | None:
    """What keeps the store's key set from verifying its checkpoints (`{"code", "message"}`:
    T451 lost while checkpoints wait, T452 a key that is no key), or None."""
    try:
        options.store().verification_keys()
    except SigningKeyError as exc:
        return {"code": exc.code, "message": str(exc)}
    return None


def _unsettled_entry(status: lifecycle.Status, now: float) -> dict[str, Any]:
    """A claimed checkpoint as `pending` lists it: claimed (a live lease) or in doubt."""
    halted = status.event("halted") or {}
    claimed = status.event("claimed") or {}
    claim = status.claim
    claimant = claim.claimant if claim is not None else None
    halt_id = halted.get("approvalId") or (claimant.halt_id if claimant else "") or ""
    claimed_at = claimed.get("at") or (claim.claimed_at if claim is not None else now)
    entry = {
        "status": status.state,
        "approvalId": halt_id if halt_id and approval_id_form(halt_id) == halt_id else None,
        "stateKey": status.record["stateKey"] if status.record else claim.state_key,
        "kind": halted.get("kind") or (claimant.kind if claimant else None) or None,
        "prompt": halted.get("prompt"), "step": status.step or halted.get("step"),
        "claimedAt": iso_time(claimed_at),
        "claimedBy": claimed.get("by") or (f"{claimant.pid}@{claimant.host}" if claimant
                                           else None),
        "approvedBy": claimed.get("approvedBy"),
        "ageSeconds": max(0, int(now - claimed_at))}
    if status.state == lifecycle.IN_DOUBT:
        entry["reason"] = status.reason
    elif claim is not None and claim.lease_until is not None:
        entry["leaseUntil"] = iso_time(claim.lease_until)
    return entry


# The `lobster_pending` request's fields, as protocol.REQUEST_FIELDS (`lobster mcp` publishes
# them as its schema): name -> (JSON Schema of the value, what it is).
PENDING_FIELDS: dict[str, tuple[dict, str]] = {
    "olderThan": ({"type": "string", "maxLength": bounds.MAX_TEXT},
                  "only the checkpoints at least this old: a duration such as 30m, 12h or 7d"),
}


def pending_request(request: dict[str, Any], options: Options) -> dict[str, Any]:
    """`pending` as a request: `{"olderThan"?: duration}` -> `{"protocolVersion": 1, "ok": true,
    "status": "ok", "checkpoints": [...]}` (the entries of `pending`), or an error envelope."""
    older = request.get("olderThan")
    if older is not None:
        try:
            if not isinstance(older, str):
                raise bounds.BoundError("", "form")
            older_ms = bounds.AGE.parse(older, "olderThan")
        except bounds.BoundError as exc:
            return RequestError(exc.message if exc.kind == "range" else
                                f"olderThan must be a duration such as 30m, 12h or 7d, got "
                                f"{bounds.shown(older)}").envelope
    try:
        entries = pending(options)
    except StoreError as exc:
        return store_error(exc)
    if older is not None:
        entries = [e for e in entries if e["ageSeconds"] * 1000 >= older_ms]
    reply = {"protocolVersion": PROTOCOL_VERSION, "ok": True, "status": "ok",
             "checkpoints": entries}
    problem = key_problem(options)
    if problem is not None:
        reply["keyProblem"] = problem
    return reply


def _source_name(store: StateStore, program_hash: str, memo: dict[str, str | None]) -> str | None:
    if program_hash not in memo:
        try:
            blob = store.load_program_bytes(program_hash)
            memo[program_hash] = None if blob is None else \
                codec.load_program(blob).header.source_name
        except LoadError:
            memo[program_hash] = None
    return memo[program_hash]


# history ------------------------------------------------------------------------------------
# The `lobster_history` request's fields (`lobster mcp` publishes them as its schema).
HISTORY_FIELDS: dict[str, tuple[dict, str]] = {
    "id": ({"type": "string", "minLength": 1},
           "the checkpoint: its approvalId, resumeToken, or the stateKey `pending` lists"),
}


def history(options: Options, ident: str) -> dict[str, Any]:
    """The record of one checkpoint, named by its approval id, resume token or state key:
    `{"protocolVersion": 1, "ok": true, "status": "ok", "checkpoint": {"stateKey",
    "approvalId", "state", "events": [...]}}`, or an error envelope. `state` is where it is
    now (waiting, expired, claimed, finished, in_doubt with `reason` and `step`, cancelled);
    the events, oldest first, are `halted` (programHash, itemsHash, at, kind, step, prompt,
    runId, initiatedBy), `claimed` (at, by: pid@host, decision, approvedBy), and how it ended
    (`finished` with outcome and the next checkpoint, `in_doubt`, `cancelled`, `expired`):
    the audit trail of who approved what. Read-only."""
    try:
        store = options.store()
        state_key = _state_key_of(store, (ident or "").strip() if isinstance(ident, str) else "")
        current = lifecycle.status(store, state_key)
    except RequestError as exc:
        return exc.envelope
    except StoreError as exc:
        return store_error(exc)
    if current.state == lifecycle.GONE:
        return RequestError(f'No checkpoint "{_shown(ident)}" in this store (never made, or '
                            "its record was collected by gc)", "E504").envelope
    record = lifecycle.history(current)
    halted = next((e for e in record["events"] if e.get("event") == "halted"), {})
    return {"protocolVersion": PROTOCOL_VERSION, "ok": True, "status": "ok",
            "checkpoint": {"stateKey": state_key, "approvalId": halted.get("approvalId"),
                           **record}}


def history_request(request: dict[str, Any], options: Options) -> dict[str, Any]:
    """`history` as a request: `{"id": ID}` -> `history(options, ID)`."""
    unknown = [name for name in request if name not in HISTORY_FIELDS]
    if unknown:
        return unknown_field(unknown[0], "history", list(HISTORY_FIELDS)).envelope
    ident = request.get("id")
    if not isinstance(ident, str) or not ident.strip():
        return RequestError("id required: an approvalId, resumeToken or stateKey").envelope
    return history(options, ident)


def _shown(ident: Any) -> str:
    text = str(ident)
    return text if len(text) <= 40 else f"{text[:16]}... ({len(text)} characters)"


def _state_key_of(store: StateStore, ident: str) -> str:
    """The state key an approval id, token or state key names; a RequestError otherwise."""
    if approval_id_form(ident) is not None:
        state_key = store.lookup_approval_id(ident)
        if state_key is None:
            raise unknown_approval_id(ident)
        return state_key
    if STATE_KEY.fullmatch(ident) and "_resume_" in ident:
        return ident
    from vm.host import token as tokens

    try:
        parsed = tokens.decode(ident)
        tokens.verify(parsed, keys_if_any(store))
    except tokens.TokenError as exc:
        raise RequestError(f"{_shown(ident)!r} is not an approval id, state key or resume "
                           f"token ({exc.message})", exc.code) from None
    return parsed.state_key


# cancel -------------------------------------------------------------------------------------
def cancel(options: Options, ident: str) -> dict:
    """End one checkpoint, named by its approval id or its state key (what `pending` lists):
    the same as a resume with `cancel: true`. A claim in doubt is cleared the same way.
    Returns the envelope (`cancelled`, or the error a resume would give): JSON data, as it
    holds no value of the run."""
    ident = (ident or "").strip()
    if approval_id_form(ident) is not None:
        return resume_js(options, Decision(cancel=True), approval_id=ident)
    if STATE_KEY.fullmatch(ident) and "_resume_" in ident:
        return cancel_state(options, ident)
    return unknown_approval_id(ident).envelope


def resume_by_id(options: Options, decision: Decision, ident: str, *,
                 checkpoint_ttl: str | int | None = None) -> dict:
    """Resume the checkpoint any id `pending` lists names: an approval id (an approval gate)
    or a state key (any gate, input gates included, which have no approval id). Anything
    else is refused as an unknown approval id, in the original's words. The envelope is
    `resume`'s, JSON data."""
    approval_id, state_key = named_by_id(ident)
    return resume(options, decision, approval_id=approval_id, state_key=state_key,
                  checkpoint_ttl=checkpoint_ttl)


def cancel_older_than(options: Options, seconds: float,
                      now: float | None = None) -> list[dict[str, Any]]:
    """Cancel every listed checkpoint (waiting, expired or in doubt; never one claimed) at
    least `seconds` old. Returns those entries, each with `cancelled` true or false."""
    now = time.time() if now is None else now
    chosen = []
    for entry in pending(options, now):
        if entry["status"] == lifecycle.CLAIMED or entry["ageSeconds"] < seconds:
            continue
        envelope = cancel_state(options, entry["stateKey"])
        entry["cancelled"] = envelope.get("status") == "cancelled"
        if not envelope.get("ok"):
            entry["error"] = envelope["error"]["message"]
        chosen.append(entry)
    return chosen


# gc -----------------------------------------------------------------------------------------
def gc(options: Options, *, dry_run: bool = False, now: float | None = None,
       grace_s: float = GC_GRACE_S, cache_age_s: float = GC_CACHE_AGE_S,
       recent_s: float = GC_RECENT_S, temp_age_s: float = GC_TEMP_AGE_S) -> dict[str, Any]:
    """Remove (or, with `dry_run`, only list) what no checkpoint needs:

    - checkpoints expired more than `grace_s` ago (with their approval ids; each leaves a
      record, `expired`);
    - the records of checkpoints that ended (finished, cancelled, expired) longer than
      LOBSTER_TOMBSTONE_TTL ago (default 7 days), with their approval ids;
    - programs no parked frame refers to and none saved in the last `recent_s` (a halt saves
      its program just before its frame, so a run halting now keeps its program); the window
      is at least twice the store's `program_touch_s` (the directory store moves a program's
      mtime, and a PostgreSQL park its used_at, at most once a minute, so a program saved a
      moment ago may look a minute old: gc never takes one a halt is about to park a frame
      on, however short `recent_s`);
    - cache entries older than `cache_age_s`, and compile cache entries whose program is gone;
    - temporary files of interrupted writes, and approval ids without a frame, older than
      `temp_age_s`;
    - keys of the key set that no waiting checkpoint was signed with, superseded more than
      KEY_RETIRE_S ago (never the newest, the signing key).

    Safe while other processes run, halt and resume: a frame is removed only through a claim,
    and a program only if nothing saved it since it was found unused."""
    store = options.store()
    now = time.time() if now is None else now
    report: dict[str, Any] = {"dryRun": dry_run, "checkpoints": [], "tombstones": [], "keys": [],
                              "programs": [], "cache": [], "leftovers": []}
    for record in lifecycle.collect(store, now - tombstone_s(options), dry_run):
        report["tombstones"].append(record["stateKey"])
        if not dry_run:
            for event in record["events"]:
                if event.get("event") == "halted" and event.get("approvalId"):
                    store.remove_approval_id(event["approvalId"])
    referenced: set[str] = set()
    parked_all = store.list_parked()
    for parked in parked_all:
        try:
            frame = codec.load_frame(parked.blob)
        except LoadError:
            frame = None
        if parked.expires_at is not None and parked.expires_at + grace_s <= now:
            if dry_run or lifecycle.expire(store, parked, frame):
                report["checkpoints"].append(parked.state_key)
                if not dry_run and frame is not None and frame.pending is not None:
                    store.remove_approval_id(frame.pending.approval_id)
                continue
        if frame is not None:
            referenced.add(frame.program_hash)
    report["keys"] = _retire_keys(store, [p for p in parked_all
                                          if p.state_key not in report["checkpoints"]],
                                  now - KEY_RETIRE_S, dry_run)
    unused_since = now - max(recent_s, 2 * store.program_touch_s)
    stored = set()
    for program_hash, used_at in store.list_programs():
        stored.add(program_hash)
        if program_hash in referenced or used_at >= unused_since:
            continue
        if dry_run or store.remove_program(program_hash, unused_since):
            report["programs"].append(program_hash)
    remaining = stored - set(report["programs"])
    for entry in store.list_cache():
        stale = entry.written_at < now - cache_age_s or (
            entry.kind == "compile" and entry.written_at < unused_since
            and _compiled_program(store, entry.key) not in remaining)
        if stale:
            if not dry_run:
                store.remove_cache(entry.kind, entry.key)
            report["cache"].append(f"{entry.kind}/{entry.key}")
    for name in store.leftovers(now - temp_age_s):
        if dry_run or store.remove_leftover(name):
            report["leftovers"].append(name)
    return report


def _retire_keys(store: StateStore, parked: list, superseded_before: float,
                 dry_run: bool) -> list[str]:
    """Retire (or list) each key no waiting checkpoint needs, whose successor was made before
    `superseded_before`; returns their ids."""
    try:
        keys, infos = store.keys(), store.key_set()
    except SigningKeyError:
        return []
    if [key_id(k) for k in keys] != [info.id for info in infos]:
        return []  # rotated while read: next time
    retired = []
    for newer, info, key in zip(infos, infos[1:], keys[1:]):
        if newer.created_at >= superseded_before or any(p.authentic(key) for p in parked):
            continue
        if dry_run or store.retire_key(info.number):
            retired.append(info.id)
    return retired


# keys ---------------------------------------------------------------------------------------
def key_list(options: Options) -> list[dict[str, Any]]:
    """The store's key set, newest (the signing key) first: number, id (never the key),
    createdAt, whether it signs, and how many waiting checkpoints it signed. A key set that
    cannot be used raises its SigningKeyError (a StoreError)."""
    store = options.store()
    keys, infos = store.keys(), store.key_set()
    parked = store.list_parked()
    return [{"number": info.number, "id": info.id, "createdAt": iso_time(info.created_at),
             "signing": n == 0, "checkpoints": sum(p.authentic(key) for p in parked)}
            for n, (info, key) in enumerate(zip(infos, keys))]


def rotate_key(options: Options) -> dict[str, Any]:
    """Add a new signing key; the others verify until gc retires them. Returns the new key's
    number, id and createdAt, and `unverifiable`: checkpoints no key verifies (a lost key)."""
    store = options.store()
    info = store.rotate_key()
    keys = store.keys()
    unverifiable = sum(not p.authentic(keys) for p in store.list_parked())
    return {"number": info.number, "id": info.id, "createdAt": iso_time(info.created_at),
            "unverifiable": unverifiable}


def _compiled_program(store: StateStore, key: str) -> str | None:
    try:
        entry = json.loads(store.get_cache("compile", key) or b"")
        return entry["program"] if isinstance(entry["program"], str) else None
    except (ValueError, TypeError, KeyError):
        return None
