"""workflows.list and workflows.run with the built-in workflows (github.pr.monitor and
github.pr.monitor.notify), run by the real `lobster` against the fake `gh` in tests/fakebin."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import ROOT

FAKEBIN = ROOT / "tests" / "fakebin"
PR7 = {"number": 7, "title": "Add a thing", "url": "https://github.com/o/r/pull/7",
       "state": "OPEN", "isDraft": False, "mergeable": "MERGEABLE", "reviewDecision": "",
       "updatedAt": "2026-01-01T00:00:00Z", "baseRefName": "main", "headRefName": "thing"}
VIEW_FIELDS = ("number,title,url,state,isDraft,mergeable,reviewDecision,author,baseRefName,"
               "headRefName,updatedAt")


@pytest.fixture
def fake(cli, tmp_path):
    log = tmp_path / "calls.jsonl"
    cli.env.update(PATH=f"{FAKEBIN}{os.pathsep}{cli.env.get('PATH', '')}", FAKE_CLI_LOG=str(log))
    cli.calls = lambda: [json.loads(line) for line in log.read_text().splitlines()] \
        if log.exists() else []
    cli.pr_file = tmp_path / "pr.json"
    return cli


def ok(result) -> list:
    envelope, code = result
    assert code == 0 and envelope["ok"] is True, envelope
    return envelope["output"]


def failed(result) -> str:
    envelope, code = result
    assert envelope["ok"] is False and code != 0, envelope
    return envelope["error"]["message"]


def run(fake, name: str, args: dict | str, **env) -> tuple[dict, int]:
    text = args if isinstance(args, str) else json.dumps(args)
    return fake.pipeline(f"workflows.run --name {name} --args-json '{text}'", env=env)


def test_list_names_the_built_in_workflows(fake):
    listed = ok(fake.pipeline("workflows.list"))
    assert [w["name"] for w in listed] == ["github.pr.monitor", "github.pr.monitor.notify"]
    for w in listed:
        assert set(w) == {"name", "description", "argsSchema", "examples", "sideEffects"}
        assert w["argsSchema"]["required"] == ["repo", "pr"]
        assert w["examples"][0]["args"] == {"repo": "openclaw/openclaw", "pr": 1152}
    assert set(listed[0]["argsSchema"]["properties"]) == {"repo", "pr", "key", "changesOnly",
                                                          "summaryOnly"}
    assert set(listed[1]["argsSchema"]["properties"]) == {"repo", "pr", "key"}


def test_monitor_first_run_then_unchanged_then_changed(fake):
    first = ok(run(fake, "github.pr.monitor", {"repo": "o/r", "pr": 7}))
    assert first == [{"kind": "github.pr.monitor", "repo": "o/r", "prNumber": 7,
                      "key": "github.pr:o/r#7", "changed": True,
                      "summary": {"changedFields": list(PR7),
                                  "changes": {k: {"from": None, "to": v} for k, v in PR7.items()}},
                      "prSnapshot": {**PR7, "author": {"login": "octo"}}}]
    assert fake.calls()[0]["argv"] == ["pr", "view", "--repo=o/r", f"--json={VIEW_FIELDS}", "--",
                                       "7"]
    again = ok(run(fake, "github.pr.monitor", {"repo": "o/r", "pr": 7}))[0]
    assert again["changed"] is False and again["summary"] == {"changedFields": [], "changes": {}}
    quiet = ok(run(fake, "github.pr.monitor", {"repo": "o/r", "pr": 7, "changesOnly": True}))
    assert quiet == [{"kind": "github.pr.monitor", "repo": "o/r", "prNumber": 7,
                      "key": "github.pr:o/r#7", "changed": False, "suppressed": True}]
    fake.pr_file.write_text(json.dumps({"state": "MERGED", "title": None}))
    changed = ok(run(fake, "github.pr.monitor", {"repo": "o/r", "pr": 7, "summaryOnly": True},
                     FAKE_GH_PR=str(fake.pr_file)))
    assert changed == [{"kind": "github.pr.monitor", "repo": "o/r", "prNumber": 7,
                        "key": "github.pr:o/r#7", "changed": True,
                        "summary": {"changedFields": ["title", "state"],
                                    "changes": {"title": {"from": "Add a thing", "to": None},
                                                "state": {"from": "OPEN", "to": "MERGED"}}},
                        "pr": {"number": 7, "title": None, "url": PR7["url"], "state": "MERGED",
                               "updatedAt": PR7["updatedAt"]}}]


def test_the_snapshot_is_a_state_value_under_its_key(fake):
    ok(run(fake, "github.pr.monitor", {"repo": "o/r", "pr": "7", "key": "mine"}))
    stored = ok(fake.pipeline("state.get mine"))
    assert stored == [{**PR7, "author": {"login": "octo"}}]
    assert fake.calls()[0]["argv"][-1] == "7"


def test_notify_speaks_only_on_change(fake):
    first = ok(run(fake, "github.pr.monitor.notify", {"repo": "o/r", "pr": 7}))[0]
    assert first["kind"] == "github.pr.monitor.notify" and first["changed"] is True
    assert first["message"] == ("PR updated: o/r#7: Add a thing (number, title, url, state, "
                                "isDraft, mergeable, reviewDecision, updatedAt, baseRefName, "
                                "headRefName). https://github.com/o/r/pull/7")
    assert ok(run(fake, "github.pr.monitor.notify", {"repo": "o/r", "pr": 7})) == [
        {"kind": "github.pr.monitor.notify", "suppressed": True}]
    fake.pr_file.write_text(json.dumps({"title": "  Spaced\n title ", "url": ""}))
    [note] = ok(run(fake, "github.pr.monitor.notify", {"repo": "o/r", "pr": 7},
                    FAKE_GH_PR=str(fake.pr_file)))
    assert note["message"] == "PR updated: o/r#7: Spaced title (title, url)."
    assert note["pr"]["title"] == "  Spaced\n title "
    assert note["summary"]["changedFields"] == ["title", "url"]


def test_name_may_be_positional(fake):
    ok(fake.pipeline("workflows.run github.pr.monitor --args-json '{\"repo\":\"o/r\",\"pr\":7}'"))
    assert len(fake.calls()) == 1


@pytest.mark.parametrize("pipeline, message", [
    ("workflows.run --name nope", "Unknown workflow: nope"),
    ("workflows.run --name github.pr.monitor --args-json '{bad'",
     "workflows.run --args-json must be valid JSON"),
    ("workflows.run --name github.pr.monitor --args-json '{\"repo\":\"o/r\"}'",
     "github.pr.monitor requires args.repo and args.pr"),
    ("workflows.run --name github.pr.monitor.notify", "github.pr.monitor requires args.repo "
     "and args.pr"),
])
def test_refusals(fake, pipeline, message):
    assert failed(fake.pipeline(pipeline)) == message
    assert fake.calls() == []


def test_run_requires_a_name_before_anything_runs(fake):
    envelope, code = fake.pipeline("exec --shell 'touch ran' | workflows.run")
    assert envelope["error"]["message"] == "workflows.run requires --name"
    assert not (fake.work / "ran").exists()


@pytest.mark.parametrize("env, message", [
    ({"FAKE_GH_EXIT": "1", "FAKE_GH_STDERR": "no pull requests found"},
     "gh failed (1): no pull requests found"),
    ({"PATH": "/nonexistent"}, "gh not found on PATH (install GitHub CLI)"),
])
def test_gh_failures(fake, env, message):
    assert failed(run(fake, "github.pr.monitor", {"repo": "o/r", "pr": 7}, **env)) == message


def test_gh_output_that_is_not_json(fake, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text("#!/bin/sh\necho 'not json'\n")
    (bin_dir / "gh").chmod(0o755)
    assert failed(run(fake, "github.pr.monitor", {"repo": "o/r", "pr": 7},
                      PATH=f"{bin_dir}{os.pathsep}{fake.env['PATH']}")) == \
        "gh returned non-JSON output"
