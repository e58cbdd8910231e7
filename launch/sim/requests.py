"""Requests to the simulator: parsing and refusing them as vLLM's OpenAI server does (pure).

Pipeline position: inside the simulated server (:mod:`launch.sim.server`), between the HTTP framing and
the engine. A refusal is a :class:`BadRequest` carrying vLLM's status, error type and message.
"""

from __future__ import annotations

import json
from typing import Any

from launch.sim.model import chat_text, count_chat_tokens, count_text_tokens, token_ids


def error_body(status: int, message: str, kind: str, param: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": param, "code": status}}).encode()


class BadRequest(Exception):
    """A request vLLM would refuse; becomes an HTTP error response."""

    def __init__(
        self, message: str, status: int = 400, kind: str = "BadRequestError", param: str | None = None
    ):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param = param


def _int_field(body: dict[str, Any], name: str, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be an integer, got {value!r}", param=name)
    if value < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {value}.", param=name)
    return value


def validate_cache_salt(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not 1 <= len(value) <= 128 or any(ch in value for ch in "@/\\\x00"):
        raise BadRequest(
            "Parameter 'cache_salt' must be a non-empty string of at most 128 characters without "
            "'@', '/', '\\' or NUL.",
            param="cache_salt",
        )


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    return data


def check_model(data: dict[str, Any], names: tuple[str, ...]) -> None:
    model = data.get("model")
    if model is not None and model not in names:
        raise BadRequest(f"The model `{model}` does not exist.", 404, "NotFoundError", "model")


def tokenize(body: bytes, names: tuple[str, ...], max_model_len: int) -> dict[str, Any]:
    data = parse_json(body)
    check_model(data, names)
    if "messages" in data:
        messages = data["messages"]
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise BadRequest("messages must be a list of objects", param="messages")
        count = count_chat_tokens(
            messages, add_generation_prompt=bool(data.get("add_generation_prompt", True))
        )
        text = chat_text(messages)
        ids = [1, *token_ids(text)]
    elif isinstance(data.get("prompt"), str):
        count = count_text_tokens(data["prompt"])
        ids = token_ids(data["prompt"])
    else:
        raise BadRequest("either 'prompt' (a string) or 'messages' is required")
    ids = (ids + [0] * count)[:count]
    return {"count": count, "max_model_len": max_model_len, "tokens": ids, "token_strs": None}


def parse_chat(data: dict[str, Any], names: tuple[str, ...], max_model_len: int) -> dict[str, Any]:
    check_model(data, names)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise BadRequest("messages must be a non-empty list of message objects", param="messages")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream must be a boolean", param="stream")
    options = data.get("stream_options")
    if options is not None and not stream:
        raise BadRequest("Stream options can only be defined when `stream=True`.", param="stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest("stream_options must be an object", param="stream_options")
    max_tokens = _int_field(data, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _int_field(data, "max_tokens", 1)
    min_tokens = _int_field(data, "min_tokens", 0) or 0
    temperature = data.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise BadRequest(f"temperature must be a number, got {temperature!r}", param="temperature")
        if temperature < 0:
            raise BadRequest(f"temperature must be non-negative, got {temperature}.", param="temperature")
    ignore_eos = data.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise BadRequest("ignore_eos must be a boolean", param="ignore_eos")
    validate_cache_salt(data.get("cache_salt"))
    seed = _int_field(data, "seed", -(2**63))
    prompt_tokens = count_chat_tokens(messages)
    limit = max_model_len
    if max_tokens is None:
        max_tokens = limit - prompt_tokens
        if max_tokens < 1:
            raise BadRequest(
                f"This model's maximum context length is {limit} tokens. However, your request has "
                f"{prompt_tokens} input tokens. Please reduce the length of the input messages.",
                param="messages",
            )
    if prompt_tokens + max_tokens > limit:
        raise BadRequest(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
            f"completion). Please reduce the length of the messages or completion.",
            param="max_tokens",
        )
    if min_tokens > max_tokens:
        raise BadRequest(
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
            param="min_tokens",
        )
    return {
        "messages": messages,
        "stream": stream,
        "include_usage": bool((options or {}).get("include_usage", False)),
        "max_tokens": max_tokens,
        "min_tokens": min_tokens,
        "ignore_eos": ignore_eos,
        "seed": seed,
        "prompt_tokens": prompt_tokens,
    }
