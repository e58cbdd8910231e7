"""Replay a workload against the engine model in virtual time, in-process (no HTTP, no wall clock).

Pipeline position: a what-if tool beside the server. The calibration tests drive the shipped profile and
candidates through it in seconds; ``benchmarks`` and docs quote its figures. Closed loop: ``concurrency``
requests in flight, each finished request immediately replaced by the next (as the load runner does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from contracts.metrics import median
from launch.sim.engine import Host, Sink
from launch.sim.model import EngineConfig, check_startup, prompt_digest
from launch.sim.profile import Profile


@dataclass(frozen=True)
class ReplayRequest:
    """One request of a replayed workload."""

    prompt_tokens: int
    max_tokens: int
    min_tokens: int = 0
    ignore_eos: bool = False
    prompt_key: str = ""  # the prompt's text as the server sees it (model.chat_text of the messages)


@dataclass
class ReplayRecord:
    """What a client would have seen for one request (virtual seconds from its send)."""

    index: int
    sent: float
    ttft: float | None = None
    first_visible: float | None = None
    end: float | None = None
    completion_tokens: int = 0
    finish_reason: str | None = None
    chunks: list[tuple[float, int, int]] = field(default_factory=list)  # (time, reasoning, content)


@dataclass
class ReplayResult:
    """Records plus the aggregate figures the case study quotes."""

    records: list[ReplayRecord]
    host: Host

    @property
    def duration(self) -> float:
        first = min(r.sent for r in self.records)
        last = max(r.sent + (r.end or 0.0) for r in self.records)
        return last - first

    @property
    def output_tps(self) -> float:
        return sum(r.completion_tokens for r in self.records) / self.duration

    def prompt_tps(self, prompt_tokens: list[int]) -> float:
        return sum(prompt_tokens) / self.duration

    @property
    def ttft_p50(self) -> float:
        return _median([r.ttft for r in self.records if r.ttft is not None])

    @property
    def e2e_p50(self) -> float:
        return _median([r.end for r in self.records if r.end is not None])

    @property
    def visible(self) -> int:
        return sum(1 for r in self.records if r.first_visible is not None)

    @property
    def censored_visible_median(self) -> float:
        return _median([r.first_visible if r.first_visible is not None else math.inf for r in self.records])

    @property
    def preemptions(self) -> int:
        return sum(r.stats.preemptions for r in self.host.replicas)


def _median(values: list[float]) -> float:
    """The vocabulary's median (+inf counts as censored); NaN when there are no values."""
    value = median(values)
    return math.nan if value is None else value


def _record_end(done: list[float]) -> Sink:
    def sink(t: float, _r: int, _c: int, finish: str | None) -> None:
        if finish is not None:
            done.append(t)

    return sink


@dataclass
class FrontEnd:
    """The server's front end taking requests in turn before the engine sees them (parse, tokenize).

    A request handed over at ``at`` reaches the engine at ``max(at, the previous one's) + per_request_s +
    per_prompt_token_s x its prompt tokens``. Zero (the default) is an instant front end: a wave of
    requests reaches the engine at once. A launched server is never instant: it takes a wave's requests
    one at a time, and with data parallelism in lockstep the first step then starts with one replica's
    work (docs/simulator.md, "A wave of requests").
    """

    per_request_s: float = 0.0
    per_prompt_token_s: float = 0.0
    _free_at: float = field(default=0.0, repr=False)

    def admit(self, at: float, prompt_tokens: int) -> float:
        cost = self.per_request_s + self.per_prompt_token_s * prompt_tokens
        if cost <= 0.0:
            return at
        self._free_at = max(at, self._free_at) + cost
        return self._free_at


def _add(host: Host, spec: ReplayRequest, request_id: str, *, key: str, at: float, sink: Sink) -> None:
    """Hand one request to the host at ``at``; its prompt digest is of ``spec.prompt_key``, else ``key``."""
    host.add(
        host.new_request(
            request_id,
            prompt_tokens=spec.prompt_tokens,
            digest=prompt_digest(spec.prompt_key or key),
            max_tokens=spec.max_tokens,
            min_tokens=spec.min_tokens,
            ignore_eos=spec.ignore_eos,
            arrival=at,
            sink=sink,
        )
    )


def replay_closed_loop(
    profile: Profile,
    cfg: EngineConfig,
    requests: list[ReplayRequest],
    concurrency: int,
    *,
    warmup: list[ReplayRequest] | None = None,
    front_end: FrontEnd | None = None,
) -> ReplayResult:
    """Run ``requests`` with ``concurrency`` in flight; warmup requests first, one at a time, unrecorded.

    ``front_end`` delays each measured request's arrival at the engine (:class:`FrontEnd`); TTFT and
    latency count from its send, as a client's do."""
    host = Host(profile, cfg, check_startup(profile, cfg))
    now = 0.0
    for i, spec in enumerate(warmup or []):
        done: list[float] = []
        _add(host, spec, f"warmup-{i}", key=f"warmup-{i}", at=now, sink=_record_end(done))
        while not done:
            end = host.next_end() or host.next_start()
            assert end is not None
            host.advance(end)
        now = done[0]

    records: list[ReplayRecord] = []
    pending = list(enumerate(requests))
    pending.reverse()

    def submit(at: float) -> None:
        if not pending:
            return
        index, spec = pending.pop()
        record = ReplayRecord(index=index, sent=at)
        records.append(record)

        def sink(t: float, r: int, c: int, finish: str | None, record: ReplayRecord = record) -> None:
            rel = t - record.sent
            if record.ttft is None and r + c:
                record.ttft = rel
            if record.first_visible is None and c:
                record.first_visible = rel
            record.completion_tokens += r + c
            record.chunks.append((rel, r, c))
            if finish is not None:
                record.end = rel
                record.finish_reason = finish
                submit(t)

        arrival = at if front_end is None else front_end.admit(at, spec.prompt_tokens)
        _add(host, spec, f"req-{index}", key=f"prompt-{index}", at=arrival, sink=sink)

    for _ in range(min(concurrency, len(requests))):
        submit(now)
    while True:
        end = host.next_end()
        if end is None:
            end = host.next_start()
            if end is None:
                break
        host.advance(end)
    return ReplayResult(records=records, host=host)
