"""The protocol side of `lobsterc lsp` (pygls): document sync, lint diagnostics as you type
(debounced), and the requests, each answered from lobsterc.tools.lsp.analysis. A handler that fails
answers empty and logs the error: a broken buffer never takes the server down."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from lobsterc.diagnostics import Diagnostic
from lobsterc.tools.lsp import analysis, fixes
from lobsterc.tools.lsp import completion as answers
from vm import __version__
from vm.core.source import file_name

DEBOUNCE_S = 0.3
STEPS_KEY = re.compile(r"""^\s*["']?steps["']?\s*:""", re.M)
log = logging.getLogger("lobsterc.tools.lsp")


class LobsterServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("lobsterc", __version__,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.findings: dict[str, tuple[str, list[Diagnostic]]] = {}  # uri -> (its text, lint's)
        self.pending: dict[str, asyncio.Task] = {}
        self.lint_pool = ThreadPoolExecutor(max_workers=1)  # lint runs off the event loop
        self.require_approval = False
        self.strict = False


server = LobsterServer()


def path_of(uri: str) -> str:
    """The file a document names (untitled documents: their name); lint's spans name it."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return path or uri.rsplit("/", 1)[-1] or "untitled"


def lint_path(uri: str, text: str) -> str | None:
    """Where lint reads the buffer as: its own path; a document without an extension (an
    untitled one) as a workflow file when it has `steps:`, else as a pipeline. None for any
    other extension: not ours, nothing to say."""
    path = path_of(uri)
    if analysis.is_workflow(path) or path.endswith(".pipeline"):
        return path
    if os.path.splitext(path)[1]:
        return None
    return path + (".lobster" if STEPS_KEY.search(text) else ".pipeline")


def answering(empty: Any) -> Callable:
    """Wrap a handler: any exception is logged and the request answered with `empty`."""
    def wrap(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(ls: LobsterServer, params: Any) -> Any:
            try:
                return handler(ls, params)
            except Exception:  # noqa: BLE001 - the server outlives any one request
                log.error("%s failed:\n%s", handler.__name__, traceback.format_exc())
                return empty
        return run
    return wrap


def _doc(ls: LobsterServer, uri: str):
    return ls.workspace.get_text_document(uri)


def _pos(doc: Any, position: lsp.Position) -> tuple[int, int]:
    p = doc.position_from_client_units(position)
    return p.line, p.character


def _at(ls: LobsterServer, params: Any) -> tuple[Any, str | None, int, int]:
    """The document a position request names, its lint path (None: not ours) and the
    position in code points."""
    doc = _doc(ls, params.text_document.uri)
    return (doc, lint_path(params.text_document.uri, doc.source),
            *_pos(doc, params.position))


def _range(doc: Any, rng: analysis.Range) -> lsp.Range:
    r = lsp.Range(lsp.Position(rng[0], rng[1]), lsp.Position(rng[2], rng[3]))
    try:
        return doc.range_to_client_units(r)
    except Exception:  # noqa: BLE001 - a range past the text: leave it in code points
        return r


# ---------------------------------------------------------------------------------------------
# diagnostics


def to_lsp(doc: Any, d: Diagnostic) -> lsp.Diagnostic:
    severity = lsp.DiagnosticSeverity.Error if d.severity == "error" else \
        lsp.DiagnosticSeverity.Warning
    message = d.message + (f"\nhelp: {d.help}" if d.help else "")
    return lsp.Diagnostic(_range(doc, analysis.to_range(d.span)), message, severity=severity,
                          code=d.code, source="lobsterc")


def lint(ls: LobsterServer, uri: str, text: str) -> list[Diagnostic]:
    """lint's findings in this document. A .yaml/.yml/.json file without a `steps` key is
    someone else's YAML or JSON (a server attached to every YAML file says nothing there)."""
    from lobsterc.tools.lint import lint_file

    path = lint_path(uri, text)
    if path is None or path.lower().endswith((".yaml", ".yml", ".json")) \
            and not STEPS_KEY.search(text):
        return []
    found = lint_file(path, text=text, require_approval=ls.require_approval, strict=ls.strict)
    own = (path, file_name(path))  # spans name files absolute and resolved
    return [d if d.span is None or d.span.source in own else _in_caller(d, path, text)
            for d in found]


def _in_caller(d: Diagnostic, path: str, text: str) -> Diagnostic:
    """A finding in a file this one calls, shown on the line that names that file (else the
    first line), its own place leading the message."""
    from lobsterc.syntax.source import Span

    s = d.span
    name = os.path.basename(s.source)
    lines = analysis.lines_of(text)
    line = next((i for i, x in enumerate(lines) if name in x and "workflow" in x), 0)
    col = lines[line].find(name) if name in lines[line] else 0
    where = Span(path, line + 1, col + 1, line + 1, col + 1 + (len(name) if col else 0))
    return Diagnostic(d.code, f"{s.source}:{s.line}:{s.col}: {d.message}", where, d.help,
                      d.severity)


async def publish(ls: LobsterServer, uri: str, delay: float) -> None:
    """Lint the document after `delay` seconds, unless it changed meanwhile, and publish."""
    try:
        if delay:
            await asyncio.sleep(delay)
        doc = _doc(ls, uri)
        text, version = doc.source, doc.version
        try:
            found = await asyncio.get_running_loop().run_in_executor(
                ls.lint_pool, lint, ls, uri, text)
        except Exception:  # noqa: BLE001 - a lint bug: say so once, at the top of the file
            log.error("lint failed:\n%s", traceback.format_exc())
            found = [Diagnostic("T498", "lobsterc lint failed on this text (a bug: see the "
                                "server log)", None)]
        if _doc(ls, uri).version != version:
            return
        ls.findings[uri] = (text, found)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri, [to_lsp(doc, d) for d in found], version=version))
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001
        log.error("publishing diagnostics failed:\n%s", traceback.format_exc())


