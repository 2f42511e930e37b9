"""The program run_code starts (tools/code_mode.py): it runs the model's Python with the session's tools as
functions.

Runs INSIDE the session's sandbox, as `python3 -I -X utf8 -u -c SOURCE` (the source read by auger, never
from a path a command could change; stdlib only). Its stdin and stdout, as started, are the channel to auger,
one JSON object a line:

    auger -> {"prelude": "...", "code": "..."}          first: the tool functions, then the program
    prog  -> {"id": N, "tool": "read_file", "args": {...}}   a call; the program waits for its answer
    auger -> {"id": N, "ok": true, "output": "..."}         what the model would have read

Before anything runs it moves the channel to descriptors of its own that no child inherits, points stdin at
/dev/null and stdout at stderr, which auger captures: whatever the program prints, and whatever a
subprocess it starts writes, goes to the captured output and can never be taken for a call. A program that
writes to the channel itself gains nothing: every call it sends goes through auger's tool runtime.
"""

import json
import os
import sys
import traceback


class ToolFailed(Exception):
    """A tool call that did not succeed (refused, failed, or the tool reported an error): its message is
    what the model would have read."""


def main():
    rpc_in = os.fdopen(os.dup(0), "r", encoding="utf-8")  # os.dup: not inherited by children
    rpc_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    start = json.loads(rpc_in.readline())
    made = [0]

    def call(name, args):
        made[0] += 1
        sys.stdout.flush()
        sys.stderr.flush()
        rpc_out.write(json.dumps({"id": made[0], "tool": name, "args": args}) + "\n")
        rpc_out.flush()
        line = rpc_in.readline()
        if not line:  # auger stopped the program
            os._exit(124)
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ToolFailed(reply.get("output", ""))
        return reply.get("output", "")

    namespace = {"__name__": "__main__", "__builtins__": __builtins__, "_call": call, "ToolFailed": ToolFailed}
    exec(compile(start["prelude"], "<tools>", "exec"), namespace)
    try:
        exec(compile(start["code"], "<run_code>", "exec"), namespace)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the program's own error, shown as Python shows it
        frames = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # not this runner's
        traceback.print_exception(type(exc), exc, frames)
        sys.exit(1)


if __name__ == "__main__":
    main()
