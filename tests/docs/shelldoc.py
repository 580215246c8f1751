"""Shell examples in Markdown, read and run so that no example in the README or docs/ can rot.

The syntax, written for people first:

- A ```sh fence holds commands, each on a line starting with `$ ` (a line ending in ` \\`
  continues on the next), followed by the output it prints: stdout, then stderr. A last
  output line `[exit N]` says the command exits with N; without it, the command must exit 0.
- In expected output, a line `...` stands for any number of lines, and `...` inside a line for
  any text on that line. `<name>` (a lower-case letter, then letters, digits, `_`) stands for
  one word (no blanks or quotes) and remembers it: a later `<name>`, in output or in a
  command, means that same word. `<pipeline>` and `<stdin>` are Lobster's own names, literal.
- ```sh no-run marks a fence that is shown but not run (installs, servers, long benchmarks).
- A fence whose info string has `file=NAME` (```yaml file=hello.lobster) writes its text to
  NAME in the working directory before the commands after it run.

A document is one session: its commands run in order in one working directory (a copy of
examples/), with one private HOME and LOBSTER_STATE_DIR. `export NAME=VALUE` and `cd DIR` are
kept for the commands after them; `$NAME` and `${NAME}` are expanded outside single quotes.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)
PLACEHOLDER = re.compile(r"<([a-z][A-Za-z0-9_]*)>")
LITERAL_NAMES = {"pipeline", "stdin"}
EXIT = re.compile(r"^\[exit (\d+)\]$")
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
OPERATORS = set("|&;<>()")


@dataclass
class Command:
    line: int  # where the command starts in its file (1-based)
    text: str
    expected: list[str]
    exit_code: int = 0


@dataclass
class Fence:
    line: int
    info: str
    body: str
    commands: list[Command] = field(default_factory=list)

    @property
    def runs(self) -> bool:
        words = self.info.split()
        return bool(words) and words[0] == "sh" and "no-run" not in words

    @property
    def file(self) -> str | None:
        return next((w.split("=", 1)[1] for w in self.info.split() if w.startswith("file=")),
                    None)


def fences(text: str) -> Iterator[Fence]:
    """Every fenced block of a Markdown text, with the commands of a ```sh block."""
    for match in FENCE.finditer(text):
        start = text.count("\n", 0, match.start()) + 2  # the body's first line
        fence = Fence(start, match["info"].strip(), match["body"])
        if fence.info.split()[:1] == ["sh"]:
            fence.commands = _commands(match["body"], start)
        yield fence


def _commands(body: str, first_line: int) -> list[Command]:
    commands: list[Command] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"line {first_line + i}: output before any `$ ` command")
        start, text = i, lines[i][2:]
        while text.endswith(" \\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + lines[i].strip()
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        command = Command(first_line + start, text, expected)
        if expected and (m := EXIT.match(expected[-1])):
            command.exit_code = int(m.group(1))
            command.expected = expected[:-1]
        commands.append(command)
    return commands


def expand(text: str, env: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` from env, outside single quotes (as the shell does)."""
    out, quote, i = [], "", 0
    while i < len(text):
        c = text[i]
        if c == "'" and quote != '"':
            quote = "" if quote == "'" else "'"
        elif c == '"' and quote != "'":
            quote = "" if quote == '"' else '"'
        elif c == "\\" and quote != "'" and i + 1 < len(text):
            out.append(text[i:i + 2])
            i += 2
            continue
        elif c == "$" and quote != "'" and (m := VARIABLE.match(text, i)):
            out.append(env.get(m.group(1) or m.group(2), ""))
            i = m.end()
            continue
        out.append(c)
        i += 1
    return "".join(out)


def has_operators(text: str) -> bool:
    """Whether the line needs a shell: a pipe, redirection, `;`, `&&` outside quotes."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return any(token and set(token) <= OPERATORS for token in lexer)


