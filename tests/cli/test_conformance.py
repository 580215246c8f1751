"""Every recorded run of the original Lobster in ../shared/conformance, through our real CLI."""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import LOBSTER, ROOT

CONFORMANCE = ROOT.parent / "shared" / "conformance"


def _cases():
    if not (CONFORMANCE / "replay.py").exists():
        return []
    return sorted(p for p in (CONFORMANCE / "cases").iterdir() if (p / "case.json").exists())


def _replay():
    spec = importlib.util.spec_from_file_location("replay", CONFORMANCE / "replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not _cases(), reason="../shared/conformance is not beside this checkout")
@pytest.mark.parametrize("case_dir", _cases(), ids=lambda p: p.name)
def test_conformance_case(case_dir):
    replay = _replay()
    case, actual = replay.run_case(case_dir, [LOBSTER])
    # error.checkpoint and error.detail are additive, as error.code and error.location are
    # (which replay sets aside itself): a retry after a finished resume says how it ended
    # (issue 24), and an error carries its JSON position, excerpt or allowed values
    # (docs/differences.md item 19); the original's fields and words are compared as recorded
    actual = [replay.drop_paths(step, ["error.checkpoint", "error.detail"]) for step in actual]
    expected = json.loads((case_dir / "expected.json").read_text())["steps"]
    problems = replay.compare(case, expected, actual)
    assert not problems, "\n".join(problems)
