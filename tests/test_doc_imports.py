"""`@path` imports in AGENTS.md: expanded in place, read beneath the same root as the file holding them;
what leads out, cycles, too deep a chain and what does not fit the byte budget are refused with a note."""

from __future__ import annotations

import json

from auger.context.project_docs import discover_project_docs, global_docs
from auger.protocol import events as ev
from tests.support.harness import run_session
from tests.support.mock_openai import Reply

SECRET = "SECRET-KEY-4242"


def docs(project, **kwargs):
    return discover_project_docs(project, stop_at=project, **kwargs)


def test_an_import_on_its_own_line_is_expanded_in_place(project):
    (project / "docs").mkdir()
    (project / "docs" / "conventions.md").write_text("Use TABS-42.\n@style.md\n")
    (project / "docs" / "style.md").write_text("Name things NAME-7.\n")
    (project / "AGENTS.md").write_text("# Rules\n@docs/conventions.md\nMention @someone inline.\n"
                                       "```\n@docs/style.md\n```\n@alice\nEnd.\n")
    found = docs(project)
    assert found.text.index("# Rules") < found.text.index("TABS-42") < found.text.index("NAME-7") < \
        found.text.index("Mention @someone") < found.text.index("End.")
    assert "```\n@docs/style.md\n```" in found.text  # an example in a code block stays text
    assert "\n@alice\n" in found.text  # no such file: the line stays, with a warning
    assert found.imports == [project / "docs" / "conventions.md", project / "docs" / "style.md"]
    assert found.warnings == [f"{project}/AGENTS.md: @alice not imported: no such file"]


def test_imports_that_lead_out_of_the_project_are_refused_with_a_note(project, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text(SECRET)
    (project / "sub").mkdir()
    (project / "sub" / "link.md").symlink_to(outside)
    (project / "shared.md").write_text("SHARED-OK\n")
    (project / "sub" / "AGENTS.md").write_text(f"@../../outside.md\n@{outside}\n@~/outside.md\n@link.md\n"
                                               "@../shared.md\n")
    found = discover_project_docs(project / "sub", stop_at=project)
    assert SECRET not in found.text
    assert "SHARED-OK" in found.text  # `..` that stays inside the project is fine
    assert found.text.count("not imported") == 4
    assert any("leads out of the project" in w for w in found.warnings)
    assert any("absolute path" in w for w in found.warnings)
    assert any("symlink" in w and "link.md" in w for w in found.warnings)


def test_cycles_depth_and_size_are_capped(project):
    (project / "a.md").write_text("A\n@b.md\n")
    (project / "b.md").write_text("B\n@a.md\n")
    for n in range(1, 8):
        (project / f"d{n}.md").write_text(f"DEPTH-{n}\n@d{n + 1}.md\n")
    (project / "big.md").write_text("x" * 5000)
    (project / "AGENTS.md").write_text("@a.md\n@d1.md\n@big.md\n")
    found = docs(project, max_bytes=4000)
    assert found.text.count("A\n") == 1 and "import cycle" in found.text
    assert "DEPTH-5" in found.text and "DEPTH-6" not in found.text and "deeper than 5" in found.text
    assert "x" * 100 not in found.text and "larger than project_doc_max_bytes" in found.text


def test_the_global_file_imports_from_the_config_dir_only(tmp_path):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "mine.md").write_text("MY-HABITS\n")
    (tmp_path / "elsewhere.md").write_text(SECRET)
    (config_dir / "AGENTS.md").write_text("@mine.md\n@../elsewhere.md\n")
    found = global_docs(config_dir)
    assert "MY-HABITS" in found.text and SECRET not in found.text
    assert any("leads out of your config directory" in w for w in found.warnings)


def test_a_session_never_sends_an_import_from_outside_and_says_so(project, server, tmp_path):
    (tmp_path / "secret.md").write_text(SECRET)
    (project / "AGENTS.md").write_text("Rule: be brief.\n@../secret.md\n")
    server.add(Reply(text="ok"))
    run = run_session(project, server, "hi")
    sent = json.dumps(server.chat_requests[0].body)
    assert "be brief" in sent and SECRET not in sent
    assert any("@../secret.md not imported" in w.message for w in run.of(ev.WarningEvent))
