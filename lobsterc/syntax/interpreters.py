"""Which words of an argv the program it runs reads as code, for the splicing lint: how each
interpreter reads its options (`OptionSyntax`, one row a program in INTERPRETERS), so that
`program_texts` finds the program text in `sh -c TEXT`, `python3 -c TEXT`, `node -e TEXT`,
`perl -lne TEXT`, `awk TEXT`, ..., also behind `env`, `sudo`, `xargs`, `timeout` and the other
WRAPPERS. The words themselves come from lobsterc/syntax/shellwords.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from attrs import frozen


@frozen
class OptionSyntax:
    """How one program reads its options. Short letters: `code` take program text (attached,
    `-cTEXT`, when `attached`, else the next word); `arg` take a value (attached or the next
    word); `rest` take the rest of their cluster only; `digits` take attached digits; `stop`
    ends option reading (`python -m`); `file` reads the program from a file. Long options:
    `long_code` take program text, `long_args` take that many words (unless `=value`),
    `long_file` a program file. `mode_c`: `-c` is a mode (shells): the program text is the
    first operand. `operand_code`: without -e/-f the first operand is the program (awk, sed,
    jq). `operands_from`: every operand from this one on is code (ssh's remote command).
    `plus`: `+o` style options too. `words_code`: whole words, in any case, that the program
    text follows (pwsh's `-Command`)."""

    code: str = ""
    attached: bool = True
    arg: str = ""
    rest: str = ""
    digits: str = ""
    stop: str = ""
    file: str = ""
    long_code: frozenset = frozenset()
    long_args: tuple = ()
    long_file: frozenset = frozenset()
    mode_c: bool = False
    operand_code: bool = False
    operands_from: int | None = None
    plus: bool = False
    words_code: frozenset = frozenset()


SHELL = OptionSyntax(code="c", arg="oO", mode_c=True, plus=True,
                     long_code=frozenset({"--command"}),
                     long_args=(("--rcfile", 1), ("--init-file", 1)))
PYTHON = OptionSyntax(code="c", arg="WX", stop="m", long_args=(("--check-hash-based-pycs", 1),))
NODE = OptionSyntax(code="ep", attached=False, arg="rC",
                    long_code=frozenset({"--eval", "--print"}),
                    long_args=(("--require", 1), ("--import", 1), ("--loader", 1),
                               ("--experimental-loader", 1), ("--input-type", 1),
                               ("--conditions", 1)))
PERL = OptionSyntax(code="eE", arg="IMm", rest="ixdD", digits="l0C")
RUBY = OptionSyntax(code="e", arg="rICEF", rest="xiK", digits="0TW")
PHP = OptionSyntax(code="r", arg="dcz", file="f")
LUA = OptionSyntax(code="e", arg="l")
RSCRIPT = OptionSyntax(code="e")
OSASCRIPT = OptionSyntax(code="e", arg="ls")
AWK = OptionSyntax(code="e", arg="Fvil", file="f", operand_code=True,
                   long_code=frozenset({"--source"}), long_file=frozenset({"--file"}),
                   long_args=(("--include", 1), ("--load", 1), ("--assign", 1),
                              ("--field-separator", 1)))
SED = OptionSyntax(code="e", arg="l", rest="i", file="f", operand_code=True,
                   long_code=frozenset({"--expression"}), long_file=frozenset({"--file"}),
                   long_args=(("--line-length", 1),))
JQ = OptionSyntax(arg="L", file="f", operand_code=True, long_file=frozenset({"--from-file"}),
                  long_args=(("--arg", 2), ("--argjson", 2), ("--slurpfile", 2),
                             ("--rawfile", 2), ("--indent", 1)))
PWSH = OptionSyntax(words_code=frozenset({"-c", "-command", "-command:"}))
SU = OptionSyntax(code="c", arg="sgG", long_code=frozenset({"--command"}),
                  long_args=(("--shell", 1), ("--group", 1)))
SSH = OptionSyntax(arg="BbcDEeFIiJLlmOoPpQRSWw", operands_from=1)

# program name (after the directory and a version suffix) -> how it reads its options
INTERPRETERS: dict[str, tuple[str, OptionSyntax]] = {
    **{name: ("sh", SHELL) for name in ("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash",
                                        "yash", "fish", "rbash", "busybox-sh")},
    **{name: ("python", PYTHON) for name in ("python", "python2", "python3", "pypy", "pypy3")},
    **{name: ("node", NODE) for name in ("node", "nodejs", "bun")},
    "perl": ("perl", PERL), "ruby": ("ruby", RUBY), "php": ("php", PHP), "lua": ("lua", LUA),
    "luajit": ("lua", LUA), "Rscript": ("R", RSCRIPT), "osascript": ("osascript", OSASCRIPT),
    **{name: ("awk", AWK) for name in ("awk", "gawk", "mawk", "nawk")},
    "sed": ("sed", SED), "gsed": ("sed", SED), "jq": ("jq", JQ), "gojq": ("jq", JQ),
    "pwsh": ("pwsh", PWSH), "powershell": ("pwsh", PWSH), "su": ("sh", SU), "ssh": ("sh", SSH),
}

# programs that run the rest of their argv as a command: their own options, then how many
# operands of theirs come before the command (`timeout 5 CMD`)
WRAPPERS: dict[str, tuple[OptionSyntax, int]] = {
    "env": (OptionSyntax(code="S", arg="uC", long_code=frozenset({"--split-string"}),
                         long_args=(("--unset", 1), ("--chdir", 1))), 0),
    "command": (OptionSyntax(), 0), "exec": (OptionSyntax(arg="a"), 0),
    "nohup": (OptionSyntax(), 0), "setsid": (OptionSyntax(), 0),
    "time": (OptionSyntax(arg="fo"), 0), "nice": (OptionSyntax(arg="n"), 0),
    "ionice": (OptionSyntax(arg="cnp"), 0), "stdbuf": (OptionSyntax(arg="ioe"), 0),
    "timeout": (OptionSyntax(arg="sk", long_args=(("--signal", 1), ("--kill-after", 1))), 1),
    "sudo": (OptionSyntax(arg="ugCDhprtUT", long_args=(("--user", 1), ("--group", 1))), 0),
    "doas": (OptionSyntax(arg="uC"), 0),
    "xargs": (OptionSyntax(arg="ILnPsdEa", rest="ie"), 0), "busybox": (OptionSyntax(), 0),
    "chroot": (OptionSyntax(), 1), "flock": (OptionSyntax(code="c", arg="wE"), 1),
    "unbuffer": (OptionSyntax(), 0),
}


@frozen
class ProgramText:
    """argv[word][start:] is code for `language`."""

    word: int
    start: int
    language: str


def program_name(word: str) -> str:
    """`/usr/bin/python3.11` -> `python3`: the base name without a minor version suffix."""
    base = os.path.basename(word)
    if base.endswith(".exe"):
        base = base[:-4]
    return re.sub(r"(?<=[a-z])(\d)(?:\.\d+)+$", r"\1", base)


def program_texts(argv: Sequence[str]) -> list[ProgramText]:
    """The parts of `argv` that the program it runs (through any WRAPPERS) reads as code."""
    found: list[ProgramText] = []
    i = 0
    while i < len(argv):
        name = program_name(argv[i])
        if name not in WRAPPERS and name not in INTERPRETERS:
            name = re.sub(r"[\d.]+$", "", name)  # ruby3.2, lua5.4, node20
        if name in WRAPPERS:
            options, operands = WRAPPERS[name]
            codes, first = _read_options(argv, i + 1, options)
            # `env -S 'cmd args'` and `flock -c 'cmd'`: a command line in one word
            found += [ProgramText(w, s, "sh") for w, s, _ in codes]
            i = first + operands
            if name == "flock":  # `flock FILE -c 'cmd'`: its options may follow the file
                codes, i = _read_options(argv, i, options)
                found += [ProgramText(w, s, "sh") for w, s, _ in codes]
            while name in ("env", "sudo") and i < len(argv) and "=" in argv[i][1:]:
                i += 1  # `env NAME=value CMD`
            continue
        if name in INTERPRETERS:
            language, options = INTERPRETERS[name]
            codes, first = _read_options(argv, i + 1, options)
            found += [ProgramText(w, s, language) for w, s, mode in codes if not mode]
            if first < len(argv):
                if options.operands_from is not None:
                    found += [ProgramText(k, 0, language)
                              for k in range(first + options.operands_from, len(argv))]
                elif any(mode for *_, mode in codes) or (options.operand_code and not codes and
                                                    not _reads_file(argv[i + 1:first], options)):
                    found.append(ProgramText(first, 0, language))
        break
    return found


def _reads_file(words: Sequence[str], options: OptionSyntax) -> bool:
    for word in words:
        if word.startswith("--") and word.partition("=")[0] in options.long_file:
            return True
        if word.startswith("-") and not word.startswith("--") and options.file \
                and any(c in options.file for c in word[1:2]):
            return True
    return False


def _read_options(argv: Sequence[str], i: int, o: OptionSyntax) -> tuple[list, int]:
    """Read options from argv[i]: ([(word, start, is_mode_c)], index of the first operand).
    start -1 marks a `-c` mode flag (shells), whose program is the first operand."""
    codes: list = []
    n = len(argv)
    while i < n:
        word = argv[i]
        if word == "--":
            return codes, i + 1
        if word.lower() in o.words_code:
            if i + 1 < n:
                codes.append((i + 1, 0, False))
            return codes, n
        if word.startswith("--") and len(word) > 2:
            name, eq, _ = word.partition("=")
            if name in o.long_code:
                if eq:
                    codes.append((i, len(name) + 1, False))
                elif i + 1 < n:
                    i += 1
                    codes.append((i, 0, False))
            elif name in o.long_file or name in dict(o.long_args):
                i += 0 if eq else dict(o.long_args).get(name, 1)
            i += 1
            continue
        if not (word[:1] == "-" or (o.plus and word[:1] == "+")) or len(word) < 2:
            return codes, i
        pending_code = False
        j = 1
        while j < len(word):
            ch = word[j]
            if ch in o.code:
                if o.mode_c:
                    codes.append((i, -1, True))
                elif o.attached and word[j + 1:]:
                    codes.append((i, j + 1, False))
                    break
                else:
                    pending_code = True
                    if o.attached:
                        break
            elif ch in o.stop:
                return codes, n
            elif ch in o.arg or ch in o.file:
                if not word[j + 1:]:
                    i += 1
                break
            elif ch in o.rest:
                break
            elif ch in o.digits:
                while j + 1 < len(word) and word[j + 1].isdigit():
                    j += 1
            j += 1
        if pending_code and i + 1 < n:
            i += 1
            codes.append((i, 0, False))
        i += 1
    return codes, i
