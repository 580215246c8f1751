"""No user value reaches an external CLI as a flag: every command that runs `gog`, `openclaw`
or `gh` is driven with `-`-leading values against the fakes in tests/fakebin (real child
processes that read their flags as the real CLIs do and log what they read). For each call
the recorded argv must be safe by construction (before a `--`, only our own words and
`--name=value` words), and the CLI must have read the value back into the intended slot."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from vm import Options, handle

FAKEBIN = ROOT / "tests" / "fakebin"
HOSTILE = ["--account=evil@example.com", "-x", "--", "--help", "-", "--web"]
OURS = {"gog": {"gmail", "search", "send", "--json"}, "openclaw": {"agent", "--json", "--local"},
        "gh": {"pr", "view"}}


class Fake:
    def __init__(self, tmp_path: Path) -> None:
        self.log = tmp_path / "calls.jsonl"
        self.work = tmp_path / "work"
        self.work.mkdir()
        env = {k: v for k, v in os.environ.items()
               if k not in ("GOG_BIN", "LOBSTER_OPENCLAW_BIN")}
        env.update(PATH=f"{FAKEBIN}{os.pathsep}{env.get('PATH', '')}",
                   FAKE_CLI_LOG=str(self.log))
        self.options = Options(env=env, cwd=str(self.work), state_dir=str(tmp_path / "state"))

    def run(self, pipeline: str, items: list | None = None) -> dict:
        if items is not None:
            (self.work / "items.json").write_text(json.dumps(items))
            pipeline = f"exec --json cat items.json | {pipeline}"
        return handle({"action": "run", "pipeline": pipeline}, self.options)

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] \
            if self.log.exists() else []


@pytest.fixture
def fake(tmp_path):
    return Fake(tmp_path)


def assert_safe(call: dict) -> None:
    """Before the first `--` every word is one of ours or `--name=value`: no parser can read
    a user value there as a flag of its own."""
    argv = call["argv"]
    head = argv[:argv.index("--")] if "--" in argv else argv
    for word in head:
        assert word in OURS[call["cli"]] or re.fullmatch(r"--[a-z-]+=.*", word, re.S), \
            (word, argv)


# gog.gmail.search ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", HOSTILE)
def test_search_query_is_a_positional_after_the_terminator(fake, value):
    envelope = fake.run(f"gog.gmail.search --query={value} --max 1")
    assert envelope["ok"] is True, envelope
    [call] = fake.calls()
    assert_safe(call)
    assert call["positionals"] == [value] and "account" not in call["flags"]
    assert call["argv"] == ["gmail", "search", "--json", "--max=1", "--", value]


@pytest.mark.parametrize("value", ["--account=x", "-1", "--json"])
@pytest.mark.parametrize("flag", ["max", "limit"])
def test_search_max_is_glued_to_its_flag(fake, flag, value):
    fake.run(f"gog.gmail.search --{flag}={value}")  # gog refuses a max that is not a number
    [call] = fake.calls()
    assert_safe(call)
    assert call["flags"]["max"] == ("NaN" if value != "-1" else "-1")
    assert call["positionals"] == ["newer_than:1d"]


# gog.gmail.send -----------------------------------------------------------------------------
def test_send_draft_fields_are_glued_to_their_flags(fake):
    drafts = [{"to": v, "subject": v, "body": v} for v in HOSTILE]
    envelope = fake.run("gog.gmail.send", drafts)
    assert envelope["ok"] is True, envelope
    calls = fake.calls()
    assert len(calls) == len(HOSTILE)
    for call, value in zip(calls, HOSTILE):
        assert_safe(call)
        assert call["flags"] == {"to": value, "subject": value, "body": value, "json": True}
        assert call["positionals"] == []


# openclaw.agent -----------------------------------------------------------------------------
FLAGS = {"agent": "agent", "model": "model", "session-key": "session-key",
         "session-id": "session-id", "thinking": "thinking", "prompt": "message",
         "message": "message"}


@pytest.mark.parametrize("value", ["--local", "--deliver=yes", "-x", "--"])
@pytest.mark.parametrize("ours", sorted(FLAGS))
def test_agent_options_are_glued_to_their_flags(fake, ours, value):
    extra = "" if ours in ("prompt", "message") else " --prompt hi"
    agent = "" if ours in ("agent", "session-key", "session-id") else " --agent a"
    envelope = fake.run(f"openclaw.agent --{ours}={value}{extra}{agent}")
    assert envelope["ok"] is True, envelope
    [call] = fake.calls()
    assert_safe(call)
    assert call["flags"][FLAGS[ours]] == value
    assert "local" not in call["flags"] and "deliver" not in call["flags"]
    assert call["positionals"] == []


def test_agent_positional_prompt_and_items_stay_in_the_message(fake):
    envelope = fake.run("openclaw.agent --agent a -x -y", [{"id": "--local"}])
    assert envelope["ok"] is True, envelope
    [call] = fake.calls()
    assert_safe(call)
    assert call["flags"]["message"] == '-x -y\n\nPipeline input (JSONL):\n{"id":"--local"}'
    assert "local" not in call["flags"] and "y" not in call["flags"]


# workflows.run github.pr.monitor ------------------------------------------------------------
def monitor(fake: Fake, args: dict) -> dict:
    return fake.run(f"workflows.run --name github.pr.monitor --args-json '{json.dumps(args)}'")


@pytest.mark.parametrize("repo", ["--web", "-R", "--repo=other/x", "o/r"])
def test_repo_is_glued_to_its_flag_and_pr_follows_the_terminator(fake, repo):
    envelope = monitor(fake, {"repo": repo, "pr": 7})
    assert envelope["ok"] is True, envelope
    [call] = fake.calls()
    assert_safe(call)
    assert call["flags"]["repo"] == repo and "web" not in call["flags"]
    assert call["positionals"] == ["7"]


@pytest.mark.parametrize("pr, argv_pr", [(7, "7"), ("7", "7"), (7.0, "7"), ("12345", "12345")])
def test_a_valid_pr_number(fake, pr, argv_pr):
    envelope = monitor(fake, {"repo": "o/r", "pr": pr})
    assert envelope["ok"] is True, envelope
    [call] = fake.calls()
    assert call["argv"][:2] == ["pr", "view"] and call["argv"][-2:] == ["--", argv_pr]
    assert_safe(call)


@pytest.mark.parametrize("pr", ["--web", "-1", -1, "0", 1.5, "7 --web", "07", "abc", True,
                                [7], {"n": 7}, "1e3", " 7"])
@pytest.mark.parametrize("name", ["github.pr.monitor", "github.pr.monitor.notify"])
def test_a_pr_that_is_not_a_positive_integer_is_refused_before_gh_runs(fake, name, pr):
    args = json.dumps({"repo": "o/r", "pr": pr})
    envelope = fake.run(f"workflows.run --name {name} --args-json '{args}'")
    assert envelope["ok"] is False, envelope
    assert envelope["error"]["code"] == "T413"
    shown = json.dumps(pr, separators=(",", ":"))
    assert envelope["error"]["message"] == \
        f"github.pr.monitor args.pr must be a positive integer (got {shown})"
    assert fake.calls() == []
