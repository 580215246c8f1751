"""`lobsterc lsp` end to end: a real server process over stdio, driven by pygls's client
(tests/lsp_session.py): diagnostics as lint gives them, through edits into and out of errors;
quick fixes; completion; hover; definition; symbols; rename; broken text; the extra stays
optional."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from lsprotocol import types as lsp  # noqa: E402
from pygls.exceptions import JsonRpcException  # noqa: E402

from tests.lsp_session import DEMO, Session, apply, find  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def session(body, refusals: int = 0, args: tuple[str, ...] = ()):
    """Run `body(s)` against a fresh server; the server is shut down cleanly after, having
    logged no failure (a handler that fails answers empty, and logs why) but the `refusals`
    it was expected to answer with an error (pygls logs those too)."""
    async def main():
        s = Session(*args)
        await s.start()
        try:
            result = await body(s)
        finally:
            log = await s.stop()
        blocks = log.split("Traceback")[1:]
        assert "failed:" not in log and len(blocks) == refusals, log
        assert all("JsonRpcInvalidParams" in block for block in blocks), log
        return result

    return asyncio.run(main())


def lint_json(tmp_path: Path, name: str, text: str) -> list[dict]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "lobsterc.tools.cli", "lint", "--format", "json",
                          str(path)], capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout)


def as_lint(d: lsp.Diagnostic) -> tuple:
    message, _, help_ = d.message.partition("\nhelp: ")
    return (d.code, d.range.start.line + 1, d.range.start.character + 1, d.range.end.line + 1,
            d.range.end.character + 1, message, help_ or None,
            "error" if d.severity == lsp.DiagnosticSeverity.Error else "warning")


def from_cli(found: list[dict]) -> list[tuple]:
    return [(f["code"], f["line"], f["column"], f["endLine"], f["endColumn"], f["message"],
             f["help"], f["severity"]) for f in found]


def test_edits_into_and_out_of_errors_match_lint(tmp_path):
    uri = (tmp_path / "demo.lobster").as_uri()
    typo = DEMO.replace("timeout_ms: 5000\n    run", "timout_ms: 5000\n    run").replace(
        "--shell", "--shel")

    async def body(s: Session):
        s.open(uri, DEMO)
        assert await s.diagnostics(uri) == []
        line, char = find(DEMO, "timeout_ms: 5000\n    run")
        s.change(uri, (line, char, line, char + len("timeout_ms")), "timout_ms")
        line, char = find(s.texts[uri], "--shell")
        s.change(uri, (line, char, line, char + 7), "--shel")
        assert s.texts[uri] == typo
        found = await s.diagnostics(uri)
        assert sorted(as_lint(d) for d in found) == sorted(from_cli(lint_json(
            tmp_path, "saved.lobster", typo)))
        assert {d.code for d in found} == {"E217", "E202", "W302"}  # W302: `run` lost its timeout
        s.change(uri, (0, 0, 0, 0), "steps: [\n")  # a YAML syntax error: lint stops there
        broken = await s.diagnostics(uri)
        assert [d.code for d in broken] == ["E210"]
        assert [i.label for i in await s.completion(uri, 14, 8)] is not None
        assert await s.symbols(uri)
        s.change(uri, (0, 0, 1, 0), "")
        for d in await s.diagnostics(uri):
            if d.code in ("E217", "E202"):
                actions = await s.code_actions(uri, d)
                assert actions, d
                s.apply(uri, actions[0].edit)
        assert [d.code for d in await s.diagnostics(uri)] == []
        assert s.texts[uri] == DEMO

    session(body)


def test_typing_is_debounced(tmp_path):
    uri = (tmp_path / "typing.pipeline").as_uri()

    async def body(s: Session):
        s.open(uri, "")
        await s.diagnostics(uri)
        for n, ch in enumerate("exec --shel 'ls' | pik"):
            s.change(uri, (0, n, 0, n), ch)  # one keystroke at a time, faster than the delay
        found = await s.diagnostics(uri)
        return [d.code for d in found], [p.version for p in s.published[uri]]

    codes, versions = session(body)
    assert codes == ["E202", "E201"]
    # the open, then (on a machine that keeps up) the last keystroke's version only
    assert versions[0] == 1 and versions[-1] == 23 and len(versions) <= 4, versions


WITH_SPLICES = """\
args:
  who: {default: world}
