"""Every `lobster` subcommand's command line: its synopsis, what it does, and the table of its
flags, which its parser (vm/cli/flags.py) and its help both read. Stdlib only (and `vm`'s
cheap top level): `lobster help X` and `lobster X --help` load nothing of the machine."""

from __future__ import annotations

from vm import install_hint
from vm.cli.flags import Flag, Spec

TIMEOUT = Flag("timeout", "T", "stop after T: milliseconds (30000) or a duration (30s, 2m)")
EVENTS = Flag("events", "jsonl", "every run event as one JSON line on stderr")
TTL = Flag("checkpoint-ttl", "D", "a checkpoint this run parks expires after D (30m, 12h, 7d)")
FORMAT = Flag("format", "text|json", "text for people (default), json for programs")

RUN = Spec(
    "run", "lobster run [options] (PIPELINE | FILE | --file FILE)\n       lobster PIPELINE",
    "run a pipeline or a workflow file, to its end or to its first gate",
    "Run a pipeline, or a workflow file, to its end or to its first approval or input gate.\n"
    "Options go before the pipeline, or after a single FILE or quoted PIPELINE.",
    (Flag("mode", "human|tool", "human (default): the output as text, progress on a terminal; "
                                "tool: one JSON envelope on stdout"),
     Flag("file", "FILE", "a workflow file, whatever its name looks like"),
     Flag("args-json", "J", "a JSON object of the workflow's args (over its defaults)"),
     Flag("dry-run", "", "print what would run, and run nothing"),
     TIMEOUT,
     Flag("quiet", "", "human mode: no resume hint on stderr"),
     Flag("progress", "", "human mode: progress lines on stderr even when it is not a terminal"),
     EVENTS._replace(help=EVENTS.help + " (either mode)"),
     TTL),
    (("PIPELINE", "pipeline text, one argument ('exec --json --shell \"ls\" | head --n 2') "
                  "or several words joined"),
     ("FILE", "a workflow file (.lobster, .yaml, .yml, .json), a compiled program (.lbc, from "
              "`lobsterc compile`) or a file of pipeline text (.pipeline)")),
    "At a gate the run stops and saves its state: human mode prints the `lobster resume`\n"
    "command that continues it. Exit codes: 0 (also when waiting at a gate), 1 runtime error,\n"
    "2 bad input.")

RESUME = Spec(
    "resume", "lobster resume (--token T | --id ID) (--approve yes|no | --response-json J | "
              "--cancel)\n                      [--timeout T] [--events jsonl] "
              "[--checkpoint-ttl D]",
    "continue a run stopped at a gate: approve, answer or cancel it",
    "Continue a run that stopped at a gate, and print its envelope (as `--mode tool` does).\n"
    "Name the run by --token or --id, and give exactly one answer: --approve, --response-json\n"
    "or --cancel.",
    (Flag("token", "T", "the resumeToken of the envelope that stopped"),
     Flag("id", "ID", "instead of a token: any id `lobster pending` lists (the approvalId of "
                      "an approval, the state key of any gate)"),
     Flag("approve", "yes|no", "the decision on an approval request (also y/n, true/false); "
                               "no ends the run, cancelled", aliases=("decision",)),
     Flag("response-json", "J", "the answer to an input request: JSON valid under its "
                                "responseSchema"),
     Flag("cancel", "true", "end the run without answering", optional=True),
     TIMEOUT, EVENTS,
     Flag("checkpoint-ttl", "D", "the next checkpoint of the resumed run expires after D"),
     Flag("mode", "tool", "accepted as `run` takes it, and ignored: resume always prints the "
                          "envelope")),
    footer="A wrong answer is refused and the checkpoint stays; a token works once.")

TOOL = Spec(
    "tool", "lobster tool [REQUEST | -]",
    "one tool call: request JSON in, envelope out",
    "Read one tool request (JSON: an argument, or stdin when it is `-` or absent), run or\n"
    "resume it, and print its envelope. The request's fields are listed below.",
    args=(("REQUEST", "the request as JSON text"), ("-", "read the request from stdin")))

