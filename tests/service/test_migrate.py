"""`lobster migrate`: a paused run of examples/review/ship.lobster moved onto a fixed version
and resumed there, in both stores; unsound moves refused with their reasons; a weakening in the
safety diff refused until accepted; every paused run of a program hash; a migration racing a
resume (exactly one takes the checkpoint, nothing is lost); the embedding API."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pg_server import location, pg_server, pg_url  # noqa: F401  (fixtures)
from conftest import LOBSTER, Cli
from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process

ROOT = Path(__file__).resolve().parents[2]
REVIEW = ROOT / "examples" / "review"
WHO = {"LOBSTER_APPROVAL_INITIATED_BY": "alice"}
APPROVER = {"LOBSTER_APPROVAL_APPROVED_BY": "release-managers"}


@pytest.fixture
def ship(tmp_path, location):
    """A Cli on the store `location`, with the review examples in its working directory."""
    cli = Cli(tmp_path)
    cli.env["LOBSTER_STORE"] = location
    for f in REVIEW.glob("ship*.lobster"):
        shutil.copy(f, cli.work / f.name)
    return cli


def start(cli: Cli) -> str:
    env, code = cli.tool("run", "--mode", "tool", "--file", "ship.lobster", "--args-json",
                         json.dumps({"log": str(cli.work / "ship.log")}), env=WHO)
    assert env["status"] == "needs_approval", env
    return env["requiresApproval"]["approvalId"]


def migrate(cli: Cli, *argv: str):
    return cli.run("migrate", *argv)


def pending(cli: Cli) -> list[dict]:
    return json.loads(cli.run("pending", "--format", "json").stdout)


def test_a_paused_run_moves_onto_the_fixed_version_and_resumes_there(ship):
    approval = start(ship)
    dry = migrate(ship, "--to", "ship.fixed.lobster", "--id", approval, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "ok: the approval gate review exists in the new program, unchanged" in dry.stdout
    assert "warning[S611]: step deploy runs something else" in dry.stdout
    assert "sound: would migrate (dry run, nothing changed)" in dry.stdout
    [entry] = pending(ship)
    assert entry["source"] == "ship.lobster"  # the dry run changed nothing
    done = migrate(ship, "--to", "ship.fixed.lobster", "--id", approval)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "migrated: the run continues on the new program when resumed" in done.stdout
    [entry] = pending(ship)
    assert entry["source"] == "ship.fixed.lobster" and entry["approvalId"] == approval
    env, _ = ship.tool("resume", "--id", approval, "--approve", "yes", env=APPROVER)
    assert env["status"] == "needs_input", env
    env, _ = ship.tool("resume", "--token", env["requiresInput"]["resumeToken"],
                       "--response-json", '{"text":"hotfix"}')
    assert env["status"] == "ok"
    assert env["output"] == ["deployed v1\n"]  # the fixed deploy line ran
    assert (ship.work / "ship.log").read_text() == "v1 hotfix\n"


def test_the_migration_is_recorded_and_signed(ship):
    from vm.isa import codec
    from vm.service.migrate import history
    from vm.host.store import open_store

    approval = start(ship)
    assert migrate(ship, "--to", "ship.fixed.lobster", "--id", approval).returncode == 0
    store = open_store(ship.env["LOBSTER_STORE"])
    key = store.lookup_approval_id(approval)
    parked = store.read_parked(key)
    assert parked.authentic(store.existing_key())
    frame = codec.load_frame(parked.blob)
    [record] = history(store, key)
    assert record["to"] == frame.program_hash and record["from"] != record["to"]
    assert record["gate"] == "approval gate review"


def test_unsound_moves_are_refused_with_the_reason(ship):
    approval = start(ship)
    moved = migrate(ship, "--to", "ship.effect-moved.lobster", "--id", approval)
    assert moved.returncode == 1
    assert ("refused: step deploy would run before the gate in the new program, and did not "
            "run in this paused run") in moved.stdout
    assert "error[S607]: step deploy" in moved.stdout
    gone = migrate(ship, "--to", "ship.renamed.lobster", "--id", approval)
    assert gone.returncode == 1
    assert "refused: the approval gate review does not exist in the new program" in gone.stdout
    (ship.work / "ship.reads.lobster").write_text(
        (ship.work / "ship.fixed.lobster").read_text().replace(
            "NOTE: $note.response.text", "NOTE: $build.json.0.port"))
    reads = migrate(ship, "--to", "ship.reads.lobster", "--id", approval)
    assert reads.returncode == 1
    assert ("refused: the new program reads $build.json.0.port after the gate, and the result "
            "of step build in the paused run has no such field") in reads.stdout
    (ship.work / "ship.before.lobster").write_text(
        (ship.work / "ship.lobster").read_text().replace("echo '[{\"host\":\"web1\"",
                                                         "echo '[{\"host\":\"web2\""))
    before = migrate(ship, "--to", "ship.before.lobster", "--id", approval)
    assert "refused: step build ran before the gate, and the new program changes it" \
        in before.stdout
    [entry] = pending(ship)
    assert entry["source"] == "ship.lobster"  # every refusal left the run where it was


def test_a_weakening_after_the_gate_needs_accepting(ship):
    approval = start(ship)
    (ship.work / "ship.loose.lobster").write_text(
        (ship.work / "ship.lobster").read_text().replace("maxLength: 200", "maxLength: 9000"))
    loose = migrate(ship, "--to", "ship.loose.lobster", "--id", approval)
    assert loose.returncode == 1
    assert "refused: the safety diff weakens S606:note:input:schema" in loose.stdout
    ok = migrate(ship, "--to", "ship.loose.lobster", "--id", approval,
                 "--accept", "S606:note:input:schema")
    assert ok.returncode == 0, ok.stdout
    second = start(ship)
    (ship.work / "ship.reviewed.lobster").write_text(
        (ship.work / "ship.loose.lobster").read_text().replace(
            "name: ship\n", "name: ship\nx-reviewed: [S606:note:input:schema]\n"))
    reviewed = migrate(ship, "--to", "ship.reviewed.lobster", "--id", second)
    assert reviewed.returncode == 0, reviewed.stdout
    assert "error[S606] (accepted)" in reviewed.stdout


def test_every_paused_run_of_a_program_hash(ship):
    first, second = start(ship), start(ship)
    program = pending(ship)[0]
    from vm.isa import codec
    from vm.host.store import open_store

    store = open_store(ship.env["LOBSTER_STORE"])
    old = codec.load_frame(store.read_parked(store.lookup_approval_id(first)).blob).program_hash
    proc = migrate(ship, "--to", "ship.fixed.lobster", "--program", old[:12], "--format", "json")
    assert proc.returncode == 0, proc.stdout
    results = json.loads(proc.stdout)
    assert sorted(r["approvalId"] for r in results) == sorted([first, second])
    assert {r["status"] for r in results} == {"migrated"}
    assert {e["source"] for e in pending(ship)} == {"ship.fixed.lobster"}
    assert program["approvalId"] in (first, second)
    again = migrate(ship, "--to", "ship.fixed.lobster", "--program", old[:12])
    assert again.returncode == 1 and "no paused run of program" in again.stderr


def test_usage(ship):
    for argv, why in ((["--to", "ship.fixed.lobster"], "name one of --id ID and --program HASH"),
                      (["--to", "x", "--id", "1", "--program", "12345678"],
                       "name one of --id ID and --program HASH"),
                      (["--id", "12345678"], "--to NEW names the new version"),
                      (["--to", "x", "--id", "1", "--format", "xml"],
                       "--format must be text or json")):
        refused = migrate(ship, *argv)
        assert refused.returncode == 2
        assert refused.stderr.splitlines()[0] == f"lobster migrate: {why}", refused.stderr
    nothing = migrate(ship, "--to", "ship.fixed.lobster", "--id", "deadbeef")
    assert nothing.returncode == 1 and "no paused run 'deadbeef'" in nothing.stderr
    assert "usage: lobster migrate" in ship.run("migrate", "--help").stdout


def test_a_migration_racing_a_resume_takes_the_checkpoint_at_most_once(ship):
    """Both start together, as separate processes: either the resume ran first (on the old
    program; the migration then finds nothing or reports the resume), or the migration did
    (the resume then runs the new program, or finds the frame claimed: not found). Either way
    the checkpoint is consumed once and one run state remains."""
    for _ in range(4):
        approval = start(ship)
        env = {**ship.env, **APPROVER}
        mig = subprocess.Popen([LOBSTER, "migrate", "--to", "ship.fixed.lobster", "--id",
                                approval], cwd=ship.work, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        res = subprocess.Popen([LOBSTER, "resume", "--id", approval, "--approve", "yes"],
                               cwd=ship.work, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        m_out, m_err = mig.communicate(timeout=60)
        r_out, _ = res.communicate(timeout=60)
        resumed = json.loads(r_out)
        left = pending(ship)
        if resumed.get("status") == "needs_input":  # the resume took it
            assert [e["kind"] for e in left] == ["input"]
            assert ("migrated" in m_out or "resume took the checkpoint first" in m_out
                    or "no paused run" in m_err)
        else:  # the migration held the claim when the resume came: nothing lost
            # T435: the original's "not found" words, while the migration's claim was live
            assert resumed["error"]["code"] in ("T430", "T435"), resumed
            assert "migrated:" in m_out
            assert [(e["kind"], e["source"]) for e in left] == [("approval",
                                                                 "ship.fixed.lobster")]
        for entry in left:
            ship.run("cancel", "--id", entry["approvalId"] or entry["stateKey"])


def test_embedding_api_dry_run_and_refusal(tmp_path):
    from vm.service.migrate import migrate as api
    from vm.service.protocol import Options

    cli = Cli(tmp_path)
    for f in REVIEW.glob("ship*.lobster"):
        shutil.copy(f, cli.work / f.name)
    approval = start(cli)
    options = Options(state_dir=str(cli.state), cwd=str(cli.work))
    [result] = api(options, str(cli.work / "ship.fixed.lobster"), ident=approval, dry_run=True)
    assert result.status == "sound" and result.gate == "approval gate review"
    [result] = api(options, str(cli.work / "ship.renamed.lobster"), ident=approval)
    assert result.status == "refused"
    assert result.reasons == ("the approval gate review does not exist in the new program",)


def test_inside_a_for_each_the_loop_body_counts_as_before_the_gate(tmp_path):
    """Paused at the second host's gate: the body already ran past the gate for the first host,
    so a changed body is refused; a change after the loop moves the run, which then ends on
    the new program."""
    cli = Cli(tmp_path)
    source = (ROOT / "golden" / "for-each-gate.lobster").read_text()
    (cli.work / "a.lobster").write_text(source)
    (cli.work / "after.lobster").write_text(source.replace("echo done", "echo all done"))
    (cli.work / "body.lobster").write_text(source.replace("rolling $host", "ROLL $host"))
    env, _ = cli.tool("run", "--mode", "tool", "--file", "a.lobster")
    env, _ = cli.tool("resume", "--id", env["requiresApproval"]["approvalId"], "--approve", "yes")
    second = env["requiresApproval"]["approvalId"]
    body = cli.run("migrate", "--to", "body.lobster", "--id", second)
    assert body.returncode == 1
    assert "refused: step each/roll ran before the gate, and the new program changes it" \
        in body.stdout
    after = cli.run("migrate", "--to", "after.lobster", "--id", second)
    assert after.returncode == 0, after.stdout
    env, _ = cli.tool("resume", "--id", second, "--approve", "yes")
    assert env["status"] == "ok" and env["output"] == ["all done\n"]


def test_a_run_signed_before_a_key_rotation_migrates_and_keeps_its_key(ship):
    """The moved frame stays signed by the key that signed its token, so gc keeps that key
    while the run waits and the old token still resumes it."""
    import time

    from vm.service import admin
    from vm.service.protocol import Options
    from vm.host.store import open_store

    parked, _ = ship.tool("run", "--mode", "tool", "--file", "ship.lobster", "--args-json",
                          json.dumps({"log": str(ship.work / "ship.log")}), env=WHO)
    approval = parked["requiresApproval"]["approvalId"]
    assert ship.run("key", "rotate").returncode == 0
    done = migrate(ship, "--to", "ship.fixed.lobster", "--id", approval)
    assert done.returncode == 0, done.stdout + done.stderr
    options = Options(cwd=str(ship.work), state_dir=ship.env["LOBSTER_STORE"], env={})
    assert admin.gc(options, now=time.time() + 3600)["keys"] == []  # key 1 still signs it
    assert len(open_store(ship.env["LOBSTER_STORE"]).keys()) == 2
    env, _ = ship.tool("resume", "--token", parked["requiresApproval"]["resumeToken"],
                       "--approve", "yes", env=APPROVER)
    assert env["status"] == "needs_input", env


def test_at_the_first_item_of_a_for_each_a_changed_body_after_the_gate_moves(tmp_path):
    """Paused at the first host's gate, nothing after the gate in the body has run yet: a fix
    to it moves the run, and every host then runs the fixed body."""
    cli = Cli(tmp_path)
    source = (ROOT / "golden" / "for-each-gate.lobster").read_text().replace(
        "    run: echo done\n", "    stdin: $each.json\n    pipeline: pick roll\n")
    (cli.work / "a.lobster").write_text(source)
    (cli.work / "body.lobster").write_text(source.replace("rolling $host", "ROLL $host"))
    env, _ = cli.tool("run", "--mode", "tool", "--file", "a.lobster")
    moved = cli.run("migrate", "--to", "body.lobster", "--id",
                    env["requiresApproval"]["approvalId"])
    assert moved.returncode == 0, moved.stdout
    assert "migrated: the run continues on the new program" in moved.stdout
    env, _ = cli.tool("resume", "--id", env["requiresApproval"]["approvalId"], "--approve", "yes")
    env, _ = cli.tool("resume", "--id", env["requiresApproval"]["approvalId"], "--approve", "yes")
    assert env["status"] == "ok"
    assert env["output"] == [{"roll": "ROLL web-1\n"}, {"roll": "ROLL web-2\n"}]
