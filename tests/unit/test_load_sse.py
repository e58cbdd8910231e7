"""Canned SSE streams through the load runner's parsing seam: bytes in, timings and error class out."""

from __future__ import annotations

import json

import pytest

from load.client import Exchange, _Conn
from load.sse import ChunkedDecoder, Read, ResponseDecoder, decode_response, parse_events, split_events


def chunk(
    content: str | None = None, *, reasoning: str | None = None, finish: str | None = None, old: bool = False
) -> bytes:
    delta: dict[str, str] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content" if old else "reasoning"] = reasoning
    body = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def usage(prompt: int, completion: int) -> bytes:
    body = {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
ROLE = chunk("")  # vLLM's first chunk: the role with empty content


def reads(*events: bytes) -> list[Read]:
    """One read per event, 1 ms apart starting at t = 1 ms."""
    return [((i + 1) * 1_000_000, e) for i, e in enumerate(events)]


CASES = {
    # name: (events, (first token ms, first visible ms, token chunks, finish, prompt, completion, error))
    "reasoning then content": (
        [
            ROLE,
            chunk(reasoning="a"),
            chunk(reasoning="b"),
            chunk("x"),
            chunk("y", finish="stop"),
            usage(7, 4),
            DONE,
        ],
        (2, 4, 4, "stop", 7, 4, None),
    ),
    "content only": (
        [ROLE, chunk("x"), chunk("y", finish="length"), usage(3, 2), DONE],
        (2, 2, 2, "length", 3, 2, None),
    ),
    "reasoning only is censored, not failed": (
        [ROLE, chunk(reasoning="a"), chunk(reasoning="b", finish="length"), usage(3, 2), DONE],
        (2, None, 2, "length", 3, 2, None),
    ),
    "old reasoning_content field": (
        [chunk(reasoning="a", old=True), chunk("x", finish="stop"), usage(1, 2), DONE],
        (1, 2, 2, "stop", 1, 2, None),
    ),
    "empty deltas are not tokens": (
        [ROLE, chunk(""), chunk(reasoning=""), chunk("x"), chunk("", finish="stop"), usage(1, 1), DONE],
        (4, 4, 1, "stop", 1, 1, None),
    ),
    "multi-token chunks: tokens come from usage": (
        [chunk("several words"), chunk("more words", finish="length"), usage(5, 9), DONE],
        (1, 1, 2, "length", 5, 9, None),
    ),
    "error object mid-stream": (
        [chunk("x"), b'data: {"error": {"message": "engine died\\nmore", "code": 500}}\n\n', DONE],
        (1, 1, 1, None, None, None, "stream_error"),
    ),
    "no [DONE] is truncated": (
        [chunk("x"), chunk("y", finish="stop"), usage(1, 2)],
        (1, 1, 2, "stop", 1, 2, "truncated"),
    ),
    "no finish_reason is truncated": (
        [chunk("x"), DONE],
        (1, 1, 1, None, None, None, "truncated"),
    ),
    "malformed JSON keeps what came before": (
        [chunk("x"), b"data: {not json\n\n", chunk("y", finish="stop"), DONE],
        (1, 1, 1, None, None, None, "malformed"),
    ),
    "comments and event lines are ignored": (
        [b": ping\n\n", b"event: message\n" + chunk("x", finish="stop"), usage(1, 1), DONE],
        (2, 2, 1, "stop", 1, 1, None),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_canned_streams(name: str) -> None:
    events, want = CASES[name]
    out = parse_events(reads(*events), complete=True)
    ms = [None if ns is None else ns // 1_000_000 for ns in (out.first_token_ns, out.first_visible_ns)]
    got = (
        *ms,
        len(out.token_chunk_ns),
        out.finish_reason,
        out.prompt_tokens,
        out.completion_tokens,
        out.error,
    )
    assert got == want
    if out.error is not None:
        assert out.error_detail


def test_stream_error_detail_is_the_first_line_of_the_message() -> None:
    out = parse_events(reads(b'data: {"error": {"message": "engine died\\nmore"}}\n\n'), complete=True)
    assert (out.error, out.error_detail) == ("stream_error", "engine died")


@pytest.mark.parametrize(
    ("status", "body", "error", "detail"),
    [
        (500, b'{"error": {"message": "boom"}}', "http_5xx", "HTTP 500: boom"),
        (400, b'{"object": "error", "message": "too long"}', "http_4xx", "HTTP 400: too long"),
        (404, b'{"detail": "Not Found"}', "http_4xx", "HTTP 404: Not Found"),
        (503, b"", "http_5xx", "HTTP 503: (empty body)"),
    ],
)
def test_http_errors(status: int, body: bytes, error: str, detail: str) -> None:
    out = parse_events([(1, body)], complete=True, status=status)
    assert (out.error, out.error_detail) == (error, detail)


def test_transport_error_wins_and_partial_timing_is_kept() -> None:
    out = parse_events(reads(chunk("x")), complete=False, transport_error="timeout")
    assert (out.error, out.first_visible_ns) == ("timeout", 1_000_000)


def test_connection_closed_mid_stream_is_truncated() -> None:
    out = parse_events(reads(chunk("x"), b'data: {"cho'), complete=False)
    assert out.error == "truncated"
    assert "closed mid-stream" in (out.error_detail or "")


def test_event_arrival_is_the_read_of_its_last_byte() -> None:
    event = chunk("x", finish="stop")
    body = [(10, event[:5]), (20, event[5:-1]), (30, event[-1:] + DONE)]
    out = parse_events(body, complete=True)
    assert out.token_chunk_ns == [30]


def test_chunks_per_read_counts_token_chunks_delivered_together() -> None:
    body = [(1, chunk("a") + chunk("b")), (2, chunk("c", finish="stop") + usage(1, 3) + DONE)]
    out = parse_events(body, complete=True)
    assert sorted(out.chunks_per_read) == [1, 2]


def test_crlf_line_endings() -> None:
    crlf = chunk("x", finish="stop").replace(b"\n", b"\r\n") + DONE.replace(b"\n", b"\r\n")
    out = parse_events([(5, crlf)], complete=True)
    assert (out.first_visible_ns, out.error) == (5, None)


def test_split_events_returns_the_unterminated_rest() -> None:
    events, rest = split_events([(1, b"data: a\n\ndata: b")])
    assert (events, rest) == ([(1, b"data: a")], b"data: b")


def framed(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("cut", [1, 3, 7, 20, 50, 90])
def test_chunked_decoding_survives_any_split(cut: int) -> None:
    raw = HEAD + framed(b"data: one\n\n", b"data: two\n\n")
    response = decode_response([(1, raw[:cut]), (2, raw[cut:])])
    assert response.status == 200
    assert response.complete
    assert b"".join(piece for _, piece in response.body) == b"data: one\n\ndata: two\n\n"


def test_chunked_trailers_and_bad_size() -> None:
    decoder = ChunkedDecoder()
    decoder.feed(1, b"3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n")
    assert decoder.done and decoder.body == [(1, b"abc")]
    bad = ChunkedDecoder()
    bad.feed(1, b"zz\r\n")
    assert bad.error is not None and not bad.done


def test_content_length_body_and_missing_status() -> None:
    response = decode_response([(1, b"HTTP/1.1 500 Oops\r\ncontent-length: 4\r\n\r\nab"), (2, b"cdEXTRA")])
    assert (response.status, response.complete, response.body) == (500, True, [(1, b"ab"), (2, b"cd")])
    assert decode_response([(1, b"garbage")]).status is None


def test_large_chunk_has_no_buffer_limit() -> None:
    big = (
        b"data: "
        + json.dumps({"choices": [{"delta": {"content": "x" * 300_000}, "finish_reason": "stop"}]}).encode()
    )
    raw = HEAD + framed(big + b"\n\n", DONE)
    response = decode_response([(i, raw[i : i + 65536]) for i in range(0, len(raw), 65536)])
    out = parse_events(response.body, complete=response.complete)
    assert (out.error, out.finish_reason) == (None, "stop")


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.mark.parametrize(
    ("pieces", "finished"),
    [
        ([HEAD + framed(b"data: a\n\n")], True),
        ([HEAD + framed(b"data: a\n\n")[:-2], b"\r\n"], True),  # terminator split across reads
        ([HEAD, b"b\r\ndata: a\n\n\r\n", b"0\r\n", b"\r\n"], True),
        ([HEAD + b"b\r\ndata: a\n\n\r\n"], False),
        ([HEAD + b"b\r\ndata: a\n\n\r\n0\r\nX-T: 1\r\n\r\n"], True),  # trailers: the decoder decides
        ([b"HTTP/1.1 400 Bad\r\ncontent-length: 3\r\n\r\nab", b"c"], True),
        ([b"HTTP/1.1 400 Bad\r\ncontent-length: 3\r\n\r\nab"], False),
    ],
)
def test_connection_end_detection(pieces: list[bytes], finished: bool) -> None:
    conn = _Conn(_Clock())
    for piece in pieces:
        conn.data_received(piece)
    assert conn.finished is finished
    assert [ns for ns, _ in conn.reads] == list(range(1, len(pieces) + 1))


@pytest.mark.parametrize(
    "pieces",
    [
        [HEAD, b"9\r\ndata: a\n\n\r\n", b"0\r\nX-T: 1\r\n\r\n"],  # trailers: the client decodes while reading
        [HEAD + b"9\r\ndata: a\n\n\r\n", b"0\r\n\r\n"],  # the tail test ends it: decoded after the stream
        [HEAD[:10], HEAD[10:] + b"9\r\ndata: a\n\n\r\n0\r\n", b"\r\n"],
    ],
)
def test_each_read_is_decoded_once(pieces: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    fed: list[int] = []
    feed = ChunkedDecoder.feed

    def counting(self: ChunkedDecoder, ns: int, data: bytes) -> None:
        fed.append(ns)
        feed(self, ns, data)

    monkeypatch.setattr(ChunkedDecoder, "feed", counting)
    conn = _Conn(_Clock())
    for piece in pieces:
        conn.data_received(piece)
    assert conn.finished
    exchange = Exchange(sent_ns=0, raw=conn.reads, decoder=conn.response, reads=len(conn.reads)).decode()
    assert (exchange.status, exchange.complete, exchange.detail) == (200, True, None)
    assert b"".join(piece for _, piece in exchange.body) == b"data: a\n\n"
    assert sorted(fed) == sorted(set(fed))  # no read went through the chunked decoder twice


@pytest.mark.parametrize("cut", [5, 40, 75])
def test_decoding_in_steps_matches_decoding_at_once(cut: int) -> None:
    raw = HEAD + framed(b"data: one\n\n", b"data: two\n\n", b"data: three\n\n")
    reads = [(i, raw[i : i + cut]) for i in range(0, len(raw), cut)]
    whole = decode_response(reads)
    steps = ResponseDecoder().finish_steps(reads, size=2)
    count = 0
    while True:
        try:
            next(steps)
            count += 1
        except StopIteration as done:
            stepped = done.value
            break
    assert (stepped.status, stepped.complete, stepped.body) == (whole.status, whole.complete, whole.body)
    assert count >= 1  # it yielded between batches of two reads
