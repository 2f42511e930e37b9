"""Plugins, found for real: an installed distribution's `auger.plugins` entry point (a `.dist-info` on the
`sys.path` of an `auger exec` subprocess, discovered by importlib.metadata), and project-local
modules, which run only when the user's config opts in."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

from auger.tools.plugins import load_plugins
from tests.support.harness import auger_cli, json_events
from tests.support.mock_openai import Reply, ToolCall

from tests.test_hooks import run_with, tool_message, warnings

PLUGIN = '''
from auger.tools.base import ToolResult, ToolSpec


async def greet(args, ctx):
    return ToolResult(f"hello {args['name']} from a plugin")


def no_forbidden(event):
    if "forbidden" in event["args"].get("command", ""):
        return {"decision": "block", "reason": "the plugin says no"}


def register(api):
    api.add_tool(ToolSpec("plugin_greet", "Greet someone.", {"type": "object", "properties": {
        "name": {"type": "string"}}, "required": ["name"]}, greet, parallel_safe=True))
    api.add_contribution("PLUGIN-CONTRIBUTION-MARKER")
    api.add_hook("before_tool", no_forbidden, matcher="shell")
'''


def install(site: Path, module: str, source: str, entry_points: str) -> None:
    """A distribution as pip leaves it: the module, and a .dist-info with METADATA and entry_points.txt."""
    site.mkdir(exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_an_installed_plugin_adds_a_tool_prompt_text_and_a_hook(tmp_path, server, project, auger_home):
    site = tmp_path / "site"
    install(site, "augertestplugin", PLUGIN, "[auger.plugins]\ngreet = augertestplugin:register\n")
    install(site, "augertestbroken", "raise RuntimeError('broken on purpose')\n",
            "[auger.plugins]\nbroken = augertestbroken:register\n")
    server.add(Reply(tool_calls=[ToolCall("plugin_greet", {"name": "ada"}, id="c1"),
                                 ToolCall("shell", {"command": "echo forbidden"}, id="c2"),
                                 ToolCall("shell", {"command": "echo allowed"}, id="c3")]),
               Reply(text="done"))
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", "-c", "sandbox=off",
                       "-c", "generate_titles=false", "greet ada", home=auger_home, cwd=project,
                       env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    events = json_events(result.stdout)
    first = server.chat_requests[0].body
    assert "plugin_greet" in [t["function"]["name"] for t in first["tools"]]
    assert "PLUGIN-CONTRIBUTION-MARKER" in first["messages"][0]["content"]
    after = server.chat_requests[1]
    assert tool_message(after, "c1") == "hello ada from a plugin"
    assert tool_message(after, "c2") == "Not run: a hook blocked this shell call: the plugin says no"
    assert "allowed" in tool_message(after, "c3")
    messages = [e["message"] for e in events if e["type"] == "warning"]
    assert any(m.startswith("plugin 'broken' was not loaded: RuntimeError: broken on purpose") for m in messages), \
        messages
    assert [e["reason"] for e in events if e["type"] == "turn_ended"] == ["complete"]


def test_without_plugins_discovery_costs_no_metadata_import(tmp_path):
    code = textwrap.dedent("""
        import sys
        from auger.tools.plugins import load_plugins
        plugins = load_plugins(sys.argv[1], project=False)
        print(plugins.names, "importlib.metadata" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "False"]


PROJECT_PLUGIN = '''
from auger.tools.base import ToolResult, ToolSpec


async def run(args, ctx):
    return ToolResult("project tool ran")


def register(api):
    api.add_tool(ToolSpec("project_tool", "A project's tool.", {"type": "object", "properties": {}}, run))
'''


