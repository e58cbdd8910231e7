"""Raw HTTP/1.1 response bytes → one request's timing and outcome (pure; the load runner's parsing seam).

Pipeline position: the streaming client (:mod:`load.client`) only timestamps socket reads and
keeps their bytes; one :class:`ResponseDecoder` per response splits the status line, headers and body
(chunked, length-delimited or close-delimited), partly while the stream runs when the client must know
where the body ends, the rest after it ended; :class:`EventParser` then turns the body's Server-Sent
Events into a :class:`StreamOutcome`. Nothing here reads a clock or a socket, so every case is a table test.

Timing rules (the user-visible boundary): a *token chunk* is an event whose ``delta`` carries non-empty
``content``, ``reasoning`` or ``reasoning_content``; TTFT is the first token chunk (hidden reasoning
included); the first *visible* answer is the first non-empty ``content``. Token counts come only from the
``usage`` chunk. An event's arrival is the read that delivered its last byte.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from contracts.results import ErrorClass

#: One socket read: (monotonic nanoseconds when it was taken, the bytes).
Read = tuple[int, bytes]

_BLANK_LINE = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_MAX_DETAIL = 200


@dataclass
class HttpResponse:
    """A response split into status, headers and body pieces (each piece keeps its read's timestamp)."""

    status: int | None  # None: no complete status line arrived
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names
    body: list[Read] = field(default_factory=list)
    complete: bool = False  # the body's framing said it ended (not just a closed connection)
    framing_error: str | None = None


@dataclass
class StreamOutcome:
    """What one streamed completion showed, in monotonic nanoseconds (absolute)."""

    first_token_ns: int | None = None
    first_visible_ns: int | None = None
    token_chunk_ns: list[int] = field(default_factory=list)
    last_byte_ns: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False  # "data: [DONE]" arrived
    error: ErrorClass | None = None
    error_detail: str | None = None
    chunks_per_read: list[int] = field(default_factory=list)  # token chunks delivered by each read
    text: str | None = None  # the visible answer (content deltas joined), when the parser was asked for it


class ChunkedDecoder:
    """Incremental HTTP/1.1 chunked transfer decoding; keeps each read's timestamp on its body bytes."""

    __slots__ = ("_buf", "_remaining", "_state", "body", "done", "error")

    def __init__(self) -> None:
        self._buf = b""
        self._state = "size"  # size | data | data_crlf | trailers | done
        self._remaining = 0
        self.body: list[Read] = []
        self.done = False
        self.error: str | None = None

    def feed(self, ns: int, data: bytes) -> None:
        """Consume one read; every state transition consumes bytes, so the loop ends with the buffer."""
        buf = self._buf + data if self._buf else data
        pos = 0
        end = len(buf)
        while pos < end and not self.done and self.error is None:
            if self._state == "data":
                take = min(self._remaining, end - pos)
                self.body.append((ns, buf[pos : pos + take]))
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._state = "data_crlf"
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            line = buf[pos:eol]
            pos = eol + 2
            if self._state == "data_crlf":
                if line:
                    self.error = f"chunk data not followed by CRLF: {line[:40]!r}"
                self._state = "size"
            elif self._state == "size":
                size_text = line.split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    self.error = f"bad chunk size line {line[:40]!r}"
                    break
                if size == 0:
                    self._state = "trailers"
                else:
                    self._remaining = size
                    self._state = "data"
            elif self._state == "trailers" and not line:
                self._state = "done"
                self.done = True
        self._buf = buf[pos:]


def split_head(reads: Sequence[Read]) -> tuple[int | None, dict[str, str], int, int]:
    """Find the end of the response head: (status, headers, read index, offset in that read of the body)."""
    joined = b""
    for index, (_, data) in enumerate(reads):
        start = len(joined)
        joined += data
        head_end = joined.find(b"\r\n\r\n")
        if head_end < 0:
            continue
        status, headers = _parse_head(joined[:head_end])
        return status, headers, index, head_end + 4 - start
    return None, {}, len(reads), 0


def _parse_head(head: bytes) -> tuple[int | None, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status: int | None = None
    if len(parts) >= 2 and parts[0].startswith("HTTP/") and parts[1].isdigit():
        status = int(parts[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return status, headers


Framing = Literal["chunked", "length", "close"]


class ResponseDecoder:
    """One HTTP/1.1 response, decoded once: the head when it is complete, the body's framing read by read.

    The raw client (:mod:`load.client`) keeps one per response and asks it only what it must know while
    the stream runs (where the body starts, how it is framed, whether a chunked body ended when the cheap
    tail test cannot tell); :meth:`finish_steps` decodes the rest after the stream ended, continuing where
    the client stopped, so no byte is decoded twice and the head is parsed once.
    """

    __slots__ = ("_chunked", "_fed", "_start", "content_length", "framing", "head_done", "headers", "status")

    def __init__(self) -> None:
        self.head_done = False
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.framing: Framing = "close"
        self.content_length = 0
        self._start = (0, 0)  # (read index, offset in that read) of the body's first byte
        self._chunked: ChunkedDecoder | None = None
        self._fed = 0  # reads already fed to the chunked decoder

    @property
    def keep_alive(self) -> bool:
        """May the connection carry the next request (HTTP/1.1 default, unless told otherwise)?"""
        return self.framing != "close" and self.headers.get("connection", "").lower() != "close"

    def read_head(self, reads: Sequence[Read]) -> bool:
        """Parse the head once it is complete; False while it is still arriving."""
        status, headers, index, offset = split_head(reads)
        if status is None and index == len(reads):
            return False
        self.head_done = True
        self.status, self.headers, self._start = status, headers, (index, offset)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.framing = "chunked"
        elif headers.get("content-length", "").isdigit():
            self.framing = "length"
            self.content_length = int(headers["content-length"])
        return True

    def body_bytes(self, reads: Sequence[Read]) -> int:
        """Bytes of body among ``reads`` (after the head)."""
        index, offset = self._start
        return sum(len(data) for _, data in reads[index:]) - offset

    def feed_chunked(self, reads: Sequence[Read], stop: int | None = None) -> ChunkedDecoder:
        """Feed the chunked decoder the reads it has not seen (up to index ``stop``); returns it."""
        decoder = self._chunked
        if decoder is None:
            decoder = self._chunked = ChunkedDecoder()
        index, offset = self._start
        end = len(reads) if stop is None else min(stop, len(reads))
        for position in range(max(self._fed, index), end):
            if decoder.done or decoder.error:
                break
            ns, data = reads[position]
            decoder.feed(ns, data[offset:] if position == index else data)
        self._fed = max(self._fed, end)
        return decoder

    def finish_steps(self, reads: Sequence[Read], size: int = 256) -> Generator[None, None, HttpResponse]:
        """Decode what is left in steps of ``size`` reads (the runner interleaves them with other work)."""
        if not self.head_done:
            self.read_head(reads)
        response = HttpResponse(status=self.status, headers=self.headers)
        if self.status is None:
            return response
        if self.framing == "chunked":
            stop = max(self._fed, self._start[0])
            decoder = self.feed_chunked(reads, stop)
            while stop < len(reads) and not (decoder.done or decoder.error):
                stop += size
                decoder = self.feed_chunked(reads, stop)
                yield
            response.body = decoder.body
            response.complete = decoder.done
            response.framing_error = decoder.error
            return response
        index, offset = self._start
        body_reads: list[Read] = []
        if index < len(reads):
            ns, data = reads[index]
            if offset < len(data):
                body_reads.append((ns, data[offset:]))
            body_reads.extend(reads[index + 1 :])
        if self.framing == "length":
            wanted, got = self.content_length, 0
            for ns, data in body_reads:
                piece = data[: wanted - got]
                if piece:
                    response.body.append((ns, piece))
                got += len(piece)
            response.complete = got >= wanted
            return response
        response.body = body_reads  # close-delimited: complete only if the caller saw a clean close
        return response


def decode_response(reads: Sequence[Read]) -> HttpResponse:
    """Decode the raw reads of one HTTP/1.1 response (all of them, or what arrived before it broke)."""
    steps = ResponseDecoder().finish_steps(reads, max(len(reads), 1))
    while True:
        try:
            next(steps)
        except StopIteration as done:
            response: HttpResponse = done.value
            return response


def body_text(body: Sequence[Read], limit: int = 4096) -> str:
    return b"".join(data for _, data in body)[:limit].decode("utf-8", "replace")


def error_detail_from_body(body: Sequence[Read]) -> str:
    """The first line of an error response: the OpenAI-style ``message`` when there is one."""
    text = body_text(body)
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return _first_line(inner["message"])
        if isinstance(data.get("detail"), str):
            return _first_line(data["detail"])
    return _first_line(text) or "(empty body)"


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0][:_MAX_DETAIL]


def split_events(body: Sequence[Read], carry: bytes = b"") -> tuple[list[tuple[int, bytes]], bytes]:
    """Split a body into SSE events with their arrival (the read of each event's last byte).

    Returns the complete events and the unterminated rest (pass it back as ``carry`` with the next
    pieces). Events end at a blank line; bodies with CR line endings take the slower regex path.
    """
    if not body:
        return [], carry
    if any(b"\r" in piece for _, piece in body):
        return _split_events_cr([(body[0][0], carry), *body] if carry else body)
    events: list[tuple[int, bytes]] = []
    for ns, piece in body:
        data = carry + piece if carry else piece
        start = 0
        while True:
            end = data.find(b"\n\n", start)
            if end < 0:
                break
            events.append((ns, data[start:end]))
            start = end + 2
        carry = data[start:] if start < len(data) else b""
    return events, carry


def _split_events_cr(body: Sequence[Read]) -> tuple[list[tuple[int, bytes]], bytes]:
    data = b"".join(piece for _, piece in body)
    ends: list[int] = []
    total = 0
    for _, piece in body:
        total += len(piece)
        ends.append(total)
    events: list[tuple[int, bytes]] = []
    start = 0
    for match in _BLANK_LINE.finditer(data):
        last_byte = match.end() - 1
        events.append((body[bisect_left(ends, last_byte + 1)][0], data[start : match.start()]))
        start = match.end()
    return events, data[start:]


def event_payload(event: bytes) -> bytes | None:
    """The joined ``data:`` lines of one event (None: a comment or an event without data)."""
    if event.startswith(b"data: ") and b"\n" not in event and b"\r" not in event:
        return event[6:]  # the common case: one data line
    lines = event.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    datas = []
    for line in lines:
        if line.startswith(b"data:"):
            value = line[5:]
            datas.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(datas) if datas else None


def _loads_all(payloads: list[bytes]) -> tuple[list[Any], int | None]:
    """Parse JSON payloads in one call when all are valid; else up to the first bad one (its index)."""
    if not payloads:
        return [], None
    try:
        joined = json.loads(b"[" + b",".join(payloads) + b"]")
    except ValueError:
        joined = None
    if isinstance(joined, list) and len(joined) == len(payloads):
        return joined, None
    parsed: list[Any] = []
    for index, payload in enumerate(payloads):
        try:
            parsed.append(json.loads(payload))
        except ValueError:
            return parsed, index
    return parsed, None


#: Body pieces parsed per step of :meth:`EventParser.steps` (a few hundred microseconds of work).
EVENTS_PER_STEP = 64


class EventParser:
    """Parses one stream's events in bounded steps, so a long stream never holds the event loop long."""

    def __init__(
        self,
        body: Sequence[Read],
        *,
        complete: bool,
        transport_error: ErrorClass | None = None,
        keep_text: bool = False,
    ):
        self.complete = complete
        # The visible answer's pieces, kept only when asked (a labelled set's answers are scored).
        self._text: list[str] | None = [] if keep_text else None
        self.transport_error = transport_error
        self.out = StreamOutcome(last_byte_ns=body[-1][0] if body else None)
        self._body = body
        self._crlf = any(b"\r" in piece for _, piece in body)
        self._rest = b""
        self._reads_seen: dict[int, int] = {}
        self._stopped = False

    def steps(self, size: int = EVENTS_PER_STEP) -> Iterator[None]:
        """Parse about ``size`` body pieces per step; the outcome is in :attr:`out` once exhausted."""
        body = self._body
        if self._crlf:  # rare: split everything at once, then parse in steps
            events, self._rest = split_events(body)
            for start in range(0, len(events), size):
                if self._stopped:
                    break
                self._feed(events[start : start + size])
                yield
        else:
            for start in range(0, len(body), size):
                if self._stopped:
                    break
                events, self._rest = split_events(body[start : start + size], self._rest)
                self._feed(events)
                yield
        self._close()

    def run(self) -> StreamOutcome:
        for _ in self.steps(max(len(self._body), 1)):
            pass
        return self.out

    def _feed(self, events: Sequence[tuple[int, bytes]]) -> None:
        out = self.out
        stamps: list[int] = []
        payloads: list[bytes] = []
        for ns, event in events:
            payload = event_payload(event)
            if payload is None:
                continue
            if payload.strip() == b"[DONE]":
                out.done = True
                self._stopped = True
                break
            stamps.append(ns)
            payloads.append(payload)
        objects, bad_index = _loads_all(payloads)
        reads_seen = self._reads_seen
        for ns, obj in zip(stamps, objects, strict=False):
            if not isinstance(obj, dict):
                out.error, out.error_detail = "malformed", f"event is not a JSON object: {str(obj)[:80]}"
                self._stopped = True
                return
            if "error" in obj or obj.get("object") == "error":
                inner = obj.get("error", obj)
                message = inner.get("message") if isinstance(inner, dict) else inner
                out.error, out.error_detail = "stream_error", _first_line(str(message))
                self._stopped = True
                return
            usage = obj.get("usage")
            if isinstance(usage, dict):
                out.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
                out.completion_tokens = _int_or_none(usage.get("completion_tokens"))
            choices = obj.get("choices")
            if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
                continue
            choice = choices[0]
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = delta.get("content")
                reasoning = delta.get("reasoning") or delta.get("reasoning_content")
                if content or reasoning:
                    if out.first_token_ns is None:
                        out.first_token_ns = ns
                    if content and out.first_visible_ns is None:
                        out.first_visible_ns = ns
                    if content and self._text is not None:
                        self._text.append(str(content))
                    out.token_chunk_ns.append(ns)
                    reads_seen[ns] = reads_seen.get(ns, 0) + 1
            reason = choice.get("finish_reason")
            if reason:
                out.finish_reason = str(reason)
        if bad_index is not None:
            out.error = "malformed"
            out.error_detail = f"event is not valid JSON: {payloads[bad_index][:80]!r}"
            self._stopped = True

    def _close(self) -> None:
        out = self.out
        out.chunks_per_read = list(self._reads_seen.values())
        if self._text is not None:
            out.text = "".join(self._text)
        if self.transport_error is not None:
            out.error = self.transport_error
        elif out.error is None and (not out.done or out.finish_reason is None):
            missing = "[DONE]" if not out.done else "a finish_reason"
            how = "the stream ended cleanly" if self.complete else "the connection closed mid-stream"
            tail = f"; {len(self._rest)} unterminated bytes" if self._rest.strip() else ""
            out.error, out.error_detail = "truncated", f"{how} without {missing}{tail}"


def http_error_outcome(status: int, body: Sequence[Read]) -> StreamOutcome:
    """A 4xx/5xx response: its class and the server's message."""
    return StreamOutcome(
        last_byte_ns=body[-1][0] if body else None,
        error="http_5xx" if status >= 500 else "http_4xx",
        error_detail=f"HTTP {status}: {error_detail_from_body(body)}",
    )


def parse_events(
    body: Sequence[Read],
    *,
    complete: bool,
    status: int | None = 200,
    transport_error: ErrorClass | None = None,
) -> StreamOutcome:
    """Turn a streamed completion's body into its outcome and error class (never raises on bad input).

    ``complete`` says whether the HTTP framing ended cleanly; ``transport_error`` is what the client saw
    (``timeout``, ``connect``, ``cancelled``...) and wins over what the bytes alone would say.
    """
    if status is not None and status >= 400:
        return http_error_outcome(status, body)
    return EventParser(body, complete=complete, transport_error=transport_error).run()


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
