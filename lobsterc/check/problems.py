"""The front end pass over a parsed workflow document: `iter_problems` chains small generators,
each yielding its problems with their locations, in the order the file is reported in:

  keys    unknown keys (E217; lobsterc.check.keys), every one, in document order
  values  the reference's rules (E210; lobsterc.check.values), the file's values, then each step
  types   the JSON Schema made from the field table (E210; lobsterc.check.types)

The first error, as the original reports it, is the first of them (`first_problem`): no other
checker decides it. Lint reads the same generators (`lint_problems`): every unknown key, every
repeated id and every invalid responseSchema, each with lint's detail, then every other problem
of the values and types; the document is never copied nor patched to get past them.
"""

from __future__ import annotations

from collections.abc import Iterator

from lobsterc.check.keys import unknown_keys
from lobsterc.check.types import type_problems
from lobsterc.check.values import value_problems
from lobsterc.diagnostics import CompileError, Diagnostic
from lobsterc.load import Document, Path, parse_text, read_text
from lobsterc.syntax.source import Span

__all__ = ["iter_problems", "first_problem", "lint_problems", "validated", "load_checked"]


def key_problems(doc: Document) -> Iterator[Diagnostic]:
    return (diag for diag, _ in unknown_keys(doc))


def iter_problems(doc: Document) -> Iterator[Diagnostic]:
    """Every problem of a parsed workflow file: keys, then values, then the types of the values
    the rules have not already reported (a value the reference refuses is not reported twice)."""
    yield from key_problems(doc)
    yield from _values_then_types(doc, value_problems(doc))


def _values_then_types(doc: Document, values: Iterator[Diagnostic]) -> Iterator[Diagnostic]:
    """The value problems, then the type problems at none of their places nor around them: the
    schema's "not valid" of an object whose field the rules refused says that again."""
    reported: list[Span | None] = []
    for problem in values:
        reported.append(problem.span)
        yield problem
    for problem in type_problems(doc):
        if not any(_said(problem.span, span) for span in reported):
            yield problem


def _said(outer: Span | None, inner: Span | None) -> bool:
    """Whether a problem at `outer` is about what one at `inner` said: same start, or around."""
    if outer is None or inner is None:
        return outer is inner
    start, end = (outer.line, outer.col), (outer.end_line, outer.end_col)
    return start == (inner.line, inner.col) or (
        start <= (inner.line, inner.col) and (inner.end_line, inner.end_col) <= end)


def first_problem(doc: Document) -> Diagnostic | None:
    """The problem a load refuses a file with (the original's first error), or None."""
    return next(iter_problems(doc), None)


def validated(text: str, name: str) -> Document:
    """Parse and check workflow text; `name` (a path) picks the format. Raises CompileError
    (E210) on the first problem."""
    doc = parse_text(text, name)
    problem = first_problem(doc)
    if problem is not None:
        raise CompileError([problem], doc.source)
    return doc


def load_checked(path: str) -> Document:
    """Read, parse and check a workflow file. Raises CompileError (E210) with the reference's
    message on the first problem."""
    return validated(read_text(path), path)


def lint_problems(doc: Document) -> tuple[list[Diagnostic], Diagnostic | None]:
    """For lint, which reports as much as it can: every unknown key (E217), every repeated step
    id (E210, with where it was first defined), every responseSchema that is not a JSON Schema
    (E213) and every other problem of the values and types; the first of those others comes
    apart (the file cannot be built when there is one), the rest are in the list. None: the
    file is built as it is."""
    found = [*key_problems(doc), *repeated_ids(doc), *bad_response_schemas(doc)]
    rest = list(_values_then_types(doc, value_problems(doc, lenient=True)))
    if not rest:
        return found, None
    return [*found, *rest[1:]], rest[0]


def repeated_ids(doc: Document, steps: list | None = None, at: Path = ("steps",),
                 message: str = "Duplicate workflow step id: {sid}") -> Iterator[Diagnostic]:
    """E210 for every step id (and for_each sub-step id) that an earlier one has."""
    if steps is None:
        steps = doc.data.get("steps") if isinstance(doc.data, dict) else None
        if not isinstance(steps, list):
            return
    first: dict[str, Path] = {}
    for index, step in enumerate(steps):
        sid = step.get("id") if isinstance(step, dict) else None
        if not isinstance(sid, str) or not sid:
            continue
        if sid in first:
            line = doc.span_of(*first[sid], "id").line
            yield Diagnostic("E210", message.format(sid=sid), doc.span_of(*at, index, "id"),
                             help=f"'{sid}' is first defined on line {line}")
        else:
            first[sid] = (*at, index)
        subs = step.get("steps")
        if isinstance(step.get("for_each"), str) and isinstance(subs, list):
            yield from repeated_ids(doc, subs, (*at, index, "steps"),
                                    f"Workflow step {sid} duplicate for_each sub-step id: {{sid}}")


def bad_response_schemas(doc: Document, steps: list | None = None,
                         at: Path = ("steps",)) -> Iterator[Diagnostic]:
    """E213 for every input step's responseSchema (an object) that is not a JSON Schema of the
    input dialect (vm.core.schema), at the keyword that is wrong."""
    from vm.core.schema import schema_fault

    if steps is None:
        steps = doc.data.get("steps") if isinstance(doc.data, dict) else None
        if not isinstance(steps, list):
            return
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        spec = step.get("input")
        schema = spec.get("responseSchema") if isinstance(spec, dict) else None
        if isinstance(schema, dict):
            error = schema_fault(schema)
            if error is not None:
                where = (*at, index, "input", "responseSchema", *error.absolute_path)
                yield Diagnostic(
                    "E213", f"Workflow step {step.get('id')} input.responseSchema is invalid: "
                    f"{error.message}", doc.span_of(*where),
                    help="see https://json-schema.org/understanding-json-schema/")
        subs = step.get("steps")
        if isinstance(step.get("for_each"), str) and isinstance(subs, list):
            yield from bad_response_schemas(doc, subs, (*at, index, "steps"))
