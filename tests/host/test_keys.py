"""The signing key set: checked when it is read (length, permissions, file type), never replaced
silently while checkpoints need it, reported by `doctor`, `pending` and every refusal when lost,
and rotated by `lobster key rotate` (old keys verify until their checkpoints end), on both
stores. Each test of a finding of issue 24 says which."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time

import pytest
from conftest import LOBSTER
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process
from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)

from vm.service import admin
from vm.cli import mcp
from vm.host import token as tokens
from vm.service.protocol import Options, handle
from vm.host.store import open_store

GATED = "exec --json --shell 'echo [1]' | approve --prompt 'Go?'"


@pytest.fixture
def options(location, tmp_path) -> Options:
    return Options(cwd=str(tmp_path), state_dir=location, env={})


def _lose_every_key(location: str) -> None:
    """What an operator's mistake does: the key set is gone, the checkpoints stay."""
    if location.startswith("postgresql://"):
        import psycopg

        from vm.host.store.postgres_pool import close_pools

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("DELETE FROM lobster_keys")
        close_pools()  # other processes of this test see the store as a fresh process would
        return
    os.unlink(os.path.join(location, "key"))
    shutil.rmtree(os.path.join(location, "keys"), ignore_errors=True)


def _run(location: str, tmp_path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOBSTER_")}
    env.update(LOBSTER_STORE=location, HOME=str(tmp_path), TZ="UTC")
    return subprocess.run([LOBSTER, *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


# losing the key (issue 24: resume got T434 or E502, pending said waiting, doctor said ok, the
# next run made a new key; on PostgreSQL a deleted key row gave two keys in one store) ---------
def test_a_lost_key_is_reported_by_every_refusal_pending_and_doctor(options, location, tmp_path):
    parked = handle({"action": "run", "pipeline": GATED}, options)
    token = parked["requiresApproval"]["resumeToken"]
    approval_id = parked["requiresApproval"]["approvalId"]
    _lose_every_key(location)
    for how in ({"token": token}, {"approvalId": approval_id}):
        envelope = handle({"action": "resume", "approve": True, **how}, options)
        assert envelope["error"]["code"] == "T451", envelope
        assert "signing key" in envelope["error"]["message"]
        assert "1 checkpoint" in envelope["error"]["message"]
    refused = handle({"action": "run", "pipeline": GATED}, options)  # no silent new key
    assert refused["error"]["code"] == "T451", refused
    assert options.store().keys() == []
    (entry,) = admin.pending(options)
    assert entry["status"] == "unverifiable" and "signing key" in entry["error"]
    over_mcp = mcp.call("lobster_pending", {}, options)
    assert over_mcp["keyProblem"]["code"] == "T451"
    assert over_mcp["checkpoints"][0]["status"] == "unverifiable"
    doctor = _run(location, tmp_path, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    assert "signing key" in json.loads(doctor.stdout)["error"]["message"]
    listed = _run(location, tmp_path, "pending")
    assert "unverifiable" in listed.stdout and "signing key" in listed.stderr
    # what is left to do: cancel it (nothing in it runs), then the store starts a new key
    assert handle({"action": "resume", "approvalId": approval_id, "cancel": True},
                  options)["status"] == "cancelled"
    assert handle({"action": "run", "pipeline": GATED}, options)["status"] == "needs_approval"


def test_an_explicit_rotation_replaces_a_lost_key_and_pending_still_says_why(options, location,
                                                                             tmp_path):
    handle({"action": "run", "pipeline": GATED}, options)
    _lose_every_key(location)
    rotated = _run(location, tmp_path, "key", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    assert "1 checkpoint" in rotated.stderr  # said, not silent
    (entry,) = admin.pending(options)
    assert entry["status"] == "unverifiable"
    assert handle({"action": "run", "pipeline": GATED}, options)["status"] == "needs_approval"


def test_a_fresh_postgres_store_opened_by_many_processes_has_one_key(pg_url, tmp_path):
    procs = [subprocess.Popen([LOBSTER, "run", "--mode", "tool", GATED], cwd=tmp_path,
                              env={**os.environ, "LOBSTER_STORE": pg_url, "HOME": str(tmp_path)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert json.loads(out)["status"] == "needs_approval", err
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM lobster_keys").fetchone()[0] == 1


# a key file that is no key (issue 24: a 0- or 1-byte key was accepted and a token forged with
# the empty key worked; a 0644 key was not flagged; a directory gave a traceback) ------------
@pytest.mark.parametrize("content", [b"", b"k", b"x" * 31])
def test_a_short_key_is_refused_and_a_token_forged_with_it_does_not_work(cli, content):
    parked, _ = cli.pipeline(GATED)
    state_key = json.loads(base64.urlsafe_b64decode(
        parked["requiresApproval"]["resumeToken"] + "==="))["stateKey"]
    key_path = cli.state / "key"
    key_path.write_bytes(content)
    forged = tokens.issue("pipeline-resume", state_key, content)
    envelope, code = cli.tool("resume", "--token", forged, "--approve", "yes")
    assert code == 1 and envelope["error"]["code"] == "T452", envelope
    assert f"is {len(content)} byte" in envelope["error"]["message"]
    assert str(key_path) in envelope["error"]["message"]
    again, code = cli.pipeline(GATED)
    assert code == 1 and again["error"]["code"] == "T452"
    doctor, code = cli.tool("doctor")
    assert code == 1 and "signing key" in doctor["error"]["message"]


def test_a_key_others_can_read_is_refused(cli):
    cli.pipeline(GATED)
    os.chmod(cli.state / "key", 0o644)
    envelope, code = cli.pipeline(GATED)
    assert code == 1 and envelope["error"]["code"] == "T452", envelope
    assert "0644" in envelope["error"]["message"] and "chmod 600" in envelope["error"]["message"]
    doctor, code = cli.tool("doctor")
    assert code == 1 and "0644" in doctor["error"]["message"]


def test_a_directory_in_the_keys_place_is_one_line_not_a_traceback(cli):
    (cli.state).mkdir()
    (cli.state / "key").mkdir()
    envelope, code = cli.pipeline(GATED)
    assert code == 1 and envelope["error"]["code"] == "T452", envelope
    assert "not a regular file" in envelope["error"]["message"]
    for argv, code in ((["doctor"], 1), (["key", "list"], 1), (["pending"], 0)):
        proc = cli.run(*argv)  # pending lists what it can, after a warning
        assert proc.returncode == code and "Traceback" not in proc.stdout + proc.stderr, argv
        assert "not a regular file" in proc.stdout + proc.stderr


# rotation ------------------------------------------------------------------------------------
def test_rotation_keeps_old_checkpoints_resumable_and_signs_new_ones_with_the_new_key(
        options, location, tmp_path):
    old = handle({"action": "run", "pipeline": GATED}, options)
    first_key = options.store().key()
    rotated = _run(location, tmp_path, "key", "rotate", "--format", "json")
    assert rotated.returncode == 0, rotated.stderr
    new_id = json.loads(rotated.stdout)["id"]
    listed = json.loads(_run(location, tmp_path, "key", "list", "--format", "json").stdout)
    assert [(k["number"], k["signing"]) for k in listed] == [(2, True), (1, False)]
    assert listed[0]["id"] == new_id and listed[1]["checkpoints"] == 1
    text = json.dumps(listed)
    for key in options.store().keys():  # ids, never secrets
        assert key.hex() not in text and base64.b64encode(key).decode() not in text
    new = handle({"action": "run", "pipeline": GATED}, options)
    new_token = tokens.decode(new["requiresApproval"]["resumeToken"])
    with pytest.raises(tokens.TokenError):
        tokens.verify(new_token, [first_key])  # signed by the newest key
    for envelope in (old, new):
        resumed = handle({"action": "resume", "approve": True,
                          "token": envelope["requiresApproval"]["resumeToken"]}, options)
        assert resumed["status"] == "ok", resumed


def test_gc_retires_an_old_key_once_its_checkpoints_are_gone(options, location, tmp_path):
    old = handle({"action": "run", "pipeline": GATED}, options)
    store = options.store()
    store.rotate_key()
    later = time.time() + 3600
    assert admin.gc(options, now=later)["keys"] == []  # a checkpoint still needs key 1
    handle({"action": "resume", "approve": False,
            "approvalId": old["requiresApproval"]["approvalId"]}, options)
    report = admin.gc(options, now=later, dry_run=True)
    assert len(report["keys"]) == 1 and len(options.store().keys()) == 2
    assert admin.gc(options, now=time.time())["keys"] == []  # rotated just now: kept a while
    assert len(admin.gc(options, now=later)["keys"]) == 1
    assert [k["number"] for k in admin.key_list(options)] == [2]


def test_a_store_of_schema_version_3_keeps_its_key_through_the_migration(pg_url):
    import psycopg

    from vm.host.store import postgres_schema

    key = os.urandom(32)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE lobster_meta (version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        for version, step in enumerate(postgres_schema.MIGRATIONS[:3], start=1):
            for statement in step:
                conn.execute(statement)
            conn.execute("INSERT INTO lobster_meta (version) VALUES (%s)", (version,))
        conn.execute("INSERT INTO lobster_key (id, key) VALUES (1, %s)", (key,))
    store = open_store(pg_url, {})
    assert store.keys() == [key] and store.key() == key


def _lose_newest_key(location: str) -> None:
    if location.startswith("postgresql://"):
        import psycopg

        from vm.host.store.postgres_pool import close_pools

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("DELETE FROM lobster_keys WHERE id = (SELECT max(id) FROM lobster_keys)")
        close_pools()
        return
    newest = max(os.listdir(os.path.join(location, "keys")), key=int)
    os.unlink(os.path.join(location, "keys", newest))


def test_a_lost_newest_key_is_reported_not_replaced(options, location, tmp_path):
    options.store().key()
    options.store().rotate_key()
    parked = handle({"action": "run", "pipeline": GATED}, options)  # signed by key 2
    _lose_newest_key(location)
    (entry,) = admin.pending(options)
    assert entry["status"] == "unverifiable" and "not signed by any key" in entry["error"]
    doctor = _run(location, tmp_path, "doctor")
    assert doctor.returncode == 1 and "signed by no key" in json.loads(doctor.stdout)["error"][
        "message"]
    refused = handle({"action": "resume", "approve": True,
                      "token": parked["requiresApproval"]["resumeToken"]}, options)
    assert refused["ok"] is False and refused["error"]["code"] == "E502"
    assert [k["number"] for k in admin.key_list(options)] == [1]  # no new key made in its place


def test_a_short_key_row_is_refused_on_postgres(pg_url, tmp_path):
    import psycopg

    from vm.host.store.postgres_pool import close_pools

    options = Options(cwd=str(tmp_path), state_dir=pg_url, env={})
    parked = handle({"action": "run", "pipeline": GATED}, options)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE lobster_keys SET key = ''::bytea")
    close_pools()
    state_key = tokens.decode(parked["requiresApproval"]["resumeToken"]).state_key
    forged = tokens.issue("pipeline-resume", state_key, b"")
    for request in ({"action": "resume", "token": forged, "approve": True},
                    {"action": "run", "pipeline": GATED}):
        envelope = handle(request, options)
        assert envelope["error"]["code"] == "T452", envelope
        assert "0 bytes" in envelope["error"]["message"]


def test_a_process_reads_a_settled_key_set_once_and_sees_every_change_after(tmp_path):
    """The directory store keeps the key set it read while no key file and not keys/ changed
    (directory_keys._KEY_SETS); a key set changed within RACY_SECONDS is read every time."""
    from vm.host.store import directory_keys
    from vm.host.store.base import SigningKeyError

    root = str(tmp_path / "state")
    store = open_store(root, {})
    first = store.key()
    assert root not in directory_keys._KEY_SETS  # just made: too fresh to keep
    time.sleep(directory_keys.RACY_SECONDS + 0.1)
    assert open_store(root, {}).keys() == [first]
    assert directory_keys._KEY_SETS[root][1][0][1] == first  # settled: kept
    # another writer adds a key: seen at once, and the fresh set is not kept
    second = open_store(root, {}).rotate_key()
    keys = store.keys()
    assert len(keys) == 2 and keys[1] == first and store.key() == keys[0] != first
    assert second.number == 2
    assert root not in directory_keys._KEY_SETS
    time.sleep(directory_keys.RACY_SECONDS + 0.1)
    assert len(store.keys()) == 2 and root in directory_keys._KEY_SETS
    # a key opened to others is refused at once, though the set was kept
    os.chmod(os.path.join(root, "keys", "2"), 0o644)
    with pytest.raises(SigningKeyError, match="open to others"):
        store.key()
    os.chmod(os.path.join(root, "keys", "2"), 0o600)
    # a key retired by gc is gone at once
    assert store.retire_key(1)
    assert store.keys() == [store.key()] and store.key() != first


@pytest.mark.parametrize("checked_key_s, signer", [(60.0, "checked"), (0.0, "rotated")])
def test_a_halt_signs_with_the_key_its_run_checked_only_soon_after_the_check(
        monkeypatch, tmp_path, checked_key_s, signer):
    """A run checks the signing key before it starts (a lost key is refused before anything
    runs); a halt within park.CHECKED_KEY_S of that check signs with the key checked, a later
    one reads the key set again. Here a step rotates the key between the check and the halt."""
    from vm.service.protocol import park

    monkeypatch.setattr(park, "CHECKED_KEY_S", checked_key_s)
    root = str(tmp_path / "state")
    options = Options(cwd=str(tmp_path), state_dir=root,
                      env={"PATH": os.environ["PATH"], "LOBSTER_STORE": root,
                           "HOME": str(tmp_path)})
    first = options.store().key()
    rotate = f"{LOBSTER} key rotate --format json >/dev/null && echo [1]"
    halted = handle({"action": "run", "pipeline": f"exec --json --shell '{rotate}' | approve "
                                                  "--prompt 'Go?'"}, options)
    keys = options.store().keys()
    assert len(keys) == 2 and keys[1] == first, halted
    token = tokens.decode(halted["requiresApproval"]["resumeToken"])
    tokens.verify(token, [first if signer == "checked" else keys[0]])
    resumed = handle({"action": "resume", "approve": True,
                      "token": halted["requiresApproval"]["resumeToken"]}, options)
    assert resumed["status"] == "ok", resumed
