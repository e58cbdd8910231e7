"""The engine model in virtual time: scheduling, chunked prefill, preemption, determinism."""

from __future__ import annotations

from dataclasses import replace

import pytest

from launch.sim.engine import Host, SimRequest
from launch.sim.model import EngineConfig, check_startup
from launch.sim.profile import Profile
from launch.sim.replay import FrontEnd, ReplayRequest, replay_closed_loop
from tests.unit.sim_fixtures import BASE, PROFILE

Events = list[tuple[float, int, int, str | None]]


def drive(host: Host, until: float | None = None) -> None:
    while True:
        end = host.next_end()
        if end is None:
            end = host.next_start()
        if end is None or (until is not None and end > until):
            return
        host.advance(end)


def submit(
    host: Host, name: str, prompt: int, max_tokens: int, *, ignore_eos: bool = True, at: float = 0.0
) -> Events:
    events: Events = []
    req = host.new_request(
        name,
        prompt_tokens=prompt,
        digest=name,
        max_tokens=max_tokens,
        min_tokens=max_tokens if ignore_eos else 0,
        ignore_eos=ignore_eos,
        arrival=at,
        sink=lambda t, r, c, f: events.append((t, r, c, f)),
    )
    host.add(req)
    return events


def make_host(cfg: EngineConfig = BASE, profile: Profile = PROFILE) -> Host:
    return Host(profile, cfg, check_startup(profile, cfg))


def schedule(seed: int) -> list[list[tuple[float, int, int, str | None]]]:
    reqs = [ReplayRequest(300 + 7 * i, 200 + i, 0, i % 2 == 0, f"p{i}") for i in range(40)]
    result = replay_closed_loop(PROFILE, replace(BASE, seed=seed), reqs, 16)
    return [[(t, r, c, None) for t, r, c in rec.chunks] for rec in result.records]


def test_same_seed_same_token_schedule() -> None:
    first, second = schedule(0), schedule(0)
    assert first == second
    assert schedule(1) != first


def test_tokens_add_up_and_reasoning_comes_first() -> None:
    host = make_host()
    events = submit(host, "a", 500, 300)
    drive(host)
    assert sum(r + c for _, r, c, _ in events) == 300
    assert events[-1][3] == "length"
    seen_content = False
    for _, r, c, _ in events:
        assert not (seen_content and r), "reasoning after visible content"
        seen_content = seen_content or c > 0
    times = [t for t, *_ in events]
    assert times == sorted(times)


def test_speculative_decoding_advances_several_tokens_per_step() -> None:
    host = make_host()
    events = submit(host, "a", 100, 2000)
    drive(host)
    per_chunk = [r + c for _, r, c, _ in events[1:-1]]
    assert max(per_chunk) <= 8
    assert 2.5 < sum(per_chunk) / len(per_chunk) < 4.0
    plain = make_host(replace(BASE, speculative_method=None, num_speculative_tokens=0))
    single = submit(plain, "a", 100, 2000)
    drive(plain)
    assert {r + c for _, r, c, _ in single} == {1}
    assert single[-1][0] > events[-1][0]  # no drafts: slower


def test_chunked_prefill_delays_the_first_token() -> None:
    small_budget = make_host(replace(BASE, max_num_batched_tokens=2048))
    events = submit(small_budget, "long", 10_000, 4)
    small_budget.advance(0.0)  # starts the first step
    steps = 0
    while not events:
        end = small_budget.next_end()
        assert end is not None
        steps += 1
        small_budget.advance(end)
    assert steps == 5  # ceil(10000 / 2048) chunks, the token comes with the last
    assert small_budget.replicas[0].stats.ttft.n == 1


def test_running_requests_never_exceed_max_num_seqs() -> None:
    host = make_host(replace(BASE, max_num_seqs=3))
    for i in range(40):
        submit(host, f"r{i}", 64, 50)
    peak = 0
    while True:
        end = host.next_end() or host.next_start()
        if end is None:
            break
        host.advance(end)
        peak = max(peak, *(len(r.running) for r in host.replicas))
    assert peak == 3
    assert sum(r.stats.success["length"] for r in host.replicas) == 40


