"""Streaming responses of the simulator: the engine's token steps -> OpenAI chat-completion SSE chunks.

Pipeline position: inside the simulated server (:mod:`launch.sim.server`), which hands each stream the
runtime (:mod:`launch.sim.runtime`: its clock, the coalescing interval, the flushes it owes) and what the
stream writes. A :class:`ChatStream` is the engine's sink for one request; it coalesces steps into chunks
the way vLLM's API server does and writes them with chunked transfer framing (or builds one JSON response
at the end for ``stream: false``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from launch.sim.runtime import Runtime

_REASONING_WORDS = (" Let", " me", " think", " about", " this", " carefully", " and", " check", ".")
_CONTENT_WORDS = (" The", " answer", " is", " shown", " here", " in", " plain", " words", ".")
_TEXT_CACHE: dict[tuple[bool, int], bytes] = {}


def text_of(reasoning: bool, n: int) -> bytes:
    key = (reasoning, n)
    cached = _TEXT_CACHE.get(key)
    if cached is None:
        words = _REASONING_WORDS if reasoning else _CONTENT_WORDS
        cached = "".join(words[i % len(words)] for i in range(n)).encode()
        if len(_TEXT_CACHE) < 4096:
            _TEXT_CACHE[key] = cached
    return cached


class ChatStream:
    """The engine's sink for one chat request: turns steps into SSE chunks (or one JSON at the end)."""

    __slots__ = (
        "answer",
        "chunks",
        "completion",
        "content_started",
        "created",
        "done",
        "finish",
        "include_usage",
        "last_write",
        "model_json",
        "model_name",
        "pend_c",
        "pend_r",
        "prefix",
        "prompt_tokens",
        "rid",
        "runtime",
        "stall_after",
        "started",
        "stream",
        "text_c",
        "text_r",
        "transport",
    )

    def __init__(
        self,
        runtime: Runtime,
        transport: asyncio.WriteTransport | None,
        *,
        model_name: str,
        stall_after: int | None,
        stream: bool,
        include_usage: bool,
        prompt_tokens: int,
    ) -> None:
        self.runtime = runtime
        self.model_name = model_name
        self.transport = transport
        self.stream = stream
        self.include_usage = include_usage
        self.prompt_tokens = prompt_tokens
        self.rid = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model_json = json.dumps(model_name)
        self.prefix = (
            f'data: {{"id":"{self.rid}","object":"chat.completion.chunk","created":{self.created},'
            f'"model":{self.model_json},"choices":[{{"index":0,"delta":{{'
        ).encode()
        self.pend_r = self.pend_c = 0
        self.text_r: list[bytes] = []
        self.text_c: list[bytes] = []
        self.completion = 0
        self.started = False
        self.content_started = False
        self.finish: str | None = None
        self.last_write = 0.0
        self.chunks = 0
        self.stall_after = stall_after
        # A labelled item's answer, one JSON-escaped piece per content token (launch.sim.answers); None:
        # filler words. Consumed from the front as content tokens are written.
        self.answer: list[bytes] | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- the engine's sink -----------------------------------------------------------------------------
    def __call__(self, _t: float, r: int, c: int, finish: str | None) -> None:
        self.pend_r += r
        self.pend_c += c
        self.completion += r + c
        if not self.stream:
            if r:
                self.text_r.append(text_of(True, r))
            if c:
                self.text_c.append(self.content(c))
            if finish is not None:
                self.finish = finish
                if not self.done.done():
                    self.done.set_result(None)
            return
        if finish is not None:
            self.finish = finish
        wall = self.runtime.clock()
        must = finish is not None or not self.started or (c and not self.content_started)
        if must or wall - self.last_write >= self.runtime.coalesce_s:
            self.flush(wall)
        else:
            self.runtime.defer(id(self), self.flush_if_due)

    def content(self, n: int) -> bytes:
        """The next ``n`` content tokens' text: the labelled answer's next pieces, else filler words."""
        if self.answer is None:
            return text_of(False, n)
        taken, self.answer = self.answer[:n], self.answer[n:]
        return b"".join(taken)

    def flush_if_due(self, wall: float) -> bool:
        if wall - self.last_write >= self.runtime.coalesce_s:
            self.flush(wall)
            return True
        return False

    def _write(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def flush(self, wall: float) -> None:
        self.runtime.undefer(id(self))
        if self.stall_after is not None and self.chunks >= self.stall_after:
            self.pend_r = self.pend_c = 0
            return
        parts: list[bytes] = []
        if not self.started:
            self.started = True
            parts.append(
                self.prefix + b'"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
            )
        delta: list[bytes] = []
        if self.pend_r:
            delta.append(b'"reasoning":"' + text_of(True, self.pend_r) + b'"')
        if self.pend_c:
            self.content_started = True
            delta.append(b'"content":"' + self.content(self.pend_c) + b'"')
        self.pend_r = self.pend_c = 0
        if self.finish is None:
            tail = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            tail = b'},"logprobs":null,"finish_reason":"%s","stop_reason":null}]}\n\n' % self.finish.encode()
        parts.append(self.prefix + b",".join(delta) + tail)
        self.chunks += 1
        if self.finish is not None:
            if self.include_usage:
                usage = (
                    f'data: {{"id":"{self.rid}","object":"chat.completion.chunk","created":{self.created},'
                    f'"model":{self.model_json},"choices":[],"usage":{{"prompt_tokens":{self.prompt_tokens},'
                    f'"total_tokens":{self.prompt_tokens + self.completion},'
                    f'"completion_tokens":{self.completion}}}}}\n\n'
                )
                parts.append(usage.encode())
            parts.append(b"data: [DONE]\n\n")
        self._write(b"".join(parts))
        self.last_write = wall
        if self.finish is not None:
            self._write_end()

    def _write_end(self) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(b"0\r\n\r\n")
        if not self.done.done():
            self.done.set_result(None)

    def response(self) -> dict[str, Any]:
        # The pieces are JSON-escaped (a streamed delta writes them as they are): read them back once.
        content = json.loads(b'"' + b"".join(self.text_c) + b'"') or None
        reasoning = b"".join(self.text_r).decode() or None
        return {
            "id": self.rid,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "reasoning": reasoning,
                        "tool_calls": [],
                    },
                    "logprobs": None,
                    "finish_reason": self.finish,
                    "stop_reason": None,
                }
            ],
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "total_tokens": self.prompt_tokens + self.completion,
                "completion_tokens": self.completion,
            },
            "prompt_logprobs": None,
        }
