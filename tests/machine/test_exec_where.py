"""`exec --json | where`: the where's items are tested as the child's array is parsed (never
all held). Whatever the child prints, the answer is the one the same where gives a step
later (a `head` put between the two turns the streaming off): the items, or the error."""

from __future__ import annotations

import json

import pytest

from conftest import in_process_cli as cli  # noqa: F401 - the subject is not the process

OUTPUTS = {
    "array": json.dumps([{"team": "red", "n": i} if i % 3 else {"team": "blue", "n": i}
                         for i in range(30)]) + "\n",
    "spaced": ' \n[ {"team" : "red"} ,\n\t{"team":"blue"}\r\n, 1, "red", null ]  \n',
    "empty": "[]",
    "object": '{"team": "red"}',
    "scalar": "7",
    "nothing": "  \n",
    "trailing comma": '[{"team": "red"},]',
    "cut": '[{"team": "red"}, {"team": "bl',
    "extra": '[{"team": "red"}] [1]',
    "index keys and big numbers": '[{"team": "red", "2": 1, "1": 12345678901234567890}]',
    "nan": '[{"team": "red"}, NaN]',
}


@pytest.mark.parametrize("name", sorted(OUTPUTS))
@pytest.mark.parametrize("where", ["team=red", "team!=red", "n>=10", "=bad"])
def test_exec_json_then_where_answers_as_the_where_a_step_later(cli, name, where):
    (cli.work / "out.json").write_text(OUTPUTS[name])
    exec_stage = "exec --json --shell 'cat out.json'"
    fused, fused_code = cli.pipeline(f"{exec_stage} | where {where} | pick team,n,1,2")
    apart, apart_code = cli.pipeline(
        f"{exec_stage} | head --n 1000 | where {where} | pick team,n,1,2")
    assert fused_code == apart_code
    if fused.get("ok"):
        assert fused["output"] == apart["output"], (fused, apart)
    else:
        assert fused["error"]["message"] == apart["error"]["message"]
        assert fused["error"].get("code") == apart["error"].get("code")


def test_a_where_keeps_the_streamed_items_through_a_gate(cli):
    """A halt right after the where: what parks is the where's items, and the resume goes on."""
    (cli.work / "out.json").write_text(OUTPUTS["array"])
    halted, _ = cli.pipeline("exec --json --shell 'cat out.json' | where team=blue"
                             " | approve --prompt ok --preview-from-stdin --limit 20")
    preview = halted["requiresApproval"]["items"]
    assert preview == [{"team": "blue", "n": i} for i in range(0, 30, 3)]
    done, code = cli.tool("resume", "--token", halted["requiresApproval"]["resumeToken"],
                          "--approve", "yes")
    assert code == 0 and done["output"] == preview
