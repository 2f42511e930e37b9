"""Model clients: the wire APIs spoken over httpx and server-sent events.

httpx imports its own command-line client (`httpx._main`: click, pygments, rich) whenever those happen
to be installed — and the MCP and terminal extras install them — which costs 20–80 ms of every start.
auger never uses that client, so its import is blocked here, before any wire module imports httpx: a
None entry in sys.modules makes the import fail at once, and httpx falls back to a stub `main`.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None blocks the import (see above)
