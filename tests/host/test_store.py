"""The state directory's own parts: its files and modes, atomic writes, planted links, ids of
earlier versions, claim record files. What every store promises is in test_store_backends.py."""

from __future__ import annotations

import base64
import json
import os
import time
import struct

import pytest

from vm.service.protocol import Decision, Options, handle, resume
from vm.host.store import Claimant, Store, StoreError, atomic_write, value_file_name


def test_atomic_write_replaces_and_leaves_no_temp_files(tmp_path):
    path = str(tmp_path / "d" / "f")
    atomic_write(path, b"one")
    atomic_write(path, b"two", 0o644)
    assert open(path, "rb").read() == b"two"
    assert os.listdir(tmp_path / "d") == ["f"]


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
    key = runs[1][:-len(".frame")]  # what stays is the tombstone: its record and its id
    assert sorted(os.listdir(tmp_path / "state" / "runs")) == [
        ".spare", runs[0], f"{key}.record"]  # and the files it is done with, kept for reuse
    assert len(os.listdir(tmp_path / "state" / "runs" / ".spare")) == 2  # frame, first record
    from vm.service import admin

    report = admin.gc(options, now=time.time() + 8 * 86400)
    assert report["tombstones"] == [key] and len(report["leftovers"]) == 2, report
    assert os.listdir(tmp_path / "state" / "runs") == [".spare"]
    assert os.listdir(tmp_path / "state" / "runs" / ".spare") == []


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


def test_the_signing_key_is_a_file_of_its_own(tmp_path):
    key = Store(str(tmp_path)).key()
    assert (tmp_path / "key").read_bytes() == key
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
        store.save_frame("c", b"frame")
        store.claim_frame("c", Claimant("approval", "0badcafe"))
        store.put_cache("llm-invoke", "k", b"entry")
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


def test_a_program_found_intact_is_read_again_only_once_its_file_changed(tmp_path):
    from vm.host.store import directory

    store = Store(str(tmp_path))
    path = store.program_path("h")
    store.save_program("h", lambda: b"good")
    settled = time.time() - 30  # older than RACY_SECONDS: a check of it is kept
    os.utime(path, (settled, settled))
    os.chmod(path, 0o600)  # the ctime moves with a chmod only, not with utime's own change
    checked = []

    def intact(blob: bytes) -> bool:
        checked.append(blob)
        return blob == b"good"

    time.sleep(directory.RACY_SECONDS + 0.1)  # the ctime the chmod set is old enough now
    store.save_program("h", lambda: b"never", intact=intact)
    store.save_program("h", lambda: b"never", intact=intact)
    assert checked == [b"good"]  # read once, then known by its stat
    assert os.stat(path).st_mtime == settled  # touched only once a minute has gone by
    with open(path, "r+b") as fh:  # damaged in place: its stat changes
        fh.write(b"torn")
    store.save_program("h", lambda: b"good", intact=intact)
    assert checked == [b"good", b"torn"] and open(path, "rb").read() == b"good"


def test_a_stored_program_saved_again_after_a_minute_is_touched(tmp_path):
    from vm.host.store import directory

    store = Store(str(tmp_path))
    store.save_program("h", lambda: b"good")
    old = time.time() - directory.PROGRAM_TOUCH_S - 5
    os.utime(store.program_path("h"), (old, old))
    store.save_program("h", lambda: b"never")
    assert os.stat(store.program_path("h")).st_mtime > time.time() - 5


def test_a_claim_record_replaces_the_frame_file_until_finished(tmp_path):
    store = Store(str(tmp_path))
    store.save_frame("k", b"frame")
    assert store.claim_frame("k", Claimant("approval", "0badcafe", pid=7, host="h"))
    (name,) = os.listdir(tmp_path / "runs")  # k.<record>.claimed: the record is in the name
    key, record, suffix = name.split(".")
    assert (key, suffix) == ("k", "claimed")
    record = json.loads(base64.urlsafe_b64decode(record + "=" * (-len(record) % 4)))
    assert record["claimant"] == {"kind": "approval", "haltId": "0badcafe", "pid": 7, "host": "h"}
    assert os.stat(tmp_path / "runs" / name).st_mode & 0o777 == 0o600
    store.finish_claim("k")
    assert os.listdir(tmp_path / "runs") == [".spare"]  # the frame's file, kept for reuse
    (spare,) = os.listdir(tmp_path / "runs" / ".spare")
    assert open(tmp_path / "runs" / ".spare" / spare, "rb").read().endswith(b"frame")


