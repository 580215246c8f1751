"""`lobster graph`: a workflow file's steps and data flow as Mermaid, Graphviz dot, or text
(reference section 4.13). Nothing is run; `${arg}` is resolved from the caller's args over the
file's defaults."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from lobsterc.syntax import ast
from lobsterc.diagnostics import CompileError
from lobsterc.load import Document
from vm.core import json_write
from vm.engine.refs import REF, substitute_args

__all__ = ["FORMATS", "graph", "render_graph", "Node", "Edge", "nodes_and_edges"]

FORMATS = ("mermaid", "dot", "ascii")
DETAIL_LIMIT = 80
WHEN_LIMIT = 70


@frozen
class Node:
    id: str
    type: str  # parallel | for_each | workflow | pipeline | run | approval | input | step
    details: str  # `kind: text`, at most DETAIL_LIMIT characters; "" when there are none
    gate: bool = False  # the step asks for approval: drawn as a diamond

    @property
    def label(self) -> str:
        """`id\\n<details>` with a literal backslash-n (renderers escape around it)."""
        return f"{self.id}\\n{self.details}" if self.details else self.id


@frozen
class Edge:
    source: str
    target: str
    label: str  # next | stdin | for_each | when: <condition>


def graph(path: str, fmt: str = "mermaid", args: dict | None = None) -> str:
    """Load a workflow file and render its graph. A file that does not load raises
    CompileError; an unknown format, ValueError."""
    from lobsterc.load.build import load

    if fmt not in FORMATS:
        raise ValueError(f"graph --format must be one of: {', '.join(FORMATS)}")
    loaded = load(path)
    if loaded.workflow is None:
        raise CompileError(loaded.diagnostics)
    return render_graph(loaded.workflow, fmt, args)


def render_graph(wf: ast.Workflow | Document, fmt: str = "mermaid", args: dict | None = None) -> str:
    """The graph of a workflow (a validated Document is built first)."""
    if isinstance(wf, Document):
        from lobsterc.load.build import build

        wf = build(wf)
    nodes, edges = nodes_and_edges(wf, args)
    if fmt == "mermaid":
        return _mermaid(nodes, edges)
    if fmt == "dot":
        return _dot(nodes, edges)
    if fmt == "ascii":
        return _ascii(nodes, edges)
    raise ValueError(f"unknown graph format {fmt!r}")


# the model ---------------------------------------------------------------------------------
def nodes_and_edges(wf: ast.Workflow, args: dict | None = None) -> tuple[list[Node], list[Edge]]:
    resolved = {**wf.defaults, **(args or {})}
    steps = wf.steps
    nodes = [_node(step, resolved) for step in steps]
    known = {node.id for node in nodes}
    edges: list[Edge] = []
    seen: set[tuple[str, str, str]] = set()

    def add(source: str, target: str, label: str) -> None:
        key = (source, target, label)
        if source in known and key not in seen:
            seen.add(key)
            edges.append(Edge(source, target, label))

    for index, step in enumerate(steps):
        sid = step.id
        if index:
            add(steps[index - 1].id, sid, "next")
        if step.stdin is not ast.ABSENT and step.stdin is not None:
            text = (step.stdin if isinstance(step.stdin, str)
                    else json_write.json_compact(step.stdin))
            for ref in _template_refs(text):
                add(ref, sid, "stdin")
        if isinstance(step.kind, ast.ForEach):
            for ref in _template_refs(step.kind.source):
                add(ref, sid, "for_each")
        when = step.when
        if when is not None and isinstance(when.value, str):
            label = _truncate(f"when: {_one_line(when.value)}", WHEN_LIMIT)
            for ref in _template_refs(when.value):
                add(ref, sid, label)
    return nodes, edges


def _node(step: ast.Step, args: dict) -> Node:
    """The node of one step: its type and `kind: text` details as the reference labels them
    (a step's text is kept as written, newlines included; only `${arg}` is resolved)."""
    kind = step.kind
    if isinstance(kind, ast.Parallel):
        details, node_type = f"parallel ({kind.wait})", "parallel"
    elif isinstance(kind, ast.ForEach):
        details, node_type = f"for_each: {kind.source}", "for_each"
    elif isinstance(kind, ast.SubWorkflow):
        details, node_type = f"workflow: {kind.target}", "workflow"
    elif isinstance(kind, ast.PipelineStep):
        details, node_type = f"pipeline: {kind.pipeline.text}", "pipeline"
    elif isinstance(kind, ast.Shell):
        details, node_type = f"run: {kind.line}", "run"
    elif isinstance(kind, ast.InputGate):
        details, node_type = "input request", "input"
    elif step.approval is not None:
        details, node_type = "approval gate", "approval"
    else:
        details, node_type = "", "step"
    details = _truncate(substitute_args(details, args), DETAIL_LIMIT)
    return Node(step.id, node_type, details, gate=step.approval is not None)


def _template_refs(text: str) -> list[str]:
    out: list[str] = []
    for match in REF.finditer(text):
        if match[1] not in out:
            out.append(match[1])
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# renderers ---------------------------------------------------------------------------------
_HTML = {"&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;", "|": "&#124;"}


def _html(text: str) -> str:
    return "".join(_HTML.get(ch, ch) for ch in text)


def _mermaid_ids(nodes: list[Node]) -> dict[str, str]:
    """Step id -> a Mermaid node id of `[A-Za-z0-9_]`: other characters become `_`, a leading
    digit gets `s_`, and a clash with an id already taken gets `_2`, `_3`, ..."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for node in nodes:
        base = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_"
                       for ch in node.id)
        if base[:1].isdigit():
            base = f"s_{base}"
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = f"{base}_{n}"
        taken.add(candidate)
        out[node.id] = candidate
    return out


def _mermaid(nodes: list[Node], edges: list[Edge]) -> str:
    ids = _mermaid_ids(nodes)
    lines = ["flowchart TD"]
    for node in nodes:
        label = _html(node.id) + (f"\\n{_html(node.details)}" if node.details else "")
        if node.gate:
            lines.append(f'  {ids[node.id]}{{"{label}"}}')
        else:
            lines.append(f'  {ids[node.id]}["{label}"]')
    lines.append("")
    for edge in edges:
        lines.append(f"  {ids[edge.source]} -->|{_html(edge.label)}| {ids[edge.target]}")
    return "\n".join(lines) + "\n"


def _dot_str(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dot(nodes: list[Node], edges: list[Edge]) -> str:
    lines = ["digraph workflow {", "  rankdir=TB;"]
    for node in nodes:
        shape = "diamond" if node.gate else "box"
        lines.append(f'  "{_dot_str(node.id)}" [shape={shape},label="{_dot_str(node.label)}"];')
    lines.append("")
    for edge in edges:
        lines.append(f'  "{_dot_str(edge.source)}" -> "{_dot_str(edge.target)}" '
                     f'[label="{_dot_str(edge.label)}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _ascii(nodes: list[Node], edges: list[Edge]) -> str:
    lines = ["Workflow Graph", "", "Nodes:"]
    for node in nodes:
        lines.append(f"- {node.id} [{node.type}]" + (f" ({node.details})" if node.details else ""))
    lines += ["", "Edges:"]
    if not edges:
        lines.append("- (none)")
    for edge in edges:
        lines.append(f"- {edge.source} -> {edge.target} ({edge.label})")
    return "\n".join(lines) + "\n"


def parse_args_json(text: str | None) -> dict[str, Any]:
    """`--args-json` for graph: a JSON object; ValueError with the reference's texts."""
    from vm.core import json_read

    return {} if text is None else json_read.parse_args_json(text, "graph")
