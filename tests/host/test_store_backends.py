"""One suite, both stores: the state directory and PostgreSQL keep the same promises."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest
from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)

from vm.host.store import Claimant, ClaimRecord, Store, StoreError, open_store


@pytest.fixture
def store(location):
    return open_store(location, {})


def test_open_store_picks_the_backend_from_the_location(tmp_path, location):
    store = open_store(location, {})
    assert isinstance(store, Store) == (not location.startswith("postgresql://"))
    assert open_store(None, {"LOBSTER_STORE": location}).location == store.location
    assert open_store(None, {"LOBSTER_STATE_DIR": str(tmp_path / "s")}).location \
        == str(tmp_path / "s")
    assert open_store(None, {"LOBSTER_STORE": " ", "LOBSTER_STATE_DIR": str(tmp_path)}).location \
        == str(tmp_path)


def test_frames_are_saved_read_and_claimed_once(store):
    store.save_frame("k", b"frame")
    assert store.read_frame("k") == b"frame"
    assert store.claim_frame("k") is True
    assert store.claim_frame("k") is False
    assert store.read_frame("k") is None
    assert store.claim_frame("never") is False
    assert store.in_doubt() == []


def test_concurrent_claims_from_threads_let_exactly_one_through(store):
    for round_ in range(10):
        store.save_frame(f"k{round_}", b"x")
        wins: list[bool] = []
        claimant = Claimant("approval", "0badcafe") if round_ % 2 else None
        threads = [threading.Thread(
            target=lambda: wins.append(store.claim_frame(f"k{round_}", claimant)))
            for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(wins) == [False, False, False, True]


def test_a_claim_with_a_claimant_leaves_a_record_until_finished(store):
    store.save_frame("a", b"1")
    store.save_frame("b", b"2")
    claimant = Claimant("approval", "0badcafe", pid=42, host="h")
    assert store.claim_frame("a", claimant) is True
    assert store.claim_frame("a", claimant) is False and store.claim_frame("a") is False
    assert store.claim_frame("b", Claimant("input", "")) is True
    assert store.read_frame("a") is None
    records = store.in_doubt()
    assert [r.state_key for r in records] == ["a", "b"]
    assert records[0].claimant == claimant
    assert isinstance(records[0], ClaimRecord) and records[0].claimed_at > 0
    assert records[1].claimant.pid == os.getpid() and records[1].claimant.kind == "input"
    store.finish_claim("a")
    assert [r.state_key for r in store.in_doubt()] == ["b"]
    store.finish_claim("a")  # twice is harmless
    store.save_frame("b", b"3")  # parked again under its key: a frame, not a claim
    assert store.read_frame("b") == b"3"
    store.finish_claim("b")
    assert store.read_frame("b") == b"3" and store.in_doubt() == []


def test_approval_ids_point_at_their_state_key_and_are_matched_exactly(store):
    ids = {store.new_approval_id(f"key{i}") for i in range(200)}
    assert len(ids) == 200 and all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    some = next(i for i in sorted(ids) if i != i.upper())  # one with a letter in it
    assert store.lookup_approval_id(some).startswith("key")
    assert store.lookup_approval_id(f" {some}\n") == store.lookup_approval_id(some)
    assert store.lookup_approval_id(some.upper()) is None
    assert store.lookup_approval_id(f"{some[:4]}-{some[4:]}") is None
    store.remove_approval_id(some)
    store.remove_approval_id(some)
    store.remove_approval_id(None)
    assert store.lookup_approval_id(some) is None
    for bad in ("../../key", "", "0badcafe0", "zzzzzzzz"):
        assert store.lookup_approval_id(bad) is None


def test_an_approval_id_never_leads_to_something_that_is_not_a_state_key(store):
    for target in ("../../outside", "a/b", "x" * 200):
        approval_id = store.new_approval_id(target)
        assert store.lookup_approval_id(approval_id) is None, target


def test_the_signing_key_is_made_once(store, location):
    assert store.existing_key() is None
    key = store.key()
    assert len(key) == 32 and store.key() == key == store.existing_key()
    assert open_store(location, {}).key() == key


def test_the_signing_key_is_made_once_by_concurrent_makers(location):
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda: keys.append(open_store(location, {}).key()))
               for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and len(keys[0]) == 32


def test_programs_are_stored_once_and_a_damaged_one_is_rewritten(store):
    calls: list[int] = []

    def encode() -> bytes:
        calls.append(1)
        return b"good"

    store.save_program("h", encode)
    store.save_program("h", encode)
    store.save_program("h", encode, intact=lambda blob: blob == b"good")
    assert store.load_program_bytes("h") == b"good" and len(calls) == 1
    store.save_program("h", lambda: b"other", intact=lambda blob: blob == b"other")
    assert store.load_program_bytes("h") == b"other"
    assert store.load_program_bytes("missing") is None


def test_values_round_trip_with_the_key_normalised(store):
    store.set_value("Demo KEY", {"b": [1, "é"], "a": None})
    assert store.get_value("demo key") == {"b": [1, "é"], "a": None}
    assert list(store.get_value("_demo_key_")) == ["b", "a"]  # order kept
    store.set_value("demo-key", 3)
    assert store.get_value("demo-key") == 3 and store.get_value("demo key")["a"] is None
    assert store.get_value("missing", 7) == 7
    with pytest.raises(StoreError):
        store.set_value("___", 1)
    with pytest.raises(StoreError):
        store.get_value("!!")


def test_cache_entries_by_kind_and_key(store):
    assert store.get_cache("compile", "abc") is None
    store.put_cache("compile", "abc", b"one")
    store.put_cache("llm-invoke", "abc", b"two")
    assert store.get_cache("compile", "abc") == b"one"
    assert store.get_cache("llm-invoke", "abc") == b"two"
    store.put_cache("compile", "abc", b"three")
    assert store.get_cache("compile", "abc") == b"three"
    for kind, key in (("..", "a"), ("compile", "../x"), ("", "a"), ("compile", "a/b")):
        with pytest.raises(StoreError):
            store.put_cache(kind, key, b"x")


def test_a_halt_and_resume_cycle_as_the_protocol_runs_it(store):
    store.save_program("p1", lambda: b"program")
    approval_id = store.new_approval_id("pipeline_resume_1")
    store.save_frame("pipeline_resume_1", b"frame")
    key = store.key()
    assert store.lookup_approval_id(approval_id) == "pipeline_resume_1"
    assert store.read_frame("pipeline_resume_1") == b"frame"
    assert store.load_program_bytes("p1") == b"program" and store.existing_key() == key
    assert store.claim_frame("pipeline_resume_1", Claimant("approval", approval_id))
    store.remove_approval_id(approval_id)
    assert store.lookup_approval_id(approval_id) is None
    store.finish_claim("pipeline_resume_1")
    assert store.in_doubt() == [] and store.read_frame("pipeline_resume_1") is None


def _claim_in_a_child(location: str, keys: list[str], barrier, results) -> None:
    store = open_store(location, {})
    won = []
    for key in keys:
        barrier.wait()
        if store.claim_frame(key, Claimant("approval", key[-8:])):
            won.append(key)
    results.put((os.getpid(), won))


def test_twenty_processes_resuming_one_checkpoint_exactly_one_proceeds(store, location):
    keys = [f"pipeline_resume_{i:032x}" for i in range(5)]
    for key in keys:
        store.save_frame(key, b"frame")
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(20), context.Queue()
    children = [context.Process(target=_claim_in_a_child, args=(location, keys, barrier, results))
                for _ in range(20)]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    winners = [key for _, won in outcomes for key in won]
    assert sorted(winners) == keys  # each checkpoint claimed by exactly one process
    assert [r.state_key for r in store.in_doubt()] == keys


def test_a_frame_keeps_its_expiry_and_parked_frames_are_listed_oldest_first(store):
    import time

    store.save_frame("a", b"\x81frame-a")
    store.save_frame("b", b"\x81frame-b", expires_at=1234567890.5)
    store.save_frame("c", b"\x81frame-c")
    assert store.claim_frame("c", Claimant("input", "ask"))
    assert store.read_frame("b") == b"\x81frame-b"  # the expiry is not part of the frame
    parked = store.read_parked("b")
    assert parked.blob == b"\x81frame-b" and parked.expires_at == 1234567890.5
    assert abs(parked.created_at - time.time()) < 3600
    assert store.read_parked("a").expires_at is None and store.read_parked("c") is None
    listed = store.list_parked()
    assert sorted(p.state_key for p in listed) == ["a", "b"]  # a claimed frame is not parked
    assert [p.created_at for p in listed] == sorted(p.created_at for p in listed)
    store.save_frame("b", b"\x81again")  # parked again without an expiry
    assert store.read_parked("b").expires_at is None


def test_a_claim_record_is_found_by_its_state_key(store):
    store.save_frame("k", b"\x81f")
    assert store.claim_record("k") is None
    assert store.claim_frame("k", Claimant("approval", "0badcafe", pid=9, host="h"))
    record = store.claim_record("k")
    assert record.state_key == "k" and record.claimant == Claimant("approval", "0badcafe", 9, "h")
    assert store.claim_record("other") is None
    store.finish_claim("k")
    assert store.claim_record("k") is None


def test_programs_are_listed_with_when_they_were_last_saved_and_removed_only_if_unused(store):
    import time

    store.save_program("p1", lambda: b"one")
    store.save_program("p2", lambda: b"two")
    listed = dict(store.list_programs())
    assert sorted(listed) == ["p1", "p2"]
    later = max(listed.values()) + 1
    assert store.remove_program("p1", unused_since=listed["p1"]) is False  # saved since then
    assert store.remove_program("p1", unused_since=later) is True
    assert store.load_program_bytes("p1") is None
    assert store.remove_program("p1", unused_since=later) is False
    time.sleep(0.01)
    if hasattr(store, "program_path"):  # the directory store touches one a minute old
        listed["p2"] -= 120
        os.utime(store.program_path("p2"), (listed["p2"], listed["p2"]))
    store.save_program("p2", lambda: b"never called")  # a save of a stored one touches it
    assert dict(store.list_programs())["p2"] > listed["p2"]
    assert store.load_program_bytes("p2") == b"two"
    store.save_program("p1", lambda: b"one again")
    assert store.load_program_bytes("p1") == b"one again"


def test_cache_entries_are_listed_and_removed(store):
    store.put_cache("compile", "abc", b"{}")
    store.put_cache("llm-invoke", "def", b"[]")
    listed = store.list_cache()
    assert [(e.kind, e.key) for e in listed] == [("compile", "abc"), ("llm-invoke", "def")]
    assert all(e.written_at > 0 for e in listed)
    store.remove_cache("compile", "abc")
    store.remove_cache("compile", "abc")
    assert [(e.kind, e.key) for e in store.list_cache()] == [("llm-invoke", "def")]


def test_approval_ids_without_a_frame_are_leftovers_once_old_enough(store):
    import time

    lone = store.new_approval_id("pipeline_resume_lone")  # a crash before its frame
    kept = store.new_approval_id("pipeline_resume_kept")
    store.save_frame("pipeline_resume_kept", b"\x81f")
    claimed = store.new_approval_id("pipeline_resume_claimed")
    store.save_frame("pipeline_resume_claimed", b"\x81f")
    store.claim_frame("pipeline_resume_claimed", Claimant("approval", claimed))
    assert store.leftovers(older_than=time.time() - 3600) == []  # all too recent
    found = store.leftovers(older_than=time.time() + 3600)
    assert len(found) == 1 and lone in found[0]
    assert store.remove_leftover(found[0]) is True
    assert store.lookup_approval_id(lone) is None
    assert store.lookup_approval_id(kept) == "pipeline_resume_kept"
    assert store.lookup_approval_id(claimed) == "pipeline_resume_claimed"
    for name in ("../key", "runs/../key", "approval:" + kept, "key", f"runs/{kept}.approval"):
        assert store.remove_leftover(name) is False
    assert store.lookup_approval_id(kept) == "pipeline_resume_kept"


def test_a_directory_claim_is_one_rename_whose_name_holds_the_record(tmp_path):
    store = Store(str(tmp_path))
    long = Claimant("input", "s" * 300, pid=9, host="h" * 200)
    store.save_frame("k", b"frame")
    assert store.claim_frame("k", long) is True
    (name,) = os.listdir(tmp_path / "runs")
    assert len(name) <= 255 and name.startswith("k.") and name.endswith(".claimed")
    (record,) = Store(str(tmp_path)).in_doubt()  # another process reads it from the name
    assert (record.state_key, record.claimant.pid, record.claimant.kind) == ("k", 9, "input")
    assert Store(str(tmp_path)).claim_record("k") == record
    Store(str(tmp_path)).finish_claim("k")  # not this process's claim: found by its key
    assert os.listdir(tmp_path / "runs") == [".spare"]


def test_a_claim_record_of_an_earlier_version_is_still_read_and_cleared(tmp_path):
    store = Store(str(tmp_path))
    store.save_frame("k", b"frame")
    os.rename(store.frame_path("k"), store.claim_path("k"))
    with open(store.claim_path("k"), "w") as fh:
        fh.write('{"claimedAt": 5.0, "claimant": {"kind": "approval", "haltId": "0badcafe", '
                 '"pid": 3, "host": "h"}}')
    (record,) = store.in_doubt()
    assert (record.claimed_at, record.claimant.halt_id) == (5.0, "0badcafe")
    approval_id = store.new_approval_id("k")
    assert store.leftovers(time.time() + 3600) == []  # its approval id leads to the claim
    store.finish_claim("k")
    assert store.in_doubt() == [] and store.claim_record("k") is None
    (spare,) = os.listdir(tmp_path / "runs" / ".spare")  # the claim file, kept for reuse
    assert store.leftovers(time.time() + 3600) == [f"runs/.spare/{spare}",
                                                   f"runs/{approval_id}.approval"]
    assert store.leftovers(time.time() - 3600) == []  # both are young


def test_the_key_set_rotates_verifies_with_every_key_and_never_retires_the_newest(store,
                                                                                   location):
    first = store.key()
    store.save_frame("old", b"frame")
    second = store.rotate_key()
    assert second.number == 2 and store.key() == store.keys()[0] != first
    assert store.keys()[1] == first
    assert store.read_parked("old").authentic(store.keys())
    assert not store.read_parked("old").authentic(store.keys()[:1])
    assert [k.number for k in store.key_set()] == [2, 1]
    assert store.retire_key(2) is False  # the signing key stays
    assert store.retire_key(1) is True and [k.number for k in store.key_set()] == [2]
    assert open_store(location, {}).keys() == store.keys()


def test_concurrent_rotations_each_add_one_key(location):
    open_store(location, {}).key()
    numbers: list[int] = []
    threads = [threading.Thread(target=lambda: numbers.append(
        open_store(location, {}).rotate_key().number)) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(numbers) == [2, 3, 4, 5, 6]
    assert len(set(open_store(location, {}).keys())) == 6


def test_no_key_is_made_while_checkpoints_exist(store):
    store.key()
    store.save_frame("k", b"frame")
    for number in [k.number for k in store.key_set()]:
        if number != 1:
            store.retire_key(number)
    if hasattr(store, "root"):
        os.unlink(os.path.join(store.root, "key"))
    else:
        with store._connection() as conn:
            conn.execute("DELETE FROM lobster_keys")
        store._backend.key = None
    with pytest.raises(StoreError) as caught:
        store.key()
    assert caught.value.code == "T451" and "1 checkpoint" in str(caught.value)
    assert store.keys() == []
    with pytest.raises(StoreError):
        store.verification_keys()


def test_park_stores_the_program_with_its_frame_and_mends_a_damaged_one(store):
    from lobsterc.generate.codegen import compile_pipeline
    from vm.isa import codec

    program = compile_pipeline("exec --json --shell 'echo [1]' | approve --prompt ok")
    good = codec.dump_program(program)
    key = store.key()
    store.park("pipeline_resume_" + "1" * 32, b"\x81frame", None, key, program.hash, lambda: good)
    assert store.load_program_bytes(program.hash) == good
    assert store.read_frame("pipeline_resume_" + "1" * 32) == b"\x81frame"
    store.save_program(program.hash, lambda: b"damaged", intact=lambda blob: False)
    assert store.load_program_bytes(program.hash) == b"damaged"
    store.park("pipeline_resume_" + "2" * 32, b"\x81frame", None, key, program.hash, lambda: good)
    assert store.load_program_bytes(program.hash) == good


def _set_used_at(store, program_hash: str, at: float) -> None:
    if hasattr(store, "program_path"):
        os.utime(store.program_path(program_hash), (at, at))
    else:
        with store._connection() as conn:
            conn.execute("UPDATE lobster_programs SET used_at = to_timestamp(%s) WHERE hash = %s",
                         (at, program_hash))


def test_park_touches_a_stored_program_at_most_once_a_program_touch_s(store):
    """gc widens its window by program_touch_s (admin.gc), so a park need not move a stored
    program's last-saved time more often than that; after it, it must."""
    from lobsterc.generate.codegen import compile_pipeline
    from vm.isa import codec

    program = compile_pipeline("exec --json --shell 'echo [1]' | approve --prompt ok")
    good, key = codec.dump_program(program), store.key()
    store.park("pipeline_resume_" + "1" * 32, b"\x81frame", None, key, program.hash, lambda: good)
    recent = time.time() - store.program_touch_s + 10
    _set_used_at(store, program.hash, recent)
    store.park("pipeline_resume_" + "2" * 32, b"\x81frame", None, key, program.hash, lambda: good)
    assert dict(store.list_programs())[program.hash] == pytest.approx(recent, abs=0.01)
    old = time.time() - store.program_touch_s - 5
    _set_used_at(store, program.hash, old)
    store.park("pipeline_resume_" + "3" * 32, b"\x81frame", None, key, program.hash, lambda: good)
    assert dict(store.list_programs())[program.hash] > time.time() - 5
    assert store.load_program_bytes(program.hash) == good