def test_a_crash_between_the_claim_and_its_record_still_reads_as_in_doubt(tmp_path):
    store = Store(str(tmp_path))
    store.save_frame("k", b"\x93frame bytes")
    os.rename(store.frame_path("k"), store.claim_path("k"))  # renamed, record not yet written
    (record,) = store.in_doubt()
    assert record.state_key == "k" and record.claimant is None and record.claimed_at > 0


def test_cache_entries_keep_the_compile_cache_layout(tmp_path):
    store = Store(str(tmp_path))
    store.put_cache("compile", "abc", b"{}")
    store.put_cache("llm-invoke", "abc", b"[]")
    assert (tmp_path / "cache" / "abc.json").read_bytes() == b"{}"
    assert (tmp_path / "cache" / "llm-invoke" / "abc.json").read_bytes() == b"[]"
    assert os.stat(tmp_path / "cache" / "abc.json").st_mode & 0o777 == 0o600


def test_a_damaged_stored_program_does_not_poison_later_runs(tmp_path):
    """The compile cache and a halt both rewrite a stored program whose bytes are damaged."""
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"))
    request = {"action": "run", "pipeline": "exec --json --shell 'echo [1]' | approve --prompt ok"}
    first = handle(request, options)
    programs = tmp_path / "state" / "programs"
    (stored,) = programs.iterdir()
    stored.write_bytes(b"\x93damaged")
    again = handle(request, options)
    assert again["status"] == "needs_approval"
    token = again["requiresApproval"]["resumeToken"]
    assert handle({"action": "resume", "token": token, "approve": True}, options)["output"] == [1]
    assert first["status"] == "needs_approval"


def test_temp_files_of_interrupted_writes_are_leftovers_once_a_minute_old(tmp_path):
    import time

    store = Store(str(tmp_path / "state"))
    store.save_frame("k", b"\x81frame")
    store.save_program("h", lambda: b"program")
    old = [tmp_path / "state" / "runs" / ".k.frame.0123456789ab.tmp",
           tmp_path / "state" / "programs" / ".h.lbc.0123456789ab.tmp",
           tmp_path / "state" / ".key.0123456789ab.tmp"]
    fresh = tmp_path / "state" / "programs" / ".x.lbc.ba9876543210.tmp"
    for path in [*old, fresh]:
        path.write_bytes(b"torn")
    for path in old:
        os.utime(path, (time.time() - 120, time.time() - 120))
    found = store.leftovers(time.time() - 60)
    assert found == sorted(os.path.relpath(p, tmp_path / "state") for p in old)
    assert all(store.remove_leftover(name) for name in found)
    assert not any(p.exists() for p in old) and fresh.exists()
    assert store.read_frame("k") == b"\x81frame" and store.load_program_bytes("h") == b"program"
    assert store.remove_leftover("runs/k.frame") is False and store.read_frame("k")
    assert store.remove_leftover(str(fresh)) is False  # absolute: refused


def test_a_frame_starts_with_its_mac_and_expiry(tmp_path):
    store = Store(str(tmp_path))
    store.save_frame("k", b"\x81frame", expires_at=2.0)
    store.save_frame("n", b"\x81frame")
    raw = (tmp_path / "runs" / "k.frame").read_bytes()
    assert raw.startswith(b"LBXA") and raw.endswith(b"\x81frame") and len(raw) == 4 + 32 + 8 + 6
    parked = store.read_parked("k")
    assert parked.expires_at == 2.0 and parked.blob == b"\x81frame"
    assert parked.authentic(store.key()) and not parked.authentic(b"another key")
    assert store.read_parked("n").expires_at is None and store.read_parked("n").authentic(store.key())
    # moved to another key, or edited: no longer what this store wrote under that key
    os.rename(tmp_path / "runs" / "k.frame", tmp_path / "runs" / "m.frame")
    assert not store.read_parked("m").authentic(store.key())
    (tmp_path / "runs" / "n.frame").write_bytes(raw[:-1] + b"F")
    assert not store.read_parked("n").authentic(store.key())


