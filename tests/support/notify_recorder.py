"""A `notify` program for tests: appends its last argument (the event JSON) as one line to the file named by
its first argument. `python notify_recorder.py OUT [ARGS…] EVENT`; `--slow` first sleeps 20 s, as a program
that hangs would (auger must not wait for it)."""

from __future__ import annotations

import sys
import time


def main() -> None:
    out, *rest = sys.argv[1:]
    if "--slow" in rest:
        time.sleep(20)
    with open(out, "a", encoding="utf-8") as f:
        f.write(rest[-1] + "\n")  # JSON text: one line


if __name__ == "__main__":
    main()
