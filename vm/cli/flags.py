"""Declarative command lines: each subcommand's flags are one table (name, value name, help
line) that its parser and its help text both read, so the help cannot name a flag the parser
refuses, nor leave out one it takes. A flag nobody declared is refused with the closest
declared one ("did you mean"), never ignored.

Stdlib only: `lobster help` loads this and the tables (vm/cli/specs.py), nothing of the
machine."""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False  # without importing typing: help loads nothing but its text
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

NO_VALUE = "\0"  # a value flag given as the last word, without its value
HELP_FLAGS = ("-h", "--help")

UNKNOWN_OPTION = "E025"
NO_SUCH_FILE = "E026"
UNKNOWN_SUBCOMMAND = "E027"
UNEXPECTED_ARGUMENT = "E028"


class Flag(namedtuple("Flag", "name value help aliases optional repeat",
                      defaults=((), False, False))):
    """One `--name`: a switch when `value` is empty, else it takes a value (shown in help as
    `value`). `aliases`: other names of it; `optional`: a switch that may carry a value
    (`--cancel`, `--cancel=false`); `repeat`: its values are collected in a list."""

    __slots__ = ()


class Spec(namedtuple("Spec", "name usage summary about flags args footer",
                      defaults=((), (), ""))):
    """A subcommand: its synopsis (the lines after `usage: `), one line for the overview, what
    it does, its flags (Flag), its positional arguments ((name, help) pairs) and a closing
    paragraph."""

    __slots__ = ()

    def flag(self, name: str) -> Flag | None:
        return next((f for f in self.flags if name == f.name or name in f.aliases), None)

    def names(self) -> list[str]:
        """Every flag word the parser takes, aliases and `--help` included."""
        return [*(n for f in self.flags for n in (f.name, *f.aliases)), "help"]


class UsageError(Exception):
    """A refused command line: a message and its stable code (vm/core/codes.py); exit 2."""

    def __init__(self, message: str, code: str = UNEXPECTED_ARGUMENT) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice a mistyped word most likely meant, or None."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return found[0] if found else None


def unknown_option(word: str, spec: Spec | None, choices: Iterable[str]) -> UsageError:
    """`unknown option --aprove; did you mean --approve?`, or where its options are listed."""
    name = word.split("=", 1)[0]
    guess = closest(name.lstrip("-"), choices)
    if guess is not None:
        return UsageError(f"unknown option {name}; did you mean --{guess}?", UNKNOWN_OPTION)
    where = f"lobster help {spec.name}" if spec is not None else "lobster help"
    return UsageError(f"unknown option {name} (`{where}` lists the options)", UNKNOWN_OPTION)


def is_option(word: str) -> bool:
    """Whether a word is written as an option (`-x`, `--name`, `--name=v`); `-` is stdin."""
    return len(word) > 1 and word[0] == "-" and (word[1] == "-" or word[1].isalpha())


def parse(spec: Spec, argv: Sequence[str]) -> tuple[dict, list[str]]:
    """The flags (name -> value; True for a switch; a list for a repeated flag) and the
    positional words of a command line, read by the spec's table. A value flag at the end
    without its value gets NO_VALUE: the command says what that means. An undeclared option
    is a UsageError; `-h`/`--help` are left to the caller (main prints the help)."""
    values: dict = {}
    words: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word in HELP_FLAGS or not is_option(word):
            if word not in HELP_FLAGS:
                words.append(word)
            continue
        name, eq, inline = word.lstrip("-").partition("=")
        flag = spec.flag(name) if word.startswith("--") else None
        if flag is None:
            raise unknown_option(word, spec, spec.names())
        if not flag.value or flag.optional:
            if eq and not flag.optional:
                raise UsageError(f"--{flag.name} takes no value (got {word!r})")
            if eq:
                value = inline
            elif flag.optional and i < len(argv) and not argv[i].startswith("--"):
                value, i = argv[i], i + 1
            else:
                value = True
        elif eq:
            value = inline
        elif i < len(argv):
            value, i = argv[i], i + 1
        else:
            value = NO_VALUE
        if flag.repeat:
            values.setdefault(flag.name, []).append(value)
        else:
            values[flag.name] = value
    return values, words


def render(spec: Spec) -> str:
    """The help text of a subcommand, its option list made from its flag table."""
    lines = [f"usage: {spec.usage.rstrip()}", "", spec.about.rstrip(), ""]
    if spec.args:
        lines.append("arguments:")
        lines += _column((name, text) for name, text in spec.args)
    lines.append("options:")
    rows = []
    for f in spec.flags:
        shown = f"--{f.name}" + (f" [{f.value}]" if f.optional else f" {f.value}" if f.value
                                 else "")
        text = f.help + (f" (also --{', --'.join(f.aliases)})" if f.aliases else "")
        text += " (may be repeated)" if f.repeat else ""
        rows.append((shown, text))
    rows.append(("-h, --help", "this help"))
    lines += _column(rows)
    if spec.footer:
        lines += ["", spec.footer.rstrip()]
    return "\n".join(lines) + "\n"


def _column(rows: Iterable[tuple[str, str]], width: int = 96) -> list[str]:
    """Two columns: the name, then its help wrapped under itself."""
    import textwrap

    rows = list(rows)
    left = min(max((len(name) for name, _ in rows), default=0) + 2, 24)
    out = []
    for name, text in rows:
        wrapped = textwrap.wrap(text, width - left - 2) or [""]
        if len(name) + 2 > left:
            out.append(f"  {name}")
            out += [" " * (left + 2) + line for line in wrapped]
        else:
            out.append(f"  {name.ljust(left)}{wrapped[0]}")
            out += [" " * (left + 2) + line for line in wrapped[1:]]
    return out