def test_a_park_does_not_wait_on_the_row_of_its_stored_program(pg_url):
    """Parks of one program from many processes commit side by side: a park of a stored,
    intact, recently touched program takes no lock on its row. Here another transaction holds
    that row (FOR UPDATE) while a park runs; an upsert that always updated the row waited for
    it (and, under load, for every other park's durable commit)."""
    import psycopg
    from lobsterc.generate.codegen import compile_pipeline
    from vm.isa import codec

    store = open_store(pg_url, {})
    program = compile_pipeline("exec --json --shell 'echo [2]' | approve --prompt ok")
    good, key = codec.dump_program(program), store.key()
    store.park("pipeline_resume_" + "4" * 32, b"\x81frame", None, key, program.hash, lambda: good)
    parked = threading.Event()

    def park_again() -> None:
        store.park("pipeline_resume_" + "5" * 32, b"\x81frame", None, key, program.hash,
                   lambda: good)
        parked.set()

    with psycopg.connect(pg_url) as holder:  # a transaction, until the rollback below
        holder.execute("SELECT 1 FROM lobster_programs WHERE hash = %s FOR UPDATE",
                       (program.hash,))
        thread = threading.Thread(target=park_again)
        thread.start()
        try:
            assert parked.wait(10)
        finally:
            holder.rollback()
            thread.join()
    assert store.read_frame("pipeline_resume_" + "5" * 32) == b"\x81frame"


