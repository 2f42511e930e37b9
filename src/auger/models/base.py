"""The model-client contract: one request shape in, one internal stream-event shape out.

Every wire API (Chat Completions, Responses, Anthropic Messages, replay) turns its
own streaming format into these events, so the turn loop never sees a vendor format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Protocol

from auger.protocol.events import Usage
from auger.protocol.items import Item


@dataclass
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ModelRequest:
    instructions: str
    items: list[Item]  # normalised history (every tool call has its output)
    tools: list[ToolSchema] = field(default_factory=list)
    # "auto" lets the model call tools; "none" forbids calls but still sends the same tool list, so a
    # summary request shares the conversation's prompt-cache prefix (every wire client maps it).
    tool_choice: str = "auto"


@dataclass
class TextDelta:
    text: str


@dataclass
class ReasoningDelta:
    text: str


@dataclass
class ReasoningDone:
    """A complete reasoning item with the provider state to send back (see items.Reasoning)."""

    text: str
    encrypted: str | None = None
    provider: str | None = None
    item_id: str | None = None
    redacted: bool = False


@dataclass
class ToolCallReady:
    call_id: str
    name: str
    arguments: str  # raw JSON text


@dataclass
class WebSource:
    url: str
    title: str = ""
    cited: bool = False  # the reply's text cites it (else the search only returned it)


@dataclass
class WebSources:
    """The pages the provider's hosted web search returned or cited in this reply (`web_search = true`).
    The engine lists the cited ones under the reply's text and records all of them apart (items.SearchSources)."""

    sources: list[WebSource]


@dataclass
class UsageReport:
    usage: Usage


@dataclass
class Completed:
    """The reply is complete. `warning` says what the user must know about how it ended (a refusal, a
    content filter, a cut-off), so such an ending is never a silent empty turn."""

    finish_reason: str = "stop"
    warning: str | None = None


StreamEvent = TextDelta | ReasoningDelta | ReasoningDone | ToolCallReady | WebSources | UsageReport | Completed


class ModelError(Exception):
    """A failed model call, with what the retry policy needs to decide.

    The message is one readable line for the user; `retryable` says whether the
    same request may succeed later; `retry_after` is the server's hint in seconds.
    """

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None,
                 status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.code = code


class ContextWindowExceeded(ModelError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message, retryable=False, status=status, code="context_length_exceeded")


class ImageRejected(ModelError):
    """The provider refused an image in the request (bad format, too large, a text-only model). The
    same history would fail the same way forever, so the engine replaces the image and asks again."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message, retryable=False, status=status, code=code)


class ModelClient(Protocol):
    provider: str
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Stream one reply. Raises ModelError on failure (possibly after yielding events)."""

    async def aclose(self) -> None: ...
