"""OpenTelemetry traces and metrics of a session, made from its envelopes alone (the `auger[otel]` extra).

Imported only when observe/telemetry.py finds telemetry configured. It never reaches into a session: each
session's follower reads its envelopes, and the times they carry (the envelope's `time`, a call's
`duration_ms`) place the spans.

Traces, following the OpenTelemetry GenAI semantic conventions:

    invoke_agent auger                      one per turn (a sub-agent's turn: a child of its spawn call)
    ├── chat {model}        (CLIENT)        one per model call: `token_usage` ends it, `duration_ms` back
    └── execute_tool {name}                 one per tool call: tool_call_started → tool_call_ended

with `gen_ai.operation.name`, `gen_ai.provider.name` (and the older `gen_ai.system`), `gen_ai.request.model`,
`gen_ai.conversation.id` (the session), `gen_ai.usage.input_tokens` / `output_tokens`,
`gen_ai.response.finish_reasons`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `error.type`, and auger's own
`auger.cost_usd`, `auger.tool.decision` (auto / approved / policy / hook / unapproved), `auger.tool.outcome`
(ok / failed / denied), `auger.turn.outcome` (complete / cancelled / error), `auger.reasoning_effort`.
Retries, warnings, approval requests, loops and compactions are span events on their turn.

Metrics: `gen_ai.client.token.usage` and `gen_ai.client.operation.duration` (histograms with the
conventions' buckets), `auger.sessions`, `auger.turns`, `auger.cost` (USD), `auger.tool.calls`,
`auger.errors` (failed turns, retried model calls).

Text — the model's replies, tool arguments and results, input sent mid-turn — is added only with
`log_prompts = true`. (A turn's opening prompt is not in the event stream, so it is never exported.)
The providers are this module's own, not the process's global ones, so an application embedding auger keeps
its own telemetry setup. Each session's end flushes what it produced, bounded by the export timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from auger._version import __version__
from auger.observe.telemetry import OtelSettings
from auger.protocol import events as ev
from auger.protocol.envelope import Envelope

log = logging.getLogger("auger.telemetry")

SCOPE = "auger"
AGENT = "auger"
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
# auger's provider names → the conventions' well-known `gen_ai.provider.name` values; others are used as they are
PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic"}


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class Exporter:
    """One per process and settings: the tracer, the instruments, and the exporters behind them."""

    def __init__(self, settings: OtelSettings) -> None:
        headers = dict(settings.headers) or None  # None: the exporters read OTEL_EXPORTER_OTLP_HEADERS
        base = settings.endpoint
        resource = _resource()
        _quiet_sdk()
        # Flushed at each session's end (`flush`), so nothing is left for an exit handler: one would export
        # again, and a collector that is down would hold the exit up a second time.
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(_SpanExporter(
            endpoint=f"{base}/v1/traces" if base else None, headers=headers, timeout=settings.timeout)))
        reader = PeriodicExportingMetricReader(_MetricExporter(
            endpoint=f"{base}/v1/metrics" if base else None, headers=headers, timeout=settings.timeout))
        self.meter_provider = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
        self.tracer = self.tracer_provider.get_tracer(SCOPE, __version__)
        meter = self.meter_provider.get_meter(SCOPE, __version__)
        self.token_usage = meter.create_histogram("gen_ai.client.token.usage", "{token}",
                                                  "Input and output tokens used by a model call",
                                                  explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.duration = meter.create_histogram("gen_ai.client.operation.duration", "s", "Duration of a model call",
                                               explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.sessions = meter.create_counter("auger.sessions", "{session}", "Sessions opened or resumed")
        self.turns = meter.create_counter("auger.turns", "{turn}", "Turns ended, by outcome")
        self.cost = meter.create_counter("auger.cost", "USD", "Money spent on model calls, where prices are known")
        self.tool_calls = meter.create_counter("auger.tool.calls", "{call}", "Tool calls, by decision and outcome")
        self.errors = meter.create_counter("auger.errors", "{error}", "Failed turns and retried model calls")
        self.timeout = settings.timeout
        self.where = base or "the OTEL_EXPORTER_OTLP_* endpoint"

    async def flush(self) -> None:
        """Send what is buffered now (a session ended): spans and metrics at once, each within the export
        timeout; a failure is one line in the log, never an error of the session."""
        millis = int(self.timeout * 1000)
        failed = _FAILED[0]
        sent = await asyncio.gather(asyncio.to_thread(self.tracer_provider.force_flush, millis),
                                    asyncio.to_thread(self.meter_provider.force_flush, millis))
        if not all(sent) or _FAILED[0] > failed:
            log.warning("auger: warning: telemetry could not be sent to %s within %gs", self.where, self.timeout)


_FAILED = [0]  # exports that failed in this process (the exporters below count them)


class _SpanExporter(OTLPSpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        result = super().export(spans)
        if result is not SpanExportResult.SUCCESS:
            _FAILED[0] += 1
        return result


class _MetricExporter(OTLPMetricExporter):
    def export(self, metrics_data: Any, timeout_millis: float | None = 10_000, **kwargs: Any) -> MetricExportResult:
        result = super().export(metrics_data, timeout_millis, **kwargs)
        if result is not MetricExportResult.SUCCESS:
            _FAILED[0] += 1
        return result


def _quiet_sdk() -> None:
    """The SDK logs every failed export attempt (a line per retry); auger says it once, after a flush."""
    sdk = logging.getLogger("opentelemetry")
    sdk.addHandler(logging.NullHandler())
    sdk.propagate = False


def _resource() -> Resource:
    """service.name "auger" and its version, unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES name it."""
    detected = Resource.create({"service.version": __version__})
    if str(detected.attributes.get("service.name", "")).startswith("unknown_service"):
        return detected.merge(Resource({"service.name": AGENT}))
    return detected


_EXPORTERS: dict[OtelSettings, Exporter] = {}


def exporter_for(settings: OtelSettings) -> Exporter:
    """The process's exporter for these settings (made once: every session in the process shares it)."""
    exporter = _EXPORTERS.get(settings)
    if exporter is None:
        exporter = _EXPORTERS[settings] = Exporter(settings)
    return exporter