def test_an_approval_id_drawn_for_a_park_is_published_with_its_frame_or_not_at_all(store):
    from vm.host.store.base import ApprovalIdTaken

    key = store.key()
    drawn = store.new_approval_id("pipeline_resume_drawn", deferred=True)
    if isinstance(store, Store):  # the state dir publishes it at once (a symlink is cheap)
        assert store.lookup_approval_id(drawn) == "pipeline_resume_drawn"
    else:  # PostgreSQL: with the frame, in the park's one statement
        assert store.lookup_approval_id(drawn) is None
    store.park("pipeline_resume_drawn", b"\x81frame", None, key, "h", lambda: b"p",
               approval_id=drawn)
    assert store.lookup_approval_id(drawn) == "pipeline_resume_drawn"
    if isinstance(store, Store):
        return
    taken = store.new_approval_id("pipeline_resume_first")  # published
    with pytest.raises(ApprovalIdTaken):
        store.park("pipeline_resume_second", b"\x81frame", None, key, "h", lambda: b"p",
                   approval_id=taken)
    assert store.read_frame("pipeline_resume_second") is None  # nothing parked
    assert store.lookup_approval_id(taken) == "pipeline_resume_first"
    store.park("pipeline_resume_first", b"\x81frame", None, key, "h", lambda: b"p",
               approval_id=taken)  # its own id, published already: parks
    assert store.read_frame("pipeline_resume_first") == b"\x81frame"
    unused = store.new_approval_id("pipeline_resume_third", deferred=True)
    store.remove_approval_id(unused)  # drawn, never published: nothing to remove
    assert store.lookup_approval_id(drawn) == "pipeline_resume_drawn"


