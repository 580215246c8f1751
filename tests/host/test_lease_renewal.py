"""A claim's lease renewer starts only when the claim has been held for a third of its lease:
a resume that ends sooner starts no thread; one that runs longer is renewed from then on."""

from __future__ import annotations

import os
import threading
import time

import pytest

from vm.host.store import Store, lifecycle


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


def _switches(thread: threading.Thread) -> int | None:
    """How often `thread` has slept and woken (its voluntary context switches), per Linux."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def test_claims_that_end_at_once_do_not_wake_the_scheduler_once_each(tmp_path):
    """A steady stream of short resumes (a gateway at work): the scheduler looks over the held
    claims every sixth of the lease, not once per claim that came due (it used to wake for
    each, and take the GIL from the resumes each time)."""
    store = Store(str(tmp_path / "state"))
    lease_s = 0.6  # a look every 0.1 s; each claim is due 0.2 s after it was made
    keys = [f"pipeline_resume_wake{n:05d}" for n in range(400)]
    for key in keys:
        store.save_frame(key, b"\x80")
    lifecycle.claim(store, store.read_parked(keys[0]), None, decision="approve",
                    lease_s=lease_s).finish("ok")
    (scheduler,) = [t for t in threading.enumerate() if t.name == "lobster-lease-scheduler"]
    before, start = _switches(scheduler), time.monotonic()
    if before is None:
        pytest.skip("needs Linux's /proc/self/task")
    for key in keys[1:]:
        lifecycle.claim(store, store.read_parked(key), None, decision="approve",
                        lease_s=lease_s).finish("ok")
    time.sleep(0.5)  # every claim made has come due by now
    looks = _switches(scheduler) - before
    elapsed = time.monotonic() - start
    assert looks <= elapsed / (lease_s / 6) + 10, (looks, elapsed)
