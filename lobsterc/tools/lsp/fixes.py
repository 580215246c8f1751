"""Quick fixes for lint's findings, as plain edits (positions as in
lobsterc.tools.lsp.analysis)."""

from __future__ import annotations

import difflib
import re

from lobsterc.diagnostics import Diagnostic
from lobsterc.tools.lsp.analysis import Edit, Range, lines_of, outline, to_range

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
