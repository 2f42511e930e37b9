"""web_fetch end to end against real loopback web servers: where URLs may come from, how the policy asks
and refuses in each mode, what the model is shown (Markdown, PDF text, plain text, long pages cut with
the rest kept for recall), and `auger policy check --fetch`."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from auger.models import tls
from auger.policy.web import WebPolicy
from auger.protocol import events as ev
from auger.tools.web_http import FetchFailed, fetch
from tests.support.harness import auger_cli, run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.support.web_server import Page, WebServer

DOCS = ("egress_hosts={\"docs.test\" = \"127.0.0.1\", \"other.test\" = \"127.0.0.1\"}",
        'egress_allow=["docs.test"]')


def _fetch(url: str, **extra) -> ToolCall:
    return ToolCall("web_fetch", {"url": url, **extra})


def _session(project, calls, prompt, *overrides, interactive=False, on_event=None):
    with MockChatServer([*(Reply(tool_calls=[call]) for call in calls), Reply(text="done")]) as server:
        run = run_session(project, server, prompt, overrides=(*DOCS, *overrides), interactive=interactive,
                          on_event=on_event)
        return run, [r.body for r in server.chat_requests]


def _fetches(run) -> list[ev.ToolCallEnded]:
    return [e for e in run.of(ev.ToolCallEnded) if e.name == "web_fetch"]


def _tool_messages(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_a_link_on_a_fetched_page_may_be_fetched_in_turn(project):
    with WebServer({"/": Page("<p>See the <a href='/next'>next page</a>.</p>"),
                    "/next": Page("<h1>Next</h1>")}) as docs:
        start, following = docs.url("/", host="docs.test"), docs.url("/next", host="docs.test")
        run, _ = _session(project, [_fetch(start), _fetch(following)], f"start at {start}")
        assert [r.path for r in docs.requests] == ["/", "/next"]
    assert all(e.ok for e in _fetches(run)), [e.output for e in _fetches(run)]


def test_a_url_in_a_project_file_the_model_read_may_be_fetched(project):
    with WebServer({"/spec": Page("the spec", "text/plain")}) as docs:
        url = docs.url("/spec", host="docs.test")
        (project / "README.md").write_text(f"The spec lives at {url}.\n")
        run, bodies = _session(project, [ToolCall("read_file", {"path": "README.md"}), _fetch(url)], "read the spec")
        assert [r.path for r in docs.requests] == ["/spec"]
    assert _fetches(run)[0].ok
    assert "the spec" in _tool_messages(bodies[2])[-1]


def test_in_pending_mode_a_url_in_a_project_file_may_be_fetched_and_one_a_command_wrote_may_not(project):
    """The tools read a copy made when the session opened; the file is looked at again in the project."""
    with WebServer({"/spec": Page("the spec", "text/plain")}) as docs:
        url, planted = docs.url("/spec", host="docs.test"), docs.url("/planted", host="docs.test")
        (project / "README.md").write_text(f"The spec lives at {url}.\n")
        calls = [ToolCall("read_file", {"path": "README.md"}), _fetch(url),
                 ToolCall("shell", {"command": f"echo {planted} > notes.md"}),
                 ToolCall("read_file", {"path": "notes.md"}), _fetch(planted)]
        run, _ = _session(project, calls, "read the spec", "pending=true", "approve_all=true")
        assert [r.path for r in docs.requests] == ["/spec"]
    spec, notes = _fetches(run)
    assert spec.ok and notes.denied == "policy"


def test_any_url_may_be_fetched_when_the_user_allows_it(project):
    with WebServer({"/made-up": Page("ok", "text/plain")}) as docs:
        run, _ = _session(project, [_fetch(docs.url("/made-up", host="docs.test"))], "go", "web_fetch_any_url=true")
        assert [r.path for r in docs.requests] == ["/made-up"]
    assert _fetches(run)[0].ok


def test_interactive_a_host_outside_the_allowlist_asks_and_a_session_approval_covers_the_host(project):
    """Approving a host is not consent to reach a private address: other.test (mapped to loopback, not in
    egress_allow) is asked about once, then refused by its address each time."""
    from auger.protocol.ops import ApprovalDecision

    asked: list[ev.ApprovalRequest] = []

    def approve(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            session.submit(ApprovalDecision(event.request_id, "approve_session"))

    with WebServer({"/a": Page("A", "text/plain"), "/b": Page("B", "text/plain")}) as other:
        a, b = other.url("/a", host="other.test"), other.url("/b", host="other.test")
        run, _ = _session(project, [_fetch(a), _fetch(b)], f"read {a} and {b}", "mode=safe", interactive=True,
                          on_event=approve)
        assert other.requests == []
    assert len(asked) == 1, "the session approval did not cover the host"
    details = asked[0].details
    assert details.tool == "web_fetch" and details.effect == "remote_action" and details.subject == a
    assert "other.test is not in the egress allowlist" in " ".join(details.findings)
    assert all("resolves to 127.0.0.1, which is a private or local address" in e.output for e in _fetches(run))


def test_plan_mode_reads_allowed_hosts_and_refuses_others(project):
    with WebServer({"/": Page("<p>docs</p>")}) as site:
        allowed, other = site.url("/", host="docs.test"), site.url("/", host="other.test")
        run, _ = _session(project, [_fetch(allowed), _fetch(other)], f"read {allowed} and {other}", "mode=plan")
        assert len(site.requests) == 1 and site.requests[0].headers["host"].startswith("docs.test:")
    first, second = _fetches(run)
    assert first.ok
    assert second.denied == "policy" and "plan mode allows read-only actions only" in second.output


def test_an_exec_policy_rule_forbids_a_host(project, isolated_home):
    (isolated_home / "rules.toml").write_text('[[rules]]\nprefix = "web_fetch docs.test"\ndecision = "forbidden"\n')
    with WebServer({"/": Page("<p>docs</p>")}) as site:
        url = site.url("/", host="docs.test")
        run, _ = _session(project, [_fetch(url)], f"read {url}")
        assert site.requests == []
    assert _fetches(run)[0].denied == "policy" and "forbidden by an exec-policy rule" in _fetches(run)[0].output


def test_a_long_page_shows_the_passages_matching_the_prompt_and_keeps_the_rest_for_recall(project):
    filler = "".join(f"<p>Paragraph {n} is about nothing in particular, said at length.</p>" for n in range(900))
    html = f"<h1>Manual</h1>{filler}<p>The frobnicate flag sets the retry budget.</p>{filler}<p>THE END</p>"
    with WebServer({"/manual": Page(html)}) as docs:
        url = docs.url("/manual", host="docs.test")
        fetch = ToolCall("web_fetch", {"url": url, "prompt": "what does the frobnicate flag do?"}, id="call_page")
        recall = ToolCall("recall", {"call_id": "call_page", "query": "THE END"})
        run, bodies = _session(project, [fetch, recall], f"read {url}")
    shown, recalled = _tool_messages(bodies[2])
    assert "The frobnicate flag sets the retry budget." in shown and "# Manual" in shown
    assert "THE END" not in shown and "recall with call_id='call_page'" in shown
    assert len(shown) < 17_000
    assert "THE END" in recalled


def test_pdf_and_plain_text_are_shown_as_text(project):
    with WebServer({"/paper.pdf": Page(_tiny_pdf("Widgets considered harmful"), "application/pdf"),
                    "/notes.txt": Page("plain notes\n", "text/plain; charset=utf-8"),
                    "/blob": Page(b"\x00\x01\x02", "application/octet-stream")}) as docs:
        urls = [docs.url(p, host="docs.test") for p in ("/paper.pdf", "/notes.txt", "/blob")]
        run, bodies = _session(project, [_fetch(u) for u in urls], " ".join(urls))
    pdf, text, blob = _tool_messages(bodies[-1])
    assert "Widgets considered harmful" in pdf and "--- page 1 ---" in pdf
    assert "plain notes" in text
    assert "application/octet-stream content, 3 bytes: not shown" in blob


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Widget docs</title>
<meta name="description" content="META-DESCRIPTION"><link rel="stylesheet" href="/site.css">
<style>.hidden { color: STYLE-RULE }</style><script>window.tracker = "SCRIPT-CODE";</script>
<body><nav><a href="/">NAV-HOME</a></nav>
<h1>Widgets</h1><p>A widget <b>turns</b>.<br>It also spins.
<p>Read the <a href="/guide">install guide</a> first.
<h2>Steps</h2><ul><li>open the box</li><li>turn the widget</li></ul>
<noscript>NOSCRIPT-TEXT</noscript><template><p>TEMPLATE-TEXT</p></template>
<script type="module">import "SCRIPT-MODULE";</script></body></html>"""
HIDDEN = ("META-DESCRIPTION", "STYLE-RULE", "SCRIPT-CODE", "NAV-HOME", "NOSCRIPT-TEXT", "TEMPLATE-TEXT",
          "SCRIPT-MODULE", "<p", "<script", "<b>", "&amp;")


