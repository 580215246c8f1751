"""The compile cache (lobsterc's, reached through the frontend): a repeated pipeline or workflow
skips parsing; an edit is a miss."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, imported_by_lobster

PROBE = ("import json, sys; from vm.service.protocol import Options, handle; "
         "env = handle(json.loads(sys.argv[1]), Options(cwd=sys.argv[2], state_dir=sys.argv[3])); "
         "print(json.dumps({'output': env.get('output'), "
         "'compiled': 'lobsterc.generate.codegen' in sys.modules}))")


def probe(request: dict, cwd, state) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(request), str(cwd), str(state)],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(proc.stdout)


def test_a_repeated_pipeline_is_not_compiled_again(tmp_path):
    request = {"action": "run", "pipeline": "exec --json --shell 'echo [3,1,2]' | sort"}
    first = probe(request, tmp_path, tmp_path / "state")
    second = probe(request, tmp_path, tmp_path / "state")
    assert first == {"output": [1, 2, 3], "compiled": True}
    assert second == {"output": [1, 2, 3], "compiled": False}


def test_an_edited_workflow_or_sub_workflow_is_compiled_again(tmp_path):
    (tmp_path / "child.lobster").write_text("steps:\n  - id: c\n    run: echo '\"one\"'\n")
    (tmp_path / "main.lobster").write_text("steps:\n  - id: call\n    workflow: child.lobster\n")
    request = {"action": "run", "pipeline": "main.lobster"}
    state = tmp_path / "state"
    assert probe(request, tmp_path, state) == {"output": ["one"], "compiled": True}
    assert probe(request, tmp_path, state) == {"output": ["one"], "compiled": False}
    (tmp_path / "child.lobster").write_text("steps:\n  - id: c\n    run: echo '\"two\"'\n")
    assert probe(request, tmp_path, state)["output"] == ["two"]


def test_a_torn_cache_entry_is_a_miss(tmp_path):
    request = {"action": "run", "pipeline": "exec --json --shell 'echo [1]'"}
    state = tmp_path / "state"
    probe(request, tmp_path, state)
    for entry in (state / "cache").iterdir():
        entry.write_text("{not json")
    assert probe(request, tmp_path, state)["output"] == [1]


def test_a_cached_run_of_the_lobster_script_loads_no_parser_and_looks_nothing_up(cli):
    pipeline = "exec --json --shell 'echo [2,1]' | sort"
    out, first = imported_by_lobster(cli, "run", "--mode", "tool", pipeline)
    assert json.loads(out)["output"] == [1, 2]
    assert "lark" in first
    out, again = imported_by_lobster(cli, "run", "--mode", "tool", pipeline)
    assert json.loads(out)["output"] == [1, 2]
    assert not again & {"lark", "lobsterc.syntax.parse", "lobsterc.generate.codegen", "importlib.metadata"}
