"""An LSP client session against a real `lobsterc lsp` process over stdio (pygls's client), for
tests/compiler/test_lsp.py; run as a script it prints the transcript of one editing session (open,
type a mistake, see the diagnostic, apply the quick fix, complete a `$step.` reference)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

SERVER = [sys.executable, "-m", "lobsterc.tools.cli", "lsp"]


class Session:
    """One server process and the documents opened in it. `diagnostics(uri, version)` waits for
    the diagnostics the server publishes for that version of the document."""

    def __init__(self, *args: str) -> None:
        self.args = args  # for `lobsterc lsp`
        self.client = LanguageClient("lobster-tests", "1")
        self.published: dict[str, list[lsp.PublishDiagnosticsParams]] = {}
        self.arrived = asyncio.Event()
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.transcript: list[str] = []

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append(params)
            self.arrived.set()

    async def start(self) -> lsp.InitializeResult:
        await self.client.start_io(*SERVER, *self.args, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        result = await self.client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), process_id=os.getpid()))
        self.client.initialized(lsp.InitializedParams())
        return result

    async def stop(self) -> str:
        """Shut the server down; what it wrote on stderr (its log)."""
        await asyncio.wait_for(self.client.shutdown_async(None), 10)
        self.client.exit(None)
        server = self.client._server
        await asyncio.wait_for(server.wait(), 10)
        log = (await server.stderr.read()).decode("utf-8", "replace")
        await self.client.stop()
        return log

    def note(self, what: str, payload: Any) -> None:
        data = self.client.protocol._converter.unstructure(payload) if payload is not None else None
        if isinstance(data, list):
            shown = "\n".join("  " + json.dumps(x, ensure_ascii=False) for x in data) or "  []"
        else:
            shown = "  " + json.dumps(data, ensure_ascii=False)
        self.transcript.append(f"{what}\n{shown}")

    def open(self, uri: str, text: str) -> None:
        self.texts[uri], self.versions[uri] = text, 1
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="lobster", version=1, text=text)))

    def change(self, uri: str, rng: tuple[int, int, int, int], new: str) -> None:
        """An incremental edit, as an editor sends one keystroke or paste."""
        self.versions[uri] += 1
        self.texts[uri] = apply(self.texts[uri], [(rng, new)])
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            [lsp.TextDocumentContentChangePartial(range=to_lsp_range(rng), text=new)]))

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(lsp.DidSaveTextDocumentParams(self.doc(uri)))

    async def diagnostics(self, uri: str, timeout: float = 30) -> list[lsp.Diagnostic]:
        """The diagnostics published for the document's current version."""
        want = self.versions[uri]

        async def wait() -> list[lsp.Diagnostic]:
            while True:
                for params in reversed(self.published.get(uri, [])):
                    if params.version == want:
                        return list(params.diagnostics)
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(wait(), timeout)

    def doc(self, uri: str) -> lsp.TextDocumentIdentifier:
        return lsp.TextDocumentIdentifier(uri)

    async def completion(self, uri: str, line: int, char: int) -> list[lsp.CompletionItem]:
        result = await self.client.text_document_completion_async(lsp.CompletionParams(
            self.doc(uri), lsp.Position(line, char)))
        return result.items if isinstance(result, lsp.CompletionList) else (result or [])

    async def hover(self, uri: str, line: int, char: int) -> lsp.Hover | None:
        return await self.client.text_document_hover_async(lsp.HoverParams(
            self.doc(uri), lsp.Position(line, char)))

    async def definition(self, uri: str, line: int, char: int) -> Any:
        return await self.client.text_document_definition_async(lsp.DefinitionParams(
            self.doc(uri), lsp.Position(line, char)))

    async def symbols(self, uri: str) -> Any:
        return await self.client.text_document_document_symbol_async(
            lsp.DocumentSymbolParams(self.doc(uri)))

    async def rename(self, uri: str, line: int, char: int, new: str) -> lsp.WorkspaceEdit | None:
        return await self.client.text_document_rename_async(lsp.RenameParams(
            self.doc(uri), lsp.Position(line, char), new))

    async def prepare_rename(self, uri: str, line: int, char: int) -> Any:
        return await self.client.text_document_prepare_rename_async(lsp.PrepareRenameParams(
            self.doc(uri), lsp.Position(line, char)))

    async def code_actions(self, uri: str, diag: lsp.Diagnostic) -> list[lsp.CodeAction]:
        result = await self.client.text_document_code_action_async(lsp.CodeActionParams(
            self.doc(uri), diag.range, lsp.CodeActionContext([diag])))
        return list(result or [])

    def apply(self, uri: str, edit: lsp.WorkspaceEdit) -> None:
        """Apply a workspace edit to the document, as the editor does: one didChange per text
        edit, the last in the document first (so the earlier ranges still hold)."""
        edits = sorted(edit.changes[uri], key=lambda e: (e.range.start.line,
                                                         e.range.start.character), reverse=True)
        for e in edits:
            r = e.range
            self.change(uri, (r.start.line, r.start.character, r.end.line, r.end.character),
                        e.new_text)