MCP = Spec(
    "mcp", "lobster mcp",
    "serve run, resume, pending and history as MCP tools over stdio",
    "Serve Lobster as an MCP server over stdin/stdout: the tools lobster_run and lobster_resume\n"
    "take the fields of `lobster tool`'s run and resume requests and return its envelope;\n"
    "lobster_pending lists the checkpoints that wait, as `lobster pending --format json` does;\n"
    "lobster_history shows one checkpoint's record, as `lobster history ID --format json` does.\n"
    "Runs start in the directory the server was started in; state lives in LOBSTER_STATE_DIR\n"
    "(or LOBSTER_STORE), as for every lobster command. Needs the mcp extra:\n"
    + install_hint("mcp") + ".")

PENDING = Spec(
    "pending", "lobster pending [--format text|json] [--older-than DURATION [--cancel]]",
    "the checkpoints waiting, being resumed, or in doubt",
    "List the checkpoints that wait for a decision (waiting or expired), those being resumed\n"
    "now (claimed: their resume holds a live lease) and those whose resume failed, was cut off\n"
    "or stopped renewing its lease (in_doubt, with the reason and the step reached). Every id\n"
    "listed works with `lobster resume --id`, `lobster cancel --id` and `lobster history`.",
    (FORMAT,
     Flag("older-than", "DURATION", "only those at least that old (30m, 12h, 7d, 1w, 1h30m)"),
     Flag("cancel", "", "with --older-than: cancel those (never a claimed one)")))

CANCEL = Spec(
    "cancel", "lobster cancel --id ID",
    "end one checkpoint (approval id or state key)",
    "End one checkpoint, by its approval id or the state key `lobster pending` lists: the same\n"
    "as `lobster resume --id ID --cancel`. A claim in doubt (or whose lease expired) is\n"
    "cleared; one being resumed under a live lease is not (T435). The checkpoint's record\n"
    "stays, cancelled. The answer is the JSON envelope.",
    (Flag("id", "ID", "the approval id or state key of the checkpoint"),
     FORMAT._replace(help="accepted for symmetry with the other store commands; the answer "
                          "is the JSON envelope either way")))

HISTORY = Spec(
    "history", "lobster history ID [--format text|json]",
    "one checkpoint's record: halted, claimed, how it ended",
    "Show one checkpoint's record: where it is now (waiting, expired, claimed, finished,\n"
    "in_doubt, cancelled) and what happened to it: halted (program and items hashes, when),\n"
    "claimed (when, by which process, the decision and the approver's identity), and how it\n"
    "ended. Ended checkpoints are kept for LOBSTER_TOMBSTONE_TTL (default 7d), then\n"
    "`lobster gc` removes their records.",
    (Flag("id", "ID", "the same as the ID argument"), FORMAT),
    (("ID", "an approval id, a resume token, or the state key `lobster pending` lists"),))

GC = Spec(
    "gc", "lobster gc [--dry-run] [--format text|json] [--grace DURATION]",
    "remove what no checkpoint needs",
    "Remove what no checkpoint needs: programs no checkpoint refers to, old cache entries,\n"
    "leftovers of interrupted writes, and checkpoints expired longer than the grace ago.\n"
    "Safe while other lobster processes run.",
    (Flag("dry-run", "", "list what would be removed, remove nothing"), FORMAT,
     Flag("grace", "DURATION", "how long past its expiry a checkpoint is kept (default 1d)")))

KEY = Spec(
    "key", "lobster key list|rotate [--format text|json]",
    "the signing key set: list it, or add a new key",
    "The signing key set of the state store: tokens and checkpoints are signed with the newest\n"
    "key and verified with any of them. After a key was lost, `rotate` starts a new one (the\n"
    "checkpoints the lost key signed can only be cancelled).",
    (FORMAT,),
    (("list", "each key's number and id (never the key), when it was made, and how many "
              "waiting checkpoints it signed"),
     ("rotate", "add a key that signs from now on; the old ones verify until their "
                "checkpoints end, then `lobster gc` retires them")))

