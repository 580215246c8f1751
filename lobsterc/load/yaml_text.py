"""YAML 1.2 core schema text -> plain data with positions: a parser's event stream, our own
composer and scalar resolution."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from lobsterc.load.document import (MAX_DOCUMENT_NODES, MAX_NESTING, OffsetSpans, OverLimit,
                                     ParseError, Path, load_error, syntax_error, too_deep)
from lobsterc.syntax.source import Source

# One event source: ruamel.yaml's pure-Python parser (YAML 1.2, as the original's npm `yaml` v2
# reads workflow files), used for its events and their marks (character offsets) only; the
# composer and the core-schema resolver below are ours. The compile cache stands in front of it,
# so a file is parsed once until it changes.

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
_PLAIN_WORD = re.compile(r"[^-+.0-9~nNtTfF]")  # a plain scalar starting so is a string
# Characters of values a document may hold, every alias expansion counted: a file of at most
# MAX_WORKFLOW_BYTES cannot alias one long string into gigabytes (E230, docs/limits.md).
MAX_EXPANDED_CHARS = 4 * 1024 * 1024


def parse_yaml(source: Source) -> tuple[Any, OffsetSpans, OffsetSpans]:
    """YAML 1.2 text -> (plain data, value spans, key spans). Raises CompileError: E210 for a
    syntax error (worded by the parser, placed by its mark), E230 over a limit."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    composer = YamlComposer(source)
    try:
        composer.run(iter(YAML(typ="safe", pure=True).parse(source.text)))
    except ParseError as exc:
        raise load_error(source, exc) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        raise syntax_error(source, what, mark.index if mark else 0) from None
    except YAMLError as exc:
        raise syntax_error(source, str(exc).strip() or "invalid YAML", 0) from None
    except RecursionError:
        raise load_error(source, too_deep(0)) from None
    return composer.result()