def to_lsp_range(rng: tuple[int, int, int, int]) -> lsp.Range:
    return lsp.Range(lsp.Position(rng[0], rng[1]), lsp.Position(rng[2], rng[3]))


def offset(text: str, line: int, char: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[:line]) + char


def apply(text: str, edits: list[tuple[tuple[int, int, int, int], str]]) -> str:
    for rng, new in sorted(edits, key=lambda e: e[0][:2], reverse=True):
        text = text[:offset(text, rng[0], rng[1])] + new + text[offset(text, rng[2], rng[3]):]
    return text


def find(text: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """The (line, character) where `needle` starts (its nth occurrence)."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at)
    return line, at - (text.rfind("\n", 0, at) + 1)


DEMO = """\
name: demo
steps:
  - id: ask_env
    input:
      prompt: Which environment?
      responseSchema:
        type: object
        properties:
          env: {type: string, enum: [staging, prod]}
          dry_run: {type: boolean}
  - id: hosts
    timeout_ms: 5000
    pipeline: exec --json --shell 'echo [1,2]'
  - id: notify
    timeout_ms: 5000
    run: echo hello
"""


async def demo() -> list[str]:
    """The session of the issue's closing note, step by step, with what the server answered."""
    s = Session()
    await s.start()
    uri = "file:///tmp/demo.lobster"
    s.open(uri, DEMO)
    s.note("open demo.lobster: diagnostics", await s.diagnostics(uri))
    line, char = find(s.texts[uri], "--shell")
    s.change(uri, (line, char, line, char + len("--shell")), "--shel")
    s.transcript.append(f"type a mistake: line {line + 1} now reads {s.texts[uri].split(chr(10))[line]!r}")
    diags = await s.diagnostics(uri)
    s.note("diagnostics", diags)
    actions = await s.code_actions(uri, next(d for d in diags if d.code == "E202"))
    s.note("code actions", actions)
    s.apply(uri, actions[0].edit)
    s.note("after the fix: diagnostics", await s.diagnostics(uri))
    line, char = find(s.texts[uri], "run: echo hello")
    s.change(uri, (line, char + 5, line, char + 15), 'echo "$ask_env.')
    s.transcript.append(f"type a reference: line {line + 1} now reads "
                        f"{s.texts[uri].split(chr(10))[line]!r}")
    items = await s.completion(uri, line, char + 5 + len('echo "$ask_env.'))
    s.note("completion after `$ask_env.`", [(i.label, i.detail) for i in items])
    s.change(uri, (line, char + 20, line, char + 20), 'response.')
    end = char + 5 + len('echo "$ask_env.response.')
    items = await s.completion(uri, line, end)
    s.note("completion after `$ask_env.response.`", [(i.label, i.detail) for i in items])
    s.change(uri, (line, end, line, end), 'env"')
    s.note("hover on the reference", await s.hover(uri, line, char + 12))
    s.note("go to definition", await s.definition(uri, line, char + 12))
    diags = await s.diagnostics(uri)
    s.note("diagnostics", diags)
    actions = await s.code_actions(uri, diags[0])
    s.note("code actions", actions)
    s.apply(uri, actions[0].edit)
    s.transcript.append("after the fix:\n" + "\n".join(
        "  | " + x for x in s.texts[uri].split("\n")[line - 2:line + 3]))
    s.note("diagnostics", await s.diagnostics(uri))
    await s.stop()
    return s.transcript


if __name__ == "__main__":
    print("\n\n".join(asyncio.run(demo())))
