"""Stream and endpoint shapes of real providers, as data the mocks replay (``mock_openai.Raw`` chunks,
``mock_responses.Raw`` events, route payloads).

Each shape follows the provider's documented format: field names, nesting and where the pieces arrive.
Ids, timestamps and texts are shortened; nothing a client reads is left out.
"""

from __future__ import annotations

from typing import Any


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": 1760000000, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}


def _usage(model: str, prompt: int, completion: int) -> dict[str, Any]:
    return {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": 1760000000, "model": model,
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                     "total_tokens": prompt + completion}}


# --- DeepSeek (thinking mode): reasoning_content deltas, then a tool call ----------------------------------
DEEPSEEK_REASONING = "The user wants the file listed. I should call list_dir on the root."


def deepseek_tool_call(call_id: str = "call_00_ds1") -> list[dict[str, Any]]:
    m = "deepseek-v4-pro"
    return [
        _chunk(m, {"role": "assistant", "content": None, "reasoning_content": ""}),
        _chunk(m, {"reasoning_content": "The user wants the file listed. "}),
        _chunk(m, {"reasoning_content": "I should call list_dir on the root."}),
        _chunk(m, {"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                   "function": {"name": "list_dir", "arguments": ""}}]}),
        _chunk(m, {"tool_calls": [{"index": 0, "function": {"arguments": "{\"path\":"}}]}),
        _chunk(m, {"tool_calls": [{"index": 0, "function": {"arguments": " \".\"}"}}]}),
        _chunk(m, {}, "tool_calls"),
        _usage(m, 812, 61),
    ]


# --- Ollama OpenAI compatibility: `reasoning` deltas (thinking models such as gpt-oss, qwen3) ------------
OLLAMA_REASONING = "Need to look at the directory first."


def ollama_tool_call(call_id: str = "call_olm1") -> list[dict[str, Any]]:
    m = "gpt-oss:20b"
    return [
        _chunk(m, {"role": "assistant", "content": "", "reasoning": "Need to look at "}),
        _chunk(m, {"role": "assistant", "content": "", "reasoning": "the directory first."}),
        _chunk(m, {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "index": 0, "type": "function",
             "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}}]}),
        _chunk(m, {"role": "assistant", "content": ""}, "tool_calls"),
        _usage(m, 640, 40),
    ]


# --- OpenRouter: `reasoning` plus structured `reasoning_details` (Anthropic / Gemini via OpenRouter) ------
OPENROUTER_DETAILS = [
    {"type": "reasoning.text", "text": "Listing first. ", "signature": None, "format": "anthropic-claude-v1",
     "index": 0},
    {"type": "reasoning.text", "text": "Then answer.", "signature": "EqQBCkgIBhABGAIiQ-sig", "format":
     "anthropic-claude-v1", "index": 0},
    {"type": "reasoning.encrypted", "data": "Z0FBQUFB-opaque", "format": "google-gemini-v1", "index": 1},
]


def openrouter_tool_call(call_id: str = "toolu_or1") -> list[dict[str, Any]]:
    m = "anthropic/claude-sonnet-4.5"
    d = OPENROUTER_DETAILS
    return [
        _chunk(m, {"role": "assistant", "content": "", "reasoning": "Listing first. ", "reasoning_details": [d[0]]},
               provider="Anthropic"),
        _chunk(m, {"role": "assistant", "content": "", "reasoning": "Then answer.", "reasoning_details": [d[1]]},
               provider="Anthropic"),
        _chunk(m, {"role": "assistant", "content": "", "reasoning": None, "reasoning_details": [d[2]]},
               provider="Anthropic"),
        _chunk(m, {"role": "assistant", "content": "", "tool_calls": [
            {"index": 0, "id": call_id, "type": "function", "function": {"name": "list_dir", "arguments": ""}}]},
               provider="Anthropic"),
        _chunk(m, {"role": "assistant", "content": "", "tool_calls": [
            {"index": 0, "function": {"arguments": "{\"path\": \".\"}"}}]}, provider="Anthropic"),
        _chunk(m, {"role": "assistant", "content": ""}, "tool_calls", provider="Anthropic"),
        _usage(m, 900, 55),
    ]


def openrouter_error(code: int, message: str) -> list[dict[str, Any] | str]:
    """OpenRouter's mid-stream error: a comment keep-alive, some text, then the error chunk with
    ``finish_reason: "error"`` (the HTTP status was already 200)."""
    m = "openai/gpt-4o"
    return [
        ": OPENROUTER PROCESSING",
        _chunk(m, {"role": "assistant", "content": "Partial "}),
        {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "created": 1760000000, "model": m,
         "provider": "OpenAI", "error": {"code": code, "message": message},
         "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error", "native_finish_reason": "error"}]},
    ]


# --- Mistral / Magistral: content as a list of typed parts --------------------------------------------------
MISTRAL_THINKING = "Two plus two is four."
MISTRAL_TEXT = "The answer is 4."


def mistral_thinking_reply() -> list[dict[str, Any]]:
    m = "magistral-medium-2509"
    return [
        _chunk(m, {"role": "assistant", "content": ""}),
        _chunk(m, {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Two plus two "}]}]}),
        _chunk(m, {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "is four."}]}]}),
        _chunk(m, {"content": [{"type": "text", "text": "The answer "}]}),
        _chunk(m, {"content": "is 4."}),
        _chunk(m, {"content": ""}, "stop", usage={"prompt_tokens": 20, "total_tokens": 40, "completion_tokens": 20}),
    ]


