"""The streaming HTTP client of the load runner: timestamp each socket read, parse nothing until the end.

Pipeline position: the runner (:mod:`load.runner`) sends each request through a
:class:`StreamClient`; the client returns an :class:`Exchange` (status, body pieces with their arrival
times, how it ended) which :mod:`load.sse` turns into timings. This is the one module of the
load runner that opens sockets.

Why a raw :class:`asyncio.Protocol`: a closed-loop profile's streams receive their chunks in bursts, and
the last chunk of a burst is timestamped only after the client has handled every earlier one, so the
timing error is the burst size times the work done per read. ``data_received`` here takes the clock and
appends ``(ns, bytes)``; chunked decoding, SSE splitting and JSON happen after the stream ends. There is
no read-buffer limit: a 10K-token prompt or a megabyte chunk is just more reads. :class:`HttpxStreamClient`
is the same contract over an httpx transport: the seam tests use with ``httpx.MockTransport``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import resource
import socket
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast
from urllib.parse import urlsplit

import httpx

from contracts.errors import HarnessError, LoadError
from load.sse import Read, ResponseDecoder
from load.tls import tls_context

Ending = Literal["complete", "closed", "timeout", "connect", "client", "cancelled"]
Clock = Callable[[], int]

#: errno values of a connect that failed on the client's own host: no descriptor (EMFILE, ENFILE), no
#: local port or address (EADDRNOTAVAIL, EADDRINUSE), no buffer or memory. Not the server's doing.
CLIENT_ERRNOS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.EADDRNOTAVAIL, errno.EADDRINUSE, errno.ENOBUFS, errno.ENOMEM}
)


def failed_ending(exc: BaseException) -> Literal["connect", "client"]:
    """How a request that failed before a response ended: ``client`` when the error (or one it was raised
    from) is the client host's own (:data:`CLIENT_ERRNOS`), else ``connect`` (refused, reset, unreachable).

    >>> failed_ending(OSError(errno.EMFILE, "Too many open files")), failed_ending(ConnectionRefusedError())
    ('client', 'connect')
    """
    seen: BaseException | None = exc
    for _ in range(8):  # the chain of causes, as far as httpx and httpcore wrap it
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in CLIENT_ERRNOS:
            return "client"
        seen = seen.__cause__ or seen.__context__
    return "connect"


@dataclass
class Exchange:
    """One request/response as the client saw it (absolute monotonic nanoseconds).

    The raw client leaves the response undecoded (``raw``) so that the next request goes out first;
    :meth:`decode` splits it into status, headers and body when the runner gets to it.
    """

    sent_ns: int
    status: int | None = None
    body: list[Read] = field(default_factory=list)
    complete: bool = False  # the response's framing ended cleanly
    ending: Ending = "complete"
    detail: str | None = None  # what went wrong at the transport level
    end_ns: int | None = None
    raw: list[Read] | None = None  # undecoded reads (raw client)
    decoder: ResponseDecoder | None = None  # what the raw client already decoded of ``raw``
    reads: int = 0  # socket reads (raw client) or body pieces (httpx) the response arrived in

    def decode(self) -> Exchange:
        for _ in self.decode_steps(max(len(self.raw or ()), 1)):
            pass
        return self

    def decode_steps(self, size: int = 256) -> Iterator[None]:
        """:meth:`decode` in bounded steps (a long stream has thousands of reads)."""
        if self.raw is None:
            return
        decoder = self.decoder if self.decoder is not None else ResponseDecoder()
        response = yield from decoder.finish_steps(self.raw, size)
        self.raw = self.decoder = None
        self.status = response.status
        self.body = response.body
        close_delimited = decoder.framing == "close"  # the body ends when the connection closes
        self.complete = response.complete or (self.ending == "complete" and close_delimited)
        if response.framing_error is not None:
            self.detail = response.framing_error


@dataclass
class Begun:
    """A request :meth:`RawStreamClient.begin` wrote (``conn``, at ``sent_ns``), or failed to write
    (``error``), or left unsent (no ``conn``: no connection was idle)."""

    payload: bytes
    conn: _Conn | None = None
    sent_ns: int = 0
    error: OSError | None = None


class StreamClient(Protocol):
    """Send one POST and collect the streamed response."""

    async def post_stream(self, path: str, body: bytes, *, timeout_s: float) -> Exchange: ...

    def reads_received(self) -> int:
        """Reads (body pieces) of every response so far, those in flight included: O(streams)."""
        ...

    async def aclose(self) -> None: ...


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 connection; a response at a time."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.lost_detail: str | None = None
        self.reset()

    def reset(self) -> None:
        self.reads: list[Read] = []
        self.append = self.reads.append
        self.waiter: asyncio.Future[None] | None = None
        self.response = ResponseDecoder()
        self.mode: str | None = None  # None until the head arrived: chunked | length | close
        self.length_left = 0
        self.finished = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it

    def data_received(self, data: bytes) -> None:
        # The hot path: one clock read, one append, one cheap test. Everything else happens later.
        self.append((self.clock(), data))
        mode = self.mode
        if mode == "chunked":
            if data.endswith(b"\r\n\r\n") or len(data) < 7:
                self._check_chunked_end()
        elif mode == "length":
            self.length_left -= len(data)
            if self.length_left <= 0:
                self._finish()
        elif mode is None:
            self._read_head()

    def _read_head(self) -> None:
        response = self.response
        if not response.read_head(self.reads):
            return  # the head is still incomplete
        self.mode = response.framing
        if self.mode == "chunked":
            self._check_chunked_end()
        elif self.mode == "length":
            self.length_left = response.content_length - response.body_bytes(self.reads)
            if self.length_left <= 0:
                self._finish()

    def _check_chunked_end(self) -> None:
        """Has the body ended? The last-chunk marker ends it at once (the parse step decodes the
        framing); anything else that could end it (trailers) goes through the response's own decoder,
        which the parse step then continues instead of starting over."""
        tail = self.reads[-1][1][-7:]
        index = len(self.reads) - 2
        while len(tail) < 7 and index >= 0:
            tail = self.reads[index][1][-(7 - len(tail)) :] + tail
            index -= 1
        if tail.endswith(b"\r\n0\r\n\r\n") or (len(self.reads) == 1 and tail.endswith(b"\n0\r\n\r\n")):
            self._finish()
            return
        if not tail.endswith(b"\r\n\r\n"):
            return
        decoder = self.response.feed_chunked(self.reads)
        if decoder.done or decoder.error:
            self._finish()

    def _finish(self) -> None:
        self.finished = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost_detail = repr(exc) if exc else None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


#: Makes the event loop a run's streams are read on.
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def default_loop_factory() -> LoopFactory | None:
    """uvloop when it is installed (less work per socket read), else asyncio's own loop (None)."""
    try:
        import uvloop  # noqa: PLC0415 - optional accelerator
    except ImportError:
        return None
    return uvloop.new_event_loop


