"""Workflow files: YAML 1.2 / JSON text -> plain data with a Span for every value, checked with
the reference's load-time rules (its exact texts, first error wins), then with the JSON Schema."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

from attrs import field, frozen

from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.source import Source, Span
from vm.condition import js_number

__all__ = [
    "WorkflowFile",
    "load_workflow_file",
    "load_workflow_text",
    "validate_workflow",
    "workflow_schema",
    "step_kind",
    "is_approval",
    "is_input",
    "EXTENSIONS",
]

EXTENSIONS = (".lobster", ".yaml", ".yml", ".json")
MAX_TIMEOUT_MS = 2_147_483_647
Path = tuple  # keys and indices from the document root, e.g. ("steps", 2, "run")


@frozen
class WorkflowFile:
    """A loaded workflow file: plain data, plus where every value (and mapping key) came from."""

    path: str
    source: Source
    data: Any = field(eq=False)
    spans: Mapping[Path, Span] = field(eq=False, repr=False)
    key_spans: Mapping[Path, Span] = field(factory=dict, eq=False, repr=False)

    def span_of(self, *path: Any) -> Span:
        """The span of the value at `path`, else of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            span = self.spans.get(tuple(path[:end]))
            if span is not None:
                return span
        return self.source.span(0, len(self.source.text))

    def key_span_of(self, *path: Any) -> Span:
        """The span of the mapping key that names `path`, else span_of(path)."""
        return self.key_spans.get(tuple(path)) or self.span_of(*path)


class OffsetSpans(Mapping):
    """Path -> Span, kept as (start, end) offsets and turned into a Span only when asked for:
    a file that compiles asks for a handful of the hundreds of spans its loader records."""

    __slots__ = ("source", "offsets")

    def __init__(self, source: Source, offsets: dict[Path, tuple[int, int]]) -> None:
        self.source = source
        self.offsets = offsets

    def __getitem__(self, path: Path) -> Span:
        start, end = self.offsets[path]
        return self.source.span(start, end)

    def get(self, path: Path, default: Any = None) -> Any:
        offsets = self.offsets.get(path)
        return default if offsets is None else self.source.span(*offsets)

    def __contains__(self, path: object) -> bool:
        return path in self.offsets

    def __iter__(self) -> Iterator[Path]:
        return iter(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets)


# ---------------------------------------------------------------------------------------------
# loading


