"""Approval cards answered with each key, in the real program in tmux."""

from __future__ import annotations

from tests.support.mock_openai import Reply, ToolCall


def _shell(command: str) -> Reply:
    return Reply(tool_calls=[ToolCall("shell", {"command": command})])


def test_each_approval_key(term, server, project, auger_home):
    server.add(_shell("touch once"), _shell("mkdir session_dir"), _shell("cp once always"),
               _shell("mv once denied"), _shell("chmod 600 always"), Reply(text="feedback seen"),
               _shell("rm always"), Reply(text="unused"))
    t = term("--mode", "safe", width=120)
    t.ready()
    t.submit("make files")
    t.wait_for("[y] yes, once")
    shown = t.wait_for("$ touch once")
    assert "approval needed" in shown and "$ touch once" in shown and "safe mode asks" in shown
    t.send("y")
    t.wait_for("→ yes, once")
    t.wait_for("$ mkdir session_dir")
    t.send("s")
    t.wait_for("→ yes, this session")
    t.wait_for("$ cp once always")
    t.send("a")
    t.wait_for("→ always")
    t.wait_for("$ mv once denied")
    t.send("n")
    t.wait_for("→ denied")
    t.wait_for("$ chmod 600 always")
    t.send("f")
    t.wait_for("why not?")
    t.submit("use 644 instead")
    t.wait_for("feedback seen")
    assert (project / "once").exists() and (project / "session_dir").is_dir() and (project / "always").exists()
    assert not (project / "denied").exists()
    tool_messages = [m["content"] for m in server.chat_requests[5].messages if m["role"] == "tool"]
    assert "The user denied" in tool_messages[-2]
    assert "The user said: use 644 instead" in tool_messages[-1]
    assert "cp" in (auger_home / "rules.toml").read_text()  # "always" saved a rule
    # esc aborts the turn at the card
    t.submit("clean up")
    t.wait_for("$ rm always")
    t.send("Escape")
    t.wait_for("→ aborted the turn")
    t.wait_for("■ interrupted")
    assert (project / "always").exists()


def test_the_approval_prompt_fits_80_columns(term, server, project):
    server.add(_shell("touch narrow"), Reply(text="done narrow"))
    t = term("--mode", "safe", width=80, height=24)
    t.ready()
    t.submit("make it")
    shown = t.wait_for("approve? [y] [s] [a] [n] [f] [esc]")
    assert all(len(line) <= 80 for line in shown.splitlines())
    t.send("y")
    t.wait_for("done narrow")
    assert (project / "narrow").exists()


def test_w_lets_commands_write_beneath_the_directory_for_the_session(term, server, project):
    import shutil
    import uuid
    from pathlib import Path

    out = Path("/var/tmp") / f"auger-tui-root-{uuid.uuid4().hex[:10]}"  # outside the project and every temp dir
    out.mkdir()
    try:
        server.add(_shell(f"echo one > {out}/a.txt"), _shell(f"echo two > {out}/b.txt"), Reply(text="both written"))
        t = term("--mode", "auto", width=160)
        t.ready()
        t.submit("write outside")
        t.wait_for("[w] yes, and its dir this session")
        t.wait_for(f"[w] lets commands write beneath {out} for the rest of the session")
        t.send("w")
        t.wait_for("→ yes, and its dir this session")
        t.wait_for("both written")
        assert (out / "a.txt").read_text() == "one\n" and (out / "b.txt").read_text() == "two\n"
        assert t.history().count("approval needed") == 1
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_a_protected_file_read_is_said_and_asked_once(term, server, project):
    """A read of a protected file is refused with a warning naming it; the card lets one call have it (y) and no
    other (the next read asks again: n)."""
    (project / ".env.local").write_text("TOKEN=tui-protected-value\n")
    read = Reply(tool_calls=[ToolCall("read_file", {"path": ".env.local"})])
    server.add(read, read, Reply(text="read once"))
    t = term("--mode", "auto", width=160)
    t.ready()
    t.submit("read the env")
    t.wait_for("read_file was refused: protected file .env.local")
    t.wait_for("wants to read or change the protected file .env.local")
    t.wait_for("[y] yes, once")
    t.send("y")
    t.wait_for("read_file may read .env.local for this one call")
    t.wait_for("[n] no")
    t.send("n")
    t.wait_for("read once")
    tool_messages = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "tool"]
    assert "tui-protected-value" in tool_messages[0] and "tui-protected-value" not in tool_messages[1]