@dataclass
class _Turn:
    span: Span
    provider: str
    model: str
    mark: float  # when the current model call began, as far as the events tell (for calls without a duration)
    cost: float | None = None  # the turn's cost so far (token_usage.turn_cost)
    reply: list[str] = field(default_factory=list)  # the reply text since the last model call ended


@dataclass
class _Call:
    span: Span
    turn_id: str
    asked: bool = False  # an approval request was shown for it


class SessionTelemetry:
    """Follows one session's envelopes and turns them into spans, span events and metrics."""

    def __init__(self, exporter: Exporter, settings: OtelSettings, *, reasoning_effort: str | None = None) -> None:
        self.x = exporter
        self.log_prompts = settings.log_prompts
        self.reasoning_effort = reasoning_effort
        self.session_id = ""
        self.provider = ""
        self.model = ""
        self.turns: dict[str, _Turn] = {}
        self.calls: dict[str, _Call] = {}

    async def follow(self, envelopes: AsyncIterator[Envelope]) -> None:
        async for envelope in envelopes:
            try:
                self.see(envelope)
            except Exception:  # telemetry must never end the session's follower
                log.exception("telemetry: handling %s failed", envelope.event.TYPE)
            if isinstance(envelope.event, ev.ShutdownComplete):
                await self.x.flush()

    # -- dispatch ----------------------------------------------------------------------------------
    def see(self, envelope: Envelope) -> None:
        event, when = envelope.event, envelope.time
        if isinstance(event, ev.SessionConfigured):
            self.session_id, self.provider, self.model = event.session_id, event.provider, event.model
            self.x.sessions.add(1, {"auger.resumed": event.resumed, "gen_ai.provider.name": self._provider()})
        elif isinstance(event, ev.ModelChanged):
            self.provider, self.model = event.provider, event.model
        elif isinstance(event, ev.TurnStarted):
            self._start_turn(event.turn_id, envelope.parent_call_id, when)
        elif isinstance(event, ev.AgentMessage):
            if (turn := self.turns.get(event.turn_id)) is not None:
                turn.reply.append(event.text)
        elif isinstance(event, ev.TokenUsage):
            self._model_call(event, when)
        elif isinstance(event, ev.ToolCallStarted):
            self._start_call(event, when)
        elif isinstance(event, ev.ApprovalRequest):
            self._approval(event, when)
        elif isinstance(event, ev.ToolCallEnded):
            self._end_call(event, when)
        elif isinstance(event, ev.TurnEnded):
            self._end_turn(event.turn_id, event.reason, event.message, when)
        elif isinstance(event, ev.ShutdownComplete):
            for turn_id in list(self.turns):
                self._end_turn(turn_id, None, None, when)
        else:
            self._turn_event(event, when)

    # -- turns -------------------------------------------------------------------------------------
    def _provider(self) -> str:
        return PROVIDER_NAMES.get(self.provider, self.provider)

    def _start_turn(self, turn_id: str, parent_call_id: str | None, when: float) -> None:
        parent = self.calls.get(parent_call_id or "")  # a sub-agent's turn hangs under its spawn call
        context = trace.set_span_in_context(parent.span) if parent is not None else None
        provider = self._provider()
        span = self.x.tracer.start_span(f"invoke_agent {AGENT}", context=context, kind=SpanKind.INTERNAL,
                                        start_time=_ns(when), attributes={
                                            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                                            "gen_ai.conversation.id": self.session_id,
                                            "gen_ai.provider.name": provider, "gen_ai.system": provider,
                                            "gen_ai.request.model": self.model, "auger.turn.id": turn_id})
        self.turns[turn_id] = _Turn(span, provider, self.model, when)

    def _end_turn(self, turn_id: str, reason: str | None, message: str | None, when: float) -> None:
        turn = self.turns.pop(turn_id, None)
        if turn is None:
            return
        for call_id, call in list(self.calls.items()):  # calls a cancelled turn left open
            if call.turn_id == turn_id:
                call.span.set_status(Status(StatusCode.ERROR, "the turn ended before the call did"))
                call.span.set_attribute("error.type", "interrupted")
                call.span.end(_ns(when))
                del self.calls[call_id]
        outcome = reason or "unfinished"
        turn.span.set_attribute("auger.turn.outcome", outcome)
        if turn.cost is not None:
            turn.span.set_attribute("auger.cost_usd", turn.cost)
        if reason == "error":
            turn.span.set_attribute("error.type", "turn_error")
            # the message may quote the model's answer (a schema error): text, so only when opted in
            turn.span.set_status(Status(StatusCode.ERROR, message if self.log_prompts and message else
                                        "the turn failed"))
            self.x.errors.add(1, {"error.type": "turn_error"})
        turn.span.end(_ns(when))
        self.x.turns.add(1, {"auger.turn.outcome": outcome})

    def _turn_event(self, event: ev.Event, when: float) -> None:
        """Retries, warnings, loops, compactions and (opted in) mid-turn input, as events on their turn."""
        turn = self.turns.get(getattr(event, "turn_id", None) or "")
        if turn is None:
            return
        attributes: dict[str, Any]
        if isinstance(event, ev.Retrying):
            attributes = {"auger.attempt": event.attempt, "auger.delay_s": event.delay_s, "auger.reason": event.reason}
            self.x.errors.add(1, {"error.type": "model_retry"})
        elif isinstance(event, ev.WarningEvent):
            attributes = {"auger.message": event.message}
        elif isinstance(event, ev.LoopDetected):
            attributes = {"gen_ai.tool.name": event.tool, "auger.repeats": event.repeats}
        elif isinstance(event, ev.ContextCompacted):
            attributes = {"auger.reason": event.reason, "auger.tokens_before": event.tokens_before,
                          "auger.tokens_after": event.tokens_after}
        elif isinstance(event, ev.UserInputInjected) and self.log_prompts:
            attributes = {"gen_ai.input.messages": _messages("user", event.text)}
        else:
            return
        turn.span.add_event(f"auger.{event.TYPE}", attributes, _ns(when))

    # -- model calls -------------------------------------------------------------------------------
    def _model_call(self, event: ev.TokenUsage, when: float) -> None:
        turn = self.turns.get(event.turn_id)
        if turn is None:
            return
        model = event.model or turn.model
        start = when - event.duration_ms / 1000 if event.duration_ms else turn.mark
        usage = event.last
        cost = None
        if event.turn_cost is not None:
            cost = event.turn_cost - (turn.cost or 0.0)
            turn.cost = event.turn_cost
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": turn.provider, "gen_ai.system": turn.provider,
            "gen_ai.request.model": model, "gen_ai.conversation.id": self.session_id,
            "gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cached_input_tokens,
            "auger.usage.reasoning_tokens": usage.reasoning_tokens,
        }
        if event.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [event.finish_reason]
        if cost is not None:
            attributes["auger.cost_usd"] = cost
        if self.reasoning_effort:
            attributes["auger.reasoning_effort"] = self.reasoning_effort
        if self.log_prompts and turn.reply:
            attributes["gen_ai.output.messages"] = _messages("assistant", "".join(turn.reply))
        turn.reply.clear()
        span = self.x.tracer.start_span(f"chat {model}", context=trace.set_span_in_context(turn.span),
                                        kind=SpanKind.CLIENT, start_time=_ns(start), attributes=attributes)
        span.end(_ns(when))
        turn.mark = when
        metric = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": turn.provider,
                  "gen_ai.request.model": model}
        self.x.token_usage.record(usage.input_tokens, {**metric, "gen_ai.token.type": "input"})
        self.x.token_usage.record(usage.output_tokens, {**metric, "gen_ai.token.type": "output"})
        self.x.duration.record(max(0.0, when - start), metric)
        if cost is not None:
            self.x.cost.add(cost, metric)

    # -- tool calls --------------------------------------------------------------------------------
    def _start_call(self, event: ev.ToolCallStarted, when: float) -> None:
        turn = self.turns.get(event.turn_id)
        if turn is None:
            return
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.name,
                                      "gen_ai.tool.call.id": event.call_id, "gen_ai.tool.type": "function",
                                      "gen_ai.conversation.id": self.session_id}
        if self.log_prompts:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(event.arguments, ensure_ascii=False)
        span = self.x.tracer.start_span(f"execute_tool {event.name}", context=trace.set_span_in_context(turn.span),
                                        kind=SpanKind.INTERNAL, start_time=_ns(when), attributes=attributes)
        self.calls[event.call_id] = _Call(span, event.turn_id)

    def _approval(self, event: ev.ApprovalRequest, when: float) -> None:
        call = self.calls.get(event.details.call_id) if event.details is not None else None
        attributes = {"auger.kind": event.kind, "auger.request_id": event.request_id}
        if call is not None:
            call.asked = True
            call.span.add_event("auger.approval_request", attributes, _ns(when))
        elif (turn := self.turns.get(event.turn_id)) is not None:
            turn.span.add_event("auger.approval_request", attributes, _ns(when))

    def _end_call(self, event: ev.ToolCallEnded, when: float) -> None:
        call = self.calls.pop(event.call_id, None)
        if call is None:
            return
        decision = str(event.denied) if event.denied is not None else "approved" if call.asked else "auto"
        outcome = "denied" if event.denied is not None else "ok" if event.ok else "failed"
        call.span.set_attributes({"auger.tool.decision": decision, "auger.tool.outcome": outcome})
        if self.log_prompts:
            call.span.set_attribute("gen_ai.tool.call.result", event.output)
        if outcome == "failed":
            call.span.set_attribute("error.type", "tool_error")
            call.span.set_status(Status(StatusCode.ERROR))
        call.span.end(_ns(when))
        self.x.tool_calls.add(1, {"gen_ai.tool.name": event.name, "auger.tool.decision": decision,
                                  "auger.tool.outcome": outcome})
        turn = self.turns.get(call.turn_id)
        if turn is not None and not any(c.turn_id == call.turn_id for c in self.calls.values()):
            turn.mark = when  # the last call of a reply: the next model call starts about now


def _messages(role: str, text: str) -> str:
    """Text as the conventions' message list (a JSON string attribute)."""
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}], ensure_ascii=False)
