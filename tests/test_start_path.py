"""The start path: what `auger exec` loads before its first model request, held to a committed list.

Start-up time is a feature, and the cheapest module is the one not imported: what only a running tool
needs (the command classifier, snapshots, sub-agents, the web fetcher, MCP, structured output, memory,
telemetry, the other commands' modules) is loaded when first used. A new module on this path fails here
until it is made lazy, or added to tests/start_path_modules.txt with a reason.

What a module does as it loads counts too: making a dataclass generates and compiles its methods, and a
regular expression is compiled, so both are counted on the way and held to a ceiling (records are made
dataclasses at their first use, a dataclass's methods but `__init__` compiled at their first call, and
module-level patterns compiled at theirs: see lazy_dataclass.py, dataclass_methods.py and lazy_regex.py). A new one on the path raises the count; lower the ceiling when a change lowers it. And
the garbage collector is held back from when the command starts until the first request has gone out
(start_gc.py): with Python's default thresholds start-up walked its young objects 92 times on the way,
for nothing found; held back, it runs 27 times, 18 of them before the command starts (the interpreter's
own start, and importing the command's module).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.harness import cli_env
from tests.support.mock_openai import MockChatServer, Reply
from tests.support.start_path import at_first_request

ALLOWED = Path(__file__).with_name("start_path_modules.txt")
RUNNER = {"tests"}  # the runner's own package (tests/support/start_path.py)
# Made on the way to the first request (auger's and its libraries'), measured (75–78 and 117–126), plus a
# small margin for what varies between runs (the sandbox starts beside the request). Before dataclasses and
# module-level patterns were made at their first use: 197 dataclasses and 178 patterns.
DATACLASSES_AT_MOST = 80
REGEXES_AT_MOST = 130
# Dataclass methods compiled by then (Python 3.11, 3.12): measured 75, nearly one `__init__` a class; 326
# when every class compiled all its methods as it was made (dataclass_methods.py).
METHODS_COMPILED_AT_MOST = 85
YOUNG_COLLECTIONS_AT_MOST = 35  # measured: 27 (92 with Python's thresholds all along)


def _listed() -> set[str]:
    lines = ALLOWED.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def _start_path(modules: list[str]) -> set[str]:
    """auger's modules, and the top-level names of the other packages (not the standard library's)."""
    ours = {m for m in modules if m == "auger" or m.startswith("auger.")}
    others = {m.partition(".")[0] for m in modules if not m.startswith(("auger", "_"))}
    return ours | {m for m in others if m not in sys.stdlib_module_names} - RUNNER


def test_exec_loads_nothing_beyond_the_list_before_its_first_request(project, auger_home):
    with MockChatServer([Reply(text="done")]) as server:
        done = at_first_request(["exec", "--base-url", server.base_url, "-m", "mock-model", "hi"],
                                env=cli_env(auger_home), cwd=project)
    loaded = _start_path(done.modules)
    assert "auger.engine.session.session" in loaded and "httpx" in loaded  # the list is taken where it should be
    unlisted = sorted(loaded - _listed())
    assert not unlisted, (f"new on the way to the first request: {', '.join(unlisted)}; import them where "
                          f"they are first used, or list them in {ALLOWED.name} if the first request needs them")
    for lazy in ("auger.policy.shell", "auger.changes.snapshots", "auger.engine.agents.subagents", "auger.tools.web_http",
                 "auger.tools.mcp_config", "auger.engine.turn.structured_output", "auger.tools.memory",
                 "auger.observe.telemetry", "auger.frontends.mcp_commands", "jsonschema"):
        assert lazy not in _listed(), f"{lazy} is only needed once something uses it"
    assert done.dataclasses <= DATACLASSES_AT_MOST, (
        f"{done.dataclasses} classes made dataclasses before the first request (at most {DATACLASSES_AT_MOST})")
    assert done.methods_compiled <= METHODS_COMPILED_AT_MOST, (
        f"{done.methods_compiled} dataclass methods compiled before the first request (at most "
        f"{METHODS_COMPILED_AT_MOST}): the command line installs dataclass_methods before anything else")
    assert done.regexes <= REGEXES_AT_MOST, (
        f"{done.regexes} patterns compiled before the first request (at most {REGEXES_AT_MOST})")
    assert done.young_collections <= YOUNG_COLLECTIONS_AT_MOST, (
        f"the garbage collector ran {done.young_collections} times before the first request "
        f"(at most {YOUNG_COLLECTIONS_AT_MOST}): start_gc.hold() should hold it back until then")
