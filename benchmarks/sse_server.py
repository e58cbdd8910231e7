"""A reference OpenAI-style streaming server on loopback, for load-client benchmarks and integration tests.

Not a simulator of vLLM: it streams one chunk per active request on every tick of a fixed clock (the way
an engine step emits a token for every running request at once, so chunks arrive in bursts), and stamps
each chunk's content with its ``time.monotonic_ns()`` at send. A client on the same machine shares
CLOCK_MONOTONIC, so its receive lag per chunk is exact.

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/completions`` (streaming only), ``POST /tokenize``
(one token per word plus a fixed template overhead, the same count ``usage.prompt_tokens`` reports),
``GET /v1/models``, ``GET /health``, ``GET /metrics`` (vLLM's counter and gauge names), ``GET /stamps``
(send stamps per ``cache_salt``, or ``#<n>`` for a stream without one, then cleared), ``GET /arrivals`` (with
``--record-arrivals``: the monotonic ns at which each chat request's last byte was read, in arrival order,
then cleared: a client's send schedule as the server saw it). ``--tls-cert``/``--tls-key`` serve https
(``--tls-client-ca`` also requires a client certificate signed by that CA). Faults for tests, chosen by a
marker in the prompt: ``FAULT:http500``, ``FAULT:http400``, ``FAULT:stream_error``, ``FAULT:truncate``,
``FAULT:malformed``, ``FAULT:stall``, ``FAULT:nodone``; ``REASONING:<n>`` streams n reasoning deltas before
the content.

    python benchmarks/sse_server.py --port 0 --interval-ms 10      # prints "listening on <port>"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import ssl
import sys
import time
from typing import Any

TEMPLATE_OVERHEAD = 3  # tokens the pretend chat template adds to every prompt
_REASONING = re.compile(r"REASONING:(\d+)")
_FAULT = re.compile(r"FAULT:(\w+)")


def count_tokens(payload: dict[str, Any]) -> int:
    if "messages" in payload:
        text = " ".join(str(m.get("content", "")) for m in payload["messages"])
        return len(text.split()) + TEMPLATE_OVERHEAD
    return len(str(payload.get("prompt", "")).split())


class Stream:
    """One streaming response in progress."""

    __slots__ = (
        "conn", "fault", "finish", "left", "prompt_tokens", "reasoning", "salt", "sent", "stamps", "text",
    )  # fmt: skip

    def __init__(  # noqa: PLR0917 - one argument per field, called from one place
        self, conn: Conn, total: int, reasoning: int, fault: str | None, prompt_tokens: int, salt: str
    ):
        self.conn = conn
        self.left = total
        self.reasoning = reasoning
        self.fault = fault
        self.prompt_tokens = prompt_tokens
        self.salt = salt
        self.sent = 0
        self.finish = "length"
        self.stamps: list[int] | None = None
        self.text = False  # /v1/completions: choices[0].text instead of a delta


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.interval_ns = round(args.interval_ms * 1e6)
        self.streams: list[Stream] = []
        self.counters = {"prompt": 0, "generation": 0, "preemptions": 0}
        self.success: dict[str, int] = {"length": 0, "stop": 0, "abort": 0}
        self.stamps: dict[str, list[int]] = {}
        self.arrivals: list[int] = []
        self.unsalted = 0
        self.ticks = 0
        self.late_ticks = 0
        self.model = args.model
        self.prefix = (
            b'data: {"id":"chatcmpl-ref","object":"chat.completion.chunk","created":0,"model":"'
            + self.model.encode()
            + b'","choices":[{"index":0,"delta":{"'
        )
        self.text_prefix = (
            b'data: {"id":"cmpl-ref","object":"text_completion","created":0,"model":"'
            + self.model.encode()
            + b'","choices":[{"index":0,'
        )

    def start_ticker(self) -> None:
        loop = asyncio.get_running_loop()
        self._next = time.monotonic_ns() + self.interval_ns
        loop.call_at(self._next / 1e9, self.tick)

    def tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = time.monotonic_ns()
        self.ticks += 1
        if now - self._next > self.interval_ns:
            self.late_ticks += 1
        self._next += self.interval_ns
        if self._next < now:
            self._next = now + self.interval_ns
        loop.call_at(self._next / 1e9, self.tick)
        if not self.streams:
            return
        active = self.streams
        self.streams = []
        keep = self.streams
        tokens = self.args.tokens_per_chunk
        prefix = self.prefix
        for stream in active:
            conn = stream.conn
            if conn.closed:
                self.success["abort"] += 1
                continue
            transport = conn.transport
            stream.sent += 1
            stream.left -= 1
            if stream.fault in ("truncate", "malformed", "stream_error", "stall") and stream.sent == 3:
                if stream.fault == "malformed":
                    keep.append(stream)  # a bad chunk, then the stream goes on
                self._fault(stream)
                continue
            field = b"reasoning" if stream.sent <= stream.reasoning else b"content"
            stamp = time.monotonic_ns()
            last = stream.left <= 0
            finish = b'"length"' if last else b"null"
            if stream.text:
                body = b'%s"text":"%d ","finish_reason":%s}]}\n\n' % (self.text_prefix, stamp, finish)
            else:
                body = b'%s%s":"%d "},"finish_reason":%s}]}\n\n' % (prefix, field, stamp, finish)
            transport.write(b"%x\r\n%s\r\n" % (len(body), body))
            self.counters["generation"] += tokens
            if stream.stamps is not None:
                stream.stamps.append(stamp)
            if last:
                self._end(stream)
            else:
                keep.append(stream)

    def _fault(self, stream: Stream) -> None:
        conn = stream.conn
        if stream.fault == "truncate":
            conn.transport.close()
        elif stream.fault == "malformed":
            conn.send_chunk(b'data: {"choices": [oops\n\n')
            stream.fault = None
        elif stream.fault == "stream_error":
            conn.send_chunk(b'data: {"error": {"message": "engine died mid-stream", "code": 500}}\n\n')
            conn.send_chunk(b"data: [DONE]\n\n")
            conn.transport.write(b"0\r\n\r\n")
        # stall: nothing more is ever sent

    def _end(self, stream: Stream) -> None:
        conn = stream.conn
        completion = stream.sent * self.args.tokens_per_chunk
        usage = {
            "prompt_tokens": stream.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": stream.prompt_tokens + completion,
        }
        conn.send_chunk(
            b'data: {"id":"chatcmpl-ref","choices":[],"usage":%s}\n\n' % json.dumps(usage).encode()
        )
        if stream.fault != "nodone":
            conn.send_chunk(b"data: [DONE]\n\n")
        conn.transport.write(b"0\r\n\r\n")
        self.success[stream.finish] += 1
        if stream.stamps is not None:  # a client that sends no cache_salt gets one key per stream
            self.unsalted += not stream.salt
            self.stamps[stream.salt or f"#{self.unsalted}"] = stream.stamps
        conn.busy = False

    def metrics_text(self) -> str:
        labels = f'engine="0",model_name="{self.model}"'
        values = [
            ("vllm:num_requests_running", "gauge", len(self.streams)),
            ("vllm:num_requests_waiting", "gauge", 0),
            ("vllm:kv_cache_usage_perc", "gauge", min(1.0, len(self.streams) / 1000)),
            ("vllm:num_preemptions_total", "counter", 0),
            ("vllm:prompt_tokens_total", "counter", self.counters["prompt"]),
            ("vllm:generation_tokens_total", "counter", self.counters["generation"]),
        ]
        lines = []
        for name, kind, value in values:
            lines += [f"# TYPE {name.removesuffix('_total')} {kind}", f"{name}{{{labels}}} {float(value)}"]
        lines.append("# TYPE vllm:request_success counter")
        for reason, count in self.success.items():
            lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {float(count)}')
        return "\n".join(lines) + "\n"


class Conn(asyncio.Protocol):
    """One client connection (keep-alive; one request at a time)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.closed = False
        self.busy = False
        self.read_ns = 0
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports do not subclass it

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self.read_ns = time.monotonic_ns()
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buf) < head_end + 4 + length:
                return
            body = self.buf[head_end + 4 : head_end + 4 + length]
            self.buf = self.buf[head_end + 4 + length :]
            method, path = head.split(" ", 2)[:2]
            self.handle(method, path, body)

    def send_chunk(self, data: bytes) -> None:
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def respond(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}[status]
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status, reason.encode(), content_type.encode(), len(body), body)
        )

    def handle(self, method: str, path: str, body: bytes) -> None:
        server = self.server
        args = server.args
        if method == "GET" and path == "/health":
            self.respond(200, b"")
        elif method == "GET" and path == "/v1/models":
            models = {
                "object": "list",
                "data": [{"id": server.model, "object": "model", "max_model_len": args.max_model_len}],
            }
            self.respond(200, json.dumps(models).encode())
        elif method == "GET" and path == "/metrics" and not args.no_metrics:
            self.respond(200, server.metrics_text().encode(), "text/plain; version=0.0.4")
        elif method == "GET" and path == "/arrivals":
            arrivals, server.arrivals = server.arrivals, []
            self.respond(200, json.dumps(arrivals).encode())
        elif method == "GET" and path == "/stamps":
            stamps, server.stamps = server.stamps, {}
            self.respond(200, json.dumps(stamps).encode())
        elif method == "POST" and path == "/tokenize" and not args.no_tokenize:
            payload = json.loads(body)
            count = count_tokens(payload)
            self.respond(
                200,
                json.dumps(
                    {"count": count, "max_model_len": args.max_model_len, "tokens": [0] * count}
                ).encode(),
            )
        elif method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            if args.record_arrivals:
                server.arrivals.append(self.read_ns)
            self.chat(json.loads(body), text_api=path == "/v1/completions")
        else:
            self.respond(404, b'{"detail": "Not Found"}')

    def chat(self, payload: dict[str, Any], *, text_api: bool = False) -> None:
        server = self.server
        text = " ".join(str(m.get("content", "")) for m in payload.get("messages", []))
        text += str(payload.get("prompt", ""))
        fault_match = _FAULT.search(text)
        fault = fault_match.group(1) if fault_match else None
        if fault == "http500":
            self.respond(500, b'{"error": {"message": "internal error (injected)", "code": 500}}')
            return
        if fault == "http400" or not payload.get("stream"):
            self.respond(
                400,
                b'{"error": {"message": "This model\'s maximum context length is 8 tokens", "code": 400}}',
            )
            return
        reasoning_match = _REASONING.search(text)
        reasoning = int(reasoning_match.group(1)) if reasoning_match else server.args.reasoning
        prompt_tokens = count_tokens(payload)
        server.counters["prompt"] += prompt_tokens
        max_tokens = int(payload.get("max_tokens") or payload.get("max_completion_tokens") or 16)
        chunks = max(1, -(-max_tokens // server.args.tokens_per_chunk))
        self.transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        if server.args.role_chunk and not text_api:
            self.send_chunk(
                server.prefix + b'role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
            )
        stream = Stream(self, chunks, reasoning, fault, prompt_tokens, str(payload.get("cache_salt", "")))
        stream.text = text_api
        if server.args.record_stamps:
            stream.stamps = []
        self.busy = True
        server.streams.append(stream)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = a free port, printed on stdout")
    parser.add_argument("--model", default="ref-model")
    parser.add_argument("--interval-ms", type=float, default=10.0, help="time between chunks of a stream")
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--reasoning", type=int, default=0, help="reasoning deltas before the content")
    parser.add_argument("--no-role-chunk", dest="role_chunk", action="store_false")
    parser.add_argument("--record-stamps", action="store_true", help="keep send stamps per cache_salt")
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument("--no-tokenize", action="store_true")
    parser.add_argument("--max-model-len", type=int, default=32768, help="what /v1/models reports")
    parser.add_argument("--record-arrivals", action="store_true", help="keep chat request arrival times")
    parser.add_argument("--tls-cert", help="PEM certificate: serve https")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    parser.add_argument("--tls-client-ca", help="require a client certificate signed by this CA (PEM)")
    args = parser.parse_args(argv)
    tls = None
    if args.tls_cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:
            tls.load_verify_locations(args.tls_client_ca)
            tls.verify_mode = ssl.CERT_REQUIRED
    try:
        import uvloop  # noqa: PLC0415 - optional: more chunks per second per core
    except ImportError:
        uvloop = None

    async def serve() -> None:
        server = Server(args)
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(lambda: Conn(server), args.host, args.port, backlog=4096, ssl=tls)
        port = listener.sockets[0].getsockname()[1]
        print(f"listening on {port}", flush=True)
        server.start_ticker()
        done = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, done.set)
        await done.wait()
        listener.close()
        print(f"ticks {server.ticks} late {server.late_ticks}", file=sys.stderr, flush=True)

    if uvloop is not None:
        uvloop.run(serve())
    else:
        asyncio.run(serve())


if __name__ == "__main__":
    main()
