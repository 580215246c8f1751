"""The terminal face of `lobster run` in human mode, when stdin and stderr are both terminals:
a progress line with counts, halts that show what waits and then ask (approvals and input
gates alike), and a calm end when the answer is no. On a pipe none of this runs: human mode
keeps the original's output there (SPEC 9.13). `detail_lines` is the exception: the extra
lines of an error's detail follow the original's `Error:` line everywhere (SPEC 9.19)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from typing import Any

from vm.core import js, json_read, json_write
from vm.core.schema_errors import SchemaRecursion, error_detail, first_error

ITEMS_SHOWN = 5  # items (or preview lines) shown before a question; the rest are counted
VALUES_SHOWN = 20  # allowed enum values an error lists
DEFAULT_WIDTH = 80
CLEAR = "\r\x1b[K"  # back to the start of the line, and erase it
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # would move the cursor, recolour, retitle...


def width_of(stream: Any) -> int:
    """The terminal's width in columns (DEFAULT_WIDTH when it cannot be told)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, ValueError, OSError):
        return DEFAULT_WIDTH


def fit(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters: runs of whitespace (newlines too)
    become one space, other control characters are shown escaped (`\\x1b`: items are data,
    never terminal commands), and a longer text is cut with an ellipsis."""
    line = _SPACE.sub(" ", text).strip()
    line = safe(line)
    width = max(width, 8)
    return line if len(line) <= width else line[: width - 1] + "…"


def safe(text: str) -> str:
    """`text` with its control characters but newlines shown escaped (as `fit` shows them):
    for prompts, which may come from a step's output."""
    return _CONTROL.sub(lambda m: m.group() if m.group() == "\n" else
                        f"\\x{ord(m.group()):02x}", text)


def counted(lines: list[str], width: int, what: str = "more") -> list[str]:
    """The first ITEMS_SHOWN of `lines`, indented and fitted, then `... and K more`."""
    shown = ["  " + fit(line, width - 2) for line in lines[:ITEMS_SHOWN]]
    if len(lines) > ITEMS_SHOWN:
        shown.append(f"  ... and {len(lines) - ITEMS_SHOWN} {what}")
    return shown


# approvals ----------------------------------------------------------------------------------
def approval_lines(request: dict, width: int) -> list[str]:
    """What an approval waits on, before its `[y/N]`: the items, one line each (strings as
    they are, other values as compact JSON), else the preview's lines."""
    items = request.get("items") or []
    if not isinstance(items, list):  # a workflow step printed its own request with these
        items = [items]
    if items:
        noun = "item" if len(items) == 1 else "items"
        return [f"{len(items)} {noun}:",
                *counted([json_write.joined_text([i], "") for i in items], width)]
    preview = request.get("preview")
    if isinstance(preview, str) and preview.strip():
        lines = preview.strip().splitlines()
        return ["preview:", *counted(lines, width, "more lines")]
    return []


def approved(answer: str) -> bool:
    """`y` or `yes` (any case) approves; anything else, an empty line too, declines."""
    return answer.strip().lower() in ("y", "yes")


# input gates --------------------------------------------------------------------------------
def type_text(schema: Any) -> str:
    """A schema's type in a few words: `string`, `integer|null`, `one of: "a", "b"`,
    `array of string`."""
    if not isinstance(schema, dict):
        return "any value"
    if isinstance(schema.get("enum"), list):
        return "one of: " + ", ".join(json_write.json_compact(v) for v in schema["enum"])
    if "const" in schema:
        return f"exactly {json_write.json_compact(schema['const'])}"
    kind = schema.get("type")
    text = "|".join(kind) if isinstance(kind, list) else kind if isinstance(kind, str) else ""
    if text == "array" and isinstance(schema.get("items"), dict):
        text = f"array of {type_text(schema['items'])}"
    return text or ("object" if "properties" in schema else "any value")


def field_lines(schema: Any) -> list[str]:
    """One line per field of an object schema (name, type, required, default, description);
    one line for any other schema."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not props:
        return [f"  answer: {type_text(schema)}"]
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    pad = max(len(name) for name in props)
    lines = []
    for name, sub in props.items():
        parts = [type_text(sub)]
        if name in required:
            parts.append("required")
        if isinstance(sub, dict) and "default" in sub:
            parts.append(f"default {json_write.json_compact(sub['default'])}")
        if isinstance(sub, dict) and isinstance(sub.get("description"), str):
            parts.append(sub["description"])
        lines.append(safe(f"  {name.ljust(pad)}  " + ", ".join(parts)))
    return lines


def single_string_field(schema: Any) -> str | None:
    """The field a plain answer fills: "" when the schema itself is a string, the name of the
    one required property when it holds a string; None when an answer must be JSON."""
    if _holds_string(schema):
        return ""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    if len(required) == 1 and _holds_string(schema["properties"].get(required[0])):
        return required[0]
    return None


def _holds_string(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return all(isinstance(v, str) for v in schema["enum"])
    return schema.get("type") == "string"


def defaults_of(request: dict) -> tuple[bool, Any]:
    """(whether an empty answer has a value, that value): the request's `defaults`, else the
    schema's own defaults when they cover every required field."""
    if "defaults" in request:
        return True, request["defaults"]
    schema = request.get("responseSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return False, None
    given = {n: s["default"] for n, s in props.items() if isinstance(s, dict) and "default" in s}
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    return (bool(given) and all(n in given for n in required)), given


def input_lines(request: dict, width: int) -> list[str]:
    """What an input gate asks, before its `> `: the prompt, the subject, the fields, and how
    to answer."""
    schema = request.get("responseSchema")
    lines = [safe(str(request.get("prompt") or "Input required"))]
    subject = request.get("subject")
    if subject is not None:
        text = subject.get("text") if isinstance(subject, dict) and "text" in subject else None
        subject_lines = (str(text).splitlines() if text is not None
                         else [json_write.to_text(subject)])
        lines += ["subject:", *counted(subject_lines, width, "more lines")]
    lines += ["fields:" if isinstance(schema, dict) and schema.get("properties") else "expects:",
              *field_lines(schema)]
    single = single_string_field(schema)
    how = "answer with JSON"
    if single:
        how = f"answer with the {single}, or with JSON"
    elif single == "":
        how = "answer with the text, or with JSON"
    has_defaults, defaults = defaults_of(request)
    if has_defaults:
        how += f"; an empty line takes {fit(json_write.json_compact(defaults), width // 2)}"
    return [*lines, fit(how, width)]


def read_answer(text: str, request: dict) -> tuple[bool, Any, str | None]:
    """(valid, value, why not) for one line typed at an input gate: JSON, or a plain value
    for a single string field; the first reading the schema accepts wins."""
    schema = request.get("responseSchema")
    line = text.strip()
    if not line:
        has_defaults, defaults = defaults_of(request)
        if has_defaults:
            return _checked(schema, defaults)
        return False, None, "an answer is required"
    readings: list = []
    problem = None
    try:
        readings.append(json_read.json_loads(line))
    except ValueError as exc:
        problem = f"not JSON ({exc})"
    single = single_string_field(schema)
    if single is not None:
        plain = readings[0] if readings and isinstance(readings[0], str) else line
        readings.append(plain if single == "" else {single: plain})
    try:
        for value in readings:
            if first_error(schema, value) is None:
                return True, value, None
    except SchemaRecursion as exc:
        return False, None, str(exc)
    if not readings:
        return False, None, problem
    structured = [r for r in readings[:1] if isinstance(r, (dict, list))]
    return _checked(schema, (structured or readings)[0 if structured else -1])


def _checked(schema: Any, value: Any) -> tuple[bool, Any, str | None]:
    try:
        problem = first_error(schema, value)
    except SchemaRecursion as exc:
        return False, None, str(exc)
    if problem is None:
        return True, value, None
    where, message = problem
    why = f"not valid at {where}: {message}"
    detail = error_detail(schema, value)
    if detail:
        why += f"; {allowed_text(detail['allowed'])}"
    return False, None, why


def allowed_text(values: list) -> str:
    shown = ", ".join(json_write.json_compact(v) for v in values[:VALUES_SHOWN])
    more = f" ... and {len(values) - VALUES_SHOWN} more" if len(values) > VALUES_SHOWN else ""
    return f"allowed: {shown}{more}"


# a run's halts, answered ----------------------------------------------------------------------
class Leave(Exception):
    """The person left the question (end of input; an interrupt, where no signal handler
    ends the process first): the run stays waiting."""


def settle(envelope: dict, answer: Callable[[dict, Any], dict], ask: Callable[[str], str],
           say: Callable[[str], None], width: int,
           emitted: Callable[[], bool] = lambda: False) -> dict:
    """Answer each halt of the run at the terminal until it ends, fails, is declined, or the
    person leaves a question or the answer is refused (then the envelope of the halt, still
    waiting, is returned). `answer(halt, decision)` resumes with the decision; `ask(prompt)`
    reads one line ('' at the end of input); `say` writes lines to stderr; `emitted()`: the
    current halt asked not to be asked (`--emit`). A halt is shown as its JSON carries it
    (an undefined item null, an undefined property absent)."""
    from vm.service.protocol.envelope import as_json_data
    from vm.service.protocol.resuming import Decision

    while (envelope.get("ok") and envelope.get("status") in ("needs_approval", "needs_input")
           and not emitted()):
        shown_as = as_json_data(envelope)  # a halt's output is empty: its request is walked
        approval = shown_as.get("requiresApproval")
        try:
            if approval:
                shown = approval_lines(approval, width)
                if shown:
                    say("\n".join(shown))
                # a prompt a step printed may be any JSON value: shown as JavaScript shows it
                prompt = f"{safe(js.to_string(approval.get('prompt')))} [y/N] "
                decision = Decision(approve=approved(_line(ask, prompt)))
                halt = approval
            else:
                halt = shown_as.get("requiresInput") or {}
                decision = Decision(response=_ask_input(halt, ask, say, width),
                                    has_response=True)
        except Leave:
            say("")
            return envelope
        answered = answer(halt, decision)
        if not answered.get("ok") and answered["error"].get("code") in STILL_WAITS:
            # the answer was refused (an approver rule, say): the checkpoint still waits
            say(f"lobster: {answered['error']['message']}")
            return envelope
        envelope = answered
    return envelope


def _ask_input(request: dict, ask: Callable[[str], str], say: Callable[[str], None],
               width: int) -> Any:
    say("\n".join(input_lines(request, width)))
    while True:
        valid, value, why = read_answer(_line(ask, "> "), request)
        if valid:
            return value
        say(f"  {why}; try again")


def _line(ask: Callable[[str], str], prompt: str) -> str:
    try:
        text = ask(prompt)
    except (KeyboardInterrupt, EOFError):
        raise Leave from None
    if not text:  # end of input (an empty line is "\n")
        raise Leave
    return text


# refusals of an answer made before the checkpoint is claimed: it still waits, and the halt is
# shown again; any other error (the token went bad, the resume failed) is the answer's end
STILL_WAITS = frozenset({"E510", "E511", "E512", "E513"})


# progress -----------------------------------------------------------------------------------
def progress_text(event: dict, counts: str) -> str | None:
    """One progress line: `lobster: step 2/3 · item 4/10 · rollout/check started`."""
    from vm.engine.events import describe

    text = describe(event)  # type: ignore[arg-type]
    if text is None and event.get("type") == "stderr":
        text = f"lobster: step {event.get('step')} | {event.get('line', '')}"
    if text is None:
        return None
    body = text.removeprefix("lobster: step ")
    return f"lobster: {counts} · {body}" if counts else text


def counts_of(event: dict) -> str | None:
    """`step 2/3` and `item 4/10` from a `started` event; None for other events."""
    if event.get("type") != "started" or not event.get("steps"):
        return None
    text = f"step {event.get('position')}/{event['steps']}"
    if event.get("items"):
        text += f" · item {event.get('item')}/{event['items']}"
    return text


class Progress:
    """The run's events as one line rewritten in place on the terminal, with counts; cleared
    before a question and at the end."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.shown = False
        self.paused = False
        self.counts = ""
        self._lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        with self._lock:
            counts = counts_of(event)
            if counts is not None:
                self.counts = counts
            elif "/" not in str(event.get("step")):  # a top-level step: no loop's item
                self.counts = self.counts.split(" · ")[0]
            text = progress_text(event, self.counts)
            if text is None or self.paused:
                return
            self.stream.write(CLEAR + fit(text, width_of(self.stream) - 1))
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        """Clear the line."""
        with self._lock:
            if self.shown:
                self.stream.write(CLEAR)
                self.stream.flush()
                self.shown = False

    def pause(self) -> None:
        """Clear the line and show nothing until `resume` (a question has the terminal)."""
        self.close()
        with self._lock:
            self.paused = True

    def resume(self) -> None:
        with self._lock:
            self.paused = False


# the detail of an error ---------------------------------------------------------------------
def detail_lines(error: dict) -> list[str]:
    """The lines an error's `detail` adds after the original's message: where JSON stopped
    parsing, a glimpse of output that was not JSON, what was wrong with a reply, the allowed
    values."""
    detail = error.get("detail")
    if not isinstance(detail, dict):
        return []
    lines = []
    if "excerpt" in detail:
        shown = json_write.json_compact(detail["excerpt"])
        more = detail.get("chars", 0) - len(detail["excerpt"])
        lines.append(f"  output: {shown}" + (f" ... ({more} more characters)" if more > 0
                                              else ""))
    if "line" in detail:
        char = detail.get("char")
        what = "the end of the text" if char is None else json_write.json_compact(char)
        lines.append(f"  at line {detail['line']}, column {detail['column']}: {what} "
                     f"({detail.get('reason')})")
    elif "reason" in detail:  # what was wrong with a reply (an LLM adapter's envelope)
        lines.append(f"  reason: {detail['reason']}")
    if "allowed" in detail:
        lines.append(f"  at {detail.get('path', '/')}: {allowed_text(detail['allowed'])}")
    return lines
