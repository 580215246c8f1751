"""Shell words, for the splicing lint (W301, W309, W310): a POSIX shell lexer (XCU 2.3 token
recognition and 2.2 quoting). `split_commands` cuts a shell line into simple commands and their
words after quote removal, keeping for every character of a word the offset it came from, so a
reference found in a word is placed exactly in the source; `here_documents` gives the body of
each here-document with the command it feeds; `command_start` finds a command's program name.
Which of a command's words the program runs as code is lobsterc/syntax/interpreters.py.

Why not `shlex`: even with posix=True it does not follow POSIX. Inside double quotes it lets
a backslash escape only `"` and `\\` (POSIX also `$`, `` ` `` and newline, and removes a
backslash-newline), it splits `a;b` and `x&&y` only with punctuation_chars (which then also
changes what a word is), knows neither `$'...'` nor `$(...)` / backquotes (a space inside a
command substitution splits the word), treats `#` as a comment anywhere a word starts only
when told, and gives no source offsets. Here the lexer is small enough to be exact for what
lint needs; expansions are kept as text, as the shell keeps them until it expands them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from attrs import frozen

OPERATORS = ("&&", "||", ";;", "<<-", "<<", ">>", "<&", ">&", "<>", ">|", ";", "&", "|", "(",
             ")", "<", ">", "\n")
_REDIRECTS = frozenset({"<<-", "<<", ">>", "<&", ">&", "<>", ">|", "<", ">"})
_BLANK = " \t"
_ANSI_C = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
           "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


@frozen
class ShellWord:
    """One word after quote removal. offsets[i] is where text[i] came from in the source."""

    text: str
    start: int
    end: int
    offsets: tuple[int, ...]


@frozen
class HereDoc:
    """The body of a here-document, source[start:end]. `quoted`: its delimiter was quoted, so
    the shell expands nothing in it."""

    start: int
    end: int
    quoted: bool


def split_commands(source: str) -> list[list[ShellWord]]:
    """The simple commands of a shell text, each as its argv words (redirections and their
    targets left out). Never raises: an unclosed quote runs to the end of the text."""
    return _parse(source)[0]


def here_documents(source: str) -> list[tuple[list[ShellWord], HereDoc]]:
    """Every here-document of a shell text, with the argv words of the command it feeds."""
    return _parse(source)[1]


def _parse(source: str) -> tuple[list[list[ShellWord]], list[tuple[list[ShellWord], HereDoc]]]:
    commands: list[list[ShellWord]] = []
    docs: list[tuple[list[ShellWord], HereDoc]] = []
    feeds: list[list[ShellWord]] = []  # the commands of the here-documents not yet read
    current: list[ShellWord] = []
    skip_next = False  # the word after a redirection operator is its target, not an argument
    for token in _tokens(source):
        if isinstance(token, HereDoc):
            docs.append((feeds.pop(0) if feeds else [], token))
            continue
        if isinstance(token, str):
            if token in ("<<", "<<-"):
                feeds.append(current)
            if token in _REDIRECTS:
                skip_next = True
                continue
            if current:
                commands.append(current)
            current = []
            continue
        if skip_next:
            skip_next = False
            continue
        current.append(token)
    if current:
        commands.append(current)
    return commands, docs


def _tokens(s: str) -> Iterator[ShellWord | str | HereDoc]:
    """Words (ShellWord), operators (str) and the bodies of here-documents (HereDoc, after the
    newline that ends their line) in order; comments and blanks dropped."""
    i, n = 0, len(s)
    heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, quoted)
    after_heredoc_op: str | None = None
    while i < n:
        ch = s[i]
        if ch in _BLANK:
            i += 1
        elif ch == "\\" and s.startswith("\\\n", i):
            i += 2  # a line continuation between words
        elif ch == "#":
            while i < n and s[i] != "\n":
                i += 1
        elif s.startswith("((", i):  # an arithmetic command (bash, ksh): `<<` is a shift
            end = _balanced_end(s, i + 1, "(")
            yield ShellWord(s[i:end], i, end, tuple(range(i, end)))
            i = end
        elif op := _operator_at(s, i):
            yield op
            i += len(op)
            if op == "\n" and heredocs:
                bodies, i = _skip_heredocs(s, i, heredocs)
                yield from bodies
                heredocs = []
            after_heredoc_op = op if op in ("<<", "<<-") else None
        else:
            word, i = _word(s, i)
            if _IO_NUMBER.fullmatch(word.text) and i < n and s[i] in "<>":
                continue  # `2>file`: the digits belong to the redirection
            if after_heredoc_op:
                quoted = any(c in s[word.start:word.end] for c in "'\"\\")
                heredocs.append((word.text, after_heredoc_op == "<<-", quoted))
                after_heredoc_op = None
            yield word


def _skip_heredocs(s: str, i: int, heredocs: list[tuple[str, bool, bool]]
                   ) -> tuple[list[HereDoc], int]:
    """The bodies of the here-documents opened on the line that just ended (each up to its
    delimiter line; an unclosed one runs to the end), and where the text goes on after them."""
    bodies = []
    for delimiter, strip_tabs, quoted in heredocs:
        start = end_of_body = i
        while i < len(s):
            end = s.find("\n", i)
            end = len(s) if end < 0 else end
            line = s[i:end].lstrip("\t") if strip_tabs else s[i:end]
            if line == delimiter:
                end_of_body, i = i, end + 1
                break
            i = end_of_body = end + 1
        bodies.append(HereDoc(start, min(end_of_body, len(s)), quoted))
    return bodies, min(i, len(s))


_IO_NUMBER = re.compile(r"[0-9]+")


def _operator_at(s: str, i: int) -> str | None:
    for op in OPERATORS:
        if s.startswith(op, i):
            return op
    return None


def _word(s: str, i: int) -> tuple[ShellWord, int]:
    """One word from s[i]: up to an unquoted blank or operator."""
    text: list[str] = []
    offsets: list[int] = []
    start, n = i, len(s)

    def keep(chars: str, at: int) -> None:
        for k, c in enumerate(chars):
            text.append(c)
            offsets.append(at + k)

    while i < n:
        ch = s[i]
        if ch in _BLANK or _operator_at(s, i):
            break
        if ch == "\\":
            if i + 1 >= n:
                keep("\\", i)
                i += 1
            elif s[i + 1] == "\n":
                i += 2
            else:
                keep(s[i + 1], i + 1)
                i += 2
        elif ch == "'":
            end = s.find("'", i + 1)
            end = n if end < 0 else end
            keep(s[i + 1:end], i + 1)
            i = end + 1
        elif ch == "$" and s.startswith("$'", i):
            i = _ansi_c(s, i + 2, text, offsets)
        elif ch == '"' or (ch == "$" and s.startswith('$"', i)):
            i = _double(s, i + (2 if ch == "$" else 1), text, offsets)
        elif s.startswith(_EXPANSIONS, i) or ch == "`":
            end = _substitution_end(s, i)
            keep(s[i:end], i)
            i = end
        else:
            keep(ch, i)
            i += 1
    return ShellWord("".join(text), start, i, tuple(offsets)), i


def _double(s: str, i: int, text: list[str], offsets: list[int]) -> int:
    """Inside "...": a backslash quotes only $ ` " \\ and newline; expansions are kept whole."""
    n = len(s)
    while i < n and s[i] != '"':
        ch = s[i]
        if ch == "\\" and i + 1 < n and s[i + 1] in '$`"\\\n':
            if s[i + 1] != "\n":
                text.append(s[i + 1])
                offsets.append(i + 1)
            i += 2
        elif s.startswith(_EXPANSIONS, i) or ch == "`":
            end = _substitution_end(s, i)
            text.extend(s[i:end])
            offsets.extend(range(i, end))
            i = end
        else:
            text.append(ch)
            offsets.append(i)
            i += 1
    return i + 1


