"""The model-client contract: one request shape in, one internal stream-event shape out.

Every wire API (Chat Completions, Responses, Anthropic Messages, replay) turns its
own streaming format into these events, so the turn loop never sees a vendor format.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, AsyncIterator, Protocol

from auger.lazy_dataclass import Deferred, dataclass
from auger.models.rate_limits import RateLimitSnapshot
from auger.protocol.events import Usage
from auger.protocol.items import Item


@dataclass
class ToolSchema(Deferred):
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class OutputFormat(Deferred):
    """The JSON Schema a reply's text must match, for a wire that can constrain it natively (OpenAI
    Responses `text.format`, Chat Completions `response_format`). `strict` only when the schema is in the
    subset strict mode accepts. A wire that cannot send it ignores it: the engine's instructions and its
    validation of the answer (engine/turn/structured_output.py) hold on every wire."""

    name: str
    schema: dict[str, Any]
    strict: bool


@dataclass
class ModelRequest(Deferred):
    instructions: str
    items: list[Item]  # normalised history (every tool call has its output)
    tools: list[ToolSchema] = field(default_factory=list)
    # "auto" lets the model call tools; "none" forbids calls but still sends the same tool list, so a
    # summary request shares the conversation's prompt-cache prefix (every wire client maps it).
    tool_choice: str = "auto"
    output: OutputFormat | None = None  # the turn's output schema, where it can be sent natively
    # The session's per-turn reasoning settings (set_turn_context), over the client's configured ones; None:
    # as configured. Wires that take no reasoning settings ignore them; summary "none" turns summaries off.
    effort: str | None = None
    summary: str | None = None
    # Whether the model may call several tools in one reply (ModelInfo.supports_parallel_tools); the wires
    # that can say so send False (Chat `parallel_tool_calls`, Anthropic `disable_parallel_tool_use`).
    parallel_tools: bool = True


@dataclass
class TextDelta(Deferred):
    text: str


@dataclass
class ReasoningDelta(Deferred):
    text: str


@dataclass
class ReasoningDone(Deferred):
    """A complete reasoning item with the provider state to send back (see items.Reasoning)."""

    text: str
    encrypted: str | None = None
    provider: str | None = None
    item_id: str | None = None
    redacted: bool = False


@dataclass
class ToolCallReady(Deferred):
    call_id: str
    name: str
    arguments: str  # raw JSON text


@dataclass
class WebSource(Deferred):
    url: str
    title: str = ""
    cited: bool = False  # the reply's text cites it (else the search only returned it)


@dataclass
class WebSources(Deferred):
    """The pages the provider's hosted web search returned or cited in this reply (`web_search = true`).
    The engine lists the cited ones under the reply's text and records all of them apart (items.SearchSources)."""

    sources: list[WebSource]


@dataclass
class UsageReport(Deferred):
    usage: Usage


@dataclass
class Completed(Deferred):
    """The reply is complete. `warning` says what the user must know about how it ended (a refusal, a
    content filter, a cut-off), so such an ending is never a silent empty turn."""

    finish_reason: str = "stop"
    warning: str | None = None


@dataclass
class RateLimitReport(Deferred):
    """The provider's rate limits as the response's headers stated them (first, when it has them)."""

    limits: RateLimitSnapshot


StreamEvent = (TextDelta | ReasoningDelta | ReasoningDone | ToolCallReady | WebSources | UsageReport | Completed
               | RateLimitReport)


class ModelError(Exception):
    """A failed model call, with what the retry policy needs to decide.

    The message is one readable line for the user; `retryable` says whether the
    same request may succeed later; `retry_after` is the server's hint in seconds;
    `rate_limits` what the failed response's headers said about the provider's limits, and
    `reset_after` (a 429's) when the limit that was used up refills.
    """

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 status: int | None = None, code: str | None = None,
                 rate_limits: RateLimitSnapshot | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.code = code
        self.rate_limits = rate_limits
        self.reset_after = rate_limits.reset_after() if rate_limits is not None and status == 429 else None


class ContextWindowExceeded(ModelError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status, code="context_length_exceeded")


class ImageRejected(ModelError):
    """The provider refused an image in the request (bad format, too large, a text-only model). The
    same history would fail the same way forever, so the engine replaces the image and asks again."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message, retryable=False, status=status, code=code)


class ModelClient(Protocol):
    @property
    def provider(self) -> str:
        """The provider's name (`[providers.NAME]`, or a built-in one)."""

    @property
    def model(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one reply. Raises ModelError on failure (possibly after yielding events)."""

    async def aclose(self) -> None: ...
