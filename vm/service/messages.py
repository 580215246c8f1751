"""The shapes of tool requests and envelopes, for type checkers and readers.

`vm.service.protocol.handle` takes a `Request` and returns an `Envelope`; at run time both are plain
dicts (JSON objects), so these are TypedDicts and cost nothing. A test holds the request types
to `vm.service.protocol.REQUEST_FIELDS`, the table `handle` validates against, and the envelope types
to what `handle` returns.
"""

from typing import Literal, NotRequired, TypedDict, Union

Json = Union[None, bool, int, float, str, list["Json"], dict[str, "Json"]]
"""A JSON value as Python reads it (`json.loads`): what an envelope's items, prompts and
schemas are."""


class RunRequest(TypedDict):
    """Run a pipeline, or a workflow file, until it ends or reaches its first gate."""

    action: Literal["run"]
    pipeline: str
    """Inline pipeline text, or the path of a workflow file (.lobster, .yaml, .yml, .json)."""
    argsJson: NotRequired[str]
    """A workflow file's args: a JSON object, as text."""
    cwd: NotRequired[str]
    """The run's working directory, relative to `Options.cwd` and inside it."""
    timeoutMs: NotRequired[int]
    """Wall-clock limit of this call in milliseconds (less counts as 200)."""
    maxStdoutBytes: NotRequired[int]
    """Cap on the envelope and on each child's output, in bytes (less counts as 1024)."""
    checkpointTtl: NotRequired[str | int]
    """How long a checkpoint this call parks stays resumable: a duration (`30m`, `7d`) or ms."""


class ResumeRequest(TypedDict):
    """Continue a halted run: name it by `token` or `approvalId`, and give exactly one of
    `approve`, `responseJson`, `cancel`."""

    action: Literal["resume"]
    token: NotRequired[str]
    """The `resumeToken` of the halt."""
    approvalId: NotRequired[str]
    """The short `approvalId` of an approval halt, instead of the token."""
    approve: NotRequired[bool]
    """The decision on an approval request."""
    responseJson: NotRequired[str]
    """The answer to an input request, as JSON text; checked against its `responseSchema`."""
    cancel: NotRequired[Literal[True]]
    """End the halted run `cancelled`, whatever it waits for."""
    timeoutMs: NotRequired[int]
    maxStdoutBytes: NotRequired[int]
    checkpointTtl: NotRequired[str | int]
    """The expiry of the next checkpoint the resumed run parks, if it parks again."""


Request = Union[RunRequest, ResumeRequest]


class ApprovalRequest(TypedDict):
    """What an approval halt asks (`requiresApproval`)."""

    type: Literal["approval_request"]
    prompt: Json
    """A string; a workflow step that printed its own request passes on its prompt as printed
    (any truthy JSON value), and its items and preview too."""
    items: Json
    """The items waiting for the decision (the approve step's input): a list, unless a step
    printed other items."""
    preview: NotRequired[Json]
    """The items as text, when the gate asked for a preview."""
    requiredApprover: NotRequired[str]
    requireDifferentApprover: NotRequired[bool]
    initiatedBy: NotRequired[str]
    resumeToken: str
    approvalId: NotRequired[str]


class InputRequest(TypedDict):
    """What an input halt asks (`requiresInput`)."""

    type: Literal["input_request"]
    prompt: str
    responseSchema: Json
    """The JSON Schema (draft-07) the answer must satisfy."""
    defaults: NotRequired[Json]
    subject: NotRequired[Json]
    """What the question is about (the step's input), when it has one."""
    resumeToken: str


class FinishedEnvelope(TypedDict):
    """A run or resume that ended (`ok`) or was cancelled (`cancelled`)."""

    protocolVersion: int
    ok: Literal[True]
    status: Literal["ok", "cancelled"]
    output: list[Json]
    """The run's output items."""
    requiresApproval: None
    requiresInput: None
    eventsDropped: NotRequired[int]
    """How many events an `Options.on_event` callback too far behind did not hear."""


class ApprovalEnvelope(TypedDict):
    """A run or resume halted at an approval: `requiresApproval` says what it asks."""

    protocolVersion: int
    ok: Literal[True]
    status: Literal["needs_approval"]
    output: list[Json]
    """Empty at a halt."""
    requiresApproval: ApprovalRequest
    requiresInput: None
    eventsDropped: NotRequired[int]


class InputEnvelope(TypedDict):
    """A run or resume halted at an input request: `requiresInput` says what it asks."""

    protocolVersion: int
    ok: Literal[True]
    status: Literal["needs_input"]
    output: list[Json]
    """Empty at a halt."""
    requiresApproval: None
    requiresInput: InputRequest
    eventsDropped: NotRequired[int]


OkEnvelope = Union[FinishedEnvelope, ApprovalEnvelope, InputEnvelope]
"""An `ok: true` envelope; its `status` tells which (a type checker narrows on it)."""


class Location(TypedDict):
    """Where an error was found: the source file (or `<pipeline>`), 1-based line and column."""

    file: str
    line: int
    column: int


class ErrorInfo(TypedDict):
    """An error's kind, words and stable code (see vm.core.codes)."""

    type: Literal["parse_error", "runtime_error"]
    """`parse_error`: the request or its source is wrong (exit 2); `runtime_error`: the run
    failed (exit 1)."""
    message: str
    code: NotRequired[str]
    location: NotRequired[Location]
    checkpoint: NotRequired[dict[str, Json]]
    """A refused resume: the checkpoint's state (`claimed`, `in_doubt`, `finished`,
    `cancelled`, `expired`), when and by whom it was claimed, and how and when it ended."""
    detail: NotRequired[dict[str, Json]]
    """What helps fix the input (the message stays the original's): for JSON that did not
    parse, `line`, `column`, `char` (None: the text ended) and `reason`; for `exec --json`
    output also `excerpt` (its first 200 characters) and `chars`; for a value outside an enum,
    `path` and `allowed`."""


class ErrorEnvelope(TypedDict):
    """A request that failed. Nothing it named was consumed."""

    protocolVersion: int
    ok: Literal[False]
    error: ErrorInfo
    eventsDropped: NotRequired[int]


Envelope = Union[FinishedEnvelope, ApprovalEnvelope, InputEnvelope, ErrorEnvelope]

__all__ = ["Json", "RunRequest", "ResumeRequest", "Request", "ApprovalRequest", "InputRequest",
           "FinishedEnvelope", "ApprovalEnvelope", "InputEnvelope", "OkEnvelope", "Location",
           "ErrorInfo", "ErrorEnvelope", "Envelope"]
