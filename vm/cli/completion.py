"""`lobster completion bash|zsh`: a shell completion script, made from the subcommands' flag
tables (vm/cli/specs.py) and the flags' values below."""

from __future__ import annotations

import sys

from vm.cli.common import refuse, shown, usage_error
from vm.cli.flags import UsageError, parse
from vm.cli.specs import SPECS
from vm.service.protocol.envelope import RequestError

COMMANDS = tuple(SPECS)
COMMAND_FLAGS = {  # each subcommand's words to complete: its flags (and key's actions)
    name: " ".join([*(("list", "rotate") if name == "key" else ()),
                    *(f"--{n}" for n in spec.names())])
    for name, spec in SPECS.items() if name not in ("help", "completion", "version")}
FLAG_VALUES = {"--mode": "tool human", "--approve": "yes no", "--events": "jsonl",
               "--format": "json text mermaid dot ascii"}

BASH_COMPLETION = """\
# lobster completion for bash: source <(lobster completion bash)
_lobster() {
    local cur prev sub words
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    sub="${COMP_WORDS[1]}"
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=( $(compgen -W "@COMMANDS@" -- "$cur") )
        return 0
    fi
    case "$prev" in
@VALUES@
        --file) COMPREPLY=( $(compgen -f -- "$cur") ); return 0 ;;
    esac
    case "$sub" in
        help) [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=( $(compgen -W "@COMMANDS@" -- "$cur") ); return 0 ;;
        completion) COMPREPLY=( $(compgen -W "bash zsh" -- "$cur") ); return 0 ;;
@FLAGS@
        *) words="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$words" -- "$cur") )
    else
        COMPREPLY=( $(compgen -f -- "$cur") )
    fi
    return 0
}
complete -o filenames -F _lobster lobster
"""

ZSH_COMPLETION = """\
#compdef lobster
# lobster completion for zsh: source <(lobster completion zsh), or save as _lobster in $fpath
_lobster() {
    local sub="${words[2]}" prev="${words[CURRENT-1]}"
    if (( CURRENT == 2 )); then
        compadd -- @COMMANDS@
        return
    fi
    case "$prev" in
@VALUES@
        --file) _files; return ;;
    esac
    case "$sub" in
        help) (( CURRENT == 3 )) && compadd -- @COMMANDS@; return ;;
        completion) compadd -- bash zsh; return ;;
@FLAGS@
    esac
    _files
}
if [[ "$funcstack[1]" == _lobster ]]; then _lobster "$@"; else compdef _lobster lobster; fi
"""


def completion_script(shell: str) -> str:
    """The completion script for `shell` (bash or zsh), made from the tables above."""
    if shell == "bash":
        values = "\n".join(f"        {flag}) COMPREPLY=( $(compgen -W \"{words}\" -- \"$cur\") );"
                           f" return 0 ;;" for flag, words in FLAG_VALUES.items())
        flags = "\n".join(f"        {sub}) words=\"{words}\" ;;"
                          for sub, words in COMMAND_FLAGS.items())
        template = BASH_COMPLETION
    else:
        values = "\n".join(f"        {flag}) compadd -- {words}; return ;;"
                           for flag, words in FLAG_VALUES.items())
        flags = "\n".join(f"        {sub}) [[ $PREFIX == -* ]] && {{ compadd -- {words}; "
                          f"return; }} ;;" for sub, words in COMMAND_FLAGS.items())
        template = ZSH_COMPLETION
    return (template.replace("@COMMANDS@", " ".join(COMMANDS)).replace("@VALUES@", values)
            .replace("@FLAGS@", flags))


def cmd_completion(argv: list[str]) -> int:
    try:
        _, argv = parse(SPECS["completion"], argv)
    except UsageError as exc:
        return refuse(exc)
    shell = argv[0] if len(argv) == 1 else None
    if shell not in ("bash", "zsh"):
        return usage_error(RequestError(f"completion takes bash or zsh (got "
                                        f"{shown(' '.join(argv) if argv else None)})", "E024"))
    sys.stdout.write(completion_script(shell))
    return 0
