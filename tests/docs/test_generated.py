"""The generated documentation matches the program: scripts/gen_docs.py, run in this process,
would write nothing (`python scripts/gen_docs.py` rewrites what drifted)."""

from __future__ import annotations

import importlib.util
import re

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
gen_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_docs)


def test_no_generated_page_or_region_drifted():
    stale = [str(path.relative_to(ROOT)) for path in gen_docs.drifted()]
    assert stale == [], "run `python scripts/gen_docs.py`"


def test_the_commands_page_has_every_subcommand_and_pipeline_command():
    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert {"run", "resume", "tool", "mcp", "doctor"} <= set(gen_docs.subcommands())
    for name in gen_docs.subcommands():
        assert f"## lobster {name}\n" in page or f"`{name}`" in page, name
    for name in gen_docs.pipeline_commands():
        assert f"### {name}\n" in page, name


def test_the_fields_page_lists_every_field_of_every_object():
    from lobsterc.load.fields import SHAPES

    page = (ROOT / "docs" / "workflow-fields.md").read_text(encoding="utf-8")
    for shape in SHAPES:
        section = page.split(f"\n## {shape.title}\n", 1)[1].split("\n## ", 1)[0]
        for field in shape.fields:
            assert f"| `{field.name}`" in section, (shape.title, field.name)


def test_a_region_is_filled_from_its_command_and_a_changed_one_is_drift(tmp_path):
    text = ("a\n<!-- generated: lobster graph --format mermaid "
            f"{ROOT / 'examples' / 'deploy-hosts.lobster'} -->\nstale\n<!-- end generated -->\n")
    filled = gen_docs.render_regions(text)
    assert re.search(r"-->\n```mermaid\nflowchart TD\n.*\n```\n<!-- end generated -->\n$",
                     filled, re.DOTALL)
    assert "stale" not in filled and gen_docs.render_regions(filled) == filled


def test_check_mode_reports_drift_and_writes_nothing(monkeypatch, tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("old\n")
    monkeypatch.setattr(gen_docs, "outputs", lambda: {page: "new\n"})
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    assert gen_docs.main(["--check"]) == 1
    assert page.read_text() == "old\n" and "page.md: drifted" in capsys.readouterr().err
    assert gen_docs.main([]) == 0 and page.read_text() == "new\n"
