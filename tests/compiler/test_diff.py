"""`lobsterc diff`: the example version pairs under examples/review report each weakening (and a
harmless rename reports nothing); gate, effect, schema, policy and cost findings one by one;
acceptance; formats; `--rev` through git."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lobsterc.tools.cli import compile_target, main
from lobsterc.tools.diff.compare import compare
from lobsterc.tools.diff.schemas import schema_at_least
from lobsterc.tools.diff.versions import load_version
from lobsterc.syntax.expr import compile_condition, condition_text

ROOT = Path(__file__).resolve().parents[2]
REVIEW = ROOT / "examples" / "review"
BASE = str(REVIEW / "ship.lobster")


def diff(old: str, new: str, *extra: str, capsys) -> tuple[int, dict]:
    code = main(["diff", old, new, "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


def ids(doc: dict, severity: str | None = None) -> list[str]:
    return [f["id"] for f in doc["findings"] if severity in (None, f["severity"])]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# the example pairs -----------------------------------------------------------------------------

def test_gate_removed(capsys):
    code, doc = diff(BASE, str(REVIEW / "ship.gate-removed.lobster"), capsys=capsys)
    assert code == 1
    assert ids(doc, "error") == ["S601:review:approval"]
    [gone] = [f for f in doc["findings"] if f["rule"] == "S601"]
    assert gone["message"] == "approval gate review was removed; it preceded announce, deploy"
    assert gone["old"] == {"file": BASE, "line": 14} and gone["new"] is None


def test_effect_moved_before_the_gate(capsys):
    new = str(REVIEW / "ship.effect-moved.lobster")
    code, doc = diff(BASE, new, capsys=capsys)
    assert code == 1
    assert ids(doc, "error") == ["S607:deploy:review"]
    [moved] = [f for f in doc["findings"] if f["id"] == "S607:deploy:review"]
    assert "step deploy (shell " in moved["message"]
    assert moved["message"].endswith("effects: write) can now run before approval gate review, "
                                      "which preceded it")
    assert moved["old"] == {"file": BASE, "line": 29}
    assert moved["new"] == {"file": new, "line": 12}
    assert "S607:deploy:note" in ids(doc, "warning")  # the input gate no longer precedes it


def test_approver_rule_relaxed(capsys):
    code, doc = diff(BASE, str(REVIEW / "ship.approver-relaxed.lobster"), capsys=capsys)
    assert code == 1
    [relaxed] = doc["findings"]
    assert relaxed["id"] == "S605:review:approval:approver"
    assert relaxed["message"] == ("approval gate review: required_approver release-managers -> -; "
                                  "require_different_approver true -> -")


def test_harmless_rename_reports_nothing(capsys):
    code, doc = diff(BASE, str(REVIEW / "ship.renamed.lobster"), capsys=capsys)
    assert code == 0
    assert doc["findings"] == []
    assert doc["renamed"] == {"review": "sign_off", "note": "deploy_note"}
    assert doc["old"]["programHash"] != doc["new"]["programHash"]
    main(["diff", BASE, str(REVIEW / "ship.renamed.lobster")])
    text = capsys.readouterr().out
    assert "no safety-relevant change" in text and "renamed: review -> sign_off" in text


def test_a_fix_after_the_gates_is_a_change_not_a_weakening(capsys):
    code, doc = diff(BASE, str(REVIEW / "ship.fixed.lobster"), capsys=capsys)
    assert code == 0
    assert ids(doc) == ["S611:deploy:runs"]


def test_same_file_reports_nothing_and_the_unchanged_hash(capsys):
    assert main(["diff", BASE, BASE]) == 0
    out = capsys.readouterr().out
    assert "(unchanged)" in out and "no safety-relevant change" in out


# one finding at a time ---------------------------------------------------------------------------

GATED = """name: g
steps:
  - id: fetch
    run: echo '[1]'
    timeout_ms: 1000
  - id: ok
    approval:
      prompt: Go?
{extra}
  - id: ask
    input:
      prompt: How many?
      responseSchema: {schema}
  - id: send
    timeout_ms: {timeout}
    pipeline: {pipeline}
