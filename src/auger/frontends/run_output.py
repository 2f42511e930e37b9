"""What a headless run (`auger exec`, `resume`, `fork`) leaves for the program that started it.

stdout carries the answer: the final message as text, or — with `--output-schema FILE` — the JSON value
the engine checked against that schema, compact on one line, so `auger exec --output-schema s.json … | jq`
works. A run whose answer never matched prints nothing on stdout and fails with the validation error
(the engine ends the turn in error; engine/turn/structured_output.py). With `--json` the events are the output
and the value is its own `structured_output` event. `--output-last-message FILE` also writes the final
message to FILE, with or without a schema.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from auger.frontends.cli_support import CliError
from auger.protocol import events as ev


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-schema", metavar="FILE",
                        help="a JSON Schema file: the final answer must be JSON valid against it (printed compact "
                             "on stdout; a `structured_output` event with --json); one repair, then exit 1")
    parser.add_argument("-o", "--output-last-message", metavar="FILE",
                        help="also write the final message to FILE")


def read_schema(path: str | None) -> dict[str, Any] | None:
    """The schema in `path` (None without one), checked as a JSON Schema; CliError saying what is wrong."""
    if path is None:
        return None
    from auger.engine.turn.structured_output import OutputSchemaError, OutputSpec
    from auger.protocol.jsontext import loads

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--output-schema {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        schema = loads(text)
    except ValueError as exc:
        raise CliError(f"--output-schema {path}: not JSON ({exc})") from None
    try:
        OutputSpec.of(schema)
    except OutputSchemaError as exc:
        raise CliError(f"--output-schema {path}: {exc}") from None
    return schema


class RunOutput:
    """Follows a run's envelopes for what goes to stdout and the last-message file at its end."""

    def __init__(self, schema: dict[str, Any] | None, last_message_file: str | None) -> None:
        self.schema = schema
        self.last_message_file = last_message_file
        self.final = ""  # the session's own last reply (not a sub-agent's)
        self.value: Any = None
        self.structured = False

    def see(self, envelope: Any) -> None:
        if envelope.parent_call_id is not None:
            return
        event = envelope.event
        if isinstance(event, ev.AgentMessage):
            self.final = event.text
        elif isinstance(event, ev.StructuredOutput):
            self.value, self.structured = event.value, True

    def finish(self, *, json_events: bool) -> bool:
        """Print the answer (plain mode) and write the last-message file; False when the file could not be
        written (said on stderr)."""
        from auger.protocol.jsontext import dumps, printable

        if not json_events:
            if self.structured:
                print(dumps(self.value, compact=True))
            elif self.final and self.schema is None:
                print(printable(self.final))
        if self.last_message_file is None or not self.final:
            return True
        try:
            Path(self.last_message_file).write_text(printable(self.final), encoding="utf-8")
        except OSError as exc:
            print(f"auger: error: --output-last-message {self.last_message_file}: cannot write it "
                  f"({exc.strerror or exc})", file=sys.stderr)
            return False
        return True
