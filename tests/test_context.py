"""Context gathering: base instructions, AGENTS.md discovery, environment block, skills, custom prompts.
All on real temporary trees; nothing here touches the network or runs git."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from auger.context.instructions import EnvironmentContext, base_instructions, git_branch, model_family
from auger.context.project_docs import (ProjectDocs, discover_project_docs, find_repo_root, global_docs,
                                        user_instructions)
from auger.context.prompts import CustomPrompt, discover_prompts, expand_slash
from auger.context.skills import discover_skills, parse_front_matter


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --- base instructions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model, family", [
    ("gpt-4.1", "openai"), ("o3-mini", "openai"), ("o4-mini", "openai"), ("o1", "openai"),
    ("gpt-5-codex", "openai"), ("codex-mini-latest", "openai"), ("openai/gpt-4o", "openai"),
    ("claude-sonnet-4-5", "anthropic"), ("anthropic/claude-3.7-sonnet", "anthropic"),
    ("qwen2.5-coder:32b", "open_weights"), ("Qwen/Qwen3-Coder-480B", "open_weights"),
    ("meta-llama/Llama-3.3-70B", "open_weights"), ("deepseek-chat", "open_weights"),
    ("mistral-large", "open_weights"), ("gemma3:27b", "open_weights"), ("gpt-oss-120b", "open_weights"),
    ("some-new-model", "default"), ("", "default"), (None, "default"),
])
def test_model_family(model, family):
    assert model_family(model) == family


def test_base_instructions_differ_by_family_and_are_deterministic():
    openai, claude, qwen, other = (base_instructions(m) for m in ("gpt-4.1", "claude-opus-4", "qwen3", "x-1"))
    assert len({openai, claude, qwen, other}) == 4
    for text in (openai, claude, qwen):  # the default prompt plus a family addendum
        assert text.startswith(other.rstrip())
    assert "JSON" in qwen and "one tool at a time" in qwen
    assert base_instructions("gpt-4.1") == openai  # same object from the cache, same bytes
    assert str(datetime.date.today().year) not in openai  # nothing that changes from day to day
    assert other.startswith("You are auger") and other.endswith("\n")


def test_nested_docs_root_first_with_override_in_the_middle(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "AGENTS.md", "root rules")
    write(repo / "pkg" / "AGENTS.md", "pkg rules (shadowed)")
    write(repo / "pkg" / "AGENTS.override.md", "pkg override")
    write(repo / "pkg" / "mod" / "AGENTS.md", "mod rules\n")
    write(tmp_path / "AGENTS.md", "outside the repo: never read")
    docs = discover_project_docs(repo / "pkg" / "mod")
    assert docs.text == ("<!-- AGENTS.md -->\nroot rules\n\n"
                         "<!-- pkg/AGENTS.override.md -->\npkg override\n\n"
                         "<!-- pkg/mod/AGENTS.md -->\nmod rules")
    assert docs.sources == [repo / "AGENTS.md", repo / "pkg" / "AGENTS.override.md", repo / "pkg/mod/AGENTS.md"]
    assert not docs.truncated and docs.warnings == []


def test_fallback_names_and_empty_files(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "CLAUDE.md", "claude rules")
    write(repo / "a" / "AGENTS.md", "  \n")  # empty: chosen (it exists) but contributes nothing
    write(repo / "a" / "CLAUDE.md", "not used: AGENTS.md wins in this directory")
    write(repo / "a" / "b" / "OTHER.md", "other")
    write(repo / "a" / "b" / "CLAUDE.md", "claude in b")
    docs = discover_project_docs(repo / "a" / "b", fallback_names=["CLAUDE.md", "OTHER.md"])
    assert docs.text == "<!-- CLAUDE.md -->\nclaude rules\n\n<!-- a/b/CLAUDE.md -->\nclaude in b"
    assert discover_project_docs(repo / "a" / "b").text == ""  # without fallbacks


def test_git_file_marks_the_root_of_a_worktree(tmp_path):
    write(tmp_path / "AGENTS.md", "above the worktree")
    (tmp_path / ".git").mkdir()
    worktree = tmp_path / "wt"
    write(worktree / ".git", "gitdir: ../.git/worktrees/wt\n")
    write(worktree / "AGENTS.md", "worktree rules")
    assert find_repo_root(worktree / "sub") == worktree
    docs = discover_project_docs(worktree / "sub")
    assert docs.text == "<!-- AGENTS.md -->\nworktree rules"


def test_no_repository_uses_cwd_or_stop_at(tmp_path):
    write(tmp_path / "AGENTS.md", "top")
    write(tmp_path / "proj" / "AGENTS.md", "proj")
    write(tmp_path / "proj" / "sub" / "AGENTS.md", "sub")
    cwd = tmp_path / "proj" / "sub"
    assert find_repo_root(cwd, stop_at=tmp_path) is None
    assert discover_project_docs(cwd, stop_at=cwd).text == "<!-- AGENTS.md -->\nsub"
    docs = discover_project_docs(cwd, stop_at=tmp_path / "proj")
    assert docs.text == "<!-- AGENTS.md -->\nproj\n\n<!-- sub/AGENTS.md -->\nsub"
    outside = discover_project_docs(cwd, stop_at=tmp_path / "elsewhere")
    assert outside.text.endswith("sub") and "not inside" in outside.warnings[0]


def test_cap_cuts_at_a_character_boundary_and_warns(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "AGENTS.md", "a" * 10)
    write(repo / "d" / "AGENTS.md", "é" * 10)  # 20 bytes, two per character
    write(repo / "d" / "e" / "AGENTS.md", "never reached")
    docs = discover_project_docs(repo / "d" / "e", max_bytes=15)  # 5 bytes left: cut inside the third é
    assert docs.truncated
    assert docs.sources == [repo / "AGENTS.md", repo / "d" / "AGENTS.md"]
    assert "<!-- d/AGENTS.md -->\néé\n[truncated:" in docs.text
    assert "16 bytes of d/AGENTS.md and 1 more file left out" in docs.text
    docs.text.encode("utf-8")  # well-formed: no half character
    assert len(docs.warnings) == 1 and str(repo / "d" / "AGENTS.md") in docs.warnings[0]
    assert "never reached" not in docs.text


def test_cap_reached_exactly_at_a_file_boundary(tmp_path):
    (tmp_path / ".git").mkdir()
    write(tmp_path / "AGENTS.md", "1234")
    write(tmp_path / "x" / "AGENTS.md", "more")
    docs = discover_project_docs(tmp_path / "x", max_bytes=4)
    assert docs.truncated and docs.sources == [tmp_path / "AGENTS.md"]
    assert docs.text.endswith("[truncated: project docs are limited to 4 bytes; 4 bytes of x/AGENTS.md left out]")


def test_non_utf8_and_binary_files_warn_but_never_raise(tmp_path):
    (tmp_path / ".git").mkdir()
    write(tmp_path / "AGENTS.md", b"caf\xe9 rules")
    write(tmp_path / "bin" / "AGENTS.md", b"\x00\x01\x02")
    docs = discover_project_docs(tmp_path / "bin")
    assert docs.text == "<!-- AGENTS.md -->\ncaf\ufffd rules"
    assert len(docs.warnings) == 2
    assert "UTF-8" in docs.warnings[0] and "binary" in docs.warnings[1]


def test_unreadable_file_is_skipped_with_a_warning(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    write(tmp_path / "AGENTS.md", "secret")
    import auger.context.project_docs as project_docs

    real = project_docs.read_beneath

    def deny(root, rel, **kw):  # tests run as root, whom file modes do not stop
        if rel == "AGENTS.md":
            raise PermissionError(13, "Permission denied")
        return real(root, rel, **kw)

    monkeypatch.setattr(project_docs, "read_beneath", deny)
    docs = discover_project_docs(tmp_path)
    assert docs.text == "" and "Permission denied" in docs.warnings[0]


def test_global_docs_and_user_instructions(tmp_path):
    config = tmp_path / "config"
    assert global_docs(config).text == ""
    write(config / "AGENTS.md", "global rules")
    assert global_docs(config).text == f"<!-- {config / 'AGENTS.md'} -->\nglobal rules"
    write(config / "AGENTS.override.md", "override rules")
    glob = global_docs(config)
    assert glob.text.endswith("override rules") and glob.sources == [config / "AGENTS.override.md"]

    (tmp_path / "p" / ".git").mkdir(parents=True)
    write(tmp_path / "p" / "AGENTS.md", "project rules")
    project = discover_project_docs(tmp_path / "p")
    text = user_instructions(glob, project)
    assert text.startswith("<user_instructions>\n<!-- ") and text.endswith("project rules\n</user_instructions>")
    assert text.index("override rules") < text.index("project rules")
    assert user_instructions(ProjectDocs(), project) == \
        "<user_instructions>\n<!-- AGENTS.md -->\nproject rules\n</user_instructions>"
    assert user_instructions(ProjectDocs(), ProjectDocs()) is None


# --- environment context -------------------------------------------------------------------------------


def test_git_branch_from_head(tmp_path):
    repo = tmp_path / "repo"
    write(repo / ".git" / "HEAD", "ref: refs/heads/feature/x\n")
    (repo / "src").mkdir()
    assert git_branch(repo / "src") == "feature/x"
    write(repo / ".git" / "HEAD", "0123456789abcdef0123456789abcdef01234567\n")
    assert git_branch(repo) == "(HEAD detached at 0123456)"
    write(repo / ".git" / "HEAD", "garbage")
    assert git_branch(repo) is None
    (tmp_path / "outside").mkdir()
    assert git_branch(tmp_path / "outside") is None


def test_git_branch_in_a_worktree(tmp_path):
    main = tmp_path / "main"
    write(main / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(main / ".git" / "worktrees" / "wt" / "HEAD", "ref: refs/heads/topic\n")
    write(tmp_path / "wt" / ".git", "gitdir: ../main/.git/worktrees/wt\n")  # relative, as git writes it
    assert git_branch(tmp_path / "wt") == "topic"
    write(tmp_path / "abs" / ".git", f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    assert git_branch(tmp_path / "abs") == "topic"
    write(tmp_path / "broken" / ".git", "gitdir: nowhere\n")
    assert git_branch(tmp_path / "broken") is None


def test_environment_capture_and_render(tmp_path):
    write(tmp_path / ".git" / "HEAD", "ref: refs/heads/main\n")
    env = EnvironmentContext.capture(tmp_path, "auto", "gpt-4.1", today=datetime.date(2025, 3, 9))
    assert (env.shell, env.date, env.git_branch, env.model) == ("bash", "2025-03-09", "main", "gpt-4.1")
    lines = env.render().splitlines()
    assert lines[0] == "<environment_context>" and lines[-1] == "</environment_context>"
    assert lines[1:5] == [f"  <cwd>{tmp_path}</cwd>", "  <shell>bash</shell>", f"  <os>{env.os}</os>",
                              "  <date>2025-03-09</date>"]
    assert "  <git_branch>main</git_branch>" in lines and "  <model>gpt-4.1</model>" in lines
    assert env.render() == env.render()


def test_environment_render_skips_unset_fields_and_escapes():
    env = EnvironmentContext(cwd="/p/<a&b>", shell="sh", trust_mode="safe")
    assert env.render() == ("<environment_context>\n  <cwd>/p/&lt;a&amp;b&gt;</cwd>\n  <shell>sh</shell>\n"
                            "  <trust_mode>safe</trust_mode>\n</environment_context>")


def test_environment_render_changes():
    before = EnvironmentContext(cwd="/p", shell="sh", date="2025-01-01", git_branch="main", trust_mode="auto")
    assert before.render_changes(before) is None
    assert EnvironmentContext(**{**before.__dict__}).render_changes(before) is None
    after = EnvironmentContext(cwd="/p", shell="sh", date="2025-01-02", git_branch="a<b", trust_mode="auto")
    assert after.render_changes(before) == ("<environment_context>\n  <date>2025-01-02</date>\n"
                                            "  <git_branch>a&lt;b</git_branch>\n</environment_context>")
    left = EnvironmentContext(cwd="/q", shell="sh", date="2025-01-01", trust_mode="auto")
    assert left.render_changes(before) == ("<environment_context>\n  <cwd>/q</cwd>\n  <git_branch />\n"
                                           "</environment_context>")


# --- skills --------------------------------------------------------------------------------------------


def skill(base: Path, folder: str, header: str, body: str = "Do the thing.\n") -> Path:
    return write(base / folder / "SKILL.md", f"---\n{header}\n---\n\n{body}")


def test_skills_discovery(tmp_path):
    project, config = tmp_path / "proj", tmp_path / "config"
    pskills, uskills = project / ".auger" / "skills", config / "skills"
    skill(pskills, "deploy", "name: deploy\ndescription: Deploy the app (project version)")
    skill(uskills, "deploy", "name: deploy\ndescription: user version")
    skill(uskills, "notes", 'name: "release-notes"  # quoted\ndescription: >\n  Write release notes\n'
                            '  from the log.\n\n  Use for changelogs.\nlicense: MIT',
          body="# Notes\n\nSteps.\n")
    skill(uskills, "group/nested", "name: nested\ndescription: 'it''s nested'")
    write(uskills / "nofront" / "SKILL.md", "just text")
    skill(uskills, "noname", "description: no name here")
    write(uskills / "unclosed" / "SKILL.md", "---\nname: x\ndescription: y\n")
    skill(pskills, "dup", "name: nested\ndescription: clashes with the user skill too")
    skill(pskills, "dup2", "name: deploy\ndescription: second project deploy")
    skill(uskills, "odd", "name: odd\ndescription: fine\nthis line is odd")
    (uskills / "empty-folder").mkdir()

    index = discover_skills(project, config)
    assert [s.name for s in index.skills] == ["deploy", "nested", "odd", "release-notes"]
    deploy = index.get("deploy")
    assert (deploy.source, deploy.description) == ("project", "Deploy the app (project version)")
    assert index.get("nested").source == "project"
    notes = index.get("release-notes")
    assert notes.description == "Write release notes from the log. Use for changelogs."  # one line
    assert notes.body() == "# Notes\n\nSteps.\n" and notes.path == uskills / "notes" / "SKILL.md"
    assert index.get("missing") is None

    warnings = "\n".join(index.warnings)
    assert "nofront" in warnings and "no front matter" in warnings
    assert "noname" in warnings and "no name" in warnings
    assert "unclosed" in warnings
    assert "duplicate skill name 'deploy'" in warnings
    assert "user skill 'deploy' is overridden" in warnings and "user skill 'nested' is overridden" in warnings
    assert "this line is odd" in warnings


def test_skills_render_list(tmp_path):
    project, config = tmp_path / "proj", tmp_path / "config"
    assert discover_skills(project, config).render_list() is None
    skill(project / ".auger" / "skills", "a", "name: a\ndescription: " + "word " * 100)
    skill(config / "skills", "b", "name: b\ndescription: user skill")
    text = discover_skills(project, config).render_list()
    lines = text.splitlines()
    assert lines[0] == "<skills>" and lines[-1] == "</skills>"
    a_line = next(line for line in lines if line.startswith("- a: "))
    assert a_line.endswith("… (.auger/skills/a/SKILL.md)") and len(a_line) < 260
    assert f"- b: user skill ({config / 'skills' / 'b' / 'SKILL.md'})" in lines


def test_front_matter_subset():
    meta, body, problems = parse_front_matter(
        "---\r\n"
        "name: plain value # comment\r\n"
        "hash: C# stays\r\n"
        'dq: "a \\"quoted\\" value\\n"\r\n'
        "lit: |-\r\n  line 1\r\n    indented\r\n  line 3\r\n"
        "fold: >\r\n  one\r\n  two\r\n\r\n  three\r\n"
        "empty:\r\n"
        "tags:\r\n  - a\r\n  - b\r\n"
        "cont: first\r\n  second\r\n"
        "---\r\nbody\r\n")
    assert meta == {"name": "plain value", "hash": "C# stays", "dq": 'a "quoted" value\n',
                    "lit": "line 1\n  indented\nline 3", "fold": "one two\nthree\n", "empty": "", "tags": "",
                    "cont": "first second"}
    assert body == "body\r\n" and problems == []
    assert parse_front_matter("no header") == (None, "no header", [])
    meta, _, problems = parse_front_matter("---\nname: 'unterminated\n---\n")
    assert meta["name"] == "unterminated" and "unterminated" in problems[0]


# --- custom prompts ------------------------------------------------------------------------------------


def test_prompts_discovery_project_wins(tmp_path):
    project, config = tmp_path / "proj", tmp_path / "config"
    write(config / "prompts" / "fix.md", "user fix $1")
    write(config / "prompts" / "review.md",
          "---\ndescription: Review a change\nargument-hint: <path> [focus]\n---\nReview $1.\n")
    write(config / "prompts" / "notes.txt", "not markdown")
    write(config / "prompts" / "two words.md", "cannot be typed")
    write(project / ".auger" / "prompts" / "fix.md", "project fix $1")
    prompts = discover_prompts(project, config)
    assert sorted(prompts) == ["fix", "review"]
    assert prompts["fix"].source == "project" and prompts["fix"].body == "project fix $1"
    review = prompts["review"]
    assert (review.description, review.argument_hint, review.body) == ("Review a change", "<path> [focus]", "Review $1.")
    assert discover_prompts(tmp_path / "none", tmp_path / "none") == {}


def prompt(body: str) -> dict[str, CustomPrompt]:
    return {"fix": CustomPrompt(name="fix", body=body, path=Path("fix.md"), source="user")}


def test_expand_slash_placeholders():
    p = prompt("Fix $1 in $2 (missing: [$9]). All: $ARGUMENTS. Cost: $$5, literal $$1.")
    assert expand_slash('/fix "two words" x.py', p) == \
        'Fix two words in x.py (missing: []). All: "two words" x.py. Cost: $5, literal $1.'
    assert expand_slash("/fix", p) == "Fix  in  (missing: []). All: . Cost: $5, literal $1."
    assert expand_slash("/fix it's broken", p).startswith("Fix it's in broken")  # unbalanced quote
    assert expand_slash("/fix $2 b", p).startswith("Fix $2 in b")  # arguments are not expanded again
    assert expand_slash("/fix\nmulti\nline", p).startswith("Fix multi in line")


def test_expand_slash_not_a_prompt():
    p = prompt("Fix $1")
    assert expand_slash("/unknown x", p) is None
    assert expand_slash("/fixx", p) is None
    assert expand_slash("please /fix x", p) is None
    assert expand_slash("fix x", p) is None
    assert expand_slash("", p) is None


def test_expand_slash_without_placeholders_appends_arguments():
    assert expand_slash("/fix the login bug", prompt("Fix the bug; cost $$0.")) == \
        "Fix the bug; cost $0.\n\nthe login bug"
    assert expand_slash("/fix", prompt("Fix the bug.")) == "Fix the bug."
