"""Every error and warning code Lobster reports: its title and the envelope type it travels in.

Ranges: E0xx requests, E1xx pipeline syntax, E2xx compile checks, W3xx lint warnings,
T4xx runtime traps, E5xx tokens and resume decisions. A code is wire format: never reuse
one for another meaning. tests/service/test_codes.py fails on a code used anywhere that is not here.
"""

from __future__ import annotations

PARSE = "parse_error"
RUNTIME = "runtime_error"
LINT = "lint"  # warnings: never in an envelope, only in `lobsterc lint`
DOCTOR = "doctor_error"


class Code:
    """A code's title and the envelope type it travels in. (A plain class: a NamedTuple is
    built with eval, which every start-up would pay for; this table is read by `--help`.)"""

    __slots__ = ("envelope", "title")

    def __init__(self, title: str, envelope: str) -> None:
        self.title, self.envelope = title, envelope

    def __repr__(self) -> str:
        return f"Code({self.title!r}, {self.envelope!r})"


CODES: dict[str, Code] = {
    # requests
    "E001": Code("invalid tool request", PARSE),
    "E002": Code("tool request is not JSON", PARSE),
    "E003": Code("no compiler installed", RUNTIME),
    "E004": Code("invalid checkpoint TTL or duration", RUNTIME),
    "E005": Code("--file names no workflow file", PARSE),
    "E006": Code("request over the size limit", PARSE),
    "E007": Code("JSON nested too deep", PARSE),
    "E008": Code("unknown tool request field", PARSE),
    "E009": Code("text that is not Unicode (a lone surrogate or bytes that are not UTF-8)", PARSE),
    "E010": Code("an embedding Options value that is not a number in its bounds", RUNTIME),
    # the lobster command line
    "E020": Code("unknown --mode", PARSE),
    "E021": Code("invalid --timeout", PARSE),
    "E022": Code("unknown --events format", PARSE),
    "E023": Code("a .lbc or .pipeline file that cannot be read or loaded", PARSE),
    "E024": Code("unknown shell for completion", PARSE),
    "E025": Code("unknown command-line option", PARSE),
    "E026": Code("a command-line path that names no file", PARSE),
    "E027": Code("unknown subcommand", PARSE),
    "E028": Code("unexpected command-line argument", PARSE),
    # pipeline syntax
    "E101": Code("empty pipeline", PARSE),
    "E102": Code("unclosed quote", PARSE),
    "E103": Code("empty command stage", PARSE),
    "E104": Code("invalid pipeline syntax", PARSE),
    "E105": Code("pipeline text over the size limit", PARSE),
    # compile checks (the original reports these while running, as runtime errors)
    "E201": Code("unknown command", RUNTIME),
    "E202": Code("unknown flag", RUNTIME),
    "E203": Code("missing required argument", RUNTIME),
    "E204": Code("invalid argument value", RUNTIME),
    "E205": Code("argument the command never reads", RUNTIME),
    "E210": Code("invalid workflow file", RUNTIME),
    "E211": Code("unknown step reference", RUNTIME),
    "E212": Code("invalid condition", RUNTIME),
    "E213": Code("invalid JSON Schema", RUNTIME),
    "E214": Code("gate inside a workflow pipeline step", RUNTIME),
    "E215": Code("sub-workflow path is not literal", RUNTIME),
    "E216": Code("sub-workflow cycle", RUNTIME),
    "E217": Code("unknown key in a workflow file", RUNTIME),
    "E218": Code("unknown step result field", RUNTIME),
    "E230": Code("workflow file over a resource limit", RUNTIME),
    # lint warnings
    "W301": Code("reference spliced into a shell line", LINT),
    "W302": Code("step without a timeout", LINT),
    "W303": Code("unused arg", LINT),
    "W304": Code("condition that is always true", LINT),
    "W305": Code("step that never runs", LINT),
    "W306": Code("side effect without an approval gate", LINT),
    "W307": Code("unknown effects value", LINT),
    "W308": Code("JSON Schema keyword the validator ignores", LINT),
    "W309": Code("step reference spliced into a shell line", LINT),
    "W310": Code("reference spliced into an exec stage's shell text", LINT),
    # runtime traps
    "T401": Code("command failed", RUNTIME),
    "T410": Code("child process exited non-zero", RUNTIME),
    "T411": Code("command not found", RUNTIME),
    "T412": Code("child process could not run", RUNTIME),
    "T413": Code("value an external CLI would misread (github.pr.monitor's pr is not a positive "
                 "integer)", RUNTIME),
    "T420": Code("timed out", RUNTIME),
    "T421": Code("child output over the cap", RUNTIME),
    "T422": Code("run cancelled", RUNTIME),
    "T423": Code("envelope over maxStdoutBytes", RUNTIME),
    "T424": Code("checkpoint cannot be stored", RUNTIME),
    "T425": Code("input request over LOBSTER_MAX_TOOL_ENVELOPE_BYTES", RUNTIME),
    "T430": Code("resume state not found", RUNTIME),
    "T431": Code("resume state corrupt", RUNTIME),
    "T432": Code("checkpoint claimed by a resume that did not finish", RUNTIME),
    "T433": Code("checkpoint expired", RUNTIME),
    "T434": Code("checkpoint not written by this store", RUNTIME),
    "T435": Code("checkpoint being resumed now (its claim's lease is live)", RUNTIME),
    "T436": Code("checkpoint already resumed, cancelled or expired (its record says how and when)",
                 RUNTIME),
    "T437": Code("claim fenced: its lease lapsed and it was cancelled or taken over; the "
                 "holder stopped before its next step", RUNTIME),
    "T440": Code("unknown step reference at run time", RUNTIME),
    "T441": Code("for_each source is not an array", RUNTIME),
    "T450": Code("state store failed", RUNTIME),
    "T451": Code("signing key set lost while checkpoints need it", RUNTIME),
    "T452": Code("signing key unusable (too short or long, open to others, not a file)", RUNTIME),
    "T460": Code("cost limit reached", RUNTIME),
    "T470": Code("server busy: too many runs and resumes at once", RUNTIME),
    "T497": Code("standard output could not be written (disk full, device error)", RUNTIME),
    "T498": Code("internal error (a bug in Lobster; nothing was consumed by it)", RUNTIME),
    "T499": Code("environment check failed", DOCTOR),
    # tokens and resume decisions
    "E501": Code("invalid resume token", PARSE),
    "E502": Code("token not signed by this state directory", PARSE),
    "E503": Code("approval id not found", PARSE),
    "E504": Code("no checkpoint of that id in the store (history)", PARSE),
    "E505": Code("approval id already used by a resume that ended (its record says how)", PARSE),
    "E510": Code("approval resume without a decision", PARSE),
    "E511": Code("input resume without a response", PARSE),
    "E512": Code("response fails the input schema", PARSE),
    "E513": Code("approver identity refused", PARSE),
}


# the original's words for a run, step or call past its deadline (T420), written once
TIMED_OUT = "lobster runtime timed out"


def envelope_type(code: str) -> str:
    """The envelope `error.type` a code is reported with."""
    return CODES[code].envelope


def internal_error_message(exc: BaseException) -> str:
    """The T498 message of an exception nothing else caught: a bug of ours, never a traceback
    (the envelope's in vm.service, and `lobsterc`'s one line)."""
    if isinstance(exc, RecursionError):
        what = "input nested too deeply"
    elif isinstance(exc, MemoryError):
        what = "out of memory"
    else:
        what = f"{type(exc).__name__}: {exc}"
    return f"internal error ({what[:500]}); this is a bug in Lobster, please report it"