def _ansi_c(s: str, i: int, text: list[str], offsets: list[int]) -> int:
    """Inside $'...' (bash, ksh, zsh; POSIX 2024): C escapes, \\xHH, \\NNN octal, \\cX."""
    n = len(s)
    while i < n and s[i] != "'":
        at = i
        if s[i] == "\\" and i + 1 < n:
            c = s[i + 1]
            if c in _ANSI_C:
                value, i = _ANSI_C[c], i + 2
            elif c == "x" and (m := re.match(r"[0-9A-Fa-f]{1,2}", s[i + 2:])):
                value, i = chr(int(m[0], 16)), i + 2 + len(m[0])
            elif m := re.match(r"[0-7]{1,3}", s[i + 1:]):
                value, i = chr(int(m[0], 8) & 0xFF), i + 1 + len(m[0])
            elif c == "c" and i + 2 < n:
                value, i = chr(ord(s[i + 2]) & 0x1F), i + 3
            else:
                value, i = "\\" + c, i + 2
        else:
            value, i = s[i], i + 1
        text.extend(value)
        offsets.extend([at] * len(value))
    return i + 1


_EXPANSIONS = ("$(", "${", "$[")
_CLOSE = {"(": ")", "{": "}", "[": "]"}


def _substitution_end(s: str, i: int) -> int:
    """The end of `$(...)`, `$((...))`, `${...}`, `$[...]` or a backquoted command starting
    at s[i], skipping quotes and nested substitutions inside (an unclosed one runs to the
    end)."""
    n = len(s)
    if s[i] == "`":
        j = i + 1
        while j < n and s[j] != "`":
            j += 2 if s[j] == "\\" else 1
        return min(j + 1, n)
    return _balanced_end(s, i + 2, s[i + 1])


