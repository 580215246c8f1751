"""The `lobster` command: reads the subcommand and hands the rest of argv to its module (one
per subcommand, its help beside it), loaded on first use; an exception nothing caught becomes
one T498 line. The signal handlers and the standard streams are set up here.

Exit codes: 0 (also needs_approval, needs_input, cancelled), 1 runtime error, 2 parse error.
"""

from __future__ import annotations

import os
import sys

from vm import __version__
from vm.cli.flags import HELP_FLAGS
from vm.cli.specs import SPECS

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: help and version load
if TYPE_CHECKING:  # nothing but their text (tests/machine/test_import_budget.py)
    from collections.abc import Sequence

    from vm.service.frontend import Frontend


def main(argv: Sequence[str] | None = None, frontend: Frontend | None = None) -> int:
    """`frontend` is the compiler (lobsterc's `lobster` script passes itself); without one,
    the installed compiler is looked up when a command first needs to compile. An exception
    nothing else caught is a bug: one line (T498) and exit 1, never a traceback."""
    args = list(sys.argv[1:] if argv is None else argv)
    _standard_fds()
    try:
        answered = _text_only(args)
        if answered is not None:
            sys.stdout.flush()
            return answered
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:
        return _unwritable(exc)
    from vm.cli.common import finish_events, print_json

    _install_signal_handlers()
    try:
        try:
            code = _dispatch(args, frontend)
            sys.stdout.flush()  # the answer leaves here: a refusal of it is T497, not a bug
            return code
        except BrokenPipeError:
            raise
        except Exception as exc:  # noqa: BLE001 - the last resort
            if _output_refused(exc):
                return _unwritable(exc)
            from vm.host.store import StoreError

            if isinstance(exc, StoreError):  # the store's own failure, not a bug
                from vm.cli.common import store_failed

                return store_failed(exc, tool=_tool_mode(args))
            from vm.service.protocol.envelope import internal_error

            envelope = internal_error(exc)
            if _tool_mode(args):
                print_json(envelope)
            else:
                sys.stderr.write(f"lobster: error[T498]: {envelope['error']['message']}\n")
            return 1
        finally:
            finish_events()
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader went away (`| head -1`): nothing more to say to it."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    return 1


def _unwritable(exc: OSError) -> int:
    """Standard output refused the answer (`>/dev/full`, a device error): one line, T497, exit
    1; what was already buffered for it is dropped so the exit does not fail again."""
    code = "T497"
    sys.stderr.write(f"lobster: error[{code}]: cannot write to standard output "
                     f"({exc.strerror or exc})\n")
    _reader_gone()
    return 1


def _output_refused(exc: BaseException) -> bool:
    """Whether an exception is a device refusing a write, not a bug: the store's own file
    errors name their file, a write to standard output names none."""
    import errno

    return (isinstance(exc, OSError) and exc.filename is None
            and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO))


def one_process(args: Sequence[str]) -> None:
    """Set up a `lobster` process that runs one command (the console script calls this with
    its argv; an embedding process keeps its own settings). The cycle collector runs when
    100 000 container objects were made since its last pass instead of 700: what a run makes
    is JSON values and records, which hold no cycles, and at the default the collector walks
    them again and again (3 ms of a cached run's start, 13% of a 100 000-item pipeline,
    measured). `lobster mcp` is a server that lives on, with cyclic garbage of its own (its
    event loop, tracebacks): it keeps the interpreter's settings."""
    if list(args[:1]) == ["mcp"]:
        return
    import gc

    gc.set_threshold(100_000, 50, 1_000)


def leave(code: int) -> int:
    """The end of a `lobster` process (the console script calls this with main's exit code):
    when nothing is left for the interpreter to do at exit (stdout and stderr flushed, no
    thread the interpreter would wait for, no atexit callback), exit at once instead of
    tearing down some 200 modules and their objects one by one, which takes longer than many
    commands do (about 8 ms of a cached run's 80, measured). Daemon threads (a resume's lease
    scheduler) do not count: the ordinary exit abandons them as well. Otherwise, and never
    in-process, the ordinary exit."""
    import atexit
    import threading

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _reader_gone()
    except OSError as exc:
        code = _unwritable(exc)
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # nowhere left to say it
    waited_for = [t for t in threading.enumerate()
                  if not t.daemon and t is not threading.current_thread()]
    if not waited_for and getattr(atexit, "_ncallbacks", lambda: 1)() == 0:
        os._exit(code)
    return code