# --- Refusals and content filters on Chat Completions ------------------------------------------------------
REFUSAL = "I'm sorry, I can't help with that."


def chat_refusal() -> list[dict[str, Any]]:
    m = "gpt-4o-2024-08-06"
    return [_chunk(m, {"role": "assistant", "content": None, "refusal": ""}),
            _chunk(m, {"refusal": "I'm sorry, "}), _chunk(m, {"refusal": "I can't help with that."}),
            _chunk(m, {}, "stop"), _usage(m, 30, 9)]


def chat_content_filter() -> list[dict[str, Any]]:
    m = "gpt-4o"  # Azure OpenAI: the filter ends the stream with no content
    return [_chunk(m, {"role": "assistant", "content": ""}), _chunk(m, {}, "content_filter"), _usage(m, 30, 0)]


# --- Endpoints that report a model's context window ---------------------------------------------------------
def ollama_show(context_length: int = 131072, num_ctx: int | None = None) -> dict[str, Any]:
    parameters = 'stop                           "<|start|>"\ntemperature                    1'
    if num_ctx is not None:
        parameters += f"\nnum_ctx                        {num_ctx}"
    return {
        "license": "Apache License...", "modelfile": "# Modelfile generated by \"ollama show\"\nFROM ...",
        "parameters": parameters, "template": "{{- range .Messages }}...",
        "details": {"parent_model": "", "format": "gguf", "family": "gptoss", "families": ["gptoss"],
                    "parameter_size": "20.9B", "quantization_level": "MXFP4"},
        "model_info": {"general.architecture": "gptoss", "general.parameter_count": 20914757184,
                       "gptoss.context_length": context_length, "gptoss.embedding_length": 2880,
                       "gptoss.block_count": 24},
        "capabilities": ["completion", "tools", "thinking"], "modified_at": "2025-09-01T10:00:00Z",
    }


def ollama_ps(model: str, context_length: int) -> dict[str, Any]:
    return {"models": [{"name": model, "model": model, "size": 13780173824, "digest": "aa4295ac10c3",
                        "details": {"format": "gguf", "family": "gptoss", "parameter_size": "20.9B"},
                        "expires_at": "2025-09-01T10:05:00Z", "size_vram": 13780173824,
                        "context_length": context_length}]}


def lmstudio_models(model: str, loaded: int, maximum: int = 131072) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model, "object": "model", "type": "llm", "publisher": "qwen",
                                        "arch": "qwen3", "state": "loaded", "max_context_length": maximum,
                                        "loaded_context_length": loaded}]}


def vllm_models(model: str, max_model_len: int) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model, "object": "model", "created": 1760000000, "owned_by": "vllm",
                                        "root": model, "parent": None, "max_model_len": max_model_len}]}


# --- Responses API with raw reasoning (gpt-oss behind vLLM / LM Studio / Ollama) ----------------------------
RAW_REASONING = "User asks to list. Call list_dir."


def responses_reasoning_text(call_id: str = "call_rt1") -> list[dict[str, Any]]:
    rs = {"id": "rs_rt1", "type": "reasoning", "summary": [], "encrypted_content": None, "status": None}
    done = {**rs, "content": [{"type": "reasoning_text", "text": RAW_REASONING}]}
    call = {"id": "fc_rt1", "type": "function_call", "status": "completed", "arguments": "{\"path\":\".\"}",
            "call_id": call_id, "name": "list_dir"}
    base = {"id": "resp_rt1", "object": "response", "created_at": 1760000000, "model": "openai/gpt-oss-20b"}
    return [
        {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**rs, "content": []}},
        {"type": "response.content_part.added", "item_id": "rs_rt1", "output_index": 0, "content_index": 0,
         "part": {"type": "reasoning_text", "text": ""}},
        {"type": "response.reasoning_text.delta", "item_id": "rs_rt1", "output_index": 0, "content_index": 0,
         "delta": "User asks to list. "},
        {"type": "response.reasoning_text.delta", "item_id": "rs_rt1", "output_index": 0, "content_index": 0,
         "delta": "Call list_dir."},
        {"type": "response.reasoning_text.done", "item_id": "rs_rt1", "output_index": 0, "content_index": 0,
         "text": RAW_REASONING},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.output_item.added", "output_index": 1, "item": {**call, "arguments": ""}},
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {"type": "response.completed", "response": {**base, "status": "completed", "output": [done, call],
                                                    "usage": {"input_tokens": 300, "output_tokens": 40,
                                                              "total_tokens": 340}}},
    ]