steps:
  - id: first
    timeout_ms: 1000
    run: echo hi
  - id: second
    timeout_ms: 1000
    run: echo $first.stdout ${who}
  - id: third
    timeout_ms: 1000
    env:
      KEEP: "1"
    run: 'echo "$first.json" "$KEEP"'
"""


def test_quick_fixes_move_splices_into_the_environment(tmp_path):
    uri = (tmp_path / "splice.lobster").as_uri()

    async def body(s: Session):
        s.open(uri, WITH_SPLICES)
        found = await s.diagnostics(uri)
        assert sorted(d.code for d in found) == ["W301", "W309", "W309"]
        for code in ("W309", "W301", "W309"):
            d = next(d for d in await s.diagnostics(uri) if d.code == code)
            actions = await s.code_actions(uri, d)
            assert len(actions) == 1, actions
            s.apply(uri, actions[0].edit)
        assert await s.diagnostics(uri) == []
        return s.texts[uri]

    text = session(body)
    assert text == """\
args:
  who: {default: world}
steps:
  - id: first
    timeout_ms: 1000
    run: echo hi
  - id: second
    env:
      FIRST_STDOUT: $first.stdout
    timeout_ms: 1000
    run: echo "$FIRST_STDOUT" "$LOBSTER_ARG_WHO"
  - id: third
    timeout_ms: 1000
    env:
      FIRST_JSON: $first.json
      KEEP: "1"
    run: 'echo "$FIRST_JSON" "$KEEP"'
"""
    assert lint_json(tmp_path, "fixed.lobster", text) == []


def test_crlf_and_non_ascii_text_before_a_finding(tmp_path):
    """Columns count UTF-16 units (an astral character is two) and a quick fix in a CRLF
    file writes CRLF lines."""
    uri = (tmp_path / "crlf.lobster").as_uri()
    text = ("steps:\r\n  - id: alpha\r\n    timeout_ms: 9\r\n    run: echo x\r\n  - id: b\r\n"
            "    timeout_ms: 9\r\n    run: echo \"\u00e9\U0001F600\"; sh -c \"$alpha.stdout\"\r\n")

    async def body(s: Session):
        s.open(uri, text)
        [d] = await s.diagnostics(uri)
        line = text.split("\r\n")[6]
        start = len(line[:line.index("$alpha")].encode("utf-16-le")) // 2
        assert (d.code, d.range.start.line, d.range.start.character, d.range.end.character) \
            == ("W309", 6, start, start + len("$alpha.stdout"))
        [action] = await s.code_actions(uri, d)
        s.apply(uri, action.edit)
        assert await s.diagnostics(uri) == []
        return s.texts[uri]

    fixed = session(body)
    assert "\n" not in fixed.replace("\r\n", "")
    assert "    env:\r\n      ALPHA_STDOUT: $alpha.stdout\r\n" in fixed


def test_did_you_mean_fixes_for_references_fields_commands_and_values(tmp_path):
    uri = (tmp_path / "typos.lobster").as_uri()
    text = ("steps:\n  - id: build\n    pipeline: json\n  - id: ship\n    stdin: $biuld.json\n"
            "    pipeline: pick a\n  - id: three\n    stdin: $build.jsno\n"
            "    pipeline: state.gett x\n    effects: raed\n")

    async def body(s: Session):
        s.open(uri, text)
        found = await s.diagnostics(uri)
        assert sorted(d.code for d in found) == ["E201", "E211", "E218", "W307"]
        while found:
            actions = await s.code_actions(uri, found[0])
            s.apply(uri, actions[0].edit)
            found = await s.diagnostics(uri)
        return s.texts[uri]

    assert session(body) == text.replace("biuld", "build").replace("jsno", "json").replace(
        "gett", "get").replace("raed", "read")


NESTED = """\
steps:
  - id: ask
    input:
      prompt: Go?
      responseSchema:
        type: object
        properties:
          target: {type: string, description: where to deploy}
          opts:
            type: object
            properties:
              fast: {type: boolean}
  - id: fan
    parallel:
      branches:
        - id: left
          run: echo l
        - id: right
          pipeline: json
  - id: loop
    for_each: $fan.json
    steps:
      - id: inner
        pipeline: pick name
  - id: last
    stdin: $loop.json
    pipeline: sort --desc
