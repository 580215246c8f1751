"""The leases of the claims this process holds: the table of them (`HELD`, which a claim
joins when it is made and leaves when it ends) and the one thread per process that starts a
claim's lease renewer when the claim has been held long enough (`SCHEDULER`). A claim and its
renewer are vm/host/store/lifecycle.py's `Claim`."""

from __future__ import annotations

import math
import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vm.host.store.lifecycle import Claim

HELD: dict[str, Claim] = {}  # the claims this process holds now, by state key


class Scheduler:
    """Starts a claim's lease renewer only when the claim has been held for a third of its
    lease, the time of its first renewal: most resumes end long before, and then no thread is
    started for them (starting one per resume was a measurable share of a cycle). One
    scheduler thread per process looks over the claims it holds (`HELD`, which a claim leaves
    as it ends) and starts the renewer of each one due; each is looked at by half its lease at
    the latest (its *deadline*), with half the lease still to run.

    It wakes at the earliest deadline of the claims it saw waiting, and, while claims keep
    coming, at least every half of the shortest lease among recent claims (`_floor`; recent:
    the latest of that lease came less than that lease ago). A claim made since its last look
    has a deadline no earlier than that wake, unless its lease is shorter than any recent one,
    so `add` wakes it only then, or when it sleeps (no claim for a `_floor`, none waiting). A
    process that resumes a thousand checkpoints a second, whatever the mix of leases, wakes
    it a few times a lease, not once a claim (once a claim, and the GIL handed over with it,
    was about 7% of a cycle's CPU). It does no I/O, so a store that is slow to answer one
    renewal never delays another claim's (each has its own renewer)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._wake_at: float | None = None  # when the scheduler looks next; None: asleep
        self._floor: float | None = None  # the shortest lease among recent claims
        self._floor_at = 0.0  # when the latest claim of that lease came (time.monotonic)
        self._last_claim = 0.0
        self._thread: threading.Thread | None = None
        self.looks = 0  # how often it has looked over the held claims (its pace, for tests)

    def add(self, claim: Claim) -> None:
        lease, since = claim.lease_s, claim.since
        with self._lock:
            self._last_claim = max(self._last_claim, since)
            if self._floor is None or lease <= self._floor \
                    or since - self._floor_at > self._floor:  # shorter, or that one is stale
                self._floor, self._floor_at = lease, since
            if self._thread is None or not self._thread.is_alive():  # first, or forked since
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="lobster-lease-scheduler")
                self._thread.start()
            elif self._wake_at is None or since + lease / 2 < self._wake_at:
                self._lock.notify()

    def _run(self) -> None:
        with self._lock:
            while True:
                self.looks += 1
                now = time.monotonic()
                wake = math.inf
                for claim in list(HELD.values()):
                    if claim.ended or claim.renewing:
                        continue
                    if claim.since + claim.lease_s / 3 <= now:  # due
                        try:
                            claim.start_renewing()
                        except RuntimeError:  # no thread to be had now: try again soon
                            wake = min(wake, now + claim.lease_s / 12)
                    else:
                        wake = min(wake, claim.since + claim.lease_s / 2)  # its deadline
                if self._floor is not None and now - self._last_claim <= self._floor:
                    wake = min(wake, now + self._floor / 2)  # claims keep coming
                self._wake_at = None if wake == math.inf else wake
                self._lock.wait(None if self._wake_at is None else max(wake - now, 0.0))

    def after_fork(self) -> None:
        """In a forked child: no scheduler runs, and the parent's claims are not this one's."""
        self._lock = threading.Condition()
        self._wake_at = self._floor = self._thread = None
        self._floor_at = self._last_claim = 0.0
        HELD.clear()


SCHEDULER = Scheduler()
os.register_at_fork(after_in_child=SCHEDULER.after_fork)
