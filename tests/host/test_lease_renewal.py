"""A claim's lease renewer starts only when the claim has been held for a third of its lease:
a resume that ends sooner starts no thread; one that runs longer is renewed from then on."""

from __future__ import annotations

import os
import threading
import time

from vm.host.store import Store, leases, lifecycle


def _renewers(state_key: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"lobster-lease-{state_key[-8:]}"]


def _parked(tmp_path, state_key: str):
    store = Store(str(tmp_path / "state"))
    store.save_frame(state_key, b"\x80")
    return store, store.read_parked(state_key)


def test_a_claim_that_ends_at_once_starts_no_renewer(tmp_path):
    store, parked = _parked(tmp_path, "pipeline_resume_brief0001")
    taken = lifecycle.claim(store, parked, None, decision="approve", lease_s=3.0)
    assert _renewers(parked.state_key) == []
    taken.finish("ok")
    time.sleep(1.3)  # past the third of the lease the claim no longer has
    assert _renewers(parked.state_key) == []


def test_a_claim_held_past_a_third_of_its_lease_is_renewed_until_it_ends(tmp_path):
    store, parked = _parked(tmp_path, "pipeline_resume_long00001")
    taken = lifecycle.claim(store, parked, None, decision="approve", lease_s=1.5)
    first = store.claim_record(parked.state_key).lease_until
    time.sleep(1.0)  # the renewer started at 0.5 s, and renewed the lease at once
    assert len(_renewers(parked.state_key)) == 1
    assert store.claim_record(parked.state_key).lease_until > first
    taken.finish("ok")
    deadline = time.monotonic() + 2
    while _renewers(parked.state_key) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _renewers(parked.state_key) == []


def test_a_forked_child_schedules_its_own_claims(tmp_path):
    store, parked = _parked(tmp_path, "pipeline_resume_fork00001")
    lifecycle.claim(store, parked, None, decision="approve", lease_s=30.0).finish("ok")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a claim of its own is renewed by a scheduler of its own
        try:
            child_store, child_parked = _parked(tmp_path / "child", "pipeline_resume_fork00002")
            taken = lifecycle.claim(child_store, child_parked, None, decision="approve",
                                    lease_s=0.6)
            time.sleep(0.5)
            renewed = len(_renewers(child_parked.state_key)) == 1
            taken.finish("ok")
            os.write(write, b"1" if renewed else b"0")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)


def _stream(store, prefix: str, count: int, lease_s: float) -> None:
    """`count` claims of `lease_s`, one after another, each ending at once (short resumes)."""
    for n in range(count):
        store.save_frame(f"pipeline_resume_{prefix}{n:05d}", b"\x80")
        parked = store.read_parked(f"pipeline_resume_{prefix}{n:05d}")
        lifecycle.claim(store, parked, None, decision="approve", lease_s=lease_s).finish("ok")


def _looks(run) -> tuple[int, float]:
    """How often the scheduler looked over the held claims while `run()` ran and half a second
    after it (every claim made has come due by then), and how long that took. Its own count,
    not its thread's context switches: beside another test's worker those also count each
    wait for the GIL, several a look when both cores are busy."""
    before, start = leases.SCHEDULER.looks, time.monotonic()
    run()
    time.sleep(0.5)
    return leases.SCHEDULER.looks - before, time.monotonic() - start


def test_claims_that_end_at_once_do_not_wake_the_scheduler_once_each(tmp_path):
    """A steady stream of short resumes (a gateway at work): the scheduler looks over the held
    claims every half of the lease, not once per claim that came due (it used to wake for
    each, and take the GIL from the resumes each time)."""
    store = Store(str(tmp_path / "state"))
    _stream(store, "first", 1, 0.6)  # the scheduler runs
    looks, elapsed = _looks(lambda: _stream(store, "wake", 400, 0.6))
    assert looks <= elapsed / 0.3 + 10, (looks, elapsed)


def test_a_long_claim_held_beside_short_ones_does_not_wake_it_once_each(tmp_path):
    """One resume holds a claim of a long lease (a gc sweep's, a slow step's) while short
    ones come and go: the long one's deadline is far, the short ones' leases set the pace."""
    store = Store(str(tmp_path / "state"))
    store.save_frame("pipeline_resume_longheld01", b"\x80")
    held = lifecycle.claim(store, store.read_parked("pipeline_resume_longheld01"), None,
                           decision="cancel", lease_s=30.0)
    try:
        looks, elapsed = _looks(lambda: _stream(store, "mixed", 300, 1.2))
    finally:
        held.finish("ok")
    assert looks <= elapsed / 0.6 + 10, (looks, elapsed)


def test_the_pace_of_one_short_lease_does_not_outlast_it(tmp_path):
    """A claim of a very short lease, then a stream of 30 s ones: the scheduler's pace goes
    back to theirs (it stayed at the short one's for as long as claims kept coming)."""
    store = Store(str(tmp_path / "state"))
    _stream(store, "short", 1, 0.06)
    looks, elapsed = _looks(lambda: _stream(store, "long", 300, 30.0))
    assert looks <= 10, (looks, elapsed)