"""


def labels(items) -> list[str]:
    return [i.label for i in items]


def test_completion(tmp_path):
    uri = (tmp_path / "c.lobster").as_uri()

    async def body(s: Session):
        s.open(uri, NESTED)
        await s.diagnostics(uri)
        line, char = find(NESTED, "stdin: $loop.json")
        s.change(uri, (line, char + 7, line, char + 17), "$")
        ids = labels(await s.completion(uri, line, char + 8))
        assert ids[:2] == ["ask", "fan"] and "loop" in ids and "last" not in ids
        s.change(uri, (line, char + 8, line, char + 8), "ask.")
        assert labels(await s.completion(uri, line, char + 12)) == [
            "json", "stdout", "approved", "skipped", "response"]
        s.change(uri, (line, char + 12, line, char + 12), "response.")
        items = await s.completion(uri, line, char + 21)
        assert labels(items) == ["target", "opts"]
        assert items[0].documentation.value == "where to deploy"
        s.change(uri, (line, char + 21, line, char + 21), "opts.")
        assert labels(await s.completion(uri, line, char + 26)) == ["fast"]
        line, char = find(s.texts[uri], "sort --desc")
        cmds = labels(await s.completion(uri, line, char))
        assert {"exec", "where", "pick", "head", "template", "llm.invoke"} <= set(cmds)
        s.change(uri, (line, char + 5, line, char + 11), "--d")
        items = await s.completion(uri, line, char + 8)
        assert labels(items) == ["--key", "--desc"]
        assert items[1].text_edit.range == lsp.Range(lsp.Position(line, char + 5),
                                                      lsp.Position(line, char + 8))
        s.change(uri, (line, char + 5, line, char + 8), "| ")
        assert "exec" in labels(await s.completion(uri, line, char + 7))
        s.change(uri, (line + 1, 0, line + 1, 0), "    ti\n")
        keys = labels(await s.completion(uri, line + 1, 6))
        assert "timeout_ms" in keys and "pipeline" not in keys and "stdin" not in keys
        s.change(uri, (line + 1, 0, line + 2, 0), "na\n")
        assert labels(await s.completion(uri, line + 1, 2))[:2] == ["name", "description"]
        line, char = find(s.texts[uri], "prompt: Go?")
        s.change(uri, (line + 1, 0, line + 1, 0), "      \n")
        keys = labels(await s.completion(uri, line + 1, 6))
        assert keys == ["defaults"]  # an input's keys, less the two it has

    session(body)


def test_hover_definition_symbols_rename(tmp_path):
    uri = (tmp_path / "n.lobster").as_uri()
    text = NESTED.replace("run: echo l", "run: echo 'é😀' $ask.response.target")

    async def body(s: Session):
        s.open(uri, text)
        await s.diagnostics(uri)
        line, char = find(text, "sort --desc")
        hover = await s.hover(uri, line, char + 1)
        assert hover.contents.value.startswith("```\nsort [--key <str>] [--desc]\n```\n")
        hover = await s.hover(uri, line, char + 7)
        assert hover.contents.value.startswith("```\nsort --desc\n```\n")
        line, char = find(text, "$fan.json")
        hover = await s.hover(uri, line, char + 2)
        assert hover.contents.value.startswith("**step `fan`** (parallel")
        where = await s.definition(uri, line, char + 2)
        assert (where.range.start.line, where.range.start.character) == find(text, "fan\n")
        line, char = find(text, "$ask.response.target")
        prefix = text.split("\n")[line][:char]
        utf16 = len(prefix.encode("utf-16-le")) // 2  # the client counts UTF-16 units
        assert utf16 == char + 1
        where = await s.definition(uri, line, utf16 + 1)
        assert (where.range.start.line, where.range.start.character) == find(text, "ask\n")
        hover = await s.hover(uri, line, utf16 + 1)
        assert hover.range.start.character == utf16
        symbols = await s.symbols(uri)
        tree = [(x.name, [c.name for c in x.children or []]) for x in symbols]
        assert tree == [("ask", []), ("fan", ["left", "right"]), ("loop", ["inner"]),
                        ("last", [])]
        line, char = find(text, "id: fan")
        assert await s.prepare_rename(uri, line, char + 5) == lsp.Range(
            lsp.Position(line, char + 4), lsp.Position(line, char + 7))
        assert await s.prepare_rename(uri, line, char + 1) is None  # on the key
        edit = await s.rename(uri, line, char + 5, "spread")
        renamed = apply(text, [((e.range.start.line, e.range.start.character, e.range.end.line,
                                 e.range.end.character), e.new_text) for e in edit.changes[uri]])
        assert "fan" not in renamed and renamed.count("spread") == 2
        with pytest.raises(JsonRpcException):
            await s.rename(uri, line, char + 5, "not an id")
        line, char = find(text, "pipeline: json")
        assert await s.rename(uri, line, char + 2, "x") is None
        loop = text.replace("pipeline: pick name", "run: echo $item.stdout")
        s.open(uri.replace("n.lobster", "loop.lobster"), loop)
        line, char = find(loop, "$item.stdout")  # a loop variable is no step: nothing to rename
        assert await s.rename(uri.replace("n.lobster", "loop.lobster"), line, char + 2, "x") is None

    session(body, refusals=1)


def test_pipeline_files(tmp_path):
    uri = (tmp_path / "p.pipeline").as_uri()

    async def body(s: Session):
        s.open(uri, "exec --json 'ls' | pik name\n")
        found = await s.diagnostics(uri)
        assert [(d.code, d.range.start.character) for d in found] == [("E201", 19)]
        actions = await s.code_actions(uri, found[0])
        s.apply(uri, actions[0].edit)
        assert s.texts[uri] == "exec --json 'ls' | pick name\n"
        assert await s.diagnostics(uri) == []
        assert labels(await s.completion(uri, 0, 7)) == ["--json", "--shell", "--stdin"]
        block = (tmp_path / "block.lobster").as_uri()
        s.open(block, "steps:\n  - id: a\n    pipeline: |\n      exec --json 'ls'\n"
                      "        | pi\n  - id: b\n    run: echo $item.stdout\n")
        assert "pick" in labels(await s.completion(block, 4, 12))
        assert labels(await s.completion(block, 3, 18)) == ["--json", "--shell", "--stdin"]
        assert "run" in labels(await s.completion(block, 6, 4))  # a key, not a pipeline
        as_json = (tmp_path / "flow.json").as_uri()
        text = '{"steps": [{"id": "a", "pipeline": "exec --js"}, {"id": "b", "stdin": "$a."}]}'
        s.open(as_json, text)
        assert labels(await s.completion(as_json, 0, text.index("--js") + 4)) == [
            "--json", "--shell", "--stdin"]
        assert labels(await s.completion(as_json, 0, text.index("$a.") + 3))[0] == "json"
        assert [x.name for x in await s.symbols(as_json)] == ["a", "b"]
        s.change(as_json, (0, len(text) - 3, 0, len(text) - 3), ', "ti')
        keys = labels(await s.completion(as_json, 0, len(text)))
        assert "timeout_ms" in keys and "stdin" not in keys and "id" not in keys

    session(body)


def test_other_yaml_and_json_files_get_no_findings(tmp_path):
    async def body(s: Session):
        found = {}
        for name, text in (("ci.yml", "on: push\njobs: {}\n"), ("package.json", '{"a": 1}'),
                           ("notes.txt", "pik | exec --shel"),
                           ("flow.yaml", "steps:\n  - id: a\n    pipeline: pik\n")):
            uri = (tmp_path / name).as_uri()
            s.open(uri, text)
            found[name] = [d.code for d in await s.diagnostics(uri)]
        return found

    assert session(body) == {"ci.yml": [], "package.json": [], "notes.txt": [],
                             "flow.yaml": ["E201"]}


def test_a_callees_findings_show_on_the_line_that_calls_it(tmp_path):
    (tmp_path / "callee.lobster").write_text("steps:\n  - id: x\n    pipeline: pik\n",
                                             encoding="utf-8")
    uri = (tmp_path / "caller.lobster").as_uri()
    text = "steps:\n  - id: call\n    workflow: ./callee.lobster\n"

    async def body(s: Session):
        s.open(uri, text)
        (found,) = await s.diagnostics(uri)
        callee = (tmp_path / "callee.lobster").as_uri()
        s.open(callee, (tmp_path / "callee.lobster").read_text(encoding="utf-8"))
        await s.diagnostics(callee)
        s.change(callee, (2, 14, 2, 17), "json")  # fixed in the editor, then saved
        (tmp_path / "callee.lobster").write_text(s.texts[callee], encoding="utf-8")
        s.published.pop(uri)
        s.save(callee)
        assert await s.diagnostics(uri) == []  # the caller is linted again
        return found

    found = session(body)
    assert found.code == "E201" and found.message.startswith(str(tmp_path / "callee.lobster"))
    assert (found.range.start.line, found.range.start.character) == find(text, "callee.lobster")


def test_require_approval_lints_as_the_cli_does(tmp_path):
    uri = (tmp_path / "gate.lobster").as_uri()
    text = "steps:\n  - id: save\n    pipeline: state.set seen\n"

    async def body(s: Session):
        s.open(uri, text)
        return [d.code for d in await s.diagnostics(uri)]

    assert session(body) == []
    assert session(body, args=("--require-approval",)) == ["W306"]


BROKEN = [
    "", "\n\n", "steps:", "steps: [", "steps:\n  - id: a\n    run: [\n", "{", '{"steps": [{"id": ',
    "steps:\n\t- id: x", "- - - -", "steps:\n  - id: a\n    pipeline: 'unterminated\n",
    "steps:\n  - id: $a.json\n    stdin: $a.json.", "\x00\x01", "é😀" * 50,
    "steps:\n" + "  - id: s\n    for_each: $s.json\n    steps:\n" * 20,
    "steps:\n  - id: a\n    input:\n      responseSchema: {properties: 3}\n  - id: b\n"
    "    stdin: $a.response.",
]


@pytest.mark.slow
def test_broken_text_never_crashes_the_server(tmp_path):
    async def body(s: Session):
        for n, text in enumerate(BROKEN):
            for suffix in (".lobster", ".json", ".pipeline"):
                uri = (tmp_path / f"b{n}{suffix}").as_uri()
                s.open(uri, text)
                await s.diagnostics(uri)
                lines = text.split("\n")
                for line in range(len(lines) + 1):
                    for char in sorted({0, 1, len(lines[line]) if line < len(lines) else 5}):
                        await s.completion(uri, line, char)
                        await s.hover(uri, line, char)
                        await s.definition(uri, line, char)
                        await s.rename(uri, line, char, "z")
                await s.symbols(uri)
        s.open((tmp_path / "ok.lobster").as_uri(), DEMO)
        assert await s.diagnostics((tmp_path / "ok.lobster").as_uri()) == []

    session(body)


def test_the_run_path_never_loads_pygls(tmp_path):
    flow = tmp_path / "w.lobster"
    flow.write_text("steps:\n  - id: a\n    timeout_ms: 1000\n    pipeline: json\n",
                    encoding="utf-8")
    code = ("import sys\n"
            "from lobsterc.tools.cli import main\n"
            f"main(['lint', {str(flow)!r}]); main(['compile', {str(flow)!r}])\n"
            "from lobsterc.frontend import lobster\n"
            "try:\n"
            f"    lobster(['run', '--file', {str(flow)!r}])\n"
            "except SystemExit:\n"
            "    pass\n"
            "loaded = [m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')]\n"
            "print(loaded, file=sys.stderr)\n"
            "sys.exit(1 if loaded else 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


def test_missing_extra_names_the_install():
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('pygls', 'lsprotocol'):\n"
            "            raise ImportError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from lobsterc.tools.cli import main\n"
            "sys.exit(main(['lsp']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert out.stderr == ("lobsterc lsp needs the lsp extra: pip install 'lobster-pipelines[lsp]' "
                          "(from a checkout: pip install '.[lsp]')\n")


def test_the_demo_session_runs_to_a_clean_file():
    from tests.lsp_session import demo

    transcript = asyncio.run(demo())
    assert transcript[-1] == "diagnostics\n  []"
    assert any(part.startswith("completion after `$ask_env.response.`") for part in transcript)


def test_no_one_edit_fix_for_a_splice_in_an_unquoted_here_document(tmp_path):
    """Reading "$VAR" there is still code (the shell expands it into the program): the finding
    stands without a quick fix; outside a here-document the same finding has one."""
    from lobsterc.tools.lint import lint_file
    from lobsterc.tools.lsp.fixes import fixes

    path = tmp_path / "h.lobster"
    for run, offered in (("sh <<EOF\n      echo ${who}\n      EOF", []),
                         ("echo ${who}", ["Read $LOBSTER_ARG_WHO instead"])):
        text = ("args:\n  who: {default: x}\nsteps:\n  - id: a\n    timeout_ms: 9\n"
                f"    run: |\n      {run}\n")
        path.write_text(text)
        [d] = [d for d in lint_file(str(path)) if d.code == "W301"]
        assert [title for title, _ in fixes(text, str(path), d)] == offered
