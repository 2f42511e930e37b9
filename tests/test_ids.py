"""Random identifiers (src/auger/ids.py): the shapes the store, the wire and the fleet's routes expect."""

from __future__ import annotations

import re
import uuid

from auger.ids import new_hex, new_uuid


def test_a_new_uuid_is_a_random_version_4_uuid_in_text_form():
    made = [new_uuid() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for text in made[:200]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_new_hex_gives_exactly_the_digits_asked_for():
    for length in (1, 8, 10, 12, 16, 32):
        made = {new_hex(length) for _ in range(500)}
        assert all(re.fullmatch(f"[0-9a-f]{{{length}}}", h) for h in made)
        assert len(made) > (1 if length == 1 else 490)  # random, not a counter or a constant
