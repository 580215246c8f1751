"""One table of codes: every code the source uses is in vm/core/codes.py, and every entry is used."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from vm.core.codes import CODES, envelope_type

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"[EWT]\d{3}")
TABLE = ROOT / "vm" / "core" / "codes.py"


def used_codes() -> dict[str, list[str]]:
    """Every string constant in vm/ and lobsterc/ that looks like a code, with where it is."""
    found: dict[str, list[str]] = {}
    for path in sorted([*ROOT.glob("vm/**/*.py"), *ROOT.glob("lobsterc/**/*.py")]):
        if path == TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and CODE.fullmatch(node.value):
                found.setdefault(node.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_code_used_is_in_the_table():
    unknown = {code: where for code, where in used_codes().items() if code not in CODES}
    assert unknown == {}


def test_every_code_in_the_table_is_used():
    assert sorted(set(CODES) - set(used_codes())) == []


def test_ranges_do_not_share_numbers():
    """Each hundred belongs to one family: lint warnings never share a range with errors."""
    families: dict[str, set[str]] = {}
    for code, entry in CODES.items():
        families.setdefault(code[1], set()).add(code[0] + ("w" if entry.envelope == "lint" else ""))
    assert all(len(kinds) == 1 for kinds in families.values()), families


def test_envelope_types():
    assert envelope_type("E101") == "parse_error"
    assert envelope_type("E201") == "runtime_error"
    assert envelope_type("E512") == "parse_error"
    assert all(CODES[c].envelope == "lint" for c in CODES if c.startswith("W"))


def test_an_envelope_takes_its_error_type_from_the_code_table():
    from vm.service.protocol.envelope import RequestError, error_envelope, exit_code

    for code, entry in CODES.items():
        if entry.envelope == "lint":
            continue
        envelope = error_envelope(code, "why")
        assert envelope["error"] == {"type": entry.envelope, "message": "why", "code": code}
        assert RequestError("why", code).envelope == envelope
        assert exit_code(envelope) == (2 if entry.envelope == "parse_error" else 1)
