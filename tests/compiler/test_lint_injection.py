"""The splicing lint (W301, W309, W310) over an injection corpus: each row is a `pipeline:`
or `run:` text of a workflow with an arg `name` and an earlier step `a`, and the references
lint must report in it (code, reference, the language that reads it as code), or none: a
reference that an interpreter runs as code is flagged; one that a program gets as an argv word
of its own is data and is not. Then the shell lexer against the real /bin/sh."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lobsterc.tools.lint import lint_file
from lobsterc.syntax.interpreters import program_texts
from lobsterc.syntax.shellwords import split_commands

ARG, OUT, JSON = "${name}", "$a.stdout", "$a.json"

CORPUS = [
    # exec stages: shell text
    ("pipeline", "exec --shell 'ping ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", 'exec --shell "echo \\"hi\\" ${name}"', [("W310", ARG, "sh")]),
    ("pipeline", 'exec --shell="echo ${name}"', [("W310", ARG, "sh")]),
    ("pipeline", "exec 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec --json --shell 'cat $a.stdout'", [("W310", OUT, "sh")]),
    # exec argv: a shell's -c, however spelt and however reached
    ("pipeline", "exec sh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec bash -lc 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", 'exec bash -euc "echo ${name}"', [("W310", ARG, "sh")]),
    ("pipeline", "exec bash -o pipefail -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec /bin/zsh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec dash -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec ksh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec env sh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec env -i PATH=/bin sh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec /usr/bin/env bash -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec env -S 'sh -c \"echo ${name}\"'", [("W310", ARG, "sh")]),
    ("pipeline", "exec sudo -u bob sh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec timeout 5 sh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec xargs -I{} sh -c 'echo {} ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec nice -n 5 bash -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec busybox sh -c 'echo ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec su -c 'echo ${name}' bob", [("W310", ARG, "sh")]),
    ("pipeline", "exec ssh host 'ls ${name}'", [("W310", ARG, "sh")]),
    ("pipeline", "exec sh -c 'cat $a.stdout'", [("W310", OUT, "sh")]),
    # exec argv: other interpreters' program text
    ("pipeline", "exec python3 -c 'print(\"${name}\")'", [("W310", ARG, "python")]),
    ("pipeline", "exec python -c \"import os; os.system('${name}')\"", [("W310", ARG, "python")]),
    ("pipeline", "exec /usr/bin/python3.11 -Ic 'print(${name})'", [("W310", ARG, "python")]),
    ("pipeline", "exec python3 -c'print(${name})'", [("W310", ARG, "python")]),
    ("pipeline", "exec python3 -c 'print($a.json)'", [("W310", JSON, "python")]),
    ("pipeline", "exec node -e 'console.log(\"${name}\")'", [("W310", ARG, "node")]),
    ("pipeline", "exec node -pe '${name}'", [("W310", ARG, "node")]),
    ("pipeline", "exec perl -e 'print \"${name}\"'", [("W310", ARG, "perl")]),
    ("pipeline", "exec perl -lne 'print if /${name}/'", [("W310", ARG, "perl")]),
    ("pipeline", "exec ruby -e 'puts \"${name}\"'", [("W310", ARG, "ruby")]),
    ("pipeline", "exec ruby -rjson -e 'p ${name}'", [("W310", ARG, "ruby")]),
    ("pipeline", "exec awk '{print \"${name}\"}'", [("W310", ARG, "awk")]),
    ("pipeline", "exec awk -F: -v x=1 '/${name}/'", [("W310", ARG, "awk")]),
    ("pipeline", "exec sed 's/x/${name}/'", [("W310", ARG, "sed")]),
    ("pipeline", "exec sed -e 's/x/${name}/' file", [("W310", ARG, "sed")]),
    ("pipeline", "exec jq '.[] | select(.a == \"${name}\")'", [("W310", ARG, "jq")]),
    ("pipeline", "exec php -r 'echo \"${name}\";'", [("W310", ARG, "php")]),
    ("pipeline", "exec sh -c 'echo ${name}' | exec python3 -c 'print($a.json)'",
     [("W310", ARG, "sh"), ("W310", JSON, "python")]),
    # run: lines are shell text throughout; the fix names the language that reads the value
    ("run", "echo ${name}", [("W301", ARG, "sh")]),
    ("run", "echo '${name}'", [("W301", ARG, "sh")]),
    ("run", "python3 -c 'print(\"${name}\")'", [("W301", ARG, "python")]),
    ("run", "node --eval \"console.log('$a.stdout')\"", [("W309", OUT, "node")]),
    ("run", "env bash -c \"perl -e 'print \\\"${name}\\\"'\"", [("W301", ARG, "perl")]),
    ("run", "cat <<EOF\n${name}\nEOF", [("W301", ARG, "sh")]),
    ("run", "cat <<EOF\npython3 -c '${name}'\nEOF", [("W301", ARG, "sh")]),
    ("run", "python3 - <<EOF\nprint('${name}')\nEOF", [("W301", ARG, "python")]),
    ("run", "sudo=1 bash <<-EOF\n\techo $a.stdout\n\tEOF", [("W309", OUT, "sh")]),
    ("run", "jq -n \"$a.json\" && echo ${name}", [("W301", ARG, "sh"), ("W309", JSON, "jq")]),
    ("run", "if true; then LANG=C ruby3.2 -e 'p ${name}'; fi", [("W301", ARG, "ruby")]),
    ("run", "pwsh -Command \"Write-Output '${name}'\"", [("W301", ARG, "pwsh")]),
    # data, not code: argv words of their own, script files, --arg values, env assignments
    ("pipeline", "exec echo ${name}", []),
    ("pipeline", "exec ls $a.stdout", []),
    ("pipeline", "exec sh -c 'echo \"$1\"' sh ${name}", []),
    ("pipeline", "exec bash -c 'echo \"$0\"' ${name}", []),
    ("pipeline", "exec sh script.sh ${name}", []),
    ("pipeline", "exec python3 script.py ${name}", []),
    ("pipeline", "exec python3 -m http.server ${name}", []),
    ("pipeline", "exec python3 -c 'import sys; print(sys.argv[1])' ${name}", []),
    ("pipeline", "exec node -e 'console.log(process.argv[1])' ${name}", []),
    ("pipeline", "exec perl -e 'print $ARGV[0]' ${name}", []),
    ("pipeline", "exec jq -r .a ${name}", []),
    ("pipeline", "exec awk -v n=${name} '{print n}'", []),
    ("pipeline", "exec awk -f prog.awk ${name}", []),
    ("pipeline", "exec sed -e 's/a/b/' ${name}", []),
    ("pipeline", "exec env NAME=${name} sh -c 'echo \"$NAME\"'", []),
    ("pipeline", "exec timeout 5 cat ${name}", []),
    ("pipeline", "exec xargs -I{} echo ${name}", []),
    ("pipeline", "exec ssh ${name} uptime", []),
    ("pipeline", "exec --shell 'echo \"$LOBSTER_ARG_NAME\" ${HOME}'", []),
    ("run", "echo \"$LOBSTER_ARG_NAME\" ${HOME}", []),
]


def lint(tmp_path: Path, where: str, text: str) -> list:
    step = {"id": "b", "timeout_ms": 9, where: text}
    flow = {"args": {"name": {"default": "x"}},
            "steps": [{"id": "a", "run": "echo x", "timeout_ms": 9}, step]}
    path = tmp_path / "flow.lobster"
    path.write_text(json.dumps(flow, indent=1))
    return lint_file(str(path))


def spliced(tmp_path: Path, where: str, text: str) -> list:
    return [d for d in lint(tmp_path, where, text) if d.code in ("W301", "W309", "W310")]


def reading(d) -> tuple[str, str, str]:
    """(code, reference, language) of one diagnostic."""
    ref = re.search(r"arg '([^']+)'|step reference (\S+)", d.message)
    text = f"${{{ref[1]}}}" if ref[1] else ref[2]
    language = re.search(r"the (shell|\S+ program) then reads", d.help)[1]
    return d.code, text, "sh" if language == "shell" else language.split()[0]


def test_the_corpus_is_big_enough():
    assert len(CORPUS) >= 40
    assert sum(1 for *_, want in CORPUS if want) >= 20
    assert sum(1 for *_, want in CORPUS if not want) >= 15


@pytest.mark.parametrize("where, text, want", CORPUS, ids=[t for _, t, _ in CORPUS])
def test_injection_corpus(tmp_path, where, text, want):
    diags = [d for d in lint(tmp_path, where, text) if d.code in ("W301", "W309", "W310")]
    assert sorted(reading(d) for d in diags) == sorted(want)
    assert all(d.severity == "warning" and "env:" in d.help or "LOBSTER_ARG_" in d.help
               for d in diags)
    assert [d for d in lint(tmp_path, where, text) if d.severity == "error"] == []


def test_an_escaped_quote_does_not_hide_the_reference(tmp_path):
    path = tmp_path / "flow.lobster"
    path.write_text("args:\n  name: {default: x}\nsteps:\n  - id: b\n    timeout_ms: 9\n"
                    "    pipeline: exec --shell \"echo \\\"hi\\\" ${name}\"\n")
    [d] = lint_file(str(path))
    assert (d.code, d.span.line, d.span.col, d.span.end_col) == ("W310", 6, 41, 48)
    assert d.message == "arg 'name' is spliced into the shell text of exec in step b"
    assert d.help == ('read "$LOBSTER_ARG_NAME" in the shell instead (or pass it through the '
                      "step's `env:`): the shell then reads the value as data, never as code")


def test_a_program_read_from_an_unquoted_here_document_needs_its_delimiter_quoted(tmp_path):
    """The shell expands "$VAR" inside an unquoted here-document before the program reads it,
    so reading the variable is a fix only with the delimiter quoted."""
    [arg] = spliced(tmp_path, "run", "python3 - <<EOF\nprint('${name}')\nEOF")
    assert arg.help == ("quote the here-document's delimiter (<<'EOF': the shell then expands "
                        "nothing in it) and read os.environ[\"LOBSTER_ARG_NAME\"] in the python "
                        "program: the python program then reads the value as data, never as code")
    [ref] = spliced(tmp_path, "run", "sh <<EOF\necho $a.stdout\nEOF")
    assert ref.help.startswith("pass it through the step's `env:` as A_STDOUT, quote the "
                               "here-document's delimiter")
    quoted = spliced(tmp_path, "run", "sh <<'EOF'\necho ${name}\nEOF")  # quoted: "$VAR" is safe
    assert [d.help.split(":")[0] for d in quoted] == ['use "$LOBSTER_ARG_NAME" instead']
    data = spliced(tmp_path, "run", "cat <<EOF\n${name}\nEOF")  # cat's input is data
    assert [d.help.split(":")[0] for d in data] == ['use "$LOBSTER_ARG_NAME" instead']


def test_the_fix_for_another_language_reads_its_environment(tmp_path):
    path = tmp_path / "flow.lobster"
    path.write_text("steps:\n  - id: a\n    run: echo x\n    timeout_ms: 9\n  - id: b\n"
                    "    timeout_ms: 9\n    pipeline: exec env python3 -c 'print($a.json)'\n")
    [d] = lint_file(str(path))
    assert (d.code, d.span.line, d.span.col, d.span.end_col) == ("W310", 7, 42, 49)
    assert d.message == "step reference $a.json is spliced into the python program text of " \
        "exec in step b"
    assert d.help == ("pass it through the step's `env:` (A_JSON: $a.json) and read "
                      'os.environ["A_JSON"] in the python program: the python program then '
                      "reads the value as data, never as code")


# the lexer against the real shell ------------------------------------------------------------
LEXER_CASES = [
    r"""echo "hi \"there\"" 'a b' c\ d""",
    r"""echo a"b"'c'd e''f "" ''""",
    r"""echo 'don'\''t' "it's" """,
    r"""echo "a\b\$c\`d\\e\"f" x\\y \$z""",
    "echo a\\\nb \"c\\\nd\"",
    r"""echo one;echo two&&echo three;false||echo four""",
    r"""echo x # a comment 'with quotes""",
    r"""echo a#b "#c" '#d'""",
    r"""echo 2>/dev/null x >/dev/null y""",
    r"""echo $'a\tb\x41\101\'' """,
    r"""echo "$(printf '%s' ")")" z""",
    r"""echo "`printf a`" b""",
    r"""echo ${UNSET:-"a b"} w""",
    r"""echo ${UNSET:-'a}b'} tail""",
    r"""echo $((1 + (2 * 3))) $(printf case) done""",
    r"""echo $(case x in x) printf 1;; esac) tail; echo $(case y in (y) printf 2;; esac) end""",
    "(( x = 1 << 2 ))\necho after the arithmetic\nEOF",
    "echo $[1 << 2] x\necho after\nEOF",
    "cat <<EOF >/dev/null\necho inside\nEOF\necho after",
    "cat <<-'E' >/dev/null; echo same line\n\techo inside\n\tE\necho after",
    "echo a=b c=d; (echo sub)",
]


