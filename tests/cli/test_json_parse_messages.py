"""JSON.parse's words through the real CLI: a child's stdout that `exec --json` cannot read and
a JSON workflow file that does not parse say what Node 20's JSON.parse says (the original
passes its message on), while error.detail keeps our reading of where the text went wrong."""

from __future__ import annotations

import pytest

EXEC = "exec --json could not parse stdout as JSON: "
EMOJI = "\U0001F600"


@pytest.mark.parametrize("stdout, message", [
    ("[1,]", "Unexpected token ']', \"[1,]\" is not valid JSON"),
    ("{", "Expected property name or '}' in JSON at position 1"),
    ("1 2", "Unexpected non-whitespace character after JSON at position 2"),
    ("nope", "Unexpected token 'o', \"nope\" is not valid JSON"),
    ("[1 2]", "Expected ',' or ']' after array element in JSON at position 3"),
    ("NaN", '"NaN" is not valid JSON'),
    ('{"items": [1, 2, 3], "next": tru}',
     "Unexpected token '}', ...\"next\": tru}\" is not valid JSON"),
    # trimmed as String.prototype.trim trims: a byte order mark goes, a \x1c stays
    ("\ufeff[1,]\n", "Unexpected token ']', \"[1,]\" is not valid JSON"),
    ("\x1c[1]", "Unexpected token '\x1c', \"\x1c[1]\" is not valid JSON"),
    # positions and the token in UTF-16 units
    (f'["{EMOJI}" 2]', "Expected ',' or ']' after array element in JSON at position 6"),
    (EMOJI, f"Unexpected token '\ud83d', \"{EMOJI}\" is not valid JSON"),
])
def test_exec_json_says_what_json_parse_says(cli, tmp_path, stdout: str, message: str):
    (cli.work / "out.txt").write_text(stdout, encoding="utf-8")
    envelope, code = cli.pipeline("exec --json --shell 'cat out.txt'")
    assert code == 1 and envelope["ok"] is False
    assert envelope["error"]["message"] == EXEC + message
    assert envelope["error"]["detail"]["excerpt"]  # our reading, beside the message


def test_the_detail_keeps_line_and_column(cli):
    (cli.work / "out.txt").write_text('{\n  "a": 1,\n  "b": 2,,\n}\n')
    envelope, _ = cli.pipeline("exec --json --shell 'cat out.txt'")
    assert envelope["error"]["message"] == \
        EXEC + "Expected double-quoted property name in JSON at position 21"
    detail = envelope["error"]["detail"]
    assert (detail["line"], detail["column"]) == (3, 10)


def test_a_where_after_exec_json_refuses_what_json_parse_refuses(cli):
    (cli.work / "out.txt").write_text('[{"x": 1}]\x1c')
    envelope, code = cli.pipeline("exec --json --shell 'cat out.txt' | where x==1")
    assert code == 1
    assert envelope["error"]["message"] == \
        EXEC + "Unexpected non-whitespace character after JSON at position 10"
    (cli.work / "out.txt").write_text('\ufeff [{"x": 1}, {"x": 2}]\n')
    envelope, code = cli.pipeline("exec --json --shell 'cat out.txt' | where x==1")
    assert (code, envelope["output"]) == (0, [{"x": 1}])


def test_human_mode_writes_half_an_emoji_as_node_does(cli):
    (cli.work / "out.txt").write_text(EMOJI)
    proc = cli.run("run", "exec --json --shell 'cat out.txt'")
    assert proc.returncode == 1
    first = proc.stderr.split("\n")[0]
    assert first == f"Error: {EXEC}Unexpected token '\ufffd', \"{EMOJI}\" is not valid JSON"


@pytest.mark.parametrize("text, message, line, column", [
    ('{"steps": [1,]}', "Unexpected token ']', \"{\"steps\": [1,]}\" is not valid JSON", 1, 14),
    ('{\n  "steps": [\n    {"id": "a", "run": "echo hi"}\n  ],,\n}\n',
     "Expected double-quoted property name in JSON at position 53", 4, 5),
    ('{"name": "x" "steps": []}',
     "Expected ',' or '}' after property value in JSON at position 13", 1, 14),
    ("", "Unexpected end of JSON input", 1, 1),
    ('\ufeff{"steps": [{"id": "a", "run": "echo hi"}]}',
     "Unexpected token '\ufeff', \"\ufeff{\"steps\":\"... is not valid JSON", 1, 1),
])
def test_a_json_workflow_file_that_does_not_parse(cli, text, message, line, column):
    (cli.work / "w.json").write_text(text, encoding="utf-8")
    envelope, code = cli.tool("run", "--mode", "tool", "--file", "w.json")
    assert code == 1
    error = envelope["error"]
    assert (error["code"], error["message"]) == ("E210", message)
    assert (error["location"]["line"], error["location"]["column"]) == (line, column)
    human = cli.run("run", "--file", "w.json")
    assert human.stderr.split("\n")[0] == f"Error: {message}"