def check_headers(headers: Mapping[str, str]) -> None:
    """Refuse a header with a line break (an API key read from a file with its newline): it would end the
    request's head early. The harness's input, not the server: a HarnessError naming the header, never
    its value."""
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n"):
            raise HarnessError(
                f"the load client's header {name!r} has a line break; the harness's input, not the server",
                hint="a header value is one line: strip the newline from the API key's variable "
                "(service.api_key_env)",
            )


#: Descriptors kept free beyond the streams' connections (files, pipes, /metrics, the loop's own).
FD_HEADROOM = 256


def raise_fd_limit(needed: int) -> None:
    """Raise this process's soft limit on open files toward ``needed`` (up to the hard limit), so thousands
    of streams do not fail with EMFILE where the default soft limit is 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class RawStreamClient:
    """HTTP/1.1 over asyncio protocols, with a keep-alive pool; base_url like ``http://127.0.0.1:8000``
    or ``https://gateway.example:443`` (asyncio's SSL transport; ``tls`` from :func:`tls_context`)."""

    def __init__(
        self,
        base_url: str,
        *,
        clock: Clock = time.monotonic_ns,
        headers: Mapping[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LoadError(
                f"cannot stream from {base_url!r}: the load client speaks http://host:port and "
                "https://host:port only",
                hint="point the runner at the server's http or https address",
            )
        self.host = parts.hostname
        self.tls = (tls or tls_context(None)) if parts.scheme == "https" else None
        self.port = parts.port or (443 if self.tls is not None else 80)
        self.prefix = parts.path.rstrip("/")
        self.clock = clock
        check_headers(headers or {})
        self._extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._idle: list[_Conn] = []
        self._address: tuple[socket.AddressFamily, Any] | None = None
        self._all: set[_Conn] = set()
        self._busy: set[_Conn] = set()  # connections with a request in flight
        self._reads_done = 0  # reads of the responses no longer in flight

    async def _connect(self) -> _Conn:
        """Connect with an address resolved once: a name lookup per connection runs in a thread, and
        that thread's turns at the GIL stall every stream for milliseconds."""
        loop = asyncio.get_running_loop()
        if self._address is None:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)  # once, before load
            self._address = infos[0][0], infos[0][4]
        family, address = self._address
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
            if self.tls is None:
                _, conn = await loop.create_connection(lambda: _Conn(self.clock), sock=sock)
            else:  # the handshake happens here, before the request is timed
                _, conn = await loop.create_connection(
                    lambda: _Conn(self.clock), sock=sock, ssl=self.tls, server_hostname=self.host
                )
        except BaseException:
            sock.close()
            raise
        self._all.add(conn)
        return conn

    async def preconnect(self, count: int) -> None:
        """Open up to ``count`` idle connections, so the first wave is not timed with TCP setup."""
        missing = count - len(self._idle)
        if missing <= 0:
            return
        raise_fd_limit(len(self._all) + missing + FD_HEADROOM)
        results = await asyncio.gather(*(self._connect() for _ in range(missing)), return_exceptions=True)
        self._idle.extend(conn for conn in results if isinstance(conn, _Conn))

    def _pop_idle(self) -> _Conn | None:
        """An idle connection that is still open, discarding those the server closed meanwhile."""
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None and not conn.transport.is_closing() and not conn.closed:
                return conn
            self._discard(conn)
        return None

    def _request_bytes(self, method: str, path: str, body: bytes) -> bytes:
        head = (
            f"{method} {self.prefix}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n{self._extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode("latin-1") + body

    async def get(self, path: str, *, timeout_s: float) -> Exchange:
        """A plain GET (``/metrics`` while streams run: far less loop time than a general client)."""
        return (await self._send(self._request_bytes("GET", path, b""), timeout_s)).decode()

    async def post_stream(self, path: str, body: bytes, *, timeout_s: float) -> Exchange:
        return await self._send(self._request_bytes("POST", path, body), timeout_s)

    def begin(self, path: str, body: bytes) -> Begun:
        """Write a POST now, on an idle connection, without yielding to the loop; :meth:`post_begun`
        collects its response. A burst's opening wave leaves in one pass this way (about 7 µs a request
        on loopback, the write itself) instead of a task's turn each. Nothing is written when no
        connection is idle: :meth:`post_begun` then sends it as :meth:`post_stream` does."""
        payload = self._request_bytes("POST", path, body)
        conn = self._pop_idle()
        if conn is None:
            return Begun(payload)
        try:
            return Begun(payload, conn, self._write(conn, payload))
        except OSError as exc:
            return Begun(payload, conn, self.clock(), exc)

    async def post_begun(self, begun: Begun, *, timeout_s: float) -> Exchange:
        """The response to a request :meth:`begin` wrote (or sends it now, if it wrote nothing)."""
        return await self._send(begun.payload, timeout_s, begun if begun.conn is not None else None)

    def _write(self, conn: _Conn, payload: bytes) -> int:
        """Send ``payload`` on ``conn``, which waits for its response from now on; the send's time."""
        conn.reset()
        conn.waiter = asyncio.get_running_loop().create_future()
        if conn.transport is None or conn.transport.is_closing():
            raise ConnectionResetError("the connection was closed by the server")
        sent_ns = self.clock()
        try:
            conn.transport.write(payload)
        except RuntimeError as exc:  # uvloop: the handle closed between the check and the write
            raise ConnectionResetError(str(exc)) from exc
        self._busy.add(conn)
        return sent_ns

    async def _send(self, payload: bytes, timeout_s: float, begun: Begun | None = None) -> Exchange:
        deadline = asyncio.get_running_loop().time() + timeout_s
        for attempt in range(2):  # a reused connection the server closed meanwhile gets one fresh retry
            written = begun if attempt == 0 else None  # the first attempt's write, already done
            conn: _Conn | None = written.conn if written is not None else self._pop_idle()
            reused = conn is not None
            sent_ns = written.sent_ns if written is not None else self.clock()
            try:
                async with asyncio.timeout_at(deadline):
                    if written is not None and written.error is not None:
                        raise written.error
                    if written is None:
                        if conn is None:
                            conn = await self._connect()
                        sent_ns = self._write(conn, payload)
                    assert conn is not None and conn.waiter is not None
                    await conn.waiter
            except TimeoutError:
                self._discard(conn)
                return self._exchange(conn, sent_ns, "timeout", f"no end of stream within {timeout_s:g} s")
            except asyncio.CancelledError:
                self._discard(conn)
                raise
            except OSError as exc:
                self._discard(conn)
                if reused and attempt == 0:
                    continue  # the server closed an idle connection: try once on a fresh one
                return Exchange(
                    sent_ns=sent_ns, ending=failed_ending(exc), detail=f"{type(exc).__name__}: {exc}"
                )
            assert conn is not None
            if conn.finished:
                if conn.response.keep_alive and not conn.closed:
                    self._idle.append(conn)
                else:
                    self._discard(conn)
                return self._exchange(conn, sent_ns, "complete", None)
            # The connection closed before the framing said the response ended.
            self._discard(conn)
            if reused and not conn.reads and attempt == 0:
                continue
            if conn.mode == "close" and conn.lost_detail is None:
                return self._exchange(conn, sent_ns, "complete", None)
            if not conn.reads:
                return Exchange(
                    sent_ns=sent_ns, ending="connect", detail="connection closed before a response"
                )
            why = f" ({conn.lost_detail})" if conn.lost_detail else ""
            return self._exchange(conn, sent_ns, "closed", f"connection closed mid-response{why}")
        raise AssertionError("unreachable: the retry loop returns")  # pragma: no cover

    def _exchange(self, conn: _Conn | None, sent_ns: int, ending: Ending, detail: str | None) -> Exchange:
        if conn is None:
            return Exchange(sent_ns=sent_ns, ending=ending, detail=detail, raw=[])
        self._release(conn)
        reads = conn.reads
        exchange = Exchange(
            sent_ns=sent_ns,
            ending=ending,
            detail=detail,
            end_ns=reads[-1][0] if reads else None,
            raw=reads,
            decoder=conn.response,
            reads=len(reads),
        )
        # The connection lets go of the response now: its reads (a decode_heavy stream's thousands) are
        # freed when the parse step is done with them, not by the next send's reset (77 µs a request on
        # the hot path, measured: a 128 wave left 6 ms late).
        conn.reset()
        return exchange

    def _release(self, conn: _Conn) -> None:
        """The response is no longer in flight: its reads move to the finished tally (once)."""
        if conn in self._busy:
            self._busy.discard(conn)
            self._reads_done += len(conn.reads)

    def reads_received(self) -> int:
        return self._reads_done + sum(len(conn.reads) for conn in self._busy)

    def _discard(self, conn: _Conn | None) -> None:
        if conn is None:
            return
        self._release(conn)
        self._all.discard(conn)
        if conn.transport is not None and not conn.closed:
            conn.transport.abort()

    async def aclose(self) -> None:
        for conn in list(self._all):
            self._discard(conn)
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports' close callbacks run inside this loop


class HttpxStreamClient:
    """The same contract through httpx (tests pass ``httpx.MockTransport``); slower per chunk."""

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock = time.monotonic_ns,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.clock = clock
        self._client = httpx.AsyncClient(
            base_url=base_url, transport=transport, timeout=None, headers=dict(headers or {})
        )
        self._active: dict[int, Exchange] = {}  # in flight, by id
        self._reads_done = 0

    async def post_stream(self, path: str, body: bytes, *, timeout_s: float) -> Exchange:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        sent_ns = self.clock()
        out = Exchange(sent_ns=sent_ns)
        self._active[id(out)] = out
        try:
            async with asyncio.timeout(timeout_s):
                request = self._client.build_request("POST", path, content=body, headers=headers)
                sent_ns = out.sent_ns = self.clock()
                response = await self._client.send(request, stream=True)
                try:
                    out.status = response.status_code
                    async for piece in response.aiter_bytes():
                        out.body.append((self.clock(), piece))
                    out.complete = True
                finally:
                    await response.aclose()
        except TimeoutError:
            out.ending, out.detail = "timeout", f"no end of stream within {timeout_s:g} s"
        except httpx.ConnectError as exc:
            out.ending, out.detail = failed_ending(exc), f"ConnectError: {exc}"
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            out.ending, out.detail = ("closed" if out.status else "connect"), f"{type(exc).__name__}: {exc}"
        finally:
            del self._active[id(out)]
            self._reads_done += len(out.body)
        out.end_ns = out.body[-1][0] if out.body else None
        out.reads = len(out.body)
        return out

    def reads_received(self) -> int:
        return self._reads_done + sum(len(exchange.body) for exchange in self._active.values())

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._client.aclose()