def _balanced_end(s: str, j: int, opening: str) -> int:
    """Past the bracket that closes the `opening` one just before s[j]."""
    n = len(s)
    close = _CLOSE[opening]
    depth, begin = 1, j
    cases = 0  # open `case ... esac` of a command substitution: their `)` close patterns
    while j < n and depth:
        ch = s[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "'":
            end = s.find("'", j + 1)
            j = n if end < 0 else end + 1
            continue
        if ch == '"':
            j = _skip_double(s, j + 1)
            continue
        if s.startswith(_EXPANSIONS, j) or ch == "`":
            j = _substitution_end(s, j)
            continue
        if close == ")" and (keyword := _CASE_WORD.match(s, j)) and _command_position(s[begin:j]):
            cases += 1 if keyword[1] == "case" else -1 if cases else 0
            j = keyword.end(1)
            continue
        if cases and ch in "()":
            pass
        elif ch == opening:
            depth += 1
        elif ch == close:
            depth -= 1
        j += 1
    return min(j, n)


_CASE_WORD = re.compile(r"(case|esac)(?=[ \t\n;&|)]|$)")
_BEFORE_COMMAND = re.compile(r"(?:^|[;&|(\n]|(?:^|[ \t;&|(\n])(?:then|do|else|[{!]))[ \t]*$")


def _command_position(before: str) -> bool:
    """Whether a word after `before` (the text of a substitution up to it) starts a command."""
    return bool(_BEFORE_COMMAND.search(before))


def _skip_double(s: str, j: int) -> int:
    n = len(s)
    while j < n and s[j] != '"':
        if s[j] == "\\":
            j += 2
        elif s.startswith(_EXPANSIONS, j) or s[j] == "`":
            j = _substitution_end(s, j)
        else:
            j += 1
    return j + 1


RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for",
                      "case", "esac", "!", "{", "}", "time"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def command_start(words: Sequence[str]) -> int:
    """Where the program name of a simple command is: past reserved words (`then`, `do`, `!`)
    and variable assignments (`LANG=C`)."""
    i = 0
    while i < len(words) and (words[i] in RESERVED or _ASSIGNMENT.match(words[i])):
        i += 1
    return i