def test_frames_of_the_first_format_are_read_but_never_authentic(tmp_path):
    store = Store(str(tmp_path))
    store.key()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.frame").write_bytes(b"\x81frame")
    (tmp_path / "runs" / "b.frame").write_bytes(b"LBXP" + struct.pack(">d", 2.0) + b"\x81frame")
    a, b = store.read_parked("a"), store.read_parked("b")
    assert (a.blob, a.expires_at, a.mac) == (b"\x81frame", None, None)
    assert (b.blob, b.expires_at, b.mac) == (b"\x81frame", 2.0, None)
    assert not a.authentic(store.key()) and not b.authentic(store.key())


def test_a_frame_of_megabytes_is_written_and_read_as_a_small_one_is(tmp_path):
    # past a megabyte a frame's head and body are written one after the other and read apart
    # (never copied into one), and its MAC comes from OpenSSL: the same file, the same values
    store = Store(str(tmp_path))
    body = b"\x81" + os.urandom(3 << 20)
    store.save_frame("k", body, expires_at=5.0)
    raw = (tmp_path / "runs" / "k.frame").read_bytes()
    assert raw[:4] == b"LBXA" and raw[44:] == body and len(raw) == 44 + len(body)
    parked = store.read_parked("k")
    assert (parked.blob, parked.expires_at, parked.mac) == (body, 5.0, raw[4:36])
    assert parked.authentic(store.key()) and not parked.authentic(b"another key")
    (tmp_path / "runs" / "k.frame").write_bytes(raw[:-1] + b"F")  # its last byte edited
    assert not store.read_parked("k").authentic(store.key())
    # the older formats, that large: read as split_frame_file reads them, never authentic
    (tmp_path / "runs" / "a.frame").write_bytes(body)
    (tmp_path / "runs" / "b.frame").write_bytes(b"LBXP" + struct.pack(">d", 2.0) + body)
    a, b = store.read_parked("a"), store.read_parked("b")
    assert (a.blob, a.expires_at, a.mac) == (body, None, None)
    assert (b.blob, b.expires_at, b.mac) == (body, 2.0, None)
    assert not a.authentic(store.key()) and not b.authentic(store.key())


@pytest.mark.parametrize("size", [(1 << 20) - 45, (1 << 20) - 44, (1 << 20) - 43, 1 << 20,
                                  (1 << 20) + 1])
def test_frames_around_a_mebibyte_read_back_whichever_way_they_were_written(tmp_path, size):
    # the write splits a body over 1 MiB from its head, the read a file over 1 MiB: every
    # combination at the boundary gives the body back, sealed
    store = Store(str(tmp_path))
    body = (b"\x81" + bytes(range(256)) * (size // 256 + 1))[:size]
    store.save_frame("k", body)
    parked = store.read_parked("k")
    assert parked.blob == body and type(parked.blob) is bytes and parked.authentic(store.key())


def test_a_claim_whose_lease_is_live_reads_as_not_found_being_resumed(tmp_path):
    """A claim whose lease (the claim file's mtime) has not run out is being resumed: a second
    resume is told `not found`, as any loser of a concurrent resume, with T435; once the lease
    has passed, the claim is in doubt (T432), whoever held it."""
    options = Options(cwd=str(tmp_path), state_dir=str(tmp_path / "state"))
    parked = handle({"action": "run", "pipeline": "exec --json --shell 'echo [1]' | approve"},
                    options)
    token = parked["requiresApproval"]["resumeToken"]
    store = Store(options.state_dir)
    (name,) = [n for n in os.listdir(store.runs) if n.endswith(".frame")]
    key = name[:-len(".frame")]
    os.rename(store.frame_path(key), store.claim_path(key))
    os.utime(store.claim_path(key), (time.time() + 60, time.time() + 60))
    assert store.claim_record(key).lease_until is None  # an earlier version's: no lease
    again = handle({"action": "resume", "token": token, "approve": True}, options)
    assert again["error"]["code"] == "T432", again  # so it is in doubt at once
    from vm.host.store.claims import Claimant

    os.rename(store.claim_path(key), store.frame_path(key))
    assert store.claim_frame(key, Claimant("approval", "x"), lease_until=time.time() + 60)
    again = handle({"action": "resume", "token": token, "approve": True}, options)
    assert again["error"]["message"] == "Pipeline resume state not found"
    assert again["error"]["code"] == "T435" and again["error"]["checkpoint"]["state"] == "claimed"
    assert store.renew_claim(key, time.time() - 1)
    again = handle({"action": "resume", "token": token, "approve": True}, options)
    assert again["error"]["code"] == "T432", again