MIGRATE = Spec(
    "migrate", "lobster migrate --to NEW.lobster (--id ID | --program HASH) [--dry-run]\n"
               "                       [--accept FINDING-ID]... [--format text|json]",
    "move paused runs onto a reviewed new version of their workflow",
    "Move paused runs onto a reviewed new version of their workflow. Each move is checked\n"
    "first: the gate exists in the new program, unchanged; the steps before it are the same;\n"
    "every result the new program reads after it is in the paused run. The safety diff of\n"
    "what changes after the gate is printed; a weakening in it refuses the move until\n"
    "accepted (--accept ID, as `lobsterc diff`).",
    (Flag("to", "NEW", "the new version of the workflow file"),
     Flag("id", "ID", "one checkpoint: its approval id or state key"),
     Flag("program", "HASH", "every paused run of this program (at least 8 hex digits)"),
     Flag("dry-run", "", "check and print, change nothing"),
     Flag("accept", "FINDING-ID", "accept a weakening the safety diff found (comma-separated "
                                  "ids too)", repeat=True),
     FORMAT),
    footer="Exit 0 when every chosen run was migrated (or is sound, with --dry-run), "
           "1 otherwise.")

GRAPH = Spec(
    "graph", "lobster graph [--file] FILE [--format mermaid|dot|ascii] [--args-json J]",
    "draw a workflow's steps and the data flow between them",
    "Print a workflow file's steps and the data flow between them (nothing is run).",
    (Flag("file", "FILE", "the workflow file (or give it as the argument)"),
     Flag("format", "mermaid|dot|ascii", "mermaid (default), dot, or ascii"),
     Flag("args-json", "J", "a JSON object of args for ${arg} in the labels, over the file's "
                            "defaults")),
    (("FILE", "a workflow file (.lobster, .yaml, .yml, .json)"),))

DOCTOR = Spec(
    "doctor", "lobster doctor [--format text|json] [NOTE...]",
    "check that this installation runs pipelines, and show its setup",
    "Run one pipeline and check the state store, then report the version, state dir,\n"
    "store (and whether it answers), shell, extras installed and limits in force. On a\n"
    "terminal the report is printed for people; on a pipe the output is the envelope, as\n"
    "the original prints it (--format text or json chooses). Exit 1 (doctor_error,\n"
    "T499) when something is wrong.",
    (Flag("format", "text|json", "text: the report for people, instead of the envelope; json: "
                                 "the envelope, its item carrying the report"),),
    (("NOTE", "words copied into the envelope's `notes`"),))

COMPLETION = Spec(
    "completion", "lobster completion bash|zsh",
    "a shell completion script (source it)",
    "Print a completion script for bash or zsh: `source <(lobster completion bash)`.",
    args=(("bash|zsh", "the shell"),))

VERSION = Spec("version", "lobster version", "print the version",
               "Print this installation's version (also `lobster --version`, `lobster -v`).")

HELP = Spec(
    "help", "lobster help [COMMAND]",
    "this overview, a subcommand's help, or a pipeline command's",
    "Without COMMAND: the overview of every subcommand. With one: its help (the same as\n"
    "`lobster COMMAND --help`), or a pipeline command's help made from its signature.",
    args=(("COMMAND", "a subcommand (run, resume, ...) or a pipeline command (exec, head, ...)"),))

SPECS: dict[str, Spec] = {s.name: s for s in (
    RUN, RESUME, TOOL, MCP, PENDING, CANCEL, HISTORY, GC, KEY, MIGRATE, GRAPH, DOCTOR,
    COMPLETION, VERSION, HELP)}