def _fetched_by_auger(project, home, page: Page, python=None) -> str:
    """What the model reads after the real `auger exec` fetched the page (`python`: another install's)."""
    with WebServer({"/widgets": page}) as docs:
        url = docs.url("/widgets", host="docs.test")
        with MockChatServer([Reply(tool_calls=[_fetch(url)]), Reply(text="done")]) as server:
            result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", *(
                arg for override in DOCS for arg in ("-c", override)), f"read {url}", home=home, cwd=project,
                python=python)
            assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
            output = _tool_messages(server.chat_requests[1].body)[0]
        assert [r.path for r in docs.requests] == ["/widgets"]
    return output.replace(f"http://docs.test:{docs.port}", "http://docs.test")


def test_a_plain_install_reads_a_page_as_text_with_its_structure_without_scripts_or_styles(project, auger_home,
                                                                                            plain_python):
    """Without the `web` extra the standard library's parser reads the page: no script, style or head
    metadata reaches the model, and headings, paragraphs, line breaks, lists and links keep their shape."""
    text = _fetched_by_auger(project, auger_home, Page(PAGE), python=plain_python)
    assert not [hidden for hidden in HIDDEN if hidden in text], text
    body = text.split("\n\n", 1)[1]  # after the fetch's header line
    assert body == ("# Widgets\n\nA widget turns.\nIt also spins.\n\n"
                    "Read the [install guide](http://docs.test/guide) first.\n\n"
                    "## Steps\n\n- open the box\n- turn the widget"), body
    pdf = _fetched_by_auger(project, auger_home, Page(_tiny_pdf("Widgets"), "application/pdf"), python=plain_python)
    assert "PDF: " in pdf and "pip install 'auger[web]'" in pdf