def real_words(line: str, tmp_path: Path) -> list[list[str]]:
    """What bash makes of `line`: the arguments of each `echo` it runs (echo replaced by a
    function that appends them to a file)."""
    out = tmp_path / "words"
    script = ("echo() { printf '%s\\0' \"$@\" >> \"$OUT\"; printf '\\1' >> \"$OUT\"; }\n" + line)
    subprocess.run(["bash", "-c", script], env={"OUT": str(out), "PATH": "/usr/bin:/bin"},
                   capture_output=True, timeout=10)
    return [c.decode().split("\0")[:-1] for c in out.read_bytes().split(b"\1")[:-1]]


@pytest.mark.parametrize("line", LEXER_CASES)
def test_the_lexer_splits_as_the_shell_does(line, tmp_path):
    ours = [[w.text for w in c][1:] for c in split_commands(line) if c[0].text == "echo"]
    expected = real_words(line, tmp_path)
    if re.search(r"\$\(|`|\$\{|\$\[", line):  # expansions stay text here: compare the word count
        assert [len(c) for c in ours] == [len(c) for c in expected]
    else:
        assert ours == expected


def test_program_texts_reads_options_as_each_program_does():
    def code(argv: str) -> list[str]:
        words = [w.text for w in split_commands(argv)[0]]
        return [words[p.word][p.start:] for p in program_texts(words)]

    assert code("sh -c X a b") == ["X"]
    assert code("perl -e X -e Y") == ["X", "Y"]
    assert code("python3 -cX") == ["X"]
    assert code("awk -f p X") == []
    assert code("jq -f f X") == []
    assert code("flock /tmp/l -c X") == ["X"]
    assert code("ssh -p 22 host X Y") == ["X", "Y"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab -c$'\"\\`(){};|&<>#\n=x") +
                                ["${", "$(", "$[", "((", "case ", "esac", "sh -c "]),
                max_size=30).map("".join))
def test_the_lexer_takes_any_text(text):
    for command in split_commands(text):
        for word in command:
            assert len(word.offsets) == len(word.text)
            assert all(0 <= at < len(text) for at in word.offsets)
        words = [w.text for w in command]
        for part in program_texts(words):
            assert 0 <= part.word < len(words) and 0 <= part.start <= len(words[part.word])
