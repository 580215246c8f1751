"""Completion and hover for the language server, as plain data: commands, flags and keys as
documentation (the keys from the field table, lobsterc.load.fields), the items offered at the
cursor, and what hover shows. Positions as in lobsterc.tools.lsp.analysis."""

from __future__ import annotations

import re
from typing import Any

from attrs import frozen

from lobsterc.tools.lsp.analysis import (KEY_LINE, Edit, Outline, Range, is_workflow, lines_of,
                                         outline, pipeline_prefix, references, stage_words,
                                         within)
from vm.host.commands import COMMANDS, Command

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
            m = KEY_LINE.match(text)
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
    prefix = pipeline_prefix(lines, path, line, char)
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
        key = KEY_LINE.match(text)
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
        if within(ref.range, line, char):
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
        prefix = pipeline_prefix(lines, path, line, char - left)
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
    m = KEY_LINE.match(row)
    if m and is_workflow(path) and m.start(3) <= char <= m.end(3):
        col = m.start(3) - (m.start(3) > 0 and row[m.start(3) - 1] in "\"'")
        chain, _ = key_chain(lines, line, col, len(m[1]) if m[2] else None)
        table = key_table(chain)
        node = table[1].get(m[3]) if table is not None else None
        if isinstance(node, dict) and (node.get("description") or node.get("title")):
            return (f"**{m[3]}**: {node.get('description') or node.get('title')}",
                    (line, m.start(3), line, m.end(3)))
    return None
