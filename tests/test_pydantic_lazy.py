"""The ACP SDK imported through auger/pydantic_lazy.py: its models are built at their first use and
without their fields' docstrings, and behave exactly as when imported plainly; pydantic is left as it was."""

from __future__ import annotations

import json
import subprocess
import sys

import pydantic

SAMPLE = r'''
import json, sys
if sys.argv[1] == "lazy":
    from auger.pydantic_lazy import imported
    imported("acp")
import acp
from acp import schema
import pydantic
models = [v for v in vars(schema).values() if isinstance(v, type) and issubclass(v, pydantic.BaseModel)]
deferred = sum(1 for m in models if not m.__pydantic_complete__)
response = schema.InitializeResponse(protocol_version=1, agent_capabilities=schema.AgentCapabilities(
    load_session=True, prompt_capabilities=schema.PromptCapabilities(image=True)))
update = schema.SessionNotification(session_id="s", update=schema.AgentMessageChunk(
    session_update="agent_message_chunk", content=schema.TextContentBlock(type="text", text="hi")))
refused = []
for model, payload in ((schema.TextContentBlock, {"type": "text"}),
                       (schema.InitializeResponse, {"protocolVersion": "x", "agentCapabilities": {}})):
    try:
        model.model_validate(payload)
    except pydantic.ValidationError as exc:
        refused += [e["type"] for e in exc.errors()]
print(json.dumps({"models": len(models), "deferred": deferred, "refused": refused,
                  "dumps": [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in (response, update)],
                  "parsed": schema.InitializeResponse.model_validate(response.model_dump(by_alias=True)) == response}))
'''


def _run(how: str) -> dict:
    out = subprocess.run([sys.executable, "-c", SAMPLE, how], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_sdk_imported_lazily_builds_its_models_at_first_use_and_behaves_the_same():
    plain, lazy = _run("plain"), _run("lazy")
    assert plain["models"] == lazy["models"] > 200
    assert plain["deferred"] < 10 and lazy["deferred"] > plain["models"] // 2  # built later, not at import
    for key in ("dumps", "refused", "parsed"):
        assert lazy[key] == plain[key], key
    assert lazy["refused"] == ["missing", "int_parsing"] and lazy["parsed"] is True


def test_pydantic_is_left_as_it_was_for_models_made_afterwards():
    from auger.pydantic_lazy import imported

    imported("acp")

    class Later(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(use_attribute_docstrings=True)
        size: int = 0
        """How big it is."""

    assert Later.__pydantic_complete__
    assert Later.model_json_schema()["properties"]["size"]["description"] == "How big it is."