def schedule(ls: LobsterServer, uri: str, delay: float) -> None:
    old = ls.pending.pop(uri, None)
    if old is not None:
        old.cancel()
    ls.pending[uri] = asyncio.get_running_loop().create_task(publish(ls, uri, delay))


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: LobsterServer, params: lsp.DidOpenTextDocumentParams) -> None:
    schedule(ls, params.text_document.uri, 0)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
async def did_change(ls: LobsterServer, params: lsp.DidChangeTextDocumentParams) -> None:
    schedule(ls, params.text_document.uri, DEBOUNCE_S)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: LobsterServer, params: lsp.DidSaveTextDocumentParams) -> None:
    """Lint every open document again: one may call the file just saved."""
    for uri in list(ls.workspace.text_documents):
        schedule(ls, uri, 0)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: LobsterServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.findings.pop(uri, None)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, []))


# ---------------------------------------------------------------------------------------------
# code actions


def _overlaps(a: analysis.Range, b: analysis.Range) -> bool:
    return (a[0], a[1]) <= (b[2], b[3]) and (b[0], b[1]) <= (a[2], a[3])


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
    code_action_kinds=[lsp.CodeActionKind.QuickFix]))
@answering([])
def code_action(ls: LobsterServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    doc = _doc(ls, uri)
    text = doc.source
    known = ls.findings.get(uri)
    found = known[1] if known and known[0] == text else lint(ls, uri, text)
    start = _pos(doc, params.range.start)
    end = _pos(doc, params.range.end)
    asked = (*start, *end)
    actions = []
    for d in found:
        rng = analysis.to_range(d.span)
        if d.span is None or not _overlaps(rng, asked):
            continue
        for title, edits in fixes.fixes(text, lint_path(uri, text) or "", d):
            change = lsp.WorkspaceEdit(changes={uri: [lsp.TextEdit(_range(doc, r), new)
                                                      for r, new in edits]})
            actions.append(lsp.CodeAction(title, kind=lsp.CodeActionKind.QuickFix,
                                          diagnostics=[to_lsp(doc, d)], edit=change,
                                          is_preferred=len(actions) == 0))
    return actions


# ---------------------------------------------------------------------------------------------
# completion, hover, navigation

_KINDS = {"keyword": lsp.CompletionItemKind.Keyword, "function": lsp.CompletionItemKind.Function,
          "field": lsp.CompletionItemKind.Field, "variable": lsp.CompletionItemKind.Variable,
          "property": lsp.CompletionItemKind.Property}


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(
    trigger_characters=["$", ".", "-"]))
