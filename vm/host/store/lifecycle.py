"""A checkpoint's life: the one owner of its states, their transitions and its record.

    waiting ──claim──> claimed ──finish(outcome)──> finished        (a tombstone until gc)
       │                  ├──doubt(reason, step)──> in_doubt ──cancel──> cancelled
       │                  ├──(lease not renewed)──> in_doubt         (read so, whoever held it)
       │                  └──release(frame)───────> waiting          (a frame rewritten)
       ├──cancel──> cancelled
       └──(expiry passes)──> expired ──cancel | gc──> cancelled | expired tombstone

`waiting` and `expired` are a parked frame (the store's; expiry is read from it). Once claimed,
a checkpoint has a *record*: JSON `{"v": 1, "stateKey", "state", "events": [...]}` whose events
are `halted` (programHash, itemsHash, at, kind, step, prompt, approvalId, runId, expiresAt,
initiatedBy), `claimed` (at, by: pid@host, decision, approvedBy, via: how the resume named
it, "token" | "approvalId" | "stateKey"), then one of
`finished` (at, outcome: ok | needs_approval | needs_input | cancelled | error, code,
next: {stateKey, approvalId}), `in_doubt` (at, reason, step), `cancelled` (at, by), `expired`
(at), or `released` (at, why). The record is written with the claim (one atomic store step),
so a claimed checkpoint is never without it. A claim's liveness is its *lease*: an expiry the
running resume renews (`Claim` runs a renewer thread); a lease that passed is in doubt,
whichever process held it. Callers (vm/service/protocol/, vm/service/admin.py) never touch
claims directly.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vm.core import json_write
from vm.core.records import named_tuple
from vm.host.store import leases
from vm.host.store.base import Fenced, StateStore, StoreError, process_identity
from vm.isa.frame import is_wait

if TYPE_CHECKING:
    from vm.isa.frame import Frame
    from vm.host.store.base import Parked
    from vm.host.store.claims import ClaimRecord

RECORD_VERSION = 1
LEASE_S = 30.0  # a claim's lease; the running resume renews it every third of that
TOMBSTONE_S = 7 * 24 * 3600.0  # how long an ended checkpoint's record is kept before gc

WAITING, CLAIMED, FINISHED, IN_DOUBT = "waiting", "claimed", "finished", "in_doubt"
CANCELLED, EXPIRED, GONE = "cancelled", "expired", "gone"
ENDED = (FINISHED, CANCELLED, EXPIRED)  # terminal: a tombstone, removed by gc in time
LEASE_LAPSED = ("its lease expired: the resume holding it stopped renewing it (killed, or cut "
                "off); the step on record is the gate it resumed, the steps after it may have run")


def who() -> str:
    """This process, as a claim records it: pid@host."""
    pid, host = process_identity()
    return f"{pid}@{host}"


def items_hash(items: Any) -> str:
    """sha256 of the halt's items as canonical JSON: what an approver was shown."""
    text = json_write.plain_dumps(items, ascii_only=False, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def halted_event(parked: Parked, frame: Frame | None, step: str | None = None) -> dict[str, Any]:
    """What a parked checkpoint says about its halt (a frame that cannot be read: its time);
    `step`: the halt's step when the frame does not name one (a pipeline's stage)."""
    event: dict[str, Any] = {"event": "halted", "at": parked.created_at,
                             "expiresAt": parked.expires_at}
    if frame is not None:
        event.update(programHash=frame.program_hash, runId=frame.run_id)
        pending = frame.pending
        if pending is not None:
            event.update(kind=pending.kind, step=pending.step or step, prompt=pending.prompt,
                         approvalId=pending.approval_id, itemsHash=items_hash(pending.items),
                         initiatedBy=pending.approvers.initiated_by
                         if is_wait(pending, "StepApprovalWait") else None)
    return event


def encode_record(record: dict) -> bytes:
    return json_write.plain_dumps(record).encode("ascii")


def decode_record(blob: bytes | None, state_key: str) -> dict | None:
    """The stored record of `state_key`, or None when there is none or it cannot be read. A
    record of another checkpoint does not read: after a power loss, a record file written
    without a sync may hold what the reused file held before (vm/host/store/files.py)."""
    if blob is None:
        return None
    try:
        record = json.loads(blob)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("events"), list) \
            or record.get("stateKey") != state_key:
        return None
    return record


