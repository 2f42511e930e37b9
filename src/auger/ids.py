"""Random identifiers (sessions, items, calls, tasks), made from `os.urandom` directly.

Why not the uuid module: importing it, and the platform module it loads, cost about 4 ms on the way to
the first model request, and all auger needs of it is sixteen random bytes in UUID shape.
"""

from __future__ import annotations

import os


def new_uuid() -> str:
    """A random (version 4) UUID in its usual text form, as `str(uuid.uuid4())` gives it."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_hex(length: int) -> str:
    """`length` random hex digits."""
    return os.urandom((length + 1) // 2).hex()[:length]