def test_project_plugins_run_only_when_the_user_opts_in(project, server, tmp_path):
    plugins_dir = project / ".auger" / "plugins"
    plugins_dir.mkdir(parents=True)
    (plugins_dir / "local.py").write_text(PROJECT_PLUGIN)
    (plugins_dir / "bad.py").write_text("def register(api):\n    api.add_hook('on_lunch', print)\n")
    (plugins_dir / "quits.py").write_text("import sys\nsys.exit(3)\n")
    outside = tmp_path / "outside.py"
    outside.write_text("raise SystemExit('ran code from outside the project')\n")
    (plugins_dir / "escape.py").symlink_to(outside)

    assert load_plugins(project, project=False).names == []
    server.add(Reply(text="nothing"))
    run = run_with(project, server, "hi", tables={})
    assert "project_tool" not in [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]

    server.add(Reply(tool_calls=[ToolCall("project_tool", {}, id="c1")]), Reply(text="done"))
    run = run_with(project, server, "hi", tables={"plugins": {"project": True}})
    assert tool_message(server.chat_requests[2], "c1") == "project tool ran"
    found = warnings(run)
    assert any(w.startswith("project plugin 'bad.py' was not loaded: ValueError: add_hook: unknown event 'on_lunch'")
               for w in found), found
    assert any("project plugin 'escape.py': a symlink out of the project; not loaded" in w for w in found), found
    assert "project plugin 'quits.py' was not loaded: SystemExit: 3" in found, found
    assert run.ended.reason == "complete"


def test_a_project_config_cannot_enable_plugins_or_hooks_itself(project):
    from auger.config import load_config

    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text("plugins.project = true\n[[hooks.before_tool]]\ncommand = 'x'\n")
    config = load_config(project_dir=project, env={})
    assert "plugins" not in config.tables and "hooks" not in config.tables
    assert any("[plugins] ignored" in d for d in config.warnings)


def test_a_plugin_whose_tools_fail_to_open_is_a_warning(project, server):
    from auger.tools.plugins import PluginApi, Plugins, PluginTools

    class Broken:
        async def open(self):
            raise OSError("no socket")

        async def close(self):
            pass

        def list_tools(self):
            return []

        async def call(self, name, args, ctx):
            raise AssertionError

    api = PluginApi("flaky")
    api.add_toolset(Broken())
    plugins = Plugins()
    api._into(plugins)
    told: list[str] = []
    tools = PluginTools(plugins, told.append)
    asyncio.run(tools.open())
    assert tools.list_tools() == [] and told == ["plugin 'flaky': its tools are not available: OSError: no socket"]


def test_a_plugin_toolset_whose_revision_moves_is_listed_again_before_the_next_request(project, server):
    import dataclasses

    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for
    from auger.store.sqlite import SqliteStore
    from auger.tools.base import ToolResult, ToolSpec
    from auger.tools.plugins import PluginApi, Plugins
    from tests.support.harness import drive, make_config

    class Growing:
        def __init__(self):
            self.revision = 0
            self.specs = [ToolSpec("grow", "Add a tool.", {"type": "object", "properties": {}}, self.grow)]

        async def grow(self, args, ctx):
            self.specs.append(ToolSpec("grown", "Added.", {"type": "object", "properties": {}}, self.grow))
            self.revision += 1
            return ToolResult("grown")

        async def open(self):
            pass

        async def close(self):
            pass

        def list_tools(self):
            return list(self.specs)

        async def call(self, name, args, ctx):
            return await self.grow(args, ctx)

    api = PluginApi("growing")
    api.add_toolset(Growing())
    plugins = Plugins()
    api._into(plugins)
    server.add(Reply(tool_calls=[ToolCall("grow", {})]), Reply(text="done"))

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                             "sandbox=off")
        workspace = dataclasses.replace(Workspace.open(project, config), plugins=plugins)
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(workspace, store).create(client_for(config, env={"OPENAI_API_KEY": "k"}))
            return await drive(session, "grow")
        finally:
            await store.aclose()

    run = asyncio.run(main())
    assert run.ended.reason == "complete"
    names = [[t["function"]["name"] for t in r.body["tools"]] for r in server.chat_requests]
    assert "grow" in names[0] and "grown" not in names[0]
    assert "grown" in names[1]


def test_trusting_a_projects_rules_never_runs_its_plugins(project, server, auger_home, tmp_path):
    marker = tmp_path / "plugin-ran"
    (project / ".auger" / "plugins").mkdir(parents=True)
    (project / ".auger" / "plugins" / "local.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n" + PROJECT_PLUGIN)
    server.add(Reply(text="done"), Reply(text="done"))
    (auger_home / "config.toml").write_text("trust_project_rules = true\n")
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "hi", home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    assert "project_tool" not in [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    (auger_home / "config.toml").write_text("trust_project_rules = true\nplugins.project = true\n")
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "hi", home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert marker.read_text() == "ran"  # the explicit opt-in does run it
