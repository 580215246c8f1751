"""What the language server knows about one buffer, as plain data: its steps (an outline), the
step references in it, and the answers to completion, hover, definition, rename and quick-fix
questions. No LSP library here; positions are 0-based (line, character), ranges
(line, char, end_line, end_char) with the end exclusive, as the protocol counts them.

The buffer may be half typed: the outline comes from the positioned document when it parses,
else from the `id:` lines; completion reads the text around the cursor, never the AST."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from attrs import frozen

from lobsterc.diagnostics import Diagnostic
from lobsterc.syntax.source import Span
from vm.host.commands import COMMANDS, Command
from vm.service.frontend import WORKFLOW_EXTENSIONS
from vm.engine.refs import REF

Range = tuple[int, int, int, int]
Edit = tuple[Range, str]


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
            loop_vars = (str(item.get("item_var") or "item"), str(item.get("index_var") or "index"))
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


def _within(rng: Range, line: int, char: int) -> bool:
    return rng[0] <= line <= rng[2] and (line > rng[0] or char >= rng[1]) and \
        (line < rng[2] or char <= rng[3])


def name_at(text: str, path: str, line: int, char: int) -> tuple[str, Outline] | None:
    """The step id under the cursor: in a reference, or a step's own id."""
    out = outline(text, path)
    for ref in references(text, out.names()):
        if _within(ref.name_range, line, char):
            return ref.name, out
    for step in out.walk():
        if _within(step.id_range, line, char):
            return step.id, out
    return None


def definition(text: str, path: str, line: int, char: int) -> Range | None:
    """The id of the step that the reference under the cursor reads."""
    out = outline(text, path)
    for ref in references(text, out.names()):
        if _within(ref.range, line, char):
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
    if _KEY_LINE.match(text):
        return None
    for no in range(line - 1, -1, -1):
        above = lines[no]
        if not above.strip():
            continue
        if _BLOCK.match(above):
            return (no + 1, 0) if _indent(above) < here else None
        if _KEY_LINE.match(above) or _indent(above) == 0:
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


def _pipeline_prefix(lines: list[str], path: str, line: int, char: int) -> str | None:
    start = pipeline_start(lines, path, line, char)
    if start is None:
        return None
    first, col = start
    if first == line:
        return lines[line][col:char]
    return "\n".join([lines[first][col:], *lines[first + 1:line], lines[line][:char]])


# ---------------------------------------------------------------------------------------------
# commands and keys as documentation


def command_signature(cmd: Command) -> str:
    flags = " ".join(f"[--{f.name}]" if f.kind == "bool" else f"[--{f.name} <{f.kind}>]"
                     for f in cmd.flags)
    return " ".join(part for part in (cmd.name, flags, cmd.positionals) if part)


def command_doc(cmd: Command) -> str:
    aliases = f"  \naliases: {', '.join(cmd.aliases)}" if cmd.aliases else ""
    return f"```\n{command_signature(cmd)}\n```\n{cmd.summary}  \neffects: {cmd.effects}{aliases}"


def flag_doc(cmd: Command, name: str) -> str | None:
    flag = cmd.flag(name)
    if flag is None:
        return None
    value = "" if flag.kind == "bool" else f" <{flag.kind}>"
    choices = f" (one of {', '.join(flag.choices)})" if flag.choices else ""
    return f"```\n{cmd.name} --{flag.name}{value}\n```\n{flag.help}{choices}"


