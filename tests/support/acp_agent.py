"""A scripted ACP agent for the backend tests, written with the SDK's agent side (stdio).

A prompt whose last paragraph is a JSON list is a script of steps, run in order; any other prompt
gets a two-chunk greeting. Steps (one key each, plus its arguments):

    {"say": TEXT}                      agent_message_chunk
    {"think": TEXT}                    agent_thought_chunk
    {"tool": ID, "title": T, "kind": K, "input": {...}}   tool_call (pending)
    {"permission": ID}                 session/request_permission for that call; says the outcome
    {"permission": ID, "kind": K, "title": T, "input": ANY, "locations": [PATH], "diffs": [[PATH, OLD, NEW]]}
                                       the same, the request itself saying what the call does (any shape)
    {"if_allowed": STEP}               runs STEP only if the last permission was allowed (an agent that obeys)
    {"run": COMMAND}                   runs `bash -c COMMAND` itself, in its working directory; says "ran: N"
    {"read": PATH, "line": N, "limit": N}   fs/read_text_file; says "read: CONTENT" or "read error: MESSAGE"
    {"write": PATH, "content": TEXT}   fs/write_text_file; says "wrote" or "write error: MESSAGE"
    {"touch": PATH, "content": TEXT}   writes the file itself (not through the client; relative: in its cwd)
    {"done": ID, "output": TEXT, "status": "completed" | "failed"}   tool_call_update
    {"plan": [[CONTENT, STATUS], ...]} plan
    {"sleep": SECONDS}
    {"pid": true}                      says "pid: N"
    {"spawn": true}                    starts `sleep 300` and says "child: N"
    {"usage": [INPUT, OUTPUT]}         reported in the prompt response

Every method called is appended to the file named by $ACP_TEST_AGENT_LOG (one line each), so tests
can see what the client asked for (initialize, new_session, load_session ID, resume_session ID, cancel).
With $ACP_TEST_AGENT_RESUME=1 the agent also offers session/resume (an unstable method in the SDK).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any

from auger.pydantic_lazy import imported

imported("acp")  # as auger's own ACP processes import it: the SDK's models made at their first use
import acp  # noqa: E402
from acp import schema  # noqa: E402


_RESUMES = os.environ.get("ACP_TEST_AGENT_RESUME") == "1"


def _log(line: str) -> None:
    path = os.environ.get("ACP_TEST_AGENT_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class ScriptedAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancelled: set[str] = set()
        self.allowed: dict[str, bool] = {}  # session -> whether its last permission was allowed

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> schema.InitializeResponse:
        fs = client_capabilities.fs if client_capabilities else None
        _log(f"initialize fs_read={bool(fs and fs.read_text_file)} fs_write={bool(fs and fs.write_text_file)} "
             f"terminal={bool(client_capabilities and client_capabilities.terminal)}")
        return schema.InitializeResponse(protocol_version=acp.PROTOCOL_VERSION,
                                         agent_capabilities=schema.AgentCapabilities(
                                             load_session=True, session_capabilities=schema.SessionCapabilities(
                                                 resume=schema.SessionResumeCapabilities() if _RESUMES else None)),
                                         agent_info=schema.Implementation(name="scripted", version="1"))

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> schema.NewSessionResponse:
        session_id = uuid.uuid4().hex
        _log(f"new_session {session_id} cwd={cwd}")
        return schema.NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           **kwargs: Any) -> schema.LoadSessionResponse:
        _log(f"load_session {session_id}")
        return schema.LoadSessionResponse()

    async def resume_session(self, session_id: str, cwd: str, mcp_servers: Any = None,
                             **kwargs: Any) -> schema.ResumeSessionResponse:
        _log(f"resume_session {session_id}")
        return schema.ResumeSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        _log(f"cancel {session_id}")
        self.cancelled.add(session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> schema.PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        _log(f"prompt {session_id} {text[:200]!r}")
        try:  # the script is the prompt's last paragraph (a conversation handed over may come first)
            steps = json.loads(text.rsplit("\n\n", 1)[-1])
        except ValueError:
            steps = None
        if not isinstance(steps, list):
            steps = [{"say": "Hello "}, {"say": "from the agent."}]
        usage = None
        for step in steps:
            if session_id in self.cancelled:
                self.cancelled.discard(session_id)
                return schema.PromptResponse(stop_reason="cancelled")
            usage = await self._step(session_id, step) or usage
        return schema.PromptResponse(stop_reason="end_turn", usage=usage)

    async def _say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))

    async def _step(self, sid: str, step: dict[str, Any]) -> schema.Usage | None:
        if "say" in step:
            await self._say(sid, step["say"])
        elif "think" in step:
            await self.conn.session_update(sid, acp.update_agent_thought_text(step["think"]))
        elif "tool" in step:
            await self.conn.session_update(sid, acp.start_tool_call(
                step["tool"], step.get("title", step["tool"]), kind=step.get("kind", "other"), status="pending",
                raw_input=step.get("input"),
                locations=[schema.ToolCallLocation(path=p) for p in step.get("locations", [])] or None))
        elif "permission" in step:
            options = [schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                       schema.PermissionOption(option_id="always", name="Always", kind="allow_always"),
                       schema.PermissionOption(option_id="no", name="Reject", kind="reject_once")]
            diffs = [acp.tool_diff_content(path, new, old) for path, old, new in step.get("diffs", [])]
            call = acp.update_tool_call(
                step["permission"], title=step.get("title"), kind=step.get("kind"), raw_input=step.get("input"),
                locations=[schema.ToolCallLocation(path=p) for p in step.get("locations", [])] or None,
                content=diffs or None)
            answer = await self.conn.request_permission(sid, call, options)
            outcome = answer.outcome
            chosen = outcome.option_id if outcome.outcome == "selected" else "cancelled"
            self.allowed[sid] = chosen in ("yes", "always")
            await self._say(sid, f"permission: {chosen}\n")
        elif "if_allowed" in step:
            if self.allowed.get(sid):
                return await self._step(sid, step["if_allowed"])
        elif "run" in step:
            done = await asyncio.create_subprocess_exec("bash", "-c", step["run"], stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.DEVNULL)
            await self._say(sid, f"ran: {await done.wait()}\n")
        elif "read" in step:
            try:
                got = await self.conn.read_text_file(sid, step["read"], line=step.get("line"), limit=step.get("limit"))
                await self._say(sid, f"read: {got.content}\n")
            except acp.RequestError as exc:
                await self._say(sid, f"read error: {(exc.data or {}).get('details', exc)}\n")
        elif "write" in step:
            try:
                await self.conn.write_text_file(sid, step["write"], step["content"])
                await self._say(sid, "wrote\n")
            except acp.RequestError as exc:
                await self._say(sid, f"write error: {(exc.data or {}).get('details', exc)}\n")
        elif "touch" in step:  # the agent changing a file by itself, as agents with their own tools do
            with open(step["touch"], "w", encoding="utf-8") as f:
                f.write(step.get("content", ""))
        elif "done" in step:
            await self.conn.session_update(sid, acp.update_tool_call(
                step["done"], status=step.get("status", "completed"),
                content=[acp.tool_content(acp.text_block(step.get("output", "")))]))
        elif "plan" in step:
            await self.conn.session_update(sid, acp.update_plan(
                [acp.plan_entry(content, status=status) for content, status in step["plan"]]))
        elif "sleep" in step:
            await asyncio.sleep(step["sleep"])
        elif "spawn" in step:  # a child process of the agent's own, to check nothing outlives disposal
            child = await asyncio.create_subprocess_exec("sleep", "300")
            await self._say(sid, f"child: {child.pid}\n")
        elif "pid" in step:
            await self._say(sid, f"pid: {os.getpid()}\n")
        elif "usage" in step:
            given, produced = step["usage"]
            return schema.Usage(input_tokens=given, output_tokens=produced, total_tokens=given + produced)
        return None


def main() -> None:
    if "--broken" in sys.argv:  # an agent that dies before speaking the protocol
        print("cannot start: no model configured", file=sys.stderr)
        raise SystemExit(3)
    asyncio.run(acp.run_agent(ScriptedAgent(), use_unstable_protocol=_RESUMES))


if __name__ == "__main__":
    main()
