"""Structured output: a turn whose final answer must be a JSON value valid against the caller's schema.

Why it is built this way:

* The schema belongs to one user turn (`UserTurn.output_schema`): `auger exec --output-schema FILE`, or a
  dict from a program. It is checked as a JSON Schema before anything is recorded, so a broken schema is
  one clear message and never a model call.
* The model is told in words on every wire (a `context_message` of kind `output_schema`, recorded after
  the user's message, so a resumed session sends what the original sent), and where the wire can
  constrain the reply natively it is sent the schema too (models/base.py `OutputFormat`): strict mode
  only when the schema is in the subset strict mode accepts (`strict_compatible`), the schema without
  strict mode otherwise, and not at all when its root is not an object (the APIs take object schemas).
* Whatever was sent, the answer is checked here with `jsonschema`: the final reply of the turn (the one
  without tool calls) must be one JSON value (a whole-reply code fence is tolerated) valid against the
  schema. An invalid answer is sent back once with the validation error (recorded, like any message);
  a second invalid answer ends the turn with an error naming the problem. A schema is never ignored.
* A valid answer is a `structured_output` event carrying the value.

`jsonschema` is imported only here, and only for a turn that has a schema (about 0.1 s of import).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from auger.models.base import OutputFormat
from auger.protocol import events as ev
from auger.protocol.items import ContextMessage

if TYPE_CHECKING:
    from auger.engine.turn.host import TurnHost

SCHEMA_KIND = "output_schema"  # the ContextMessage kind that tells the model the schema
REPAIR_KIND = "output_repair"  # ...and the one that sends an invalid answer back

# What strict mode accepts (OpenAI's structured outputs subset): these keywords, every object closed
# (`additionalProperties: false`) with all its properties required.
_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref", "$defs",
    "definitions", "description", "title", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "$schema",
})
_NAME = re.compile(r"[^a-zA-Z0-9_-]")


class OutputSchemaError(ValueError):
    """The schema itself is unusable (not a JSON Schema); the message says where and why."""


class StructuredOutputFailed(Exception):
    """The final answer stayed invalid after the one repair round; the message carries the validation error."""


@dataclass(frozen=True)
class OutputSpec:
    """A checked schema, and what a wire that constrains replies natively is sent (None: nothing)."""

    schema: dict[str, Any]
    format: OutputFormat | None

    @classmethod
    def of(cls, schema: Any) -> OutputSpec:
        """Check `schema` as a JSON Schema; OutputSchemaError says what is wrong with it."""
        if not isinstance(schema, dict):
            raise OutputSchemaError(f"the output schema must be a JSON object, not {type(schema).__name__}")
        from jsonschema import exceptions, validators

        try:
            validators.validator_for(schema).check_schema(schema)
        except exceptions.SchemaError as exc:
            where = exc.json_path if exc.path else "the schema"
            raise OutputSchemaError(f"the output schema is not a valid JSON Schema: {where}: {exc.message}") from None
        native = None
        if schema.get("type") == "object":  # the APIs take an object at the root
            title = schema.get("title")
            name = _NAME.sub("_", title)[:64] if isinstance(title, str) and title.strip() else "output"
            native = OutputFormat(name, schema, strict_compatible(schema))
        return cls(schema, native)


def strict_compatible(schema: Any) -> bool:
    """Whether strict mode would accept `schema`: only the keywords it knows, and every object closed
    with all its properties required (strict mode refuses anything else with a 400)."""
    if isinstance(schema, bool):
        return False
    if not isinstance(schema, dict) or not set(schema) <= _STRICT_KEYWORDS:
        return False
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or not isinstance(properties, dict):
            return False
        if set(schema.get("required", [])) != set(properties):
            return False
        if not all(strict_compatible(sub) for sub in properties.values()):
            return False
    subschemas = [schema["items"]] if "items" in schema else []
    subschemas += list(schema.get("anyOf", []))
    subschemas += list((schema.get("$defs") or {}).values()) + list((schema.get("definitions") or {}).values())
    return all(strict_compatible(sub) for sub in subschemas)


def instructions(spec: OutputSpec) -> str:
    from auger.protocol.jsontext import dumps

    return ("Your final answer to the message above (your last reply in this turn, after any tool calls) must be "
            "only a JSON value valid against this JSON Schema: no other text, no code fence.\n"
            + dumps(spec.schema))


def repair_request(error: str) -> str:
    return (f"Your final answer is not valid against the JSON Schema you were given: {error}. Reply again with "
            "only the corrected JSON value: no other text, no code fence.")


def unfenced(text: str) -> str:
    """A reply's text without the code fence a model may wrap a whole JSON answer in, stripped."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and "\n" in body:
        body = body[body.index("\n") + 1:-3].strip()
    return body


def parse_answer(text: str, schema: dict[str, Any]) -> Any:
    """The JSON value in a final answer, valid against `schema`; ValueError saying why not."""
    from auger.protocol.jsontext import loads

    body = unfenced(text)
    if not body:
        raise ValueError("the answer is empty")
    try:
        value = loads(body)
    except ValueError as exc:
        raise ValueError(f"the answer is not JSON ({exc})") from None
    from jsonschema import exceptions, validators

    validator = validators.validator_for(schema)(schema)
    error = exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        raise ValueError(f"{error.json_path}: {error.message}")
    return value


class OutputCheck:
    """One turn's schema: told to the model, sent natively where possible, and its final answer checked —
    accepted (a `structured_output` event), sent back once, or failed."""

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.repaired = False

    @property
    def format(self) -> OutputFormat | None:
        return self.spec.format

    async def tell(self, turn_id: str, host: TurnHost) -> None:
        await host.record(turn_id, ContextMessage(instructions(self.spec), SCHEMA_KIND))

    async def settle(self, text: str, turn_id: str, host: TurnHost) -> bool:
        """True when the turn may end (the answer is valid and announced); False when it was sent back to
        be repaired (the turn goes on); StructuredOutputFailed when the repair was invalid too."""
        try:
            value = parse_answer(text, self.spec.schema)
        except ValueError as exc:
            if self.repaired:
                raise StructuredOutputFailed(f"the final answer does not match the output schema, also after "
                                             f"one repair: {exc}") from None
            self.repaired = True
            await host.record(turn_id, ContextMessage(repair_request(str(exc)), REPAIR_KIND))
            return False
        host.emit(ev.StructuredOutput(turn_id, value))
        return True