def _key_tables() -> dict[str, tuple[tuple[str, ...], dict]]:
    """Which keys an object takes, by the key that holds it, with each key's schema node (the
    field table, lobsterc.load.fields)."""
    from lobsterc.load import fields

    shapes = {shape.name: shape for shape in fields.SHAPES}

    def node(schema: dict) -> dict:
        """A field's schema, with what a `$ref` names (its title, description and type)."""
        ref = schema.get("$ref", "").removeprefix("#/$defs/")
        if ref not in shapes:
            return dict(schema)
        target = fields.shape_schema(shapes[ref])
        shown = {k: v for k, v in target.items() if k in ("title", "description", "type", "oneOf")}
        return {**shown, **{k: v for k, v in schema.items() if k != "$ref"}}

    def table(shape: fields.Shape) -> tuple[tuple[str, ...], dict]:
        return shape.names, {f.name: node(f.schema) for f in shape.fields}

    return {
        "": table(fields.WORKFLOW),
        "steps": table(fields.STEP),
        "branches": table(fields.BRANCH),
        "approval": table(fields.APPROVAL),
        "input": table(fields.INPUT),
        "retry": table(fields.RETRY),
        "parallel": table(fields.PARALLEL),
        "cost_limit": table(fields.COST_LIMIT),
        "args.*": table(fields.ARG),
    }


_TABLES: dict | None = None


def key_table(chain: list[str]) -> tuple[tuple[str, ...], dict] | None:
    global _TABLES
    if _TABLES is None:
        _TABLES = _key_tables()
    if not chain:
        return _TABLES[""]
    if len(chain) > 1 and chain[1] == "args":
        return _TABLES["args.*"]
    return _TABLES.get(chain[0]) if chain[0] != "" else None


_KEY_LINE = re.compile(r"""^(\s*)(-\s+)?["']?([A-Za-z0-9_$-]+)["']?\s*:(\s|$)""")


def key_chain(lines: list[str], line: int, col: int, dash_col: int | None
              ) -> tuple[list[str], set[str]]:
    """The keys that hold the mapping a key at `col` of `line` belongs to (nearest first, two at
    most), and the keys that mapping already has above the cursor. `dash_col`: the column of
    the line's `- `, when the key opens a list item."""
    chain: list[str] = []
    siblings: set[str] = set()
    no, collecting = line, dash_col is None
    while len(chain) < 2:
        parent = None
        for up in range(no - 1, -1, -1):
            text = lines[up]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            lead = re.match(r"^(\s*)(-\s+)?", text)
            key_col = lead.end()
            m = _KEY_LINE.match(text)
            if key_col > col:
                continue
            if key_col == col:
                if collecting and m:
                    siblings.add(m[3])
                if lead[2]:  # the first line of this list item: the rest is another item's
                    collecting = False
                continue
            if m is None:
                return chain, siblings  # a flow collection or a scalar: no key to name
            parent = (up, m[3], key_col)
            break
        if parent is None:
            return chain, siblings
        no, name, col = parent
        collecting = False
        chain.append(name)
    return chain, siblings


# ---------------------------------------------------------------------------------------------
# completion


@frozen
class Item:
    label: str
    kind: str  # keyword | function | field | variable | property
    detail: str = ""
    doc: str = ""
    edit: Edit | None = None  # replace this range with this text (None: insert the label)


FIELD_DOCS = {
    "json": "the step's output as JSON (a pipeline's items, or its stdout parsed)",
    "stdout": "the step's output as text",
    "approved": "true when the step's approval was granted",
    "skipped": "true when the step's condition skipped it",
    "response": "the answer given to the step's input (valid under its responseSchema)",
}


def complete(text: str, path: str, line: int, char: int) -> list[Item]:
    lines = lines_of(text)
    if line >= len(lines):
        return []
    char = min(char, len(lines[line]))
    before = lines[line][:char]
    out = outline(text, path)
    m = re.search(r"\$([A-Za-z0-9_-]+)\.((?:[A-Za-z0-9_]+\.)*)([A-Za-z0-9_]*)$", before)
    if m and m[1] in out.names():
        return _fields(out, m[1], m[2], m[3], line, char)
    m = re.search(r"\$([A-Za-z0-9_-]*)$", before)
    if m and is_workflow(path):
        return _step_ids(out, m[1], line, char)
    prefix = _pipeline_prefix(lines, path, line, char)
    if prefix is not None:
        return _pipeline_items(prefix, line, char)
    if path.lower().endswith(".json"):
        return _json_keys(lines, line, char)
    if is_workflow(path):
        return _keys(lines, line, char)
    return []