def _tool_mode(args: list[str]) -> bool:
    """Whether this command answers with envelopes on stdout."""
    head = args[0] if args else ""
    if head in ("tool", "resume", "doctor"):
        return True
    return "--mode=tool" in args or any(a == "--mode" and b == "tool"
                                        for a, b in zip(args, args[1:]))


# subcommand -> its module's function, and whether it takes the compiler
HANDLERS = {"run": ("run", True), "resume": ("resume", False), "tool": ("tool", True),
            "mcp": ("mcp", True), "pending": ("pending", False), "cancel": ("cancel", False),
            "history": ("history", False), "gc": ("gc", False), "key": ("key", False),
            "migrate": ("migrate", True), "graph": ("graph", True), "doctor": ("doctor", True),
            "completion": ("completion", False)}


def _text_only(args: list[str]) -> int | None:
    """Help and the version, answered before the signal handlers and the shared CLI helpers
    load (tests/machine/test_import_budget.py); None for every other command line."""
    head, rest = (args[0], args[1:]) if args else ("help", [])
    if head in HELP_FLAGS:
        head, rest = "help", []
    if head in SPECS and set(rest) & set(HELP_FLAGS):
        from vm.cli.help import subcommand_help

        sys.stdout.write(subcommand_help(head))
        return 0
    if head == "help":
        from vm.cli.help import cmd_help

        return cmd_help(rest)
    if head in ("--version", "-v", "version"):
        return _version(rest if head == "version" else [])
    return None


def _dispatch(args: list[str], frontend: Frontend | None) -> int:
    head, rest = args[0], args[1:]
    if head in HANDLERS:
        import importlib

        module, takes_frontend = HANDLERS[head]
        handler = getattr(importlib.import_module(f"vm.cli.{module}"),
                          "main" if head == "mcp" else f"cmd_{head}")
        return handler(rest, frontend) if takes_frontend else handler(rest)
    if set(rest) & set(HELP_FLAGS):  # a pipeline with --help: the overview, as the original
        from vm.cli.help import cmd_help

        return cmd_help([])
    from vm.cli.frontdoor import mistyped_subcommand

    refused = mistyped_subcommand(head)  # SPEC 9.20: before the pipeline fallback
    if refused is not None:
        from vm.cli.common import refuse

        return refuse(refused, tool=_tool_mode(args))
    from vm.cli.run import cmd_run

    return cmd_run(args, frontend)


def _version(rest: list[str]) -> int:
    """`lobster version`: the version; words after it are ignored, as the original ignores
    them, an unknown option is refused (SPEC 9.20)."""
    from vm.cli.flags import UsageError, parse

    try:
        parse(SPECS["version"], rest)
    except UsageError as exc:
        from vm.cli.common import refuse

        return refuse(exc)
    sys.stdout.write(__version__ + "\n")
    return 0


def _standard_fds() -> None:
    """A stdin, stdout or stderr that was closed (`2>&-`) becomes the null device: nothing the
    process opens lands on fds 0-2 (a child would inherit it), and writing there is no error."""
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, mode)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                          closefd=False)


def _install_signal_handlers() -> None:
    """SIGINT, SIGTERM, SIGHUP: kill every child's process group, leave every claim this process
    holds in doubt with the signal as its reason, say so, exit 128+N. State writes are atomic,
    so a checkpoint is either whole or absent."""
    import signal

    def stop(signum, _frame):
        from vm.host.children import defer_while_spawning, kill_all, wait_for_spawns
        from vm.host.store.lifecycle import abandon_all

        if defer_while_spawning(lambda: stop(signum, None)):
            return  # this thread was starting a child: stop once it can be killed
        kill_all()
        wait_for_spawns()  # a child another thread was starting: kill it too
        kill_all()
        abandon_all(f"the resume was stopped by {signal.Signals(signum).name}")
        if sys.stderr.isatty():  # a progress line may stand there: clear it first
            sys.stderr.write("\r\x1b[K")
        sys.stderr.write(f"Received {signal.Signals(signum).name}\n")
        sys.stderr.flush()
        os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(leave(main()))
