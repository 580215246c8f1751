"""The command line is checked before it falls back to running a pipeline (SPEC 9.20): a
mistyped option, a path to a file that is not there, and a word close to a subcommand are
usage errors that say what was probably meant, where the original would run them as a
pipeline and answer `Unknown command: X`. A word that names a pipeline command is never
second-guessed: a real pipeline runs as in the original."""

from __future__ import annotations

import os

from vm.cli.flags import (NO_SUCH_FILE, UNEXPECTED_ARGUMENT, UNKNOWN_SUBCOMMAND, UsageError,
                          closest, is_option, unknown_option)
from vm.cli.specs import RUN, SPECS
from vm.core.patterns import compiled

FILE_EXTENSIONS = (".lobster", ".yaml", ".yml", ".json", ".lbc", ".pipeline")
_WORD = compiled(r"[A-Za-z][\w.-]*")


def mistyped_subcommand(word: str) -> UsageError | None:
    """`lobster rnu`: unknown subcommand 'rnu'; did you mean 'run'? Only for a word that is
    no pipeline command and is closer to a subcommand than to any pipeline command (whose
    own "did you mean" the pipeline's error gives)."""
    if not _WORD.fullmatch(word) or word in SPECS:
        return None
    from vm.host.commands import COMMANDS

    if word in COMMANDS:
        return None
    guess = closest(word, SPECS)
    if guess is None or closest(word, [guess, *COMMANDS]) != guess:
        return None
    return UsageError(f"unknown subcommand '{word}'; did you mean '{guess}'?",
                      UNKNOWN_SUBCOMMAND)


def pipeline_words(rest: list[str]) -> UsageError | None:
    """What is wrong with the words `run` would make a pipeline of, or None: an option first
    (none of run's), a missing file, or stray words after a single FILE or quoted pipeline."""
    if not rest:
        return None
    first = rest[0]
    if is_option(first) and not any(c.isspace() for c in first):
        return unknown_option(first, RUN, [*RUN.names(), "version", "help"])
    if _names_missing_file(first):
        return _no_such_file(first)
    whole = any(c.isspace() or c == "|" for c in first)
    if len(rest) > 1 and (whole or _is_file(first)):
        ours = RUN.names()
        unknown = [w for w in rest[1:] if is_option(w)
                   and w.lstrip("-").split("=", 1)[0] not in ours]
        if unknown:
            return unknown_option(unknown[0], RUN, ours)
        stray = _first_plain_word(rest[1:])
        if stray is None:  # only flags of ours: --dry-run, which stays a pipeline's there
            return UsageError("--dry-run goes before a pipeline: lobster run --dry-run "
                              "PIPELINE", UNEXPECTED_ARGUMENT)
        what = "FILE" if not whole else "quoted PIPELINE"
        return UsageError(f"unexpected argument {stray!r} after the {what} {first!r} (run takes "
                          "one FILE or PIPELINE; quote a pipeline as one argument)",
                          UNEXPECTED_ARGUMENT)
    return None


def _first_plain_word(words: list[str]) -> str | None:
    """The first word that is neither one of run's flags nor the value of one."""
    i = 0
    while i < len(words):
        word = words[i]
        if not is_option(word):
            return word
        flag = RUN.flag(word.lstrip("-").split("=", 1)[0])
        i += 2 if flag is not None and flag.value and "=" not in word else 1
    return None


def _is_file(word: str) -> bool:
    return word.lower().endswith(FILE_EXTENSIONS) and os.path.isfile(word)


def _names_missing_file(word: str) -> bool:
    """A word written as a path (a `/`, or a file extension run takes) that is no file, and
    no pipeline command (`lobster json` is one)."""
    if any(c.isspace() or c in "|'\"" for c in word) or os.path.exists(word):
        return False
    if "/" not in word and not word.lower().endswith(FILE_EXTENSIONS) \
            and not _close_to_a_file(word):
        return False
    from vm.host.commands import COMMANDS

    return word not in COMMANDS


def _close_to_a_file(word: str) -> bool:
    """`hello.lobstr` beside `hello.lobster`: a word with a dot, very close to the name of a
    file run takes in the working directory."""
    if "." not in word.strip("."):
        return False
    try:
        names = [n for n in os.listdir(".") if n.lower().endswith(FILE_EXTENSIONS)]
    except OSError:
        return False
    return closest(word, names, cutoff=0.85) is not None


def _no_such_file(path: str) -> UsageError:
    """`no such file: x/y.lobster`, and a close name in that directory if there is one."""
    folder, name = os.path.split(path)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        names = []
    guess = closest(name, names, cutoff=0.85) if name else None  # a shared extension is no
    # likeness: nope.lobster is not w.lobster
    hint = f"; did you mean {os.path.join(folder, guess)}?" if guess else ""
    return UsageError(f"no such file: {path}{hint}", NO_SUCH_FILE)