def test_a_halt_whose_drawn_approval_id_is_taken_draws_another(pg_url, tmp_path, monkeypatch):
    import secrets

    from vm.host.store import postgres
    from vm.host.token import decode
    from vm.service.protocol import Options, handle

    options = Options(cwd=str(tmp_path), state_dir=pg_url, env={})
    first = handle({"action": "run", "pipeline": "approve --prompt one"}, options)
    taken = first["requiresApproval"]["approvalId"]
    draws = iter([taken, taken, "0badcafe"])  # the stdlib's randomness, made to collide
    monkeypatch.setattr(postgres.secrets, "token_hex",
                        lambda n: next(draws, None) or secrets.token_hex(n))
    second = handle({"action": "run", "pipeline": "approve --prompt two"}, options)
    assert second["requiresApproval"]["approvalId"] == "0badcafe", second
    store = open_store(pg_url, {})
    state_key = {n: decode(e["requiresApproval"]["resumeToken"]).state_key
                 for n, e in (("first", first), ("second", second))}
    assert store.lookup_approval_id(taken) == state_key["first"]  # still the first's
    assert store.lookup_approval_id("0badcafe") == state_key["second"]
    assert store.read_frame(state_key["second"]) is not None


def test_a_warm_postgres_cycle_is_one_round_trip_to_halt_and_three_to_resume(pg_url, tmp_path):
    from vm.host.store.postgres_pool import shared_backend
    from vm.service.protocol import Decision, Options, handle, resume

    options = Options(cwd=str(tmp_path), state_dir=pg_url, env={})
    backend = shared_backend(pg_url)
    for _ in range(2):  # the first also makes the key and reads it
        before = backend.statements
        halted = handle({"action": "run", "pipeline": "exec --json 'echo [1]' | approve"
                                                      " --prompt ok"}, options)
        halt = backend.statements - before
        done = resume(options, Decision(approve=True),
                      token=halted["requiresApproval"]["resumeToken"])
        assert done["status"] == "ok", done
    # the halt: program, approval id and frame; the resume: read the frame (with the key
    # set), claim it (with its record), settle it (the record, the claimed frame removed)
    assert (halt, backend.statements - before - halt) == (1, 3)