def pattern(expected: list[str], bound: dict[str, str]) -> re.Pattern:
    """The expected output as one regular expression (see the module's syntax)."""
    parts, seen = [], set(bound)
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces, pos = [], 0
        for m in PLACEHOLDER.finditer(line):
            pieces.append(_literal(line[pos:m.start()]))
            name = m.group(1)
            if name in LITERAL_NAMES:
                pieces.append(re.escape(m.group(0)))
            elif name in bound:
                pieces.append(re.escape(bound[name]))
            elif name in seen:
                pieces.append(f"(?P={name})")
            else:
                seen.add(name)
                pieces.append(f"(?P<{name}>[^\\s\"']+)")
            pos = m.end()
        pieces.append(_literal(line[pos:]))
        parts.append("".join(pieces).rstrip() + r"[ \t]*\n")
    return re.compile("".join(parts))


def _literal(text: str) -> str:
    return ".*?".join(re.escape(piece) for piece in text.split("..."))


def substitute(text: str, bound: dict[str, str]) -> str:
    """A command's `<name>` placeholders replaced by the words they captured."""

    def value(m: re.Match) -> str:
        if m.group(1) not in bound:
            raise KeyError(f"{m.group(0)} was never captured by an earlier output")
        return bound[m.group(1)]

    return PLACEHOLDER.sub(value, text)


Runner = Callable[[list[str], str, dict[str, str]], tuple[int, str]]


@dataclass
class Session:
    """One document's commands, run in order; `in_process` runs a `lobster`/`lobsterc` argv
    (cwd, env) and returns its exit code and output."""

    cwd: str
    env: dict[str, str]
    in_process: Runner
    bound: dict[str, str] = field(default_factory=dict)

    def write(self, name: str, body: str) -> None:
        Path(self.cwd, name).write_text(body, encoding="utf-8")

    def run(self, command: Command) -> str | None:
        """None when the command printed what it says and exited as it says; else why not."""
        text = substitute(command.text, self.bound)
        code, output = self._execute(text)
        output = "".join(line.rstrip() + "\n" for line in output.splitlines())
        found = pattern(command.expected, self.bound).fullmatch(output)
        problems = []
        if found is None:
            problems.append("its output differs:\n--- expected\n" + "\n".join(command.expected)
                            + "\n--- got\n" + output)
        else:
            self.bound.update(found.groupdict())
        if code != command.exit_code:
            problems.append(f"it exited {code}, not {command.exit_code}")
        return "; ".join(problems) or None

    def _execute(self, text: str) -> tuple[int, str]:
        env = {**self.env, "PWD": self.cwd}
        line = expand(text, env)
        if has_operators(text):
            return self._shell(text, env)
        words = shlex.split(line)
        assigned = {}
        while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0], re.DOTALL):
            name, value = words.pop(0).split("=", 1)
            assigned[name] = value
        if not words:
            return 0, ""
        if words[0] == "export":
            self.env.update(w.split("=", 1) for w in words[1:] if "=" in w)
            return 0, ""
        if words[0] == "cd":
            self.cwd = str(Path(self.cwd, words[1]).resolve())
            return 0, ""
        if words[0] in ("lobster", "lobsterc"):
            return self.in_process(words, self.cwd, {**self.env, **assigned})
        return self._shell(text, env)

    def _shell(self, text: str, env: dict[str, str]) -> tuple[int, str]:
        proc = subprocess.run(["/bin/sh", "-c", text], check=False, cwd=self.cwd, env=env,
                              text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=120)
        return proc.returncode, proc.stdout


def documents(root: Path) -> list[Path]:
    """The README and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def environment(base: dict[str, str], home: Path, state: Path, bin_dir: str) -> dict[str, str]:
    """The session's environment: none of the caller's Lobster variables, a private home and
    state directory, the installed executables first on PATH."""
    env = {k: v for k, v in base.items() if not k.startswith("LOBSTER_")}
    env.update(HOME=str(home), LOBSTER_STATE_DIR=str(state), TZ="UTC", COLUMNS="100",
               PATH=bin_dir + os.pathsep + base.get("PATH", ""))
    return env
