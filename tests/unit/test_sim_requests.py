"""The simulator's request parsing, as a table: what vLLM's OpenAI server accepts and how it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from launch.sim.requests import BadRequest, parse_chat, parse_json, tokenize

NAMES = ("tiny", "models/tiny")
MSG = [{"role": "user", "content": "hello there"}]


@pytest.mark.parametrize(
    ("body", "status", "param", "message"),
    [
        ({"model": "other", "messages": MSG}, 404, "model", "The model `other` does not exist."),
        ({"messages": []}, 400, "messages", "non-empty list"),
        ({"messages": MSG, "stream": "yes"}, 400, "stream", "stream must be a boolean"),
        (
            {"messages": MSG, "stream_options": {}},
            400,
            "stream_options",
            "only be defined when `stream=True`",
        ),
        ({"messages": MSG, "max_tokens": 0}, 400, "max_tokens", "at least 1"),
        ({"messages": MSG, "max_tokens": True}, 400, "max_tokens", "must be an integer"),
        ({"messages": MSG, "temperature": -1}, 400, "temperature", "non-negative"),
        ({"messages": MSG, "cache_salt": "a/b"}, 400, "cache_salt", "cache_salt"),
        ({"messages": MSG, "max_tokens": 4096}, 400, "max_tokens", "maximum context length is 1024"),
        ({"messages": MSG, "max_tokens": 4, "min_tokens": 5}, 400, "min_tokens", "min_tokens must be less"),
    ],
)
def test_refusals(body: dict[str, Any], status: int, param: str, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_chat(body, NAMES, 1024)
    assert (info.value.status, info.value.param) == (status, param)
    assert message in str(info.value)


def test_accepted_request_fills_the_defaults() -> None:
    params = parse_chat({"model": "tiny", "messages": MSG, "stream": True}, NAMES, 1024)
    assert params["stream"] is True and params["include_usage"] is False
    assert params["max_tokens"] == 1024 - params["prompt_tokens"] > 0
    assert (params["min_tokens"], params["ignore_eos"], params["seed"]) == (0, False, None)


@pytest.mark.parametrize("body", [b"{", b"[1, 2]"])
def test_body_must_be_a_json_object(body: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_json(body)


def test_tokenize_counts_a_prompt_and_lists_as_many_ids() -> None:
    out = tokenize(json.dumps({"prompt": "one two three"}).encode(), NAMES, 1024)
    assert out["count"] == len(out["tokens"]) > 0 and out["max_model_len"] == 1024
