"""The example workflows in examples/, each through halt and resume in a temporary copy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import LOBSTERC, ROOT

EXAMPLES = ROOT / "examples"
WORKFLOWS = ["inbox-triage.lobster", "release-notes.lobster", "deploy-hosts.lobster"]


@pytest.fixture
def ex(cli, tmp_path_factory):
    """The shared fixture, run from a copy of the repo's examples/ (so `examples/...` paths
    work as in the README and nothing in the checkout changes), with its own mailbox."""
    shutil.copytree(EXAMPLES, cli.work / "examples")
    shutil.copy(EXAMPLES / "inbox" / "mailbox.json", cli.work / "mailbox.json")
    cli.env["INBOX_FILE"] = str(cli.work / "mailbox.json")
    cli.env.pop("PYTHONDONTWRITEBYTECODE", None)
    cli.env["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.getbasetemp() / "pycache")
    return cli


def run(cli, name: str, args: dict | None = None) -> dict:
    argv = ["run", "--mode", "tool", "--file", f"examples/{name}"]
    if args is not None:
        argv += ["--args-json", json.dumps(args)]
    envelope, code = cli.tool(*argv)
    assert code == 0, envelope
    return envelope


def resume(cli, *argv: str) -> dict:
    envelope, code = cli.tool("resume", *argv)
    assert code == 0, envelope
    return envelope


def ok(output: list) -> dict:
    return {"protocolVersion": 1, "ok": True, "status": "ok", "output": output,
            "requiresApproval": None, "requiresInput": None}


CANCELLED = {"protocolVersion": 1, "ok": True, "status": "cancelled", "output": [],
             "requiresApproval": None, "requiresInput": None}


def test_examples_lint_clean(ex) -> None:
    proc = ex.run("lint", *(f"examples/{name}" for name in WORKFLOWS), exe=LOBSTERC)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


# inbox triage -------------------------------------------------------------------------------
def labels(cli) -> dict:
    mailbox = json.loads((cli.work / "mailbox.json").read_text())
    return {m["id"]: m["labels"] for m in mailbox["messages"]}


def test_inbox_triage_halts_with_the_changes_and_applies_them_on_approve(ex) -> None:
    before = labels(ex)
    halted = run(ex, "inbox-triage.lobster")
    gate = halted["requiresApproval"]
    assert (halted["status"], gate["prompt"]) == ("needs_approval", "Apply these label changes?")
    assert [(i["id"], i["category"], i["proposed"]["addLabels"]) for i in gate["items"]] == [
        ("m1", "reply", ["needs-reply"]), ("m2", "action", ["action-required"]),
        ("m4", "reply", ["needs-reply"]), ("m5", "action", ["action-required"])]
    assert json.loads(gate["preview"]) == gate["items"]
    assert labels(ex) == before  # nothing applied before the approval

    final = resume(ex, "--id", gate["approvalId"], "--approve", "yes")
    assert final == ok([{"changed": 4, "unchanged": 0, "messages": [
        {"id": "m1", "added": ["needs-reply"]}, {"id": "m2", "added": ["action-required"]},
        {"id": "m4", "added": ["needs-reply"]}, {"id": "m5", "added": ["action-required"]}]}])
    assert labels(ex) == {**before, "m1": ["needs-reply"], "m2": ["action-required"],
                          "m4": ["work", "needs-reply"], "m5": ["action-required"]}
    assert run(ex, "inbox-triage.lobster") == ok([])  # a second triage finds nothing to do


def test_inbox_triage_declined_changes_nothing(ex) -> None:
    before = labels(ex)
    halted = run(ex, "inbox-triage.lobster", {"skip": "reply"})
    gate = halted["requiresApproval"]
    assert [i["id"] for i in gate["items"]] == ["m2", "m3", "m5"]
    assert resume(ex, "--token", gate["resumeToken"], "--approve", "no") == CANCELLED
    assert labels(ex) == before


# release notes ------------------------------------------------------------------------------
NOTES = ("- feat: Approval gates inside for_each loops\n- feat: Signed resume tokens\n"
         "- fix: Resume runs the program that halted")


def test_release_notes_input_answer_publishes(ex) -> None:
    halted = run(ex, "release-notes.lobster", {"version": "2.1.0"})
    request = halted["requiresInput"]
    assert halted["status"] == "needs_input"
    assert (request["prompt"], request["subject"]) == ("Publish the release notes?", NOTES)
    assert request["defaults"] == {"action": "publish", "channel": "changelog"}
    assert request["responseSchema"]["required"] == ["action"]

    bad, code = ex.tool("resume", "--token", request["resumeToken"],
                        "--response-json", '{"action": "ship"}')
    assert code == 2 and bad["error"]["message"] == (
        "Workflow input step decide response failed schema validation at /action: "
        "must be equal to one of the allowed values")

    final = resume(ex, "--token", request["resumeToken"],
                   "--response-json", '{"action": "publish", "channel": "blog"}')
    assert final == ok([{"published": "./blog-2.1.0.md", "lines": 3}])
    assert (ex.work / "blog-2.1.0.md").read_text() == f"# Release 2.1.0\n\n{NOTES}\n"


def test_release_notes_hold_skips_publishing(ex) -> None:
    halted = run(ex, "release-notes.lobster")
    final = resume(ex, "--token", halted["requiresInput"]["resumeToken"],
                   "--response-json", '{"action": "hold", "reason": "waiting for QA"}')
    assert final == ok([{"held": True, "reason": "waiting for QA"}])
    assert not list(ex.work.glob("*.md"))


# deploy hosts -------------------------------------------------------------------------------
def test_deploy_hosts_approves_each_host_inside_the_loop(ex) -> None:
    envelope = run(ex, "deploy-hosts.lobster", {"hosts": ["web1", "web2"], "release": "v42"})
    log = ex.work / "deploy.log"
    for position, host in enumerate(["web1", "web2"]):
        gate = envelope["requiresApproval"]
        assert envelope["status"] == "needs_approval"
        assert gate["prompt"] == "Deploy this release to the host?"
        assert gate["items"] == [{"host": host, "release": "v42", "position": position}]
        deployed = ["web1 v42\n", "web2 v42\n"][:position]
        assert (log.read_text() if log.exists() else "") == "".join(deployed)
        envelope = resume(ex, "--id", gate["approvalId"], "--approve", "yes")
    assert envelope == ok([{"host": "web1", "deploy": "deployed web1\n"},
                           {"host": "web2", "deploy": "deployed web2\n"}])
    assert log.read_text() == "web1 v42\nweb2 v42\n"


def test_deploy_hosts_declining_a_host_stops_the_rollout(ex) -> None:
    envelope = run(ex, "deploy-hosts.lobster")
    envelope = resume(ex, "--token", envelope["requiresApproval"]["resumeToken"],
                      "--approve", "yes")
    assert envelope["requiresApproval"]["items"] == [
        {"host": "web2", "release": "v1", "position": 1}]
    assert resume(ex, "--token", envelope["requiresApproval"]["resumeToken"],
                  "--approve", "no") == CANCELLED
    assert (ex.work / "deploy.log").read_text() == "web1 v1\n"


def test_deploy_hosts_a_crafted_host_name_runs_nothing_before_the_gate(ex) -> None:
    """Host names reach the shell through `env:` only: each of these would run `touch` before
    the first approval if it were spliced into the check step's `run:` line."""
    hostile = ['web1"; touch pwned-quote; echo "', "$(touch pwned-subst)", "`touch pwned-tick`",
               "web1\ntouch pwned-newline", "web1'; touch pwned-single; echo '"]
    envelope = run(ex, "deploy-hosts.lobster", {"hosts": hostile, "release": "v9"})
    assert envelope["status"] == "needs_approval"
    assert envelope["requiresApproval"]["items"] == [
        {"host": hostile[0], "release": "v9", "position": 0}]
    assert sorted(p.name for p in ex.work.glob("pwned*")) == []
    assert not (ex.work / "deploy.log").exists()
    for position in range(len(hostile)):  # every check step treats its host as data
        gate = envelope["requiresApproval"]
        assert gate["items"] == [{"host": hostile[position], "release": "v9",
                                  "position": position}]
        assert sorted(p.name for p in ex.work.glob("pwned*")) == []
        envelope = resume(ex, "--id", gate["approvalId"], "--approve", "yes")
    assert envelope["status"] == "ok"
    assert sorted(p.name for p in ex.work.glob("pwned*")) == []
    assert (ex.work / "deploy.log").read_text() == "".join(f"{h} v9\n" for h in hostile)
