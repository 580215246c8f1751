"""The state directory: atomic writes, frames, approval ids, values, the signing key."""

from __future__ import annotations

import json
import os
import threading

import pytest

from vm.protocol import Decision, Options, handle, resume
from vm.store import Store, StoreError, atomic_write, value_file_name


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    path = str(tmp_path / "d" / "f")
    atomic_write(path, b"one")
    atomic_write(path, b"two", 0o644)
    assert open(path, "rb").read() == b"two"
    assert os.listdir(tmp_path / "d") == ["f"]


def test_frames_are_saved_read_and_claimed_once(tmp_path):
    store = Store(str(tmp_path))
    store.save_frame("k", b"frame")
    assert store.read_frame("k") == b"frame"
    assert store.claim_frame("k") is True
    assert store.claim_frame("k") is False
    assert store.read_frame("k") is None


def test_concurrent_claims_let_exactly_one_through(tmp_path):
    store = Store(str(tmp_path))
    for round_ in range(20):
        store.save_frame(f"k{round_}", b"x")
        wins: list[bool] = []
        threads = [threading.Thread(target=lambda: wins.append(store.claim_frame(f"k{round_}")))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(wins) == [False, False, False, True]


def test_approval_ids_point_at_their_state_key_and_are_never_reused(tmp_path):
    store = Store(str(tmp_path))
    ids = {store.new_approval_id(f"key{i}") for i in range(200)}
    assert len(ids) == 200 and all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    some = sorted(ids)[0]
    assert store.lookup_approval_id(some).startswith("key")
    assert store.lookup_approval_id(f" {some}\n") == store.lookup_approval_id(some)
    assert store.lookup_approval_id(some.upper()) is None  # as the original: exact, not folded
    assert store.lookup_approval_id(f"{some[:4]}-{some[4:]}") is None  # never after stripping
    store.remove_approval_id(some)
    assert store.lookup_approval_id(some) is None
    assert store.lookup_approval_id("../../key") is None
    assert store.lookup_approval_id("") is None


def test_an_approval_id_from_an_earlier_version_is_still_found(tmp_path):
    store = Store(str(tmp_path))
    os.makedirs(tmp_path / "approvals")
    (tmp_path / "approvals" / "0badcafe").write_text(json.dumps({"stateKey": "old_key"}))
    assert store.lookup_approval_id("0badcafe") == "old_key"
    store.remove_approval_id("0badcafe")
    assert not (tmp_path / "approvals" / "0badcafe").exists()


def test_a_halt_writes_one_frame_and_one_id_beside_it_and_resume_removes_both(tmp_path):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"))
    envelope = handle({"action": "run", "pipeline": "state.get x | approve --prompt ok"}, options)
    approval_id = envelope["requiresApproval"]["approvalId"]
    runs = sorted(os.listdir(tmp_path / "state" / "runs"))
    assert len(runs) == 2 and runs[0] == f"{approval_id}.approval" and runs[1].endswith(".frame")
    assert os.readlink(tmp_path / "state" / "runs" / runs[0]) + ".frame" == runs[1]
    done = resume(options, Decision(approve=True), approval_id=approval_id)
    assert done["status"] == "ok"
    assert os.listdir(tmp_path / "state" / "runs") == []


def test_an_id_whose_frame_is_gone_reads_as_not_found(tmp_path):
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"))
    store = Store(options.state_dir)
    approval_id = store.new_approval_id("pipeline_resume_" + "0" * 32)  # a crash before the frame
    done = resume(options, Decision(approve=True), approval_id=approval_id)
    assert done["ok"] is False
    assert done["error"]["message"] == "Pipeline resume state not found"


def test_values_round_trip_and_bad_files_read_as_the_default(tmp_path):
    store = Store(str(tmp_path))
    store.set_value("Demo KEY", {"a": [1, "é"]})
    assert store.get_value("demo key") == {"a": [1, "é"]}
    assert (tmp_path / "values" / "demo_key.json").read_text().endswith("\n")
    (tmp_path / "values" / "junk.json").write_bytes(b"\xff{")
    assert store.get_value("junk", "d") == "d"
    assert store.get_value("missing", 7) == 7
    with pytest.raises(StoreError):
        value_file_name("___")


def test_the_signing_key_is_made_once(tmp_path):
    store = Store(str(tmp_path))
    assert store.existing_key() is None
    key = store.key()
    assert len(key) == 32 and Store(str(tmp_path)).key() == key == store.existing_key()
    assert os.stat(tmp_path / "key").st_mode & 0o777 == 0o600


def test_a_planted_approval_link_cannot_lead_outside_the_state_dir(tmp_path):
    store = Store(str(tmp_path / "state"))
    store.save_frame("k", b"x")
    for target in ("../../outside", "/etc/passwd", "a/b", "x" * 200, ""):
        link = os.path.join(store.runs, "0badcafe.approval")
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target or ".", link)
        assert store.lookup_approval_id("0badcafe") is None, target


def test_directories_0700_and_files_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        store = Store(str(tmp_path / "a" / "state"))
        store.key()
        store.save_program("h", lambda: b"program")
        store.save_frame("k", b"frame")
        store.set_value("v", 1)
    finally:
        os.umask(old)
    for root, dirs, files in os.walk(tmp_path / "a"):
        assert os.stat(root).st_mode & 0o777 == 0o700, root
        for name in files:
            assert os.stat(os.path.join(root, name)).st_mode & 0o777 == 0o600, name


def test_a_damaged_stored_program_is_rewritten_at_save(tmp_path):
    store = Store(str(tmp_path))
    store.save_program("h", lambda: b"good")
    with open(store.program_path("h"), "wb") as fh:
        fh.write(b"torn")
    store.save_program("h", lambda: b"good")  # no check asked for: left alone
    assert store.load_program_bytes("h") == b"torn"
    store.save_program("h", lambda: b"good", intact=lambda blob: blob == b"good")
    assert store.load_program_bytes("h") == b"good"
