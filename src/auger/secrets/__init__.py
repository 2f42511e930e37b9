"""Secrets kept out of the model: files the agent may not read (protected files), secret values redacted
from everything that reaches the model, the store, an event or a log, and the last check on what leaves."""