def _replace(line: int, char: int, partial: str, new: str) -> Edit:
    return ((line, char - len(partial), line, char), new)


def _fields(out: Outline, name: str, path: str, partial: str, line: int, char: int
            ) -> list[Item]:
    step = out.find(name)
    segments = [s for s in path.split(".") if s]
    if not segments:
        fields = ["json", "stdout", "approved", "skipped"]
        if step is not None and step.kind == "input":
            fields.append("response")
        return [Item(f, "field", f"${name}.{f}", FIELD_DOCS[f], _replace(line, char, partial, f))
                for f in fields]
    if segments[0] != "response" or step is None or not isinstance(step.schema, dict):
        return []
    node: Any = step.schema
    for seg in segments[1:]:
        node = node.get("properties", {}).get(seg) if isinstance(node, dict) else None
    props = node.get("properties") if isinstance(node, dict) else None
    if not isinstance(props, dict):
        return []
    items = []
    for key, sub in props.items():
        sub = sub if isinstance(sub, dict) else {}
        kind = sub.get("type", "")
        doc = sub.get("description") or sub.get("title") or ""
        items.append(Item(str(key), "property", f"{kind}".strip(), doc,
                          _replace(line, char, partial, str(key))))
    return items


def _step_ids(out: Outline, partial: str, line: int, char: int) -> list[Item]:
    here = out.innermost(line) if out.parsed else None
    items = []
    seen: set[str] = set()
    for step in out.walk():
        if step.id_range[0] >= line or step is here or step.id in seen:
            continue
        seen.add(step.id)
        items.append(Item(step.id, "variable", f"{step.kind} step",
                          step.summary, _replace(line, char, partial, step.id)))
        for var in step.loop_vars:
            if var not in seen and step.range[0] <= line <= step.range[2]:
                seen.add(var)
                items.append(Item(var, "variable", f"loop variable of {step.id}", "",
                                  _replace(line, char, partial, var)))
    return items


def _pipeline_items(prefix: str, line: int, char: int) -> list[Item]:
    words, partial = stage_words(prefix)
    if not words:
        seen = set()
        items = []
        for name, cmd in sorted(COMMANDS.items()):
            if name in seen:
                continue
            seen.add(name)
            items.append(Item(name, "function", command_signature(cmd), cmd.summary,
                              _replace(line, char, partial, name)))
        return items
    cmd = COMMANDS.get(words[0])
    if cmd is None or (partial and not partial.startswith("-")):
        return []
    return [Item(f"--{f.name}", "keyword", f.kind, f.help,
                 _replace(line, char, partial, f"--{f.name}")) for f in cmd.flags]


def _keys(lines: list[str], line: int, char: int) -> list[Item]:
    m = re.match(r"^(\s*)(-\s+)?([A-Za-z0-9_-]*)$", lines[line][:char])
    if m is None:
        return []
    col = len(m[0]) - len(m[3])
    chain, siblings = key_chain(lines, line, col, len(m[1]) if m[2] else None)
    table = key_table(chain)
    if table is None or (not chain and col > 0):
        return []
    names, nodes = table
    for text in lines[line + 1:]:  # the keys below, up to the end of this mapping
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        lead = re.match(r"^(\s*)(-\s+)?", text)
        if lead.end() < col or (lead[2] and lead.end() <= col):
            break
        key = _KEY_LINE.match(text)
        if lead.end() == col and key:
            siblings.add(key[3])
    return [Item(k, "property", _type_of(nodes.get(k, {})), (nodes.get(k) or {}).get("description", ""),
                 _replace(line, char, m[3], f"{k}: ")) for k in names if k not in siblings]