@answering(lsp.CompletionList(is_incomplete=False, items=[]))
def completion(ls: LobsterServer, params: lsp.CompletionParams) -> lsp.CompletionList:
    doc, path, line, char = _at(ls, params)
    items = []
    for item in answers.complete(doc.source, path, line, char) if path else ():
        edit = None
        if item.edit is not None:
            edit = lsp.TextEdit(_range(doc, item.edit[0]), item.edit[1])
        items.append(lsp.CompletionItem(
            item.label, kind=_KINDS.get(item.kind), detail=item.detail or None,
            documentation=lsp.MarkupContent(lsp.MarkupKind.Markdown, item.doc) if item.doc
            else None, text_edit=edit))
    return lsp.CompletionList(is_incomplete=False, items=items)


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
@answering(None)
def hover(ls: LobsterServer, params: lsp.HoverParams) -> lsp.Hover | None:
    doc, path, line, char = _at(ls, params)
    found = answers.hover(doc.source, path, line, char) if path else None
    if found is None:
        return None
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, found[0]), _range(doc, found[1]))


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
@answering(None)
def definition(ls: LobsterServer, params: lsp.DefinitionParams) -> lsp.Location | None:
    doc, path, line, char = _at(ls, params)
    found = analysis.definition(doc.source, path, line, char) if path else None
    return lsp.Location(params.text_document.uri, _range(doc, found)) if found else None


_SYMBOLS = {"for_each": lsp.SymbolKind.Array, "parallel": lsp.SymbolKind.Struct,
            "branch": lsp.SymbolKind.Field, "input": lsp.SymbolKind.Event,
            "approval": lsp.SymbolKind.Event, "workflow": lsp.SymbolKind.Module}


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@answering([])
def document_symbol(ls: LobsterServer, params: lsp.DocumentSymbolParams
                    ) -> list[lsp.DocumentSymbol]:
    uri = params.text_document.uri
    doc = _doc(ls, uri)

    def symbol(step: analysis.StepDef) -> lsp.DocumentSymbol:
        return lsp.DocumentSymbol(
            step.id, _SYMBOLS.get(step.kind, lsp.SymbolKind.Function), _range(doc, step.range),
            _range(doc, step.id_range), detail=step.kind,
            children=[symbol(c) for c in step.children])

    path = lint_path(uri, doc.source)
    return [symbol(s) for s in analysis.outline(doc.source, path).steps] if path else []


@server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
@answering(None)
def prepare_rename(ls: LobsterServer, params: lsp.PrepareRenameParams) -> lsp.Range | None:
    doc, path, line, char = _at(ls, params)
    found = analysis.name_at(doc.source, path, line, char) if path else None
    if found is None:
        return None
    edits = analysis.rename(doc.source, path, line, char, found[0]) or []
    return next((_range(doc, r) for r, _ in edits if r[0] == line and r[1] <= char <= r[3]),
                None)


@server.feature(lsp.TEXT_DOCUMENT_RENAME, lsp.RenameOptions(prepare_provider=True))
def rename(ls: LobsterServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
    doc, path, line, char = _at(ls, params)
    if path is None:
        return None
    try:
        edits = analysis.rename(doc.source, path, line, char, params.new_name)
    except ValueError as exc:  # the editor shows why the name is refused
        raise JsonRpcInvalidParams(str(exc)) from None
    except Exception:  # noqa: BLE001
        log.error("rename failed:\n%s", traceback.format_exc())
        return None
    if edits is None:
        return None
    return lsp.WorkspaceEdit(changes={params.text_document.uri: [
        lsp.TextEdit(_range(doc, r), new) for r, new in edits]})


def serve(*, require_approval: bool = False, strict: bool = False) -> None:
    """Serve on stdin/stdout; lint as `lobsterc lint [--require-approval [--strict]]` does."""
    logging.basicConfig(level=logging.WARNING, format="lobsterc lsp: %(message)s")
    server.require_approval = require_approval
    server.strict = strict
    server.start_io()
