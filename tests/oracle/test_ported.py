"""The original's own test suite, ported to differential cases (tests/differential/port/): every
ported test runs live through both CLIs and must agree, or differ only as the SPEC section 9
item it names. Needs LOBSTER_REFERENCE; tests/differential/README.md has the commands and
COMPAT.md the report.

The cases run a few at a time in threads (they mostly wait on processes), shared out between
the xdist workers (conftest.SharedBatch): every port runs once per session, on both workers at
once when both reach the ported tests."""

from __future__ import annotations

import os
import re

import pytest

from conftest import SharedBatch, session_dir
from differential import allowlist, known
from differential.compare import reference_command
from differential.port import NOT_PORTABLE, PORTED
from differential.port.report import COMPAT, render, stale_lines
from differential.port.run import WORKERS, judge_port

pytestmark = pytest.mark.slow  # docs/testing.md

REF, WHY = reference_command()
# `LOBSTER_PORTED_SHARD=i/n` runs every n-th ported test from the i-th (CI jobs in parallel)
_SHARD = os.environ.get("LOBSTER_PORTED_SHARD", "0/1")
_PART, _PARTS = (int(x) for x in _SHARD.split("/"))
SELECTED = [p for k, p in enumerate(PORTED) if k % _PARTS == _PART]
needs_reference = pytest.mark.skipif(REF is None, reason=f"ported tests skipped: {WHY}")
# threads per worker: each case runs both CLIs at once, so half the batch's WORKERS
THREADS = max(1, WORKERS // 2)


@pytest.fixture(scope="session")
def ported(request, tmp_path_factory, pytestconfig):
    """The selected ported tests' verdicts (every worker collects the same items, so they
    agree on the jobs)."""
    wanted = {item.callspec.params["name"] for item in request.session.items
              if item.originalname == "test_ported" and hasattr(item, "callspec")}
    jobs = [(port.name, lambda port=port: judge_port(port, REF)) for port in SELECTED
            if port.name in wanted]
    batch = SharedBatch(session_dir(tmp_path_factory, pytestconfig, "ported-verdicts"), jobs,
                        THREADS)
    yield batch
    batch.finish()


def _params():
    for port in SELECTED:
        marks = []
        if port.documented and port.documented.startswith("D"):  # an open divergence
            marks.append(pytest.mark.xfail(strict=True, reason=f"{port.documented} (known.py)"))
        yield pytest.param(port.name, marks=marks, id=port.name)


@needs_reference
@pytest.mark.parametrize("name", list(_params()))
def test_ported(name, ported):
    verdict = ported.result(name)
    assert verdict.ok, f"{name}\n{verdict.outcome.report()}"
    assert verdict.status != "known", f"{name}: still the open divergence {verdict.port.documented}"


def test_ports_are_well_formed():
    names = [p.name for p in PORTED]
    assert len(names) == len(set(names)), "a test is ported twice"
    ids = {e.id for e in allowlist.ENTRIES + known.ENTRIES}
    for port in PORTED:
        assert port.cases and all(c["steps"] for c in port.cases), port.name
        assert port.documented is None or port.documented in ids, port.name
        assert port.test not in NOT_PORTABLE.get(port.file, {}), f"{port.name} is also not portable"
    for file, table in NOT_PORTABLE.items():
        assert all(reason.strip() for reason in table.values()), file


def test_compat_report_lists_every_test_as_it_is_classified():
    """COMPAT.md's static columns (seen, ported, not portable) follow the port; the live
    columns are what test_ported checks."""
    text = COMPAT.read_text()
    assert not stale_lines(text), "COMPAT.md is stale: python -m tests.differential.port.report"
    assert re.search(r"\| \*\*total\*\* \|", text)
    assert render  # the generator