# the state of one checkpoint ----------------------------------------------------------------
@named_tuple
class Status:
    """Where a checkpoint is now: `state` (WAITING ... GONE), its record (None while waiting
    or when it never existed), its parked frame (waiting, expired) and its claim."""

    state: str
    record: dict | None = None
    parked: Parked | None = None
    claim: ClaimRecord | None = None
    reason: str | None = None  # in_doubt: why
    step: str | None = None  # in_doubt: the step reached

    def event(self, name: str) -> dict | None:
        """The last event of that name in the record."""
        for event in reversed((self.record or {}).get("events", [])):
            if event.get("event") == name:
                return event
        return None

    def summary(self) -> dict[str, Any]:
        """The additive `checkpoint` field of a refusal: the state and how and when it ended."""
        out: dict[str, Any] = {"state": self.state}
        claimed = self.event("claimed")
        if claimed is not None:
            out.update(claimedAt=iso(claimed.get("at")), claimedBy=claimed.get("by"))
        if self.claim is not None and self.state == CLAIMED:
            out["leaseUntil"] = iso(self.claim.lease_until)
        events = (self.record or {}).get("events") or [{}]
        last = events[-1]
        if self.state in ENDED and last.get("event") in ENDED:
            out["endedAt"] = iso(last.get("at"))
            if last.get("outcome"):
                out["outcome"] = last["outcome"]
            if last.get("code"):
                out["code"] = last["code"]
        if self.state == IN_DOUBT:
            out.update(reason=self.reason, step=self.step)
        return out


def iso(seconds: Any) -> str | None:
    if not isinstance(seconds, (int, float)):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def status(store: StateStore, state_key: str, now: float | None = None) -> Status:
    """The state of the checkpoint `state_key`, read from the store."""
    now = time.time() if now is None else now
    parked = store.read_parked(state_key)
    blob = store.read_record(state_key)
    record = decode_record(blob, state_key)
    if blob is not None and record is None:  # torn by a power loss after a lazy write
        record = {"v": RECORD_VERSION, "stateKey": state_key, "state": IN_DOUBT, "events": [
            {"event": IN_DOUBT, "reason": "its record cannot be read", "step": None}]}
    if parked is not None:
        if parked.expires_at is not None and parked.expires_at <= now:
            return Status(EXPIRED, record, parked)
        return Status(WAITING, record, parked)
    claim = store.claim_record(state_key)
    return _classify(state_key, record, claim, now)


def _classify(state_key: str, record: dict | None, claim: ClaimRecord | None,
              now: float) -> Status:
    state = (record or {}).get("state")
    if state in ENDED:
        return Status(state, record, None, claim)
    if state == IN_DOUBT:
        event = _last(record, IN_DOUBT) or {}
        return Status(IN_DOUBT, record, None, claim, event.get("reason"), event.get("step"))
    if claim is not None:
        if claim.lease_until is not None and claim.lease_until > now:
            return Status(CLAIMED, record, None, claim)
        step = (_last(record, "halted") or {}).get("step") if record else None
        return Status(IN_DOUBT, record, None, claim, LEASE_LAPSED, step)
    if state == CLAIMED:  # the claim is gone and no outcome was written (a crash between)
        step = (_last(record, "halted") or {}).get("step")
        return Status(IN_DOUBT, record, None, None, "its claim ended without an outcome", step)
    return Status(GONE, record)


def _last(record: dict | None, name: str) -> dict | None:
    for event in reversed((record or {}).get("events", [])):
        if event.get("event") == name:
            return event
    return None


def unsettled(store: StateStore, now: float | None = None) -> list[Status]:
    """Every checkpoint claimed and not ended: claimed (a live lease) or in doubt; oldest
    claim first."""
    now = time.time() if now is None else now
    found: dict[str, Status] = {}
    claims = {c.state_key: c for c in store.in_doubt()}
    for state_key, blob in store.list_records(ended=False):
        record = decode_record(blob, state_key)
        if record is not None and record.get("state") not in ENDED:
            found[state_key] = _classify(state_key, record, claims.get(state_key), now)
    for state_key, claim in claims.items():
        if state_key not in found and store.read_record(state_key) is None:
            found[state_key] = _classify(state_key, None, claim, now)
    statuses = [s for s in found.values() if s.state in (CLAIMED, IN_DOUBT)]
    return sorted(statuses, key=lambda s: (_claimed_at(s), _key(s)))