def test_full_kv_cache_preempts_and_recomputes() -> None:
    tiny = replace(PROFILE, model=replace(PROFILE.model, max_model_len=4096))
    cfg = replace(BASE, max_model_len=4096)
    memory = check_startup(tiny, cfg)
    memory = replace(memory, num_gpu_blocks=80, kv_tokens=80 * memory.block_size)  # 5,120 tokens
    host = Host(tiny, cfg, memory)
    outputs = [submit(host, f"r{i}", 400, 600) for i in range(32)]  # 8 per replica
    drive(host)
    assert sum(r.stats.preemptions for r in host.replicas) > 0
    assert all(sum(r + c for _, r, c, _ in ev) == 600 for ev in outputs)
    for replica in host.replicas:
        assert replica.free_blocks == replica.total_blocks
        assert replica.stats.ttft.n == 8  # recompute does not count a second first token


def test_dp_load_balancing_spreads_requests() -> None:
    host = make_host()
    for i in range(8):
        submit(host, f"r{i}", 100, 10)
    assert [len(r.waiting) for r in host.replicas] == [2, 2, 2, 2]


def test_moe_replicas_step_in_lockstep() -> None:
    host = make_host()
    a = submit(host, "a", 100, 40)
    b = submit(host, "b", 8000, 40)  # a longer prefill on another replica
    drive(host)
    assert a[0][0] == b[0][0]  # the first step lasts as long as the slowest replica's


def test_abort_frees_blocks_and_counts() -> None:
    host = make_host()
    events = submit(host, "a", 1000, 5000)
    host.advance(0.0)
    host.advance(host.next_end() or 0.0)
    req: SimRequest = host.replicas[0].running[0]
    assert host.abort(req, 1.0)
    assert not host.abort(req, 1.0)
    replica = host.replicas[0]
    assert replica.stats.success["abort"] == 1
    assert replica.free_blocks == replica.total_blocks
    assert events


@pytest.mark.parametrize("speed", [0.8, 1.0])
def test_sim_speed_stretches_latency(speed: float) -> None:
    reqs = [ReplayRequest(256, 256, 256, True, "x")]
    base = replay_closed_loop(PROFILE, BASE, reqs, 1).e2e_p50
    slowed = replay_closed_loop(PROFILE, replace(BASE, speed=speed), reqs, 1).e2e_p50
    assert slowed == pytest.approx(base / speed, rel=1e-9)


@pytest.mark.parametrize(
    ("per_request", "per_token", "arrivals"),
    [
        (0.0, 0.0, [0.0, 0.0, 0.0]),  # instant: the wave reaches the engine at once
        (0.002, 0.0, [0.002, 0.004, 0.006]),  # one request at a time
        (0.002, 1e-6, [0.012, 0.024, 0.036]),  # its prompt's tokens counted too (10,000 each)
    ],
)
def test_a_front_end_takes_a_wave_one_request_at_a_time(
    per_request: float, per_token: float, arrivals: list[float]
) -> None:
    front = FrontEnd(per_request, per_token)
    assert [front.admit(0.0, 10_000) for _ in range(3)] == pytest.approx(arrivals)
    # a request handed over after the front end is free again waits only its own cost
    assert front.admit(1.0, 10_000) == pytest.approx(1.0 + arrivals[0])


def test_a_staggered_wave_starts_data_parallel_lockstep_with_one_replica_busy() -> None:
    """A wave of long prompts on DP 4 in lockstep: an instant wave fills every replica's first step; one
    that reaches the engine a request at a time starts it with the first replica's work alone, and every
    later first token comes a step later, as launched runs read (docs/simulator.md, "A wave of requests")."""
    reqs = [ReplayRequest(10_000, 16, 16, True, f"p{i}") for i in range(16)]
    instant = replay_closed_loop(PROFILE, BASE, reqs, 16)
    staggered = replay_closed_loop(PROFILE, BASE, reqs, 16, front_end=FrontEnd(0.0001))
    at_once = sorted(r.ttft or 0.0 for r in instant.records)
    first = sorted(r.ttft or 0.0 for r in staggered.records)
    assert at_once[0] == pytest.approx(at_once[3])  # one request per replica in the first step
    assert first[0] < at_once[0] < first[1]  # the first replica's alone, the others' a step later
    assert staggered.ttft_p50 > 1.2 * instant.ttft_p50
