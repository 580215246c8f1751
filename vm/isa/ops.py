"""Operand payloads: the typed constant-pool records that instructions name by index.

The codec writes each one as a map tagged with its class name under `$type`; plain JSON
constants (conditions, arg defaults, renderer names, a cost limit, a stdin reference) stay
plain. Class and field names are wire format.
"""

from typing import Any

from attrs import field, frozen


def _as_tuple(value: Any) -> tuple:
    return tuple(value)


@frozen
class Stage:
    """A stdlib command with its parsed flags and positionals; `templated` words are rendered
    against args and step results when the stage runs."""

    command: str
    flags: dict[str, Any]
    positionals: tuple[str, ...] = field(converter=_as_tuple)
    templated: bool = False


@frozen
class Exec:
    """A child process: a shell line or an argv; `json` parses its stdout as JSON lines."""

    json: bool = False
    shell: str | None = None
    argv: tuple[str, ...] | None = None
    stdin: str | None = None  # raw | json | jsonl
    templated: bool = False

    def spec(self) -> dict[str, Any]:
        """The shape the exec command takes."""
        out: dict[str, Any] = {"json": self.json}
        if self.shell is not None:
            out["shell"] = self.shell
        else:
            out["argv"] = list(self.argv or ())
        if self.stdin is not None:
            out["stdin"] = self.stdin
        return out


@frozen
class Shell:
    """A workflow shell step: its (templated) line, stdin reference, env and cwd."""

    run: str
    stdin: Any = None
    env: dict[str, str] = field(factory=dict)
    cwd: str | None = None


@frozen
class LoadStdin:
    """The start of a workflow pipeline step: its stdin reference, env and cwd."""

    stdin: Any = None
    env: dict[str, str] = field(factory=dict)
    cwd: str | None = None


@frozen
class Loop:
    """A for_each: the list it walks, the names an iteration binds, its own sub-steps."""

    source: Any
    item_var: str = "item"
    index_var: str = "index"
    batch_size: int = 1
    pause_ms: int = 0
    steps: tuple[str, ...] = field(default=(), converter=_as_tuple)


@frozen
class Call:
    """A sub-workflow call: its args (templated), the callee's defaults, env and cwd."""

    args: dict[str, Any] = field(factory=dict)
    defaults: dict[str, Any] = field(factory=dict)
    env: dict[str, str] = field(factory=dict)
    cwd: str | None = None


@frozen
class Retry:
    max: int = 1
    backoff: str = "fixed"  # fixed | exponential
    delay_ms: int = 1000
    max_delay_ms: int = 30000
    jitter: bool = False


@frozen
class Policy:
    """What TRY does when its block fails or runs too long."""

    on_error: str = "stop"  # stop | continue | skip_rest
    timeout_ms: int | None = None
    retry: Retry | None = None


@frozen
class Branch:
    """One parallel branch: the code region at `start` that runs it (a SHELL, or a pipeline
    from LOAD_STDIN to STORE_PIPELINE) and ends with END_BRANCH."""

    id: str
    start: int = -1


@frozen
class Parallel:
    wait: str = "all"  # all | any
    timeout_ms: int | None = None
    branches: tuple[Branch, ...] = field(default=(), converter=_as_tuple)


@frozen
class Given:
    """A value that was written in the source (None stands for "not given")."""

    value: Any


@frozen
class HaltSite:
    """Everything a HALT_* instruction needs to build its request, known at compile time."""

    id: str
    kind: str  # approval | input
    prompt: str
    preview: bool = False  # approval: attach a preview of the first `limit` items
    limit: int = 5
    schema: Any = None  # input: the JSON Schema of the answer
    subject: bool = False  # input: attach the items as the subject
    emit: bool = False  # halt even where an interactive prompt would be possible
    step: str = ""  # workflow gates: the step whose result the gate reads and records
    items: Given | None = None  # workflow approval: the items to show, instead of the result's
    preview_text: Given | None = None  # workflow approval: the preview to show
    initiated_by: str | None = None  # workflow approval rules; None: from the environment
    required_approver: str | None = None
    require_different_approver: bool | None = None
    defaults: Given | None = None  # workflow input: defaults of the answer
    stdin: Given | None = None  # workflow input: the subject's reference


PAYLOADS: tuple[type, ...] = (Stage, Exec, Shell, LoadStdin, Loop, Call, Policy, Parallel)