def _json_keys(lines: list[str], line: int, char: int) -> list[Item]:
    """Keys in a JSON workflow file: after the `"` that opens a key of an object."""
    before = "\n".join([*lines[:line], lines[line][:char]])
    m = re.search(r'[{,]\s*"([A-Za-z0-9_-]*)$', before)
    if m is None:
        return []
    chain, siblings = json_key_chain(before[:m.start(1) - 1])
    table = key_table(chain) if chain is not None else None
    if table is None:
        return []
    names, nodes = table
    return [Item(k, "property", _type_of(nodes.get(k, {})), (nodes.get(k) or {}).get("description", ""),
                 _replace(line, char, m[1], k)) for k in names if k not in siblings]


def json_key_chain(text: str) -> tuple[list[str] | None, set[str]]:
    """For JSON text that ends inside an object: the keys that hold that object (nearest
    first; a list's key for an item of a list) and the keys the object has so far. None when
    the text does not end inside an object."""
    stack: list[list] = []  # [bracket, the key that holds it, keys seen in it]
    last: str | None = None  # the last string, until a `:` makes it a key
    key: str | None = None  # the key whose value comes next
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            m = re.match(r'"((?:[^"\\]|\\.)*)"?', text[i:])
            last = m[1]
            i += m.end()
            continue
        if ch == ":":
            key = last
            if stack and stack[-1][0] == "{" and last is not None:
                stack[-1][2].add(last)
        elif ch in "{[":
            stack.append([ch, key, set()])
            key = None
        elif ch in "}]":
            if stack:
                stack.pop()
            key = None
        elif ch == ",":
            key = None
        i += 1
    if not stack or stack[-1][0] != "{":
        return None, set()
    chain = [holder for _, holder, _ in reversed(stack) if holder is not None]
    return chain[:2], stack[-1][2]


def _type_of(node: dict) -> str:
    kind = node.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    return kind or ("one of several forms" if "oneOf" in node else "")


# ---------------------------------------------------------------------------------------------
# hover


def hover(text: str, path: str, line: int, char: int) -> tuple[str, Range] | None:
    """Markdown about what is under the cursor: a step reference's step, a command or flag of
    a pipeline, a workflow key."""
    lines = lines_of(text)
    if line >= len(lines):
        return None
    out = outline(text, path)
    for ref in references(text, out.names()):
        if _within(ref.range, line, char):
            step = out.find(ref.name)
            if step is None:
                return f"loop variable `{ref.name}`", ref.range
            where = f"line {step.id_range[0] + 1}"
            body = f"\n\n`{step.summary}`" if step.summary else ""
            return f"**step `{step.id}`** ({step.kind}, {where}){body}", ref.range
    row = lines[line]
    left = len(re.search(r"[^\s|'\"]*$", row[:char])[0])
    right = len(re.match(r"[^\s|'\"]*", row[char:])[0])
    word = row[char - left:char + right]
    rng = (line, char - left, line, char + right)
    if word:
        prefix = _pipeline_prefix(lines, path, line, char - left)
        if prefix is not None:
            words, _ = stage_words(prefix)
            if not words:
                cmd = COMMANDS.get(word)
                return (command_doc(cmd), rng) if cmd else None
            cmd = COMMANDS.get(words[0])
            if cmd is not None and word.startswith("--"):
                doc = flag_doc(cmd, word[2:].partition("=")[0])
                return (doc, rng) if doc else None
            return None
    m = _KEY_LINE.match(row)
    if m and is_workflow(path) and m.start(3) <= char <= m.end(3):
        col = m.start(3) - (m.start(3) > 0 and row[m.start(3) - 1] in "\"'")
        chain, _ = key_chain(lines, line, col, len(m[1]) if m[2] else None)
        table = key_table(chain)
        node = table[1].get(m[3]) if table is not None else None
        if isinstance(node, dict) and (node.get("description") or node.get("title")):
            return (f"**{m[3]}**: {node.get('description') or node.get('title')}",
                    (line, m.start(3), line, m.end(3)))
    return None