"""


def gated(tmp_path, name, *, extra="", schema='{type: integer, minimum: 1}', timeout=1000,
          pipeline="json", cost=""):
    return write(tmp_path, name, cost + GATED.format(extra=extra, schema=schema, timeout=timeout,
                                                     pipeline=pipeline))


def test_input_schema_loosened_and_tightened(tmp_path, capsys):
    old = gated(tmp_path, "a.lobster")
    loose = gated(tmp_path, "b.lobster", schema="{type: integer}")
    tight = gated(tmp_path, "c.lobster", schema="{type: integer, minimum: 2, maximum: 9}")
    code, doc = diff(old, loose, capsys=capsys)
    assert code == 1 and ids(doc) == ["S606:ask:input:schema"]
    code, doc = diff(old, tight, capsys=capsys)
    assert code == 0 and ids(doc) == []


def test_schema_check_is_conservative():
    old = {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"]}},
           "required": ["a"]}
    assert schema_at_least({**old, "additionalProperties": False}, old)
    assert schema_at_least({"type": "object", "properties": {"a": {"const": "x"}},
                            "required": ["a"]}, old) is False  # no `type` on a: not proved
    assert not schema_at_least({"type": "object", "properties": old["properties"]}, old)
    assert not schema_at_least({"type": "object", "properties": {"a": {"type": "string"}},
                                "required": ["a"]}, old)
    assert schema_at_least({"type": "integer"}, {"type": "number"})
    assert not schema_at_least({"type": "string", "pattern": "^a"}, {"type": "string",
                                                                     "pattern": "^b"})


def test_new_network_effect_before_any_approval_and_after_one(tmp_path, capsys):
    old = gated(tmp_path, "a.lobster")
    after = gated(tmp_path, "b.lobster", pipeline="llm.invoke --prompt hi")
    code, doc = diff(old, after, capsys=capsys)
    assert code == 0
    assert "S609:send" in ids(doc, "warning")
    [gained] = [f for f in doc["findings"] if f["id"] == "S609:send"]
    assert gained["message"] == ("step send gained llm 'llm.invoke' (no cost limit); "
                                  "approval ok precedes it")
    before = write(tmp_path, "c.lobster", GATED.format(extra="", schema="{type: integer}",
                                                       timeout=1000, pipeline="json").replace(
        "run: echo '[1]'", "pipeline: \"exec --shell 'echo [1]' | state.set k\""))
    code, doc = diff(old, before, capsys=capsys)
    assert code == 1
    assert "S608:fetch" in ids(doc, "error")
    [gained] = [f for f in doc["findings"] if f["id"] == "S608:fetch"]
    assert "state 'state.set'" in gained["message"]


def test_policy_cost_limit_and_defaults(tmp_path, capsys):
    old = gated(tmp_path, "a.lobster", cost="cost_limit: {max_usd: 1, action: stop}\n")
    new = gated(tmp_path, "b.lobster", timeout=5000,
                cost="cost_limit: {max_usd: 3, action: stop}\n")
    code, doc = diff(old, new, capsys=capsys)
    assert code == 1
    assert ids(doc, "error") == ["S616:cost_limit"]
    assert ids(doc, "warning") == ["S612:send:policy"]
    [policy] = [f for f in doc["findings"] if f["rule"] == "S612"]
    assert policy["message"] == "step send: timeout_ms 1000 -> 5000"
    code, doc = diff(new, old, capsys=capsys)
    assert code == 0 and "S617:cost_limit" in ids(doc, "note")


def test_prompt_and_preview_changes(tmp_path, capsys):
    old = gated(tmp_path, "a.lobster", extra='      preview: "all of it"')
    new = gated(tmp_path, "b.lobster").replace("a.lobster", "b.lobster")
    Path(new).write_text(Path(new).read_text().replace("prompt: Go?", "prompt: Go on?"))
    code, doc = diff(old, new, capsys=capsys)
    assert code == 1
    assert ids(doc, "error") == ["S604:ok:approval:shown"]
    assert ids(doc, "warning") == ["S603:ok:approval:prompt"]


def test_gate_added_is_a_note(tmp_path, capsys):
    new = str(REVIEW / "ship.lobster")
    code, doc = diff(str(REVIEW / "ship.gate-removed.lobster"), new, capsys=capsys)
    assert code == 0
    assert "S602:review:approval" in ids(doc, "note")
    code, doc = diff(str(REVIEW / "ship.effect-moved.lobster"), new, capsys=capsys)
    assert code == 0
    assert "S610:deploy:review" in ids(doc, "note")  # moved back behind the gate


def test_pipelines_match_stages_moved_by_an_insert(tmp_path, capsys):
    old = write(tmp_path, "a.pipeline", "exec --json --shell 'echo [1]' | approve --prompt ok | json")
    new = write(tmp_path, "b.pipeline",
                "exec --json --shell 'echo [1]' | head --n 5 | approve --prompt ok | json")
    code, doc = diff(old, new, capsys=capsys)
    assert code == 0
    assert ids(doc) == ["S618:2:head"]
    assert doc["renamed"] == {"2:approve": "3:approve", "3:json": "4:json"}
    moved = write(tmp_path, "c.pipeline",
                  "approve --prompt ok | exec --json --shell 'echo [1]' | json")
    code, doc = diff(moved, old, capsys=capsys)
    assert code == 1
    assert ids(doc, "error") == ["S607:1:exec:2:approve"]


# acceptance -------------------------------------------------------------------------------------

def test_accept_by_id_flag_and_by_x_reviewed_key(tmp_path, capsys):
    new = str(REVIEW / "ship.gate-removed.lobster")
    code = main(["diff", BASE, new, "--accept", "S601:review:approval"])
    out = capsys.readouterr().out
    assert code == 0
    assert "error[S601] (accepted): approval gate review was removed" in out
    assert "1 accepted after review" in out
    reviewed = write(tmp_path, "ship.lobster", Path(new).read_text().replace(
        "name: ship\n", "name: ship\nx-reviewed:\n  S601:review:approval: the review moved to "
        "the deploy tool (ticket 42)\n"))
    code, doc = diff(BASE, reviewed, capsys=capsys)
    assert code == 0 and not doc["weakened"]
    assert [f["accepted"] for f in doc["findings"] if f["rule"] == "S601"] == [True]
    # a fingerprint accepts as well as an id; an unrelated id accepts nothing
    report = compare(load_version(BASE, compile=compile_target), load_version(new, compile=compile_target))
    fp = report.findings[0].fingerprint
    assert compare(load_version(BASE, compile=compile_target), load_version(new, compile=compile_target), (fp,)).exit_code == 0
    assert compare(load_version(BASE, compile=compile_target), load_version(new, compile=compile_target), ("S601:other",)).exit_code == 1


# formats and usage ------------------------------------------------------------------------------

def test_markdown_is_a_table_for_a_pull_request(capsys):
    assert main(["diff", BASE, str(REVIEW / "ship.approver-relaxed.lobster"),
                 "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("### Workflow safety diff:")
    assert "**1 safety property weakened.**" in out
    assert "| **weakened** | S605 approver rule relaxed |" in out


def test_usage_errors(tmp_path, capsys):
    assert main(["diff", BASE]) == 2
    capsys.readouterr()
    assert main(["diff", BASE, str(tmp_path / "missing.lobster")]) == 2
    assert capsys.readouterr().err == f"lobsterc: No such file: {tmp_path / 'missing.lobster'}\n"
    assert main(["diff", str(tmp_path), BASE]) == 2
    assert capsys.readouterr().err == f"lobsterc: Is a directory: {tmp_path}\n"
    assert main(["diff", "--rev", "HEAD", BASE]) == 2
    bad = write(tmp_path, "bad.lobster", "steps:\n  - id: a\n    pipeline: nosuch\n")
    assert main(["diff", BASE, bad]) == 1
    assert "does not compile" in capsys.readouterr().err


def test_rev_reads_both_versions_through_git(tmp_path):
    repo = tmp_path / "repo"
    (repo / "flows" / "lib").mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_CONFIG_GLOBAL": os.devnull}

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q")
    (repo / "flows" / "lib" / "sub.lobster").write_text(
        "steps:\n  - id: s\n    pipeline: json\n")
    flow = repo / "flows" / "ship.lobster"
    flow.write_text((REVIEW / "ship.lobster").read_text() +
                    "  - id: call\n    workflow: lib/sub.lobster\n")
    git("add", "-A")
    git("commit", "-qm", "one")
    flow.write_text((REVIEW / "ship.gate-removed.lobster").read_text() +
                    "  - id: call\n    workflow: lib/sub.lobster\n")
    git("commit", "-qam", "two")
    lobsterc = str(Path(os.sys.executable).parent / "lobsterc")
    proc = subprocess.run([lobsterc, "diff", "--rev", "HEAD~1..HEAD", "flows/ship.lobster"],
                          cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "lobsterc diff HEAD~1:flows/ship.lobster -> HEAD:flows/ship.lobster" in proc.stdout
    assert "error[S601]: approval gate review was removed" in proc.stdout
    assert "at old HEAD~1:flows/ship.lobster:14" in proc.stdout
    proc = subprocess.run([lobsterc, "diff", "--rev", "HEAD~1..HEAD", "flows/ship.lobster",
                           "--format", "github"], cwd=repo, capture_output=True, text=True,
                          env=env)
    assert proc.stdout.startswith("::error file=flows/ship.lobster,line=1,title=lobsterc diff "
                                  "S601%3A gate removed::approval gate review was removed")
    # B empty: the working tree
    proc = subprocess.run([lobsterc, "diff", "--rev", "HEAD..", "flows/ship.lobster"],
                          cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "(unchanged)" in proc.stdout
    proc = subprocess.run([lobsterc, "diff", "--rev", "nosuch..HEAD", "flows/ship.lobster"],
                          cwd=repo, capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "--rev nosuch..HEAD" in proc.stderr
    # a revision that reads as an option never reaches git as one (issue 47 MEDIUM 5)
    for rev in ("--output=stolen..HEAD", "HEAD..--output=stolen", "-p..HEAD"):
        proc = subprocess.run([lobsterc, "diff", f"--rev={rev}", "flows/ship.lobster"],
                              cwd=repo, capture_output=True, text=True, env=env)
        assert proc.returncode == 2, (rev, proc.stdout, proc.stderr)
        assert f"lobsterc: --rev {rev}: unknown revision: " in proc.stderr, proc.stderr
        assert not (repo / "stolen").exists() and not (repo / "flows" / "stolen").exists()


@pytest.mark.parametrize("path", sorted(str(p) for p in (ROOT / "golden").glob("*.*")
                                         if p.suffix in (".lobster", ".pipeline")))
def test_every_golden_source_diffs_clean_against_itself(path, capsys):
    code, doc = diff(path, path, capsys=capsys)
    assert (code, doc["findings"], doc["renamed"]) == (0, [], {})
    assert doc["old"]["programHash"] == doc["new"]["programHash"]


def test_an_effect_added_in_a_sub_workflow_is_named_in_its_own_file(tmp_path, capsys):
    for side in ("a", "b"):
        (tmp_path / side / "lib").mkdir(parents=True)
        (tmp_path / side / "flow.lobster").write_text(
            (ROOT / "golden" / "sub-workflow.lobster").read_text())
        (tmp_path / side / "lib" / "notes.lobster").write_text(
            (ROOT / "golden" / "lib" / "notes.lobster").read_text())
    with open(tmp_path / "b" / "lib" / "notes.lobster", "a") as fh:
        fh.write("  - id: remember\n    stdin: $draft.json\n    pipeline: state.set notes\n")
    code, doc = diff(str(tmp_path / "a" / "flow.lobster"), str(tmp_path / "b" / "flow.lobster"),
                     capsys=capsys)
    assert code == 1
    [gained] = [f for f in doc["findings"] if f["rule"] == "S608"]
    assert gained["id"] == "S608:notes/remember"
    assert gained["message"] == ("step notes/remember gained state 'state.set' and no approval "
                                 "gate precedes it")
    assert gained["new"] == {"file": str(tmp_path / "b" / "lib" / "notes.lobster"), "line": 12}


def test_a_pipeline_has_the_same_no_defaults_as_a_workflow_without_args(tmp_path, capsys):
    old = write(tmp_path, "a.pipeline", "exec --json --shell 'echo [1]' | json")
    new = write(tmp_path, "b.lobster", "steps:\n  - id: a\n    timeout_ms: 9\n"
                "    pipeline: exec --json --shell 'echo [1]' | json\n")
    _, doc = diff(old, new, capsys=capsys)  # its steps are labelled otherwise: not compared
    assert not [i for i in ids(doc) if i.startswith("S615")], doc["findings"]


def test_env_and_cwd_changes_name_each_value(tmp_path, capsys):
    flow = ("env:\n  MODE: safe\nsteps:\n  - id: ok\n    approval: Go?\n  - id: send\n"
            "    env:\n      TARGET: prod\n    run: echo sent\n    timeout_ms: 9\n")
    old = write(tmp_path, "a.lobster", flow)
    new = write(tmp_path, "b.lobster", flow.replace("safe", "yolo").replace(
        "      TARGET: prod\n", "      TARGET: dev\n    cwd: sub\n"))
    code, doc = diff(old, new, capsys=capsys)
    assert code == 0
    [env] = [f for f in doc["findings"] if f["rule"] == "S613"]
    assert env["message"] == ("step send: env.MODE safe -> yolo; env.TARGET prod -> dev; "
                              "cwd - -> sub")


@pytest.mark.parametrize("text", [
    "$a.approved", '!$a.approved && $b.json.n > 2 || $c.stdout == "x"',
    "!($a.x == 1 || $b.y != null)", "$a.x == 1 && ($b.y || $c.z)", "true",
    "$a.json.0.port >= 3.5", '$a.x == "two words"', "!!$a.x"])
def test_a_condition_is_shown_as_written(text):
    tree = compile_condition(text, None)
    assert condition_text(tree) == text
    assert compile_condition(condition_text(tree), None) == tree


def test_a_gate_made_conditional_names_the_condition(tmp_path, capsys):
    flow = ("steps:\n  - id: fetch\n    run: echo 1\n    timeout_ms: 9\n  - id: ok\n"
            "    approval: Go?\n  - id: send\n    run: echo sent\n    timeout_ms: 9\n")
    old = write(tmp_path, "a.lobster", flow)
    new = write(tmp_path, "b.lobster", flow.replace(
        "    approval: Go?\n", "    approval: Go?\n    when: $fetch.json.skip == false\n"))
    code, doc = diff(old, new, capsys=capsys)
    assert code == 1 and ids(doc, "error") == ["S607:send:ok"]
    [cond] = [f for f in doc["findings"] if f["rule"] == "S614"]
    assert cond["message"] == "step ok: condition - -> $fetch.json.skip == false"


def test_a_version_at_a_rev_that_does_not_compile_is_named_rev_path(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "GIT_CONFIG_GLOBAL": os.devnull}
    (repo / "f.lobster").write_text("steps:\n  - id: a\n    pipeline: nosuch\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    (repo / "f.lobster").write_text("steps:\n  - id: a\n    pipeline: json\n")
    lobsterc = str(Path(os.sys.executable).parent / "lobsterc")
    proc = subprocess.run([lobsterc, "diff", "--rev", "HEAD..", "f.lobster"], cwd=repo,
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[:3] == [
        "lobsterc: HEAD:f.lobster does not compile:",
        "HEAD:f.lobster:3:15: error[E201]: Unknown command: nosuch",
        "  3 |     pipeline: nosuch"], proc.stderr
    github = subprocess.run([lobsterc, "diff", "--rev", "HEAD..", "f.lobster", "--format",
                             "github"], cwd=repo, capture_output=True, text=True, env=env)
    assert (github.returncode, github.stdout) == (1, (
        "::error file=f.lobster,line=3,col=15,endLine=3,endColumn=21,title=lobsterc E201::"
        "Unknown command: nosuch (at revision HEAD)\n"))
