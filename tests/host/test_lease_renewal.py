"""A claim's lease renewer starts only when the claim has been held for a third of its lease:
a resume that ends sooner starts no thread; one that runs longer is renewed from then on."""

from __future__ import annotations

import os
import threading
import time

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
