"""The typed registry of program handlers: which function judges the arguments of which program.

Each handler module exports its own table; this module merges them, so the analyzer never imports a
handler (handlers import the analyzer's types) and a new program is one entry in its module's table.
Programs with no entry are judged by the tables in `programs` alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from auger.policy.shell import builtins, files, git
from auger.policy.shell.analyzer import Handler

# Typed read-only; a plain dict underneath, because a lookup per classified command is on the hot path.
HANDLERS: Mapping[str, Handler] = {**files.HANDLERS, **builtins.HANDLERS, **git.HANDLERS}