def _claimed_at(status: Status) -> float:
    if status.claim is not None:
        return status.claim.claimed_at
    return (status.event("claimed") or {}).get("at") or 0.0


def _key(status: Status) -> str:
    return (status.record or {}).get("stateKey") or (status.claim.state_key if status.claim
                                                     else "")


# transitions --------------------------------------------------------------------------------
def abandon_all(reason: str) -> None:
    """The process is about to die (a signal): every claim it holds is left in doubt now, with
    `reason` and the step each had reached, rather than when its lease runs out."""
    for held in list(leases.HELD.values()):
        held.doubt(reason, held.progress())


class Claim:
    """A claimed checkpoint, held by this process while its resume runs. Its lease is renewed
    by a daemon thread, started once the claim has lived a third of its lease
    (vm/host/store/leases.py), until `finish`, `doubt` or `release`; exactly one of them ends
    it. `progress` (set by the resume) says which step the run is in."""

    def __init__(self, store: StateStore, state_key: str, record: dict, lease_s: float,
                 fence: Any = None, lease_until: float | None = None) -> None:
        self.store = store
        self.state_key = state_key
        self.record = record
        self.lease_s = lease_s
        self.fence = fence  # the store's fencing token of this claim (None: not fenced)
        self.lease_until = time.time() + lease_s if lease_until is None else lease_until
        self.lost: str | None = None  # why this holder lost the claim; scope: its run's children
        self.scope: Any = None
        self.ended = False
        self.progress: Callable[[], str | None] = lambda: None
        self.since = time.monotonic()
        self._stop: threading.Event | None = None  # made by the renewer: most claims have none
        leases.HELD[state_key] = self
        leases.SCHEDULER.add(self)

    @property
    def renewing(self) -> bool:
        """Whether its renewer was started (it may have stopped since)."""
        return self._stop is not None

    def start_renewing(self) -> None:
        """Renew the lease now, then every third of it, on a thread of its own. The event
        that stops it is made before `ended` is read, and `_stopped` sets `ended` before it
        reads the event: a claim that ends meanwhile is seen by one side or the other."""
        self._stop = threading.Event()
        if self.ended:
            return
        try:
            threading.Thread(target=self._renew, args=(self._stop,), daemon=True,
                             name=f"lobster-lease-{self.state_key[-8:]}").start()
        except RuntimeError:  # no thread could be started: not renewing, tried again later
            self._stop = None
            raise

    def _stopped(self) -> None:
        """Ended: it leaves the table of held claims, and its renewer (if any) stops."""
        self.ended = True
        leases.HELD.pop(self.state_key, None)
        if self._stop is not None:
            self._stop.set()

    def _renew(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if not self._renew_once():
                    return  # cancelled or taken over from outside: the claim is lost
            except (StoreError, OSError):
                pass  # the store is away: try again; the lease may lapse meanwhile
            stop.wait(self.lease_s / 3)

    def _renew_once(self) -> bool:
        """Extend the lease if the claim is still this one (its fence), else `_lose` it."""
        until = time.time() + self.lease_s
        if self.fence is None:
            return self.store.renew_claim(self.state_key, until)
        if self.store.renew_claim(self.state_key, until, fence=self.fence):
            self.lease_until = until
            return True
        return self._lose("it was cancelled or taken over after its lease lapsed") or False

    def _lose(self, why: str) -> None:
        """Not this holder's claim any more: it writes nothing, its children are killed."""
        self.lost = self.lost or why
        self._stopped()
        if self.scope is not None:
            self.scope.cancel()

    def fenced(self) -> Fenced:
        step = self.progress()
        return Fenced(f"this resume lost its claim of checkpoint {self.state_key}: {self.lost}; "
                      f"it stopped before its next step{f' (after step {step})' if step else ''} "
                      "and wrote nothing more (`lobster history` shows how the checkpoint "
                      "ended)")

    def check(self) -> None:
        """Before each step (vm/engine/interp.py): a lease running by this clock goes on; a
        lapsed one is renewed first, if the claim is still this one, else Fenced."""
        if self.lost is not None:
            raise self.fenced()
        if self.fence is None or time.time() < self.lease_until:
            return
        try:
            if self._renew_once():
                return
        except (StoreError, OSError) as exc:
            self._lose(f"its lease lapsed and could not be renewed ({exc})")
        raise self.fenced()

    def _end(self, event: dict, state: str, durable: bool) -> None:
        if self.lost is not None or self.ended:
            if self.lost is not None:
                raise self.fenced()
            return
        self._stopped()
        self.record["events"].append(event)
        self.record["state"] = state
        try:
            if self.fence is None:
                self.store.settle_claim(self.state_key, encode_record(self.record),
                                        durable=durable)
            elif not self.store.settle_claim(self.state_key, encode_record(self.record),
                                             durable=durable, fence=self.fence) \
                    and not self._settled_as(event):
                self.lost = "it was cancelled or taken over after its lease lapsed"
                raise self.fenced()
        except OSError as exc:
            raise StoreError(f"the store {self.store.location} cannot be written: "
                             f"{exc.strerror or exc}") from None

    def finish(self, outcome: str, code: str | None = None, next_key: str | None = None,
               next_approval_id: str | None = None, last_stage: bool = False) -> None:
        """The run's next state is durable (its next checkpoint is saved, or its final
        envelope made): the claim ends `finished`, its record kept as a tombstone. Written
        lazily: lost in a crash, the claim reads in doubt, never the reverse. `last_stage`:
        the checkpoint was a pipeline's halt at its last stage (`lastStage` in the event)."""
        event: dict[str, Any] = {"event": FINISHED, "at": time.time(), "outcome": outcome}
        if code:
            event["code"] = code
        if next_key:
            event["next"] = {"stateKey": next_key, "approvalId": next_approval_id}
        if last_stage:
            event["lastStage"] = True
        try:
            self._end(event, FINISHED, durable=False)
        except StoreError as exc:
            if isinstance(exc, Fenced):
                raise
            # the run's next state is durable; the claim's lease runs out: in doubt

    def _settled_as(self, event: dict) -> bool:  # a settle whose answer was lost
        stored = decode_record(self.store.read_record(self.state_key), self.state_key) or {}
        return (stored.get("events") or [None])[-1] == event

    def doubt(self, reason: str, step: str | None) -> None:
        """The resume failed or was cut off after its claim: the checkpoint is in doubt, with
        why and the step it reached. If even that cannot be written, the lease lapses and the
        claim reads in doubt all the same."""
        try:
            self._end({"event": IN_DOUBT, "at": time.time(), "reason": reason[:2000],
                       "step": step}, IN_DOUBT, durable=True)
        except StoreError:
            pass

    def release(self, blob: bytes, expires_at: float | None, event: dict[str, Any],
                key: bytes | None = None) -> None:
        """Park a rewritten frame under the same key (a migration: `event` says what moved,
        e.g. `{"event": "migrated", "from": ..., "to": ...}`), signed with `key` (default: the
        signing key): back to waiting, the claim and its history kept in the record."""
        self._stopped()
        self.record["events"].append({**event, "at": time.time()})
        self.record["state"] = WAITING
        try:
            self.store.write_record(self.state_key, encode_record(self.record))
            self.store.repark(self.state_key, blob, expires_at, key=key)
        except OSError as exc:
            raise StoreError(f"the store {self.store.location} cannot be written: "
                             f"{exc.strerror or exc}") from None


def claim(store: StateStore, parked: Parked, frame: Frame | None, *, decision: str,
          approved_by: str | None = None, lease_s: float = LEASE_S, via: str | None = None,
          step: str | None = None) -> Claim | None:
    """Take a waiting checkpoint for a resume: None when another caller took it first. The
    claim, its lease and its record (halted, claimed) are durable together when this returns."""
    from vm.host.store.claims import Claimant

    now = time.time()
    pending = frame.pending if frame is not None else None
    claimant = Claimant(pending.kind if pending else "",
                        (pending.approval_id or pending.step or "") if pending else "")
    events = [halted_event(parked, frame, step),
              {"event": CLAIMED, "at": now, "by": who(), "decision": decision,
               "approvedBy": approved_by, "via": via}]
    record = {"v": RECORD_VERSION, "stateKey": parked.state_key, "state": CLAIMED,
              "events": events}
    try:  # the store puts these events after those of any record already there
        taken = store.claim_checkpoint(parked.state_key, claimant, now + lease_s, record)
    except OSError as exc:
        raise StoreError(f"the store {store.location} cannot be written: "
                         f"{exc.strerror or exc}") from None
    if taken is None:
        return None
    record, fence = taken
    return Claim(store, parked.state_key, record, lease_s, fence, now + lease_s)


def cancel(store: StateStore, state_key: str, frame: Frame | None = None,
           by: str | None = None) -> Status:
    """End a checkpoint that waits, expired, or is in doubt: it reads `cancelled` from now on.
    Returns the status it had; nothing changes when that was claimed (a live lease), ended or
    gone, or when a concurrent caller took it first."""
    current = status(store, state_key)
    event = {"event": CANCELLED, "at": time.time(), "by": by or who()}
    if current.state in (WAITING, EXPIRED):
        taken = claim(store, current.parked, frame, decision="cancel", lease_s=LEASE_S)
        if taken is None:
            return status(store, state_key)
        taken._end(event, CANCELLED, durable=True)
        return current
    if current.state == IN_DOUBT:
        record = current.record or {"v": RECORD_VERSION, "stateKey": state_key, "events": []}
        record["events"] = [*record["events"], event]
        record["state"] = CANCELLED
        try:
            store.settle_claim(state_key, encode_record(record))
        except OSError as exc:
            raise StoreError(f"the store {store.location} cannot be written: "
                             f"{exc.strerror or exc}") from None
    return current


def expire(store: StateStore, parked: Parked, frame: Frame | None) -> bool:
    """gc of a checkpoint long past its expiry: it ends `expired` (a tombstone). False when a
    concurrent caller took it first."""
    taken = claim(store, parked, frame, decision="expire")
    if taken is None:
        return False
    taken._end({"event": EXPIRED, "at": time.time()}, EXPIRED, durable=True)
    return True


def collect(store: StateStore, older_than: float, dry_run: bool = False) -> list[dict]:
    """The records of checkpoints that ended before `older_than` (unix seconds), removed
    (unless `dry_run`) with any claim a crash left beside them. Returns those records."""
    removed = []
    for state_key, blob in store.list_records():
        record = decode_record(blob, state_key)
        if record is None or record.get("state") not in ENDED:
            continue
        ended_at = (record["events"][-1] if record["events"] else {}).get("at") or 0
        if ended_at >= older_than:
            continue
        if not dry_run:
            store.finish_claim(state_key)
            store.remove_record(state_key)
        removed.append(record)
    return removed


def history(status_: Status, now: float | None = None) -> dict[str, Any]:
    """A checkpoint's record as `lobster history` shows it: its state now, and its events
    (times as ISO 8601 UTC), the halt first."""
    events = [dict(e) for e in (status_.record or {}).get("events", [])]
    if status_.parked is not None and not any(e.get("event") == "halted" and
                                              e.get("at") == status_.parked.created_at
                                              for e in events):
        from vm.isa import codec
        from vm.isa.codec import LoadError

        try:
            frame = codec.load_frame(status_.parked.blob)
        except LoadError:
            frame = None
        events.append(halted_event(status_.parked, frame))
    for event in events:
        for name in ("at", "expiresAt", "leaseUntil"):
            if isinstance(event.get(name), (int, float)):
                event[name] = iso(event[name])
    out: dict[str, Any] = {"state": status_.state, "events": events}
    if status_.state == IN_DOUBT:
        out.update(reason=status_.reason, step=status_.step)
    if status_.claim is not None and status_.state == CLAIMED:
        out["leaseUntil"] = iso(status_.claim.lease_until)
    return out
