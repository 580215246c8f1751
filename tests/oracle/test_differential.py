"""The same inputs through the original Lobster and ours: regression cases and generated ones.
Needs LOBSTER_REFERENCE (the original's bin/lobster); tests/differential/README.md has the commands."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from differential import allowlist, known
from differential.cases import CASES, load_all
from differential.compare import reference_command, run_both
from differential.edges import EDGES
from differential.generators import any_case, yaml_dump
from differential.normalise import Normaliser, comparable, differences

pytestmark = pytest.mark.slow  # docs/testing.md

REF, WHY = reference_command()
needs_reference = pytest.mark.skipif(REF is None, reason=f"differential tests skipped: {WHY}")
EXAMPLES = int(os.environ.get("LOBSTER_DIFF_EXAMPLES", "10"))
DIVERGENCES = Path(__file__).resolve().parents[1] / "differential" / "DIVERGENCES.md"
ENTRIES = {e.id: e for e in allowlist.ENTRIES + known.ENTRIES}


def _case_params():
    for path, doc in load_all():
        marks = []
        if doc.get("known"):
            entry = ENTRIES.get(doc["known"])
            marks.append(pytest.mark.xfail(strict=True, reason=f"{doc['known']}: "
                                           f"{entry.title if entry else 'unknown id'}"))
        yield pytest.param(path, doc, marks=marks, id=path.stem)


@needs_reference
@pytest.mark.parametrize("path,doc", list(_case_params()))
def test_regression_case(path, doc):
    outcome = run_both(doc["case"], REF)
    if outcome.agrees:
        return
    explained = outcome.explained_by
    assert doc.get("deliberate") and explained is not None and explained.id == doc["deliberate"], \
        f"{path.name}: {doc['notes']}\n{outcome.report()}"


@needs_reference
@settings(max_examples=EXAMPLES, deadline=None, derandomize="LOBSTER_DIFF_EXAMPLES" not in os.environ,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(case=any_case)
def test_generated_case_agrees_or_is_explained(case):
    outcome = run_both(case, REF)
    assert outcome.agrees or outcome.explained_by is not None, (
        "a new divergence: classify it in tests/differential/DIVERGENCES.md, add a known.py or "
        "allowlist.py entry, and keep the case under tests/differential/cases/\n"
        + outcome.report() + "\ncase: " + json.dumps(case, ensure_ascii=False))


EDGE_EXAMPLES = int(os.environ.get("LOBSTER_DIFF_EDGE_EXAMPLES", "1"))


@needs_reference
@pytest.mark.parametrize("area", sorted(EDGES))
def test_edge_generator_agrees_or_is_explained(area):
    """Each edge generator of issue 20, a few derandomized examples in CI (more: set
    LOBSTER_DIFF_EDGE_EXAMPLES, or run the survey with `edges:AREA`)."""

    @settings(max_examples=EDGE_EXAMPLES, deadline=None, database=None,
              derandomize="LOBSTER_DIFF_EDGE_EXAMPLES" not in os.environ,
              suppress_health_check=list(HealthCheck))
    @given(case=EDGES[area])
    def one(case):
        outcome = run_both(case, REF)
        assert outcome.agrees or outcome.explained_by is not None, (
            f"a new divergence in edge area {area}\n" + outcome.report()
            + "\ncase: " + json.dumps(case, ensure_ascii=False))

    one()


# Without the original: the case files, the allow-list and the normaliser are checked too.

def test_case_files_are_well_formed():
    names = [p.name for p, _ in load_all()]
    assert names and all(re.fullmatch(r"\d{3}-[a-z0-9-]+\.json", n) for n in names)
    assert len({n[:3] for n in names}) == len(names)
    for path, doc in load_all():
        assert set(doc) <= {"notes", "known", "deliberate", "case", "observed"}, path.name
        assert doc["notes"] and doc["case"]["steps"], path.name
        assert not (doc.get("known") and doc.get("deliberate")), path.name
        if doc.get("known"):
            assert doc["known"] in {e.id for e in known.ENTRIES}, path.name
        if doc.get("deliberate"):
            assert doc["deliberate"] in {e.id for e in allowlist.ENTRIES}, path.name


def test_every_entry_is_documented_and_has_a_case():
    text = DIVERGENCES.read_text()
    used = {doc.get("known") or doc.get("deliberate") for _, doc in load_all()}
    for entry in allowlist.ENTRIES + known.ENTRIES:
        assert f"**{entry.id}**" in text, entry.id
        assert entry.id in used, f"{entry.id} has no regression case in {CASES}"
        assert entry.why and entry.spec
    for entry in allowlist.ENTRIES:
        assert "§9" in entry.spec, f"{entry.id} names no SPEC section 9 difference"


def test_normaliser_replaces_what_a_run_makes_up(tmp_path):
    norm = Normaliser(tmp_path)
    env = {"requiresApproval": {"resumeToken": "eyJhIjoxfQ", "approvalId": "0a1b2c3d"}}
    norm.learn(env)
    text = f"token eyJhIjoxfQ id 0a1b2c3d in {tmp_path}/work/x at 2026-12-03T17:00:00.123Z " \
           "run 123e4567-e89b-12d3-a456-426614174000"
    assert norm.text(text) == "token <token> id <approval_id> in <workdir>/x at <timestamp> run <uuid>"
    assert norm.value(env) == {"requiresApproval": {"resumeToken": "<token>", "approvalId": "<approval_id>"}}


def test_comparison_ignores_our_additive_fields_and_compares_json_parse_texts():
    v8 = "exec --json could not parse stdout as JSON: Unexpected token 'o', \"nope\" is not valid JSON"
    ref = {"argv": ["run"], "exitCode": 1, "stderr": "",
           "stdoutJson": {"ok": False, "error": {"type": "runtime_error", "message": v8}}}
    ours = {"argv": ["run"], "exitCode": 1, "stderr": "",
            "stdoutJson": {"ok": False, "error": {"type": "runtime_error", "code": "T401",
                           "location": {"file": "<pipeline>", "line": 1, "column": 1},
                           "detail": {"reason": "Expecting value"}, "message": v8}}}
    assert differences(ref, ours) == []
    ours["stdoutJson"]["error"]["message"] = \
        "exec --json could not parse stdout as JSON: Expecting value: line 1 column 1 (char 0)"
    assert differences(ref, ours) == ["stdoutJson"]  # Python's words are no longer masked
    ours["exitCode"] = 2
    assert differences(ref, ours) == ["exitCode", "stdoutJson"]


def test_a_damaged_state_value_is_compared_whole():
    def step(argv: list, message: str) -> dict:
        return {"argv": argv, "exitCode": 1, "stderr": "",
                "stdoutJson": {"ok": False, "error": {"type": "runtime_error", "message": message}}}
    v8, python = "Unexpected end of JSON input", "Expecting value: line 1 column 1 (char 0)"
    state_get = ["run", "--mode", "tool", "state.get k"]
    assert differences(step(state_get, v8), step(state_get, v8)) == []
    assert differences(step(state_get, v8), step(state_get, python)) == ["stdoutJson"]


def test_human_mode_rendering_lines_are_additive():
    ref = {"argv": [], "exitCode": 1, "stdout": "", "stderr": "Error: Workflow step a retry.max must be a positive integer\n"}
    ours = dict(ref, stderr="Error: Workflow step a retry.max must be a positive integer\n"
                "w.lobster:4:12: error[E210]: Workflow step a retry.max must be a positive integer\n"
                "  4 |       max: 0\n    |            ^\n")
    assert comparable(ref) == comparable(ours)


def test_yaml_dump_reads_back_as_the_same_tree():
    from ruamel.yaml import YAML   # YAML 1.2, as both engines read workflow files
    doc = {"args": {"who": {"default": "it's"}}, "steps": [
        {"id": "a", "run": "echo '{\"x\":1}'", "retry": {"max": 2}, "approval": "yes"},
        {"id": "b", "for_each": "$a.json", "steps": [{"id": "c", "run": "true"}]}, {"id": "e", "env": {}}]}
    assert YAML(typ="safe").load(yaml_dump(doc)) == doc