class YamlComposer:
    """Builds plain data from parser events, recording the span of every value and key. Events
    are told apart by class name."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.data: Any = None
        self.spans: dict[Path, tuple[int, int]] = {(): (0, len(source.text))}
        self.key_spans: dict[Path, tuple[int, int]] = {}
        self.anchors: dict[str, Any] = {}
        self.anchor_nodes: dict[str, int] = {}  # values in each anchored value
        self.anchor_chars: dict[str, int] = {}  # characters of scalars and keys in each
        self.nodes = 0  # values built so far, alias expansions counted (MAX_DOCUMENT_NODES)
        self.chars = 0  # their scalars' and keys' characters, likewise (MAX_EXPANDED_CHARS)
        self.last_end = 0

    def result(self) -> tuple[Any, OffsetSpans, OffsetSpans]:
        return self.data, OffsetSpans(self.source, self.spans), OffsetSpans(self.source, self.key_spans)

    def run(self, events: Iterator[Any]) -> None:
        next(events)  # StreamStart
        event = next(events)
        if type(event).__name__ == "StreamEndEvent":
            return  # an empty file: null
        self.data = self.node(next(events), events, ())
        next(events)  # DocumentEnd
        event = next(events)
        if type(event).__name__ == "DocumentStartEvent":
            raise ParseError("Source contains multiple documents", event.start_mark.index)

    def node(self, event: Any, events: Iterator[Any], path: Path) -> Any:
        kind = type(event).__name__
        start = event.start_mark.index
        if len(path) > MAX_NESTING:
            raise too_deep(start)
        before, chars_before = self.nodes, self.chars
        self.count(1, start)
        if kind == "ScalarEvent":
            value = event.value
            self.grow(len(value), start)
            if event.tag is not None or not (event.style or _PLAIN_WORD.match(value)):
                value = _resolve_scalar(event)  # else a string, as _resolve_scalar would say
            end = event.end_mark.index
            if not event.style and event.value == "":
                start = end = self.last_end  # an empty value: point just after its key
        elif kind == "MappingStartEvent":
            value, end = self.mapping(events, path, bool(event.flow_style))
        elif kind == "SequenceStartEvent":
            value, end = self.sequence(events, path, bool(event.flow_style))
        elif kind == "AliasEvent":
            if event.anchor not in self.anchors:
                raise ParseError(f"unknown alias *{event.anchor}", start)
            self.count(self.anchor_nodes[event.anchor], start)  # before the copy is made
            self.grow(self.anchor_chars[event.anchor], start)
            value = json.loads(json.dumps(self.anchors[event.anchor]))
            end = event.end_mark.index
        else:
            raise ParseError(f"unexpected YAML event {kind}", start)
        if kind != "AliasEvent" and getattr(event, "anchor", None):
            self.anchors[event.anchor] = value
            self.anchor_nodes[event.anchor] = self.nodes - before
            self.anchor_chars[event.anchor] = self.chars - chars_before
        self.spans[path] = (start, end if end > start else start)
        if end > self.last_end:
            self.last_end = end
        return value

    def count(self, nodes: int, offset: int) -> None:
        self.nodes += nodes
        if self.nodes > MAX_DOCUMENT_NODES:
            raise OverLimit(f"more than {MAX_DOCUMENT_NODES} values (aliases expanded)", offset)

    def grow(self, chars: int, offset: int) -> None:
        self.chars += chars
        if self.chars > MAX_EXPANDED_CHARS:
            raise OverLimit(f"more than {MAX_EXPANDED_CHARS} characters of values "
                            "(aliases expanded)", offset)

    def sequence(self, events: Iterator[Any], path: Path, flow: bool) -> tuple[list, int]:
        out: list[Any] = []
        end = self.last_end
        for event in events:
            kind = type(event).__name__
            if kind == "SequenceEndEvent":
                return out, event.end_mark.index if flow else end
            out.append(self.node(event, events, (*path, len(out))))
            end = self.last_end
        raise ParseError("unexpected end of YAML input", len(self.source.text))

    def mapping(self, events: Iterator[Any], path: Path, flow: bool) -> tuple[dict, int]:
        out: dict[str, Any] = {}
        end = self.last_end
        for event in events:
            kind = type(event).__name__
            if kind == "MappingEndEvent":
                return out, event.end_mark.index if flow else end
            if kind != "ScalarEvent":
                raise ParseError("complex mapping keys are not supported", event.start_mark.index)
            key = event.value
            if event.tag is not None or not (event.style or _PLAIN_WORD.match(key)):
                key = _resolve_scalar(event)  # else a string, as _resolve_scalar would say
                if type(key) is not str:
                    key = _key_string(key)
            if key in out:
                raise ParseError(f"Map keys must be unique (duplicate key {key!r})", event.start_mark.index)
            self.grow(len(key), event.start_mark.index)
            at = (*path, key)
            key_end = event.end_mark.index
            self.key_spans[at] = (event.start_mark.index, key_end)
            self.last_end = key_end
            out[key] = self.node(next(events), events, at)
            end = self.last_end
        raise ParseError("unexpected end of YAML input", len(self.source.text))


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
        return int(text) if len(text) < 300 else float(text)  # as JS holds it: inf past 1e308
    if _YAML_OCT.match(text):
        return int(text[2:], 8) if len(text) < 300 else math.inf
    if _YAML_HEX.match(text):
        return int(text[2:], 16) if len(text) < 300 else math.inf
    if _YAML_FLOAT.match(text):
        return float(text)
    inf = _YAML_INF.match(text)
    if inf:
        return -math.inf if inf.group(1) == "-" else math.inf
    if _YAML_NAN.match(text):
        return math.nan
    return text


def _key_string(key: Any) -> str:
    """A mapping key as the original spells it: JavaScript's String(), but a null key is ""."""
    if isinstance(key, str):
        return key
    if key is None:
        return ""  # as the original names a null key
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