def load_workflow_file(path: str) -> WorkflowFile:
    """Read, parse and validate a workflow file. Raises CompileError (E210, runtime_error) with
    the reference's message on the first problem."""
    if not path.lower().endswith(EXTENSIONS):
        raise _file_error("Workflow file must end in .lobster, .yaml, .yml, or .json")
    if not os.path.exists(path):
        raise _file_error(f"Workflow file not found: {path}")
    if not os.path.isfile(path):
        raise _file_error("Workflow path is not a file")
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            text = handle.read()
    except UnicodeDecodeError as exc:
        raise _file_error(f"Workflow file parse error: not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        raise _file_error(f"Workflow file could not be read: {exc.strerror or exc}")
    return load_workflow_text(text, path)


def load_workflow_text(text: str, name: str) -> WorkflowFile:
    """Parse and validate workflow text; `name` (a path) picks the format: .json is JSON,
    anything else YAML 1.2."""
    source = Source(name, text)
    if name.lower().endswith(".json"):
        data, spans, key_spans = _parse_json(source)
    else:
        data, spans, key_spans = _parse_yaml(source)
    wf = WorkflowFile(name, source, data, spans, key_spans)
    diag = validate_workflow(wf)
    if diag is not None:
        raise CompileError([diag], source)
    return wf


def _file_error(message: str) -> CompileError:
    return CompileError([Diagnostic(code="E210", message=message, kind="runtime_error")])


class _ParseError(Exception):
    def __init__(self, what: str, offset: int) -> None:
        super().__init__(what)
        self.what = what
        self.offset = offset


def _syntax_error(source: Source, what: str, offset: int) -> CompileError:
    line, col = source.position(offset)
    span = source.span(offset, offset + 1)
    message = f"Workflow file parse error: {what} at line {line}, column {col}"
    return CompileError([Diagnostic(code="E210", message=message, span=span, kind="runtime_error")], source)


# --- JSON: a small scanner that keeps positions; json.loads decodes each string and number ---

_JSON_WS = re.compile(r"[ \t\n\r]*")
_JSON_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_JSON_WORDS = {"true": True, "false": False, "null": None}


def _parse_json(source: Source) -> tuple[Any, OffsetSpans, OffsetSpans]:
    scanner = _JsonScanner(source.text)
    try:
        data = scanner.document()
    except _ParseError as exc:
        raise _syntax_error(source, exc.what, exc.offset) from None
    except RecursionError:
        raise _syntax_error(source, "nesting too deep", scanner.pos) from None
    return data, OffsetSpans(source, scanner.spans), OffsetSpans(source, scanner.key_spans)


class _JsonScanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 1 if text.startswith("\ufeff") else 0
        self.spans: dict[Path, tuple[int, int]] = {}
        self.key_spans: dict[Path, tuple[int, int]] = {}

    def document(self) -> Any:
        value = self.value(())
        self.skip()
        if self.pos < len(self.text):
            raise _ParseError(f"unexpected {self.text[self.pos]!r} after the JSON value", self.pos)
        return value

    def skip(self) -> None:
        self.pos = _JSON_WS.match(self.text, self.pos).end()

    def value(self, path: Path) -> Any:
        self.skip()
        start = self.pos
        ch = self.text[start : start + 1]
        if ch == "{":
            value: Any = self.obj(path)
        elif ch == "[":
            value = self.array(path)
        elif ch == '"':
            value = self.string()
        else:
            value = self.scalar()
        self.spans[path] = (start, self.pos)
        return value

    def obj(self, path: Path) -> dict:
        out: dict[str, Any] = {}
        self.pos += 1
        self.skip()
        if self.peek("}"):
            return out
        while True:
            self.skip()
            if not self.text.startswith('"', self.pos):
                raise _ParseError("expected a property name in double quotes", self.pos)
            key_start = self.pos
            key = self.string()
            self.key_spans[path + (key,)] = (key_start, self.pos)
            self.skip()
            if not self.peek(":"):
                raise _ParseError("expected ':' after a property name", self.pos)
            out[key] = self.value(path + (key,))  # a repeated key: the last one wins, as in JSON.parse
            self.skip()
            if self.peek("}"):
                return out
            if not self.peek(","):
                raise _ParseError("expected ',' or '}' in an object", self.pos)

    def array(self, path: Path) -> list:
        out: list[Any] = []
        self.pos += 1
        self.skip()
        if self.peek("]"):
            return out
        while True:
            out.append(self.value(path + (len(out),)))
            self.skip()
            if self.peek("]"):
                return out
            if not self.peek(","):
                raise _ParseError("expected ',' or ']' in an array", self.pos)

    def peek(self, ch: str) -> bool:
        if self.text.startswith(ch, self.pos):
            self.pos += 1
            return True
        return False

    def string(self) -> str:
        match = _JSON_STRING.match(self.text, self.pos)
        if match is None:
            raise _ParseError("unterminated or invalid string", self.pos)
        self.pos = match.end()
        return json.loads(match.group())

    def scalar(self) -> Any:
        if self.pos >= len(self.text):
            raise _ParseError("unexpected end of JSON input", self.pos)
        for word, value in _JSON_WORDS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return value
        match = _JSON_NUMBER.match(self.text, self.pos)
        if match is None:
            raise _ParseError(f"unexpected token {self.text[self.pos]!r}", self.pos)
        self.pos = match.end()
        return json.loads(match.group())


# --- YAML 1.2 core schema: a parser's event stream, our own composer and scalar resolution ---
#
# The events come from libyaml (PyYAML's C parser) when it is installed, else from ruamel.yaml's
# pure-Python parser. Both give the same events and marks (character offsets) for what they both
# accept; ruamel is the reference: a text libyaml rejects, or one with a construct where the two
# (YAML 1.1 and 1.2) may part - tabs, a byte order mark, NEL/LS/PS line breaks, directives, `...`,
# anchors, aliases, tags, empty keys, `key: value` pairs inside a flow sequence, some block scalar
# headers and leading blank lines - is parsed again by ruamel, which also words every syntax error.

_YAML_NULL = re.compile(r"(?:~|null|Null|NULL)?\Z")
_YAML_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_YAML_INT = re.compile(r"[-+]?[0-9]+\Z")
_YAML_OCT = re.compile(r"0o[0-7]+\Z")
_YAML_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_YAML_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_YAML_INF = re.compile(r"([-+]?)\.(?:inf|Inf|INF)\Z")
_YAML_NAN = re.compile(r"\.(?:nan|NaN|NAN)\Z")
_TAG = "tag:yaml.org,2002:"
_RESOLVED_TAGS = {f"{_TAG}int": "int", f"{_TAG}float": "float", f"{_TAG}bool": "bool", f"{_TAG}null": "null"}
# a block scalar's header line, then a line that is not blank (ruamel has rules of its own for
# leading blank lines, and for a comment right after the indicators)
_BLOCK_HEADER = re.compile(r"[|>][-+0-9]*(?: +(?:#[^\r\n]*)?)?(?:\Z|\r?\n(?! *(?:[\r\n]|\Z)))")
_PLAIN_WORD = re.compile(r"[^-+.0-9~nNtTfF]")  # a plain scalar starting so is a string
# where libyaml (YAML 1.1) and ruamel (YAML 1.2) may part, or libyaml cannot take the text:
_NOT_FOR_LIBYAML = re.compile("[\t\x85\u2028\u2029\ufeff\ud800-\udfff]")
_libyaml: tuple | None = None  # (PyYAML's CParser, its YAMLError) once looked for; () without it


class _Fallback(Exception):
    """libyaml met something ruamel must decide."""


def _parse_yaml(source: Source) -> tuple[Any, OffsetSpans, OffsetSpans]:
    if not _NOT_FOR_LIBYAML.search(source.text):
        libyaml = _libyaml if _libyaml is not None else _find_libyaml()
        if libyaml:
            parser, error = libyaml
            composer = _YamlComposer(source, libyaml=True)
            try:
                composer.run(iter(parser(source.text).get_event, None))
                return composer.result()
            except (_Fallback, _ParseError, error, RecursionError, UnicodeError):
                pass  # ruamel parses it again, and words the error
    return _parse_yaml_ruamel(source)


def _find_libyaml() -> tuple:
    global _libyaml
    try:
        from yaml import YAMLError
        from yaml._yaml import CParser
    except ImportError:
        _libyaml = ()
    else:
        _libyaml = (CParser, YAMLError)
    return _libyaml


def _parse_yaml_ruamel(source: Source) -> tuple[Any, OffsetSpans, OffsetSpans]:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    composer = _YamlComposer(source)
    try:
        composer.run(iter(YAML(typ="safe", pure=True).parse(source.text)))
    except _ParseError as exc:
        raise _syntax_error(source, exc.what, exc.offset) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        raise _syntax_error(source, what, mark.index if mark else 0) from None
    except YAMLError as exc:
        raise _syntax_error(source, str(exc).strip() or "invalid YAML", 0) from None
    except RecursionError:
        raise _syntax_error(source, "nesting too deep", 0) from None
    return composer.result()


class _YamlComposer:
    """Builds plain data from parser events, recording the span of every value and key. Events
    are told apart by class name, which ruamel.yaml and PyYAML share."""

    def __init__(self, source: Source, libyaml: bool = False) -> None:
        self.source = source
        self.libyaml = libyaml  # then the constructs where libyaml and ruamel may differ are ruamel's
        self.data: Any = None
        self.spans: dict[Path, tuple[int, int]] = {(): (0, len(source.text))}
        self.key_spans: dict[Path, tuple[int, int]] = {}
        self.anchors: dict[str, Any] = {}
        self.last_end = 0

    def result(self) -> tuple[Any, OffsetSpans, OffsetSpans]:
        return self.data, OffsetSpans(self.source, self.spans), OffsetSpans(self.source, self.key_spans)

    def run(self, events: Iterator[Any]) -> None:
        next(events)  # StreamStart
        event = next(events)
        if type(event).__name__ == "StreamEndEvent":
            return  # an empty file: null
        if self.libyaml and (event.version or event.tags):
            raise _Fallback()
        self.data = self.node(next(events), events, ())
        event = next(events)  # DocumentEnd
        if self.libyaml and event.explicit:
            raise _Fallback()  # what follows a `...` is where the two part
        event = next(events)
        if type(event).__name__ == "DocumentStartEvent":
            raise _ParseError("Source contains multiple documents", event.start_mark.index)

    def node(self, event: Any, events: Iterator[Any], path: Path) -> Any:
        kind = type(event).__name__
        start = event.start_mark.index
        if self.libyaml and (kind == "AliasEvent" or getattr(event, "anchor", None) is not None
                             or getattr(event, "tag", None) is not None):
            raise _Fallback()
        if kind == "ScalarEvent":
            value = _resolve_scalar(event)
            end = event.end_mark.index
            if not event.style and event.value == "":
                start = end = self.last_end  # an empty value: point just after its key
            elif self.libyaml and event.style in ("|", ">"):
                if not (path and _BLOCK_HEADER.match(self.source.text, start)):
                    raise _Fallback()  # where the two part on block scalars, or one at the top
        elif kind == "MappingStartEvent":
            value, end = self.mapping(events, path, bool(event.flow_style))
        elif kind == "SequenceStartEvent":
            value, end = self.sequence(events, path, bool(event.flow_style))
        elif kind == "AliasEvent":
            if event.anchor not in self.anchors:
                raise _ParseError(f"unknown alias *{event.anchor}", start)
            value = json.loads(json.dumps(self.anchors[event.anchor]))
            end = event.end_mark.index
        else:
            raise _ParseError(f"unexpected YAML event {kind}", start)
        if kind != "AliasEvent" and getattr(event, "anchor", None):
            self.anchors[event.anchor] = value
        self.spans[path] = (start, end if end > start else start)
        if end > self.last_end:
            self.last_end = end
        return value

    def sequence(self, events: Iterator[Any], path: Path, flow: bool) -> tuple[list, int]:
        out: list[Any] = []
        end = self.last_end
        text = self.source.text
        for event in events:
            kind = type(event).__name__
            if kind == "SequenceEndEvent":
                return out, event.end_mark.index if flow else end
            if flow and self.libyaml and kind == "MappingStartEvent" and text[event.start_mark.index] != "{":
                raise _Fallback()  # a `k: v` or `? k` pair in a flow sequence
            out.append(self.node(event, events, (*path, len(out))))
            end = self.last_end
        raise _ParseError("unexpected end of YAML input", len(self.source.text))

    def mapping(self, events: Iterator[Any], path: Path, flow: bool) -> tuple[dict, int]:
        out: dict[str, Any] = {}
        end = self.last_end
        for event in events:
            kind = type(event).__name__
            if kind == "MappingEndEvent":
                return out, event.end_mark.index if flow else end
            if kind != "ScalarEvent":
                raise _ParseError("complex mapping keys are not supported", event.start_mark.index)
            if self.libyaml and (event.anchor is not None or event.tag is not None or event.value == ""):
                raise _Fallback()  # libyaml's marks for an empty key are not ruamel's
            key = _resolve_scalar(event)
            if type(key) is not str:
                key = _key_string(key)
            if key in out:
                raise _ParseError(f"Map keys must be unique (duplicate key {key!r})", event.start_mark.index)
            at = (*path, key)
            key_end = event.end_mark.index
            self.key_spans[at] = (event.start_mark.index, key_end)
            self.last_end = key_end
            out[key] = self.node(next(events), events, at)
            end = self.last_end
        raise _ParseError("unexpected end of YAML input", len(self.source.text))


def _resolve_scalar(event: Any) -> Any:
    """YAML 1.2 core schema: quoted and block scalars are strings; plain ones may be
    null, booleans, integers (decimal, 0o, 0x) or floats (.inf, .nan). `yes`/`on` stay strings."""
    text = event.value
    tag = event.tag
    if tag is None:
        return text if event.style else _resolve_plain(text)  # a plain scalar's style is None or ""
    wanted = _RESOLVED_TAGS.get(tag)
    if wanted is None:
        return text  # !, !!str and unknown tags keep their text
    value = _resolve_plain(text)  # !!int "5" is 5: an explicit tag resolves any style
    if wanted == "int":
        return value if type(value) is int else text
    if wanted == "float":
        return float(value) if isinstance(value, (int, float)) else text  # bools too, as before
    if wanted == "bool":
        return value if type(value) is bool else text
    return value if value is None else text


def _resolve_plain(text: str) -> Any:
    if _PLAIN_WORD.match(text):
        return text
    if _YAML_NULL.match(text):
        return None
    if text in _YAML_BOOL:
        return _YAML_BOOL[text]
    if _YAML_INT.match(text):
        return int(text)
    if _YAML_OCT.match(text):
        return int(text[2:], 8)
    if _YAML_HEX.match(text):
        return int(text[2:], 16)
    if _YAML_FLOAT.match(text):
        return float(text)
    inf = _YAML_INF.match(text)
    if inf:
        return -math.inf if inf.group(1) == "-" else math.inf
    if _YAML_NAN.match(text):
        return math.nan
    return text


def _key_string(key: Any) -> str:
    """A mapping key as JavaScript's String() would spell it."""
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        if math.isnan(key):
            return "NaN"
        if math.isinf(key):
            return "Infinity" if key > 0 else "-Infinity"
        if key == int(key) and abs(key) < 1e21:
            return str(int(key))
    return str(key)


# ---------------------------------------------------------------------------------------------
# validation: the reference's load-time checks, in its order, with JavaScript value semantics


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()  # JavaScript `undefined`: a key that is not there


class _Invalid(Exception):
    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def _fail(message: str, *path: Any) -> None:
    raise _Invalid(message, tuple(path))


def _get(obj: Any, key: str) -> Any:
    return obj.get(key, ABSENT) if isinstance(obj, dict) else ABSENT


def _truthy(value: Any) -> bool:
    if value is ABSENT or value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    if isinstance(value, (bool, int, float, str)):
        return bool(value)
    return True


def _is_object(value: Any) -> bool:
    """typeof value === "object" && value !== null (arrays included)."""
    return isinstance(value, (dict, list))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def _is_integer(value: Any) -> bool:
    return _is_finite(value) and value == int(value)


def _to_number(value: Any) -> float:
    """JavaScript Number(value), as far as plain data goes."""
    if value is ABSENT:
        return math.nan
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        return float(js_number(value))
    if isinstance(value, list):
        return float(js_number(_js_string(value)))
    return math.nan


def _js_string(value: Any) -> str:
    if isinstance(value, list):
        return ",".join("" if v is None else _js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and _is_integer(value):
        return str(int(value))
    return str(value)


def _nonblank_str(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def is_approval(value: Any) -> bool:
    """Whether a step's `approval` value makes it a gate: true, a non-blank string, or an object."""
    return value is True or _nonblank_str(value) or isinstance(value, dict)


def is_input(value: Any) -> bool:
    """Whether a step's `input` value makes it an input step (an object)."""
    return isinstance(value, dict)


def _shell_line(step: Any) -> Any:
    run = _get(step, "run")
    return run if isinstance(run, str) else _get(step, "command")


def step_kind(step: dict) -> str:
    """What a (validated) step executes: input, for_each, then parallel > workflow > pipeline >
    shell (run/command); with none of them, approval or noop."""
    if is_input(_get(step, "input")):
        return "input"
    if isinstance(_get(step, "for_each"), str):
        return "for_each"
    if isinstance(_get(step, "parallel"), dict):
        return "parallel"
    if _nonblank_str(_get(step, "workflow")):
        return "workflow"
    pipeline = _get(step, "pipeline")
    if isinstance(pipeline, str) and pipeline:
        return "pipeline"
    if _truthy(_shell_line(step)):
        return "shell"
    return "approval" if is_approval(_get(step, "approval")) else "noop"


def validate_workflow(wf: WorkflowFile) -> Diagnostic | None:
    """The first problem of a parsed workflow file, or None. The reference's checks come first
    (they own its texts); the JSON Schema then catches what they let through."""
    try:
        _check_file(wf.data)
    except _Invalid as bad:
        return _diagnostic(wf, bad.message, bad.path)
    return _schema_diagnostic(wf)


def _diagnostic(wf: WorkflowFile, message: str, path: Path) -> Diagnostic:
    return Diagnostic(code="E210", message=message, span=wf.span_of(*path), kind="runtime_error")


def _check_file(data: Any) -> None:
    if not _is_object(data):
        _fail("Workflow file must be a JSON/YAML object")
    steps = _get(data, "steps")
    if not isinstance(steps, list) or not steps:
        _fail("Workflow file requires a non-empty steps array", "steps")
    _check_cost_limit(_get(data, "cost_limit"))
    seen: set[str] = set()
    for index, step in enumerate(steps):
        _check_step(step, ("steps", index), seen)


def _check_cost_limit(limit: Any) -> None:
    if limit is ABSENT:
        return
    if not isinstance(limit, dict):
        _fail("Workflow cost_limit must be an object", "cost_limit")
    max_usd = _to_number(_get(limit, "max_usd"))
    if not math.isfinite(max_usd) or max_usd < 0:
        _fail("Workflow cost_limit.max_usd must be a non-negative number", "cost_limit", "max_usd")
    if _get(limit, "action") not in (ABSENT, "warn", "stop"):
        _fail('Workflow cost_limit.action must be "warn" or "stop"', "cost_limit", "action")


def _check_step(step: Any, at: Path, seen: set[str]) -> None:
    if not _is_object(step):
        _fail("Workflow step must be an object", *at)
    sid = _get(step, "id")
    if not _truthy(sid) or not isinstance(sid, str):
        _fail("Workflow step requires an id", *at, "id")
    _check_workflow_ref(step, sid, at)
    parallel = _get(step, "parallel")
    if parallel is not ABSENT and not isinstance(parallel, dict):
        _fail(f"Workflow step {sid} parallel must be an object", *at, "parallel")
    is_parallel = isinstance(parallel, dict)
    if is_parallel:
        _check_parallel(parallel, sid, (*at, "parallel"), seen)
    for_each = _get(step, "for_each")
    if for_each is not ABSENT and not isinstance(for_each, str):
        _fail(f"Workflow step {sid} for_each must be a string (step reference expression)", *at, "for_each")
    is_for_each = isinstance(for_each, str)
    if is_for_each:
        _check_for_each(step, sid, at)
    _check_execution(step, sid, at, is_parallel, is_for_each)
    _check_input(step, sid, at)
    _check_approval(_get(step, "approval"), sid, (*at, "approval"))
    _check_limits(step, sid, at)
    if sid in seen:
        _fail(f"Duplicate workflow step id: {sid}", *at, "id")
    if is_parallel:
        seen.update(branch["id"] for branch in parallel["branches"])
    seen.add(sid)


def _check_workflow_ref(step: dict, sid: str, at: Path) -> None:
    workflow = _get(step, "workflow")
    if workflow is not ABSENT and not isinstance(workflow, str):
        _fail(f"Workflow step {sid} workflow must be a string (file path)", *at, "workflow")
    if isinstance(workflow, str) and not workflow.strip():
        _fail(f"Workflow step {sid} workflow path cannot be blank", *at, "workflow")
    args = _get(step, "workflow_args")
    if args is not ABSENT and not isinstance(args, dict):
        _fail(f"Workflow step {sid} workflow_args must be a plain object", *at, "workflow_args")


def _check_parallel(parallel: dict, sid: str, at: Path, seen: set[str]) -> None:
    branches = _get(parallel, "branches")
    if not isinstance(branches, list) or not branches:
        _fail(f"Workflow step {sid} parallel requires a non-empty branches array", *at, "branches")
    if _get(parallel, "wait") not in (ABSENT, "all", "any"):
        _fail(f'Workflow step {sid} parallel wait must be "all" or "any"', *at, "wait")
    timeout = _get(parallel, "timeout_ms")
    if timeout is not ABSENT and not _valid_timeout(timeout):
        _fail(
            f"Workflow step {sid} parallel timeout_ms must be a positive integer between 1 and {MAX_TIMEOUT_MS}",
            *at,
            "timeout_ms",
        )
    branch_ids: set[str] = set()
    for index, branch in enumerate(branches):
        _check_branch(branch, sid, (*at, "branches", index), branch_ids, seen)


def _check_branch(branch: Any, sid: str, at: Path, branch_ids: set[str], seen: set[str]) -> None:
    if not _is_object(branch):
        _fail(f"Workflow step {sid} parallel branches must be objects", *at)
    bid = _get(branch, "id")
    if not _truthy(bid) or not isinstance(bid, str):
        _fail(f"Workflow step {sid} parallel branch requires an id", *at, "id")
    if bid == sid:
        _fail(f"Workflow step {sid} parallel branch id cannot match the step id", *at, "id")
    if bid in branch_ids:
        _fail(f"Workflow step {sid} duplicate parallel branch id: {bid}", *at, "id")
    if bid in seen:
        _fail(f"Duplicate workflow id across steps/parallel branches: {bid}", *at, "id")
    branch_ids.add(bid)
    pipeline = _get(branch, "pipeline")
    count = _truthy(_shell_line(branch)) + (isinstance(pipeline, str) and pipeline != "")
    prefix = f"Workflow step {sid} parallel branch {bid}"
    if count == 0:
        _fail(f"{prefix} requires run, command, or pipeline", *at)
    if count > 1:
        _fail(f"{prefix} can only define one of run, command, or pipeline", *at)
    _check_strings(branch, prefix, at)


def _check_strings(step: Any, prefix: str, at: Path) -> None:
    for key in ("run", "command", "pipeline"):
        value = _get(step, key)
        if value is not ABSENT and not isinstance(value, str):
            _fail(f"{prefix} {key} must be a string", *at, key)


def _check_for_each(step: dict, sid: str, at: Path) -> None:
    subs = _get(step, "steps")
    if not isinstance(subs, list) or not subs:
        _fail(f"Workflow step {sid} for_each requires a non-empty steps array", *at, "steps")
    batch = _get(step, "batch_size")
    if batch is not ABSENT and not (_is_integer(batch) and batch >= 1):
        _fail(f"Workflow step {sid} batch_size must be a positive integer", *at, "batch_size")
    pause = _get(step, "pause_ms")
    if pause is not ABSENT and not (_is_finite(pause) and pause >= 0):
        _fail(f"Workflow step {sid} pause_ms must be a finite non-negative number", *at, "pause_ms")
    if is_approval(_get(step, "approval")):
        _fail(
            f"Workflow step {sid} for_each steps cannot define approval (use a separate step after the loop)",
            *at,
            "approval",
        )
    if is_input(_get(step, "input")):
        _fail(
            f"Workflow step {sid} for_each steps cannot define input (use a separate step after the loop)",
            *at,
            "input",
        )
    if _get(step, "stdin") not in (ABSENT, None):
        _fail(
            f"Workflow step {sid} for_each steps cannot define stdin (loop input comes from the for_each expression)",
            *at,
            "stdin",
        )
    pipeline = _get(step, "pipeline")
    if (
        _truthy(_shell_line(step))
        or (isinstance(pipeline, str) and pipeline != "")
        or _truthy(_get(step, "workflow"))
        or _truthy(_get(step, "parallel"))
    ):
        _fail(f"Workflow step {sid} for_each cannot also define run, command, pipeline, workflow, or parallel", *at)
    item_var, index_var = _get(step, "item_var"), _get(step, "index_var")
    if item_var is not ABSENT and not isinstance(item_var, str):
        _fail(f"Workflow step {sid} item_var must be a string", *at, "item_var")
    if index_var is not ABSENT and not isinstance(index_var, str):
        _fail(f"Workflow step {sid} index_var must be a string", *at, "index_var")
    item_var = "item" if item_var is ABSENT else item_var
    index_var = "index" if index_var is ABSENT else index_var
    if item_var == index_var:
        _fail(f"Workflow step {sid} item_var and index_var cannot be the same", *at, "index_var")
    sub_ids: set[str] = set()
    for index, sub in enumerate(subs):
        _check_sub_step(sub, sid, (*at, "steps", index), (item_var, index_var), sub_ids)


def _check_sub_step(sub: Any, sid: str, at: Path, loop_vars: tuple[str, str], sub_ids: set[str]) -> None:
    sub_id = _get(sub, "id")
    if not _is_object(sub) or not _truthy(sub_id) or not isinstance(sub_id, str):
        _fail(f"Workflow step {sid} for_each sub-step requires an id", *at, "id")
    if sub_id in loop_vars:
        _fail(f"Workflow step {sid} for_each sub-step id '{sub_id}' conflicts with loop variable", *at, "id")
    if sub_id in sub_ids:
        _fail(f"Workflow step {sid} duplicate for_each sub-step id: {sub_id}", *at, "id")
    sub_ids.add(sub_id)
    prefix = f"Workflow step {sid} for_each sub-step {sub_id}"
    _check_strings(sub, prefix, at)
    if any(_truthy(_get(sub, key)) for key in ("workflow", "parallel", "for_each")):
        _fail(f"{prefix} cannot define workflow, parallel, or for_each", *at)
    shell = _nonblank_str(_get(sub, "run")) or _nonblank_str(_get(sub, "command"))
    pipeline = _nonblank_str(_get(sub, "pipeline"))
    # Deliberate difference (SPEC 9.5): approval and input gates may stand inside a loop,
    # because the frame keeps the loop stack; the reference rejects them.
    approval, inputs = is_approval(_get(sub, "approval")), is_input(_get(sub, "input"))
    if inputs and (shell or pipeline):
        _fail(f"{prefix} input steps cannot define run, command, or pipeline", *at)
    if approval and inputs:
        _fail(f"{prefix} cannot define both approval and input", *at)
    if not shell and not pipeline and not approval and not inputs:
        _fail(f"{prefix} requires run, command, or pipeline", *at)
    if shell and pipeline:
        _fail(f"{prefix} can only define one of run, command, or pipeline", *at)
    if inputs:
        _check_input(sub, prefix.removeprefix("Workflow step "), at)


def _check_execution(step: dict, sid: str, at: Path, is_parallel: bool, is_for_each: bool) -> None:
    pipeline = _get(step, "pipeline")
    count = (
        _truthy(_shell_line(step))
        + (isinstance(pipeline, str) and pipeline != "")
        + _nonblank_str(_get(step, "workflow"))
        + is_parallel
        + is_for_each
    )
    approval, inputs = is_approval(_get(step, "approval")), is_input(_get(step, "input"))
    if count == 0 and not approval and not inputs:
        _fail(
            f"Workflow step {sid} requires run, command, pipeline, workflow, parallel, for_each, approval, or input",
            *at,
        )
    if count > 1:
        _fail(f"Workflow step {sid} can only define one of run, command, pipeline, workflow, parallel, or for_each", *at)
    if count > 0 and inputs:
        _fail(
            f"Workflow step {sid} input steps cannot define run, command, pipeline, workflow, parallel, or for_each",
            *at,
        )
    if approval and inputs:
        _fail(f"Workflow step {sid} cannot define both approval and input", *at)
    _check_strings(step, f"Workflow step {sid}", at)


def _check_input(step: dict, sid: str, at: Path) -> None:
    value = _get(step, "input")
    if value is ABSENT:
        return
    if not is_input(value):
        _fail(f"Workflow step {sid} input must be an object", *at, "input")
    if not isinstance(_get(value, "prompt"), str):
        _fail(f"Workflow step {sid} input.prompt must be a string", *at, "input", "prompt")
    schema = _get(value, "responseSchema")
    if not (schema is None or _is_object(schema)):
        _fail(f"Workflow step {sid} input.responseSchema must be an object", *at, "input", "responseSchema")
    problem = _schema_problem(schema)
    if problem is not None:
        _fail(f"Workflow step {sid} input.responseSchema is invalid: {problem}", *at, "input", "responseSchema")


def _schema_problem(schema: Any) -> str | None:
    """Why a JSON Schema does not compile (draft 2020-12), or None."""
    if not isinstance(schema, dict):
        return "schema must be object or boolean"
    key = repr(schema)  # of plain data: keeps key order, tells 1, 1.0, True and "1" apart
    if key in _schema_problems:
        return _schema_problems[key]
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    problem = None
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = exc.json_path
        problem = exc.message if where == "$" else f"{exc.message} at {where}"
    if len(_schema_problems) >= _SCHEMA_CACHE_SIZE:
        _schema_problems.clear()
    _schema_problems[key] = problem
    return problem


_SCHEMA_CACHE_SIZE = 256
_schema_problems: dict[str, str | None] = {}  # repr of a responseSchema -> why it is invalid


_IDENTITY_FIELDS = (
    ("initiated_by", str, "a string"),
    ("initiatedBy", str, "a string"),
    ("required_approver", str, "a string"),
    ("requiredApprover", str, "a string"),
    ("require_different_approver", bool, "a boolean"),
    ("requireDifferentApprover", bool, "a boolean"),
)


def _check_approval(approval: Any, sid: str, at: Path) -> None:
    if not isinstance(approval, dict):
        return
    for key, kind, noun in _IDENTITY_FIELDS:
        value = _get(approval, key)
        if value is not ABSENT and not isinstance(value, kind):
            _fail(f"Workflow step {sid} approval.{key} must be {noun}", *at, key)


def _valid_timeout(value: Any) -> bool:
    return _is_integer(value) and 1 <= value <= MAX_TIMEOUT_MS


def _check_limits(step: dict, sid: str, at: Path) -> None:
    timeout = _get(step, "timeout_ms")
    if timeout is not ABSENT and not _valid_timeout(timeout):
        _fail(
            f"Workflow step {sid} timeout_ms must be a positive integer between 1 and {MAX_TIMEOUT_MS}",
            *at,
            "timeout_ms",
        )
    if _get(step, "on_error") not in (ABSENT, "stop", "continue", "skip_rest"):
        _fail(f'Workflow step {sid} on_error must be "stop", "continue", or "skip_rest"', *at, "on_error")
    retry = _get(step, "retry")
    if retry is ABSENT:
        return
    if not isinstance(retry, dict):
        _fail(f"Workflow step {sid} retry must be an object", *at, "retry")
    at = (*at, "retry")
    value = _get(retry, "max")
    if value is not ABSENT and not (_is_integer(value) and value >= 1):
        _fail(f"Workflow step {sid} retry.max must be a positive integer", *at, "max")
    if _get(retry, "backoff") not in (ABSENT, "fixed", "exponential"):
        _fail(f'Workflow step {sid} retry.backoff must be "fixed" or "exponential"', *at, "backoff")
    for key in ("delay_ms", "max_delay_ms"):
        value = _get(retry, key)
        if value is not ABSENT and not (_is_finite(value) and value >= 0):
            _fail(f"Workflow step {sid} retry.{key} must be a finite non-negative number", *at, key)
    value = _get(retry, "jitter")
    if value is not ABSENT and not isinstance(value, bool):
        _fail(f"Workflow step {sid} retry.jitter must be a boolean", *at, "jitter")


# --- the JSON Schema of the file format ---

_schema_cache: dict | None = None
_flat_schema: dict | None = None  # the schema with its references inlined (_without_refs)
_validator_cache: Any = None
_schema_predicate: Any = None  # the flat schema as one predicate (lobsterc.schema_check)


def workflow_schema() -> dict:
    """The workflow file format as a JSON Schema (draft 2020-12); `lobsterc schema` prints it."""
    global _schema_cache
    if _schema_cache is None:
        text = (resources.files("lobsterc") / "workflow.schema.json").read_text(encoding="utf-8")
        _schema_cache = json.loads(text)
    return json.loads(json.dumps(_schema_cache))


def _schema_diagnostic(wf: WorkflowFile) -> Diagnostic | None:
    global _flat_schema, _validator_cache, _schema_predicate
    if _flat_schema is None:
        _flat_schema = _without_refs(workflow_schema())
    if _schema_predicate is None:
        from lobsterc.schema_check import compile_schema

        _schema_predicate = compile_schema(_flat_schema)
    if _schema_predicate(wf.data):
        return None
    if _validator_cache is None:  # a file is invalid: jsonschema finds and words the errors
        from jsonschema import Draft202012Validator

        _validator_cache = Draft202012Validator(_flat_schema)
    errors = list(_validator_cache.iter_errors(wf.data))
    if not errors:
        return None
    first = min(errors, key=lambda e: _position(wf, tuple(e.absolute_path)))
    path = tuple(first.absolute_path)
    where = _json_path(path)
    message = f"Workflow file is invalid at {where}: {_schema_message(first)}"
    return _diagnostic(wf, message, path)


def _without_refs(schema: dict) -> dict:
    """The schema with every `#/$defs/...` reference replaced by its definition, which it may do
    as the definitions do not refer to themselves. The validator then never resolves a reference:
    that lookup was half of validating a file. The errors are the same."""
    defs = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            # what may stand beside a reference here are annotations, which do not validate
            if not ref.startswith("#/$defs/") or not set(node) <= {"$ref", "description"}:
                raise ValueError(f"workflow.schema.json: cannot inline {node!r}")
            return inline(defs[ref.removeprefix("#/$defs/")])
        return {key: inline(value) for key, value in node.items() if key != "$defs"}

    return inline(schema)


def _position(wf: WorkflowFile, path: Path) -> tuple[int, int, int]:
    span = wf.span_of(*path)
    return span.line, span.col, -len(path)


def _schema_message(error: Any) -> str:
    if error.validator == "oneOf" and error.context:
        kinds = sorted({str(sub.schema.get("type")) for sub in error.context if "type" in sub.schema})
        if kinds:
            return f"{error.instance!r} must be one of the types {', '.join(kinds)}"
    return error.message


def _json_path(path: Path) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