# ---------------------------------------------------------------------------------------------
# quick fixes for lint's findings


def fixes(text: str, path: str, diag: Diagnostic) -> list[tuple[str, list[Edit]]]:
    """(title, edits) for each fix lint's finding spells out: a "did you mean" word, a spliced
    arg read from its environment variable, a spliced step reference moved into `env:`."""
    said = f"{diag.message} {diag.help or ''}"
    rng = to_range(diag.span)
    lines = lines_of(text)
    out: list[tuple[str, list[Edit]]] = []
    m = re.search(r"did you mean (['\"])(.+?)\1\?", said)
    if m and diag.span is not None:
        edit = _respell(lines, rng, m[2])
        if edit is not None:
            out.append((f"Change to '{m[2]}'", [edit]))
    heredoc = "here-document" in (diag.help or "")  # its delimiter needs quoting too
    if diag.code in ("W301", "W310") and diag.help and not heredoc:
        m = re.search(r'"\$(LOBSTER_ARG_[A-Z0-9_]+)"', diag.help)
        if m:
            out.append((f"Read ${m[1]} instead", [(rng, _quoted_var(lines, rng, m[1]))]))
    if diag.code in ("W309", "W310") and diag.help:
        m = re.search(r"\(([A-Za-z0-9_]+): (\$[A-Za-z0-9_.-]+)\)", diag.help)
        step = outline(text, path).innermost(rng[0]) if m else None
        if m and step is not None and step.env_insert is not None:
            at, indent = step.env_insert
            eol = "\r\n" if "\r\n" in text else "\n"  # a CRLF file gets CRLF lines
            entry = f"{indent}{m[1]}: {m[2]}{eol}"
            if not step.env_block:
                entry = f"{indent}env:{eol}{indent}  {m[1]}: {m[2]}{eol}"
            out.append((f"Move {m[2]} into env: as {m[1]}",
                        [(rng, _quoted_var(lines, rng, m[1])), ((at, 0, at, 0), entry)]))
    return out


def _slice(lines: list[str], rng: Range) -> str:
    if rng[0] != rng[2] or rng[0] >= len(lines):
        return ""
    return lines[rng[0]][rng[1]:rng[3]]


def _respell(lines: list[str], rng: Range, right: str) -> Edit | None:
    """Replace the word of the range closest to `right` (the range may hold more than the
    misspelt word: `$biuld.json`, `--shel=x`)."""
    text = _slice(lines, rng)
    if not text:
        return None
    best, where = 0.0, None
    for m in re.finditer(r"-*[A-Za-z0-9_][A-Za-z0-9_.-]*", text):
        starts = [m.start()] + [m.start() + i + 1 for i, ch in enumerate(m[0]) if ch == "."]
        for start in starts:
            for end in [m.end()] + [m.start() + i for i, ch in enumerate(m[0]) if ch == "."]:
                if end <= start:
                    continue
                word = text[start:end]
                score = difflib.SequenceMatcher(None, word, right).ratio()
                if word != right and score > best:
                    best, where = score, (start, end)
    if where is None:
        return None
    return ((rng[0], rng[1] + where[0], rng[0], rng[1] + where[1]), right)


def _quoted_var(lines: list[str], rng: Range, var: str) -> str:
    """`"$VAR"`, or `$VAR` inside double quotes already; escaped in a double-quoted YAML value."""
    line = lines[rng[0]] if rng[0] < len(lines) else ""
    value = re.match(r"""^\s*(?:-\s+)?[A-Za-z0-9_"']+\s*:\s*"(.*)$""", line)
    if value and rng[1] >= value.start(1):  # in a double-quoted YAML scalar
        inner = line[value.start(1):rng[1]]
        return f"${var}" if inner.count('\\"') % 2 == 1 else f'\\"${var}\\"'
    if line[:rng[1]].count('"') % 2 == 1:
        return f"${var}"
    return f'"${var}"'

