"""A fault-injecting HTTP/1.1 proxy: put it in front of any OpenAI-style server (the simulator, real vLLM).

Test support for the fault matrix (``docs/reliability.md``). The proxy forwards every request to the
upstream server; chat completions (``POST .../chat/completions``) are numbered in arrival order and
``plan(n)`` chooses a :class:`Fault` for the n-th one. A streamed (chunked) answer is re-framed one SSE
event per chunk, so a fault lands exactly after ``after_events`` events:

    stall      forward ``after_events`` events, then send nothing more (the connection stays open)
    silent     answer nothing at all, not even a status line (a server whose /health is 200 but never streams)
    reset      forward ``after_events`` events, then reset the connection (RST) before ``[DONE]``
    malformed  after ``after_events`` events, insert one event whose payload is not JSON, then go on
    big_chunk  after ``after_events`` events, insert one valid token event of ``size`` bytes, then go on
    delay      sleep ``delay_s`` before every event after ``after_events``
    status     answer ``status`` (429, 503, ...) with an OpenAI-style error body, without asking upstream

It runs its own event loop in a thread (the load runner owns the caller's loop), and keeps a log of
when each fault began and when the client gave up on the connection (:attr:`FaultProxy.log`), so a test
measures detection time without sleeping. Example::

    with FaultProxy(server.base_url, plan=lambda n: Fault("stall", after_events=3) if n == 5 else None) as px:
        run_profile(px.base_url, ...)
        px.log[0].client_gone_s - px.log[0].fault_s   # seconds from the stall to the client's abort
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

FaultKind = Literal["stall", "silent", "reset", "malformed", "big_chunk", "delay", "status"]


@dataclass(frozen=True)
class Fault:
    """What to do to one chat completion."""

    kind: FaultKind
    after_events: int = 0  # SSE events forwarded before the fault
    status: int = 503  # kind "status"
    delay_s: float = 0.0  # kind "delay"
    size: int = 1_200_000  # kind "big_chunk": bytes of content in the inserted event


@dataclass
class FaultLog:
    """One injected fault, in monotonic seconds."""

    request: int
    kind: FaultKind
    fault_s: float  # when the fault began (the stall, the reset, the inserted event)
    client_gone_s: float | None = None  # when the client closed or reset the connection (stall, silent)


Plan = Callable[[int], Fault | None]


@dataclass
class _Head:
    method: str
    path: str
    raw: bytes
    length: int


class FaultProxy:
    """Forward to ``upstream`` (``http://host:port``), injecting the faults ``plan`` chooses."""

    def __init__(self, upstream: str, plan: Plan) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.plan = plan
        self.log: list[FaultLog] = []
        self.chat_requests = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def wait_client_gone(self, entry: FaultLog, timeout_s: float) -> float | None:
        """Poll (no sleep-and-hope) until the client dropped the faulted connection; the moment, or None."""
        deadline = time.monotonic() + timeout_s
        while entry.client_gone_s is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return entry.client_gone_s

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._client, "127.0.0.1", 0)

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                head = await _read_head(reader)
                if head is None:
                    return
                body = await reader.readexactly(head.length)
                fault: Fault | None = None
                number = -1
                if head.method == "POST" and head.path.endswith("/chat/completions"):
                    with self._lock:
                        number = self.chat_requests
                        self.chat_requests += 1
                    fault = self.plan(number)
                if not await self._one(reader, writer, (head, body), fault, number):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _one(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: tuple[_Head, bytes],
        fault: Fault | None,
        number: int,
    ) -> bool:
        """Serve one request; False when the client connection must end."""
        head, body = request
        if fault is not None and fault.kind == "status":
            self.log.append(FaultLog(number, fault.kind, time.monotonic()))
            payload = json.dumps({"error": {"message": f"injected {fault.status}", "code": fault.status}})
            writer.write(
                f"HTTP/1.1 {fault.status} Injected\r\ncontent-type: application/json\r\n"
                f"content-length: {len(payload)}\r\n\r\n{payload}".encode()
            )
            await writer.drain()
            return True
        if fault is not None and fault.kind == "silent":
            await self._hold(reader, FaultLog(number, fault.kind, time.monotonic()))
            return False
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        try:
            up_writer.write(head.raw + body)
            await up_writer.drain()
            status_head = await up_reader.readuntil(b"\r\n\r\n")
            lower = status_head.lower()
            writer.write(status_head)
            if b"transfer-encoding: chunked" not in lower:
                length = _content_length(status_head)
                writer.write(await up_reader.readexactly(length) if length else b"")
                await writer.drain()
                return b"connection: close" not in lower
            return await self._relay_events(reader, writer, up_reader, fault, number)
        finally:
            up_writer.close()

    async def _relay_events(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: asyncio.StreamReader,
        fault: Fault | None,
        number: int,
    ) -> bool:
        """Re-frame the upstream's chunked SSE body one event per chunk, applying ``fault``."""
        sent = 0
        rest = b""
        async for data in _chunks(upstream):
            rest += data
            while b"\n\n" in rest:
                event, rest = rest.split(b"\n\n", 1)
                at_fault = fault is not None and sent == fault.after_events
                if at_fault and fault is not None and not await self._inject(reader, writer, fault, number):
                    return False
                if fault is not None and fault.kind == "delay" and sent >= fault.after_events:
                    await asyncio.sleep(fault.delay_s)
                writer.write(_chunk(event + b"\n\n"))
                await writer.drain()
                sent += 1
        if rest:
            writer.write(_chunk(rest))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _inject(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fault: Fault, number: int
    ) -> bool:
        """The fault itself, at its event; False when the connection is finished with."""
        entry = FaultLog(number, fault.kind, time.monotonic())
        self.log.append(entry)
        if fault.kind == "stall":
            await self._hold(reader, entry)
            return False
        if fault.kind == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:  # SO_LINGER 0: close sends RST, not FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if fault.kind == "malformed":
            writer.write(_chunk(b'data: {"choices": [{"delta": {"content": "x"\n\n'))
        elif fault.kind == "big_chunk":
            event = {"choices": [{"index": 0, "delta": {"content": "x" * fault.size}, "finish_reason": None}]}
            writer.write(_chunk(b"data: " + json.dumps(event).encode() + b"\n\n"))
        return True

    async def _hold(self, reader: asyncio.StreamReader, entry: FaultLog) -> None:
        """Send nothing; note when the client gives up (EOF or reset on its side)."""
        if entry not in self.log:
            self.log.append(entry)
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass
        entry.client_gone_s = time.monotonic()


async def _read_head(reader: asyncio.StreamReader) -> _Head | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    method, path, _ = raw.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
    return _Head(method, path, raw, _content_length(raw))


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """Decoded chunk payloads of a chunked body, until the last chunk (trailers skipped)."""
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"
