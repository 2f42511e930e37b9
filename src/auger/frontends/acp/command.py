"""`auger acp`: serve the Agent Client Protocol on stdin/stdout for an editor.

stdout carries the protocol and nothing else: the process's descriptor 1 is pointed at stderr once
the protocol has its own copy, so a stray print, a library's output or a child process cannot
corrupt the stream. Logging goes to stderr. The SDK is imported here, inside the command, so no
other command pays for it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

STDIO_LIMIT = 50 * 1024 * 1024  # one JSON-RPC line may carry a large file or image


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p_acp = sub.add_parser("acp", help="serve the Agent Client Protocol on stdio, for editors (Zed, JetBrains, …)")
    p_acp.add_argument("-m", "--model", help="model name")
    p_acp.add_argument("-p", "--provider", help="provider name; `auger providers` lists them")
    p_acp.add_argument("--base-url", help="base URL of an OpenAI-compatible API")
    p_acp.add_argument("--mode", choices=("plan", "safe", "auto"), default=None,
                       help="trust mode of new sessions (default: safe; the editor can switch it)")
    p_acp.add_argument("--no-editor-terminal", dest="editor_terminal", action="store_false",
                       help="run commands in auger's sandbox even when the editor offers terminals (the editor's "
                            "terminal is unsandboxed, so with it `auto` asks as `safe` does)")
    store_opts(p_acp)
    p_acp.set_defaults(run=_cmd_acp)
    return {"acp": p_acp}


def _cmd_acp(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from auger.config import load_config
    from auger.extras import require
    from auger.frontends.cli_support import open_store

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="auger acp: %(levelname)s %(name)s: %(message)s")
    flags = {"db_path": args.db, "model": args.model, "provider": args.provider, "base_url": args.base_url,
             "mode": args.mode or "safe"}

    def config_for(project: str):
        return load_config(args.overrides, flags, project_dir=Path(project) if os.path.isdir(project) else None)

    config = config_for(os.getcwd())
    for line in config.warnings:
        print(f"auger: warning: {line}", file=sys.stderr)
    require("acp", "`auger acp`")
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # from here on, anything written to stdout lands on stderr
    sys.stdout = sys.stderr
    asyncio.run(_serve(config_for, open_store(config), protocol_out, editor_terminal=args.editor_terminal))
    return 0


async def _serve(config_for: Callable[[str], Any], store: Any, protocol_out: Any, *, editor_terminal: bool) -> None:
    import asyncio

    from auger.pydantic_lazy import imported

    imported("acp")  # the SDK's models made at their first use: an editor waits ~0.5 s less (pydantic_lazy.py)
    from acp import run_agent

    from auger.frontends.acp.agent import AugerAgent

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDIO_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    writer_protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader())  # gives the writer flow control
    transport, _ = await loop.connect_write_pipe(lambda: writer_protocol, protocol_out)
    writer = asyncio.StreamWriter(transport, writer_protocol, None, loop)
    agent = AugerAgent(config_for, store, editor_terminals=editor_terminal)
    try:
        # unstable: session/resume, fork and close, which auger has (and says so in its capabilities)
        await run_agent(agent, writer, reader, use_unstable_protocol=True)  # type: ignore[arg-type]
    finally:
        await agent.close()
        await store.aclose()
