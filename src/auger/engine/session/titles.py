"""Session titles: a few words naming what a session is about, written by the model."""

from __future__ import annotations

from typing import Sequence

from auger.engine.turn.model_call import call_model
from auger.models.base import ModelClient, ModelRequest
from auger.protocol.items import AssistantMessage, Item, UserMessage

TITLE_INSTRUCTIONS = ("You name conversations. Reply with a title of at most 6 words for the conversation the "
                      "user shows you: no quotes, no trailing punctuation, nothing else.")
MAX_WORDS = 6


async def generate_title(client: ModelClient, items: Sequence[Item]) -> str | None:
    """One attempt, no retries: a title is a nicety, never worth a delay."""
    question = next((i.text for i in items if isinstance(i, UserMessage)), "")
    answer = next((i.text for i in items if isinstance(i, AssistantMessage)), "")
    if not question:
        return None
    prompt = f"User: {question[:2000]}\n\nAssistant: {answer[:1000]}"
    reply = await call_model(client, ModelRequest(TITLE_INSTRUCTIONS, [UserMessage(prompt)], []))
    return clean_title(reply.text)


def clean_title(text: str) -> str | None:
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    words = line.strip().strip("\"'`*#").split()[:MAX_WORDS]
    title = " ".join(words).rstrip(".!?:;,")
    return title[:80] or None
