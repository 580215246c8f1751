"""What the language server knows about one buffer, as plain data: its steps (an outline), the
step references in it, and the answers to completion, hover, definition, rename and quick-fix
questions (lobsterc.tools.lsp.completion: completion and hover; lobsterc.tools.lsp.fixes: quick
fixes). No LSP library here; positions are 0-based (line, character), ranges
(line, char, end_line, end_char) with the end exclusive, as the protocol counts them.

The buffer may be half typed: the outline comes from the positioned document when it parses,
else from the `id:` lines; completion reads the text around the cursor, never the AST."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from attrs import frozen

from lobsterc.load.fields import STEP, default
from lobsterc.syntax.source import Span
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.engine.refs import REF

Range = tuple[int, int, int, int]
Edit = tuple[Range, str]
# a `key:` line of YAML (its indent, a list item's dash, the key)
KEY_LINE = re.compile(r"""^(\s*)(-\s+)?["']?([A-Za-z0-9_$-]+)["']?\s*:(\s|$)""")


def is_workflow(path: str) -> bool:
    return path.lower().endswith(WORKFLOW_EXTENSIONS)


def to_range(span: Span | None) -> Range:
    if span is None:
        return (0, 0, 0, 0)
    return (span.line - 1, span.col - 1, span.end_line - 1, max(span.end_col - 1, 0))


def lines_of(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.split("\n")]


# ---------------------------------------------------------------------------------------------
# the outline: steps, nested for for_each sub-steps and parallel branches

STEP_KINDS = ("pipeline", "run", "command", "workflow", "parallel", "for_each", "input",
              "approval")


@frozen
class StepDef:
    id: str
    kind: str  # pipeline | shell | workflow | parallel | for_each | input | approval | branch | step
    id_range: Range
    range: Range  # the whole step (contains id_range)
    summary: str = ""  # its pipeline, shell line, prompt or callee, on one line
    schema: Any = None  # an input step's responseSchema
    loop_vars: tuple[str, ...] = ()  # a for_each step's item and index names
    env_insert: tuple[int, str] | None = None  # where a new `env:` entry goes: (line, indent)
    env_block: bool = False  # the step has an `env:` block (an entry goes in it)
    children: tuple[StepDef, ...] = ()


@frozen
class Outline:
    steps: tuple[StepDef, ...]
    parsed: bool  # False: from `id:` lines only (the document does not parse)

    def walk(self) -> Iterator[StepDef]:
        stack = list(reversed(self.steps))
        while stack:
            step = stack.pop()
            yield step
            stack.extend(reversed(step.children))

    def find(self, name: str) -> StepDef | None:
        return next((s for s in self.walk() if s.id == name), None)

    def names(self) -> set[str]:
        """Every name a `$name.path` reference may read: step and branch ids, loop variables."""
        out: set[str] = set()
        for step in self.walk():
            out.add(step.id)
            out.update(step.loop_vars)
        return out

    def innermost(self, line: int) -> StepDef | None:
        found = None
        for step in self.walk():
            if step.range[0] <= line <= step.range[2]:
                found = step
        return found


def outline(text: str, path: str) -> Outline:
    """The steps of a workflow buffer (none for a pipeline)."""
    if not is_workflow(path):
        return Outline((), True)
    from lobsterc.load import parse_text

    try:
        doc = parse_text(text, path)
    except Exception:  # noqa: BLE001 - any half-typed text: fall back to the `id:` lines
        return Outline(tuple(_id_lines(text)), False)
    data = doc.data
    steps = data.get("steps") if isinstance(data, dict) else None
    lines = lines_of(text)
    if not isinstance(steps, list):
        return Outline((), True)
    return Outline(tuple(_steps(doc, lines, steps, ("steps",), path)), True)


def _steps(doc: Any, lines: list[str], items: list, at: tuple, path: str) -> Iterator[StepDef]:
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            continue
        where = (*at, index)
        sid = item["id"]
        id_range = _id_range(doc, lines, where, sid)
        whole = to_range(doc.spans.get(where))  # widened to hold the id, as symbols must
        whole = (*min(whole[:2], id_range[:2]), *max(whole[2:], id_range[2:]))
        kind = next((k for k in STEP_KINDS if k in item), "step")
        kind = {"run": "shell", "command": "shell"}.get(kind, kind)
        children: list[StepDef] = []
        loop_vars: tuple[str, ...] = ()
        if kind == "for_each" and isinstance(item.get("steps"), list):
            children = list(_steps(doc, lines, item["steps"], (*where, "steps"), path))
            loop_vars = tuple(str(item.get(name) or default(STEP, name))
                              for name in ("item_var", "index_var"))
        par = item.get("parallel")
        if isinstance(par, dict) and isinstance(par.get("branches"), list):
            children = [StepDef(b.id, "branch", b.id_range, b.range, b.summary,
                                env_insert=b.env_insert, env_block=b.env_block)
                        for b in _steps(doc, lines, par["branches"],
                                        (*where, "parallel", "branches"), path)]
        gate = item.get("input")
        schema = gate.get("responseSchema") if isinstance(gate, dict) else None
        insert, block = _env_place(doc, lines, item, where, path)
        yield StepDef(sid, kind, id_range, whole, _summary(item, kind), schema, loop_vars,
                      insert, block, tuple(children))


def _id_range(doc: Any, lines: list[str], where: tuple, sid: str) -> Range:
    """The range of the id's own text (inside its quotes, if any)."""
    rng = to_range(doc.spans.get((*where, "id")))
    line = lines[rng[0]] if rng[0] < len(lines) else ""
    at = line.find(sid, rng[1])
    if at < 0:
        return rng
    return (rng[0], at, rng[0], at + len(sid))


def _env_place(doc: Any, lines: list[str], item: dict, where: tuple, path: str
               ) -> tuple[tuple[int, str] | None, bool]:
    """Where a new env entry of this step goes, as (line, indent), YAML block style only: before
    its first `env:` entry, or (no `env:`) a new `env:` block on the line after its id."""
    if path.lower().endswith(".json"):
        return None, False
    env = item.get("env")
    if isinstance(env, dict) and env:
        first = doc.key_spans.get((*where, "env", next(iter(env))))
        key = doc.key_spans.get((*where, "env"))
        if first is None or key is None or first.line == key.line:
            return None, False  # a flow mapping: leave it alone
        return (first.line - 1, " " * (first.col - 1)), True
    if "env" in item:
        return None, False
    key = doc.key_spans.get((*where, "id"))
    if key is None or "{" in lines[key.line - 1][:key.col - 1]:
        return None, False
    return (key.line, " " * (key.col - 1)), False


def _summary(item: dict, kind: str) -> str:
    value: Any
    if kind == "shell":
        value = item.get("run", item.get("command"))
    elif kind == "input":
        value = (item.get("input") or {}).get("prompt") if isinstance(item.get("input"), dict) else None
    elif kind == "approval":
        value = item.get("approval")
    elif kind in ("pipeline", "workflow", "for_each"):
        value = item.get(kind)
    else:
        value = None
    text = value if isinstance(value, str) else ""
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


_ID_LINE = re.compile(r"""^(\s*)(?:-\s+)?["']?id["']?\s*:\s*["']?([A-Za-z0-9_-]+)""")


def _id_lines(text: str) -> Iterator[StepDef]:
    for no, line in enumerate(lines_of(text)):
        m = _ID_LINE.match(line)
        if m:
            rng = (no, m.start(2), no, m.end(2))
            yield StepDef(m[2], "step", rng, (no, 0, no, len(line)))


# ---------------------------------------------------------------------------------------------
# references: `$id.path` in the text, to steps the file has


@frozen
class Ref:
    name: str
    name_range: Range  # the id after `$`
    range: Range  # the whole `$id.path`
    path: str  # `.json.a`


def references(text: str, names: set[str]) -> Iterator[Ref]:
    for no, line in enumerate(lines_of(text)):
        if line.lstrip().startswith("#"):
            continue
        for m in REF.finditer(line):
            if m[1] in names:
                yield Ref(m[1], (no, m.start(1), no, m.end(1)), (no, m.start(), no, m.end()), m[2])


def within(rng: Range, line: int, char: int) -> bool:
    return rng[0] <= line <= rng[2] and (line > rng[0] or char >= rng[1]) and \
        (line < rng[2] or char <= rng[3])


def name_at(text: str, path: str, line: int, char: int) -> tuple[str, Outline] | None:
    """The step id under the cursor: in a reference, or a step's own id."""
    out = outline(text, path)
    for ref in references(text, out.names()):
        if within(ref.name_range, line, char):
            return ref.name, out
    for step in out.walk():
        if within(step.id_range, line, char):
            return step.id, out
    return None


def definition(text: str, path: str, line: int, char: int) -> Range | None:
    """The id of the step that the reference under the cursor reads."""
    out = outline(text, path)
    for ref in references(text, out.names()):
        if within(ref.range, line, char):
            target = out.find(ref.name)
            return target.id_range if target else None
    return None


STEP_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def rename(text: str, path: str, line: int, char: int, new: str) -> list[Edit] | None:
    """The edits that rename the step id under the cursor (its definition, every reference);
    None when the cursor is on no step id. ValueError for a name a reference cannot spell."""
    found = name_at(text, path, line, char)
    if found is None:
        return None
    if not STEP_ID.match(new):
        raise ValueError(f"a step id is letters, digits, _ and - (got {new!r})")
    old, out = found
    edits: list[Edit] = [(s.id_range, new) for s in out.walk() if s.id == old]
    if not edits:
        return None  # a loop variable: its name is declared elsewhere (item_var, index_var)
    edits += [(r.name_range, new) for r in references(text, out.names()) if r.name == old]
    return edits


# ---------------------------------------------------------------------------------------------
# pipelines: where one is, its stages up to the cursor

_BLOCK = re.compile(r"""^(\s*)(?:-\s+)?["']?pipeline["']?\s*:\s*[|>][-+0-9]*\s*(#.*)?$""")
_INLINE = re.compile(r"""^(\s*)(?:-\s+)?pipeline\s*:[ \t]*""")
_JSON_INLINE = re.compile(r'"pipeline"\s*:\s*"')


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def pipeline_start(lines: list[str], path: str, line: int, char: int) -> tuple[int, int] | None:
    """Where the pipeline text that holds the cursor starts, None outside a pipeline."""
    if not is_workflow(path):
        return (0, 0)
    text = lines[line]
    if path.lower().endswith(".json"):
        for m in _JSON_INLINE.finditer(text[:char]):
            if '"' not in text[m.end():char].replace('\\"', ""):
                return (line, m.end())
        return None
    m = _INLINE.match(text)
    if m and m.end() <= char and not _BLOCK.match(text):
        quoted = text[m.end():m.end() + 1] in ("'", '"')
        return (line, m.end() + quoted)
    here = _indent(text) if text.strip() else char  # the block's lines are indented past its key
    if KEY_LINE.match(text):
        return None
    for no in range(line - 1, -1, -1):
        above = lines[no]
        if not above.strip():
            continue
        if _BLOCK.match(above):
            return (no + 1, 0) if _indent(above) < here else None
        if KEY_LINE.match(above) or _indent(above) == 0:
            return None  # a key of the document: the cursor is in no pipeline block
        here = min(here, _indent(above))
    return None


def stage_words(text: str) -> tuple[list[str], str]:
    """The finished words of the last stage of `text` and the word being typed (quotes and
    backslash escapes followed as the pipeline grammar does, roughly)."""
    words: list[str] = []
    word, quote, started, escape = "", "", False, False
    for ch in text:
        if escape:
            word, escape = word + ch, False
        elif ch == "\\" and quote != "'":
            escape = started = True
        elif quote:
            if ch == quote:
                quote = ""
            else:
                word += ch
        elif ch in "'\"":
            quote, started = ch, True
        elif ch == "|":
            words, word, started = [], "", False
        elif ch.isspace():
            if started or word:
                words.append(word)
            word, started = "", False
        else:
            word, started = word + ch, True
    return words, word


def pipeline_prefix(lines: list[str], path: str, line: int, char: int) -> str | None:
    start = pipeline_start(lines, path, line, char)
    if start is None:
        return None
    first, col = start
    if first == line:
        return lines[line][col:char]
    return "\n".join([lines[first][col:], *lines[first + 1:line], lines[line][:char]])