def test_with_the_web_extra_a_page_is_markdown(project, auger_home):
    text = _fetched_by_auger(project, auger_home, Page(PAGE))
    assert not [hidden for hidden in HIDDEN if hidden in text], text
    assert "# Widgets" in text and "A widget **turns**." in text and "## Steps" in text
    assert "[install guide](http://docs.test/guide)" in text and "- open the box\n- turn the widget" in text


def test_web_fetch_is_not_offered_when_turned_off(project):
    with MockChatServer([Reply(text="done")]) as server:
        run_session(project, server, "hi", overrides=("web_fetch=false",))
        tools = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    assert "web_fetch" not in tools and "read_file" in tools


def test_policy_check_explains_a_fetch(project, auger_home):
    (auger_home / "config.toml").write_text('egress_allow = ["docs.test"]\n')
    allowed = auger_cli("policy", "check", "--fetch", "https://docs.test/guide", home=auger_home, cwd=project)
    other = auger_cli("policy", "check", "--mode", "plan", "--fetch", "https://other.test/", home=auger_home,
                      cwd=project)
    local = auger_cli("policy", "check", "--fetch", "http://127.0.0.1:8000/", home=auger_home, cwd=project)
    bad = auger_cli("policy", "check", "--fetch", "ftp://docs.test/x", home=auger_home, cwd=project)
    assert allowed.returncode == 0, allowed.stderr
    assert "effect:   read_only" in allowed.stdout and "decision: allow" in allowed.stdout
    assert "effect:   remote_action" in other.stdout and "decision: deny in plan mode" in other.stdout
    assert "refused" in local.stdout and "private or local address" in local.stdout
    assert bad.returncode == 0 and "only http:// and https:// URLs are fetched" in bad.stdout
    assert "must have appeared in the conversation" in allowed.stdout


def _tiny_pdf(text: str) -> bytes:
    """A one-page PDF showing `text` in Helvetica (offsets computed, as a real writer would)."""
    content = f"BT /F1 18 Tf 20 100 Td ({text}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 144] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length " + str(len(content)).encode() + b" >>\nstream\n" + content + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)



def test_a_sub_agent_may_fetch_a_url_the_user_gave_its_parent(project):
    from tests.support.agents import Routes, spawn

    with WebServer({"/": Page("<h1>Shared</h1>")}) as docs, MockChatServer() as server:
        url = docs.url("/", host="docs.test")
        Routes({f"summarise {url}": [Reply(tool_calls=[spawn(f"fetch {url}")]), Reply(text="done")],
                f"fetch {url}": [Reply(tool_calls=[_fetch(url)]), Reply(text="fetched")]}).install(server)
        run = run_session(project, server, f"summarise {url}", overrides=DOCS)
        assert [r.path for r in docs.requests] == ["/"]
    assert _fetches(run)[0].ok


def test_https_goes_to_the_checked_address_and_verifies_the_certificate_against_the_name(tmp_path, monkeypatch):
    """The connection is pinned to the address the policy checked, while TLS still proves the name: a
    certificate for docs.test passes for docs.test and fails for another name mapped to the same server."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: this test makes its certificate with it "
                    "(scripts/install-system-deps installs it)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=docs.test", "-addext", "subjectAltName=DNS:docs.test"],
                   check=True, capture_output=True, timeout=60)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.setattr(tls, "_context", None)  # the process's context, built again from SSL_CERT_FILE
    monkeypatch.setattr(tls, "_builder", None)
    policy = WebPolicy.build(["docs.test", "alias.test"], {"docs.test": "127.0.0.1", "alias.test": "127.0.0.1"})
    with WebServer({"/": Page("secure", "text/plain")}, certificate=(str(cert), str(key))) as site:
        got = asyncio.run(fetch(site.url("/", host="docs.test"), policy, accept="*/*", user_agent="t", max_bytes=100))
        with pytest.raises(FetchFailed, match="CERTIFICATE_VERIFY_FAILED|certificate"):
            asyncio.run(fetch(site.url("/", host="alias.test"), policy, accept="*/*", user_agent="t", max_bytes=100))
        assert [r.headers["host"] for r in site.requests] == [f"docs.test:{site.port}"]
    assert got.status == 200 and got.body == b"secure"
