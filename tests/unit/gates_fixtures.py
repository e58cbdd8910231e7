"""Builders of synthetic sweep directories for the gate tests (and the case study's numbers).

Samples are deterministic: a profile's latencies are the quantiles of a log-normal with the given median
and log-spread, so a sample's median is the median asked for, and repeats differ by fixed factors.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from omegaconf import OmegaConf
from scipy.stats import norm

from contracts.files import write_jsonl, write_model
from contracts.metrics import censored_median, stats
from contracts.results import (
    CandidateRun,
    ClientHealth,
    HostProbe,
    ProfileSummary,
    RequestRecord,
    ServerMetrics,
    StartupRecord,
    WatchEvent,
)
from contracts.schema import GauntletConfig

#: Per-repeat multipliers of a figure with relative noise 1 (scaled by the ``noise`` argument).
REPEAT_OFFSETS = (0.0, -1.0, 1.0, -0.5, 0.5, -1.5, 1.5, 0.0, -0.25, 0.25)


def lognormal_quantiles(median: float, spread: float, n: int, shift: int = 0) -> list[float]:
    """n values whose median is ``median`` and whose log-sd is about ``spread``, in a rotated order."""
    values = [median * math.exp(spread * float(norm.ppf((i + 0.5) / n))) for i in range(n)]
    values = values[::2] + values[1::2]  # interleave: arrival order is not sorted by latency
    shift %= max(n, 1)
    return values[shift:] + values[:shift]


def make_records(
    ttft: Sequence[float | None],
    *,
    output_tokens: int = 256,
    prompt_tokens: int = 256,
    itl_s: float = 0.02,
    visible: Sequence[float | None] | None = None,
    failed: Sequence[int] = (),
) -> list[RequestRecord]:
    """One record per TTFT value (None = no token ever came); indices in ``failed`` end in error."""
    records = []
    for i, first in enumerate(ttft):
        bad = i in failed or first is None
        end = None if bad or first is None else first + output_tokens * itl_s
        seen = None if visible is None else visible[i]
        if seen is None and visible is None and not bad:
            seen = first
        records.append(
            RequestRecord(
                index=i,
                warmup=False,
                target_prompt_tokens=prompt_tokens,
                target_output_tokens=output_tokens,
                scheduled_s=0.0,
                sent_s=0.0,
                ttft_s=None if (i in failed and first is None) else first,
                first_visible_s=None if bad else seen,
                end_s=end if not bad else (first if first is not None else None),
                prompt_tokens=prompt_tokens,
                completion_tokens=0 if bad else output_tokens,
                finish_reason=None if bad else "length",
                http_status=200,
                error="http_5xx" if bad else None,
            )
        )
    return records


def write_repeat(
    sweep: Path,
    candidate: str,
    profile: str,
    repeat: int,
    records: Sequence[RequestRecord],
    *,
    output_tps: float,
    prompt_tps: float,
    root: str | None = None,
    preemptions: float = 0.0,
    restart: bool = False,
    server: bool = True,
    dispatch_lag_p99: float = 0.0,
) -> Path:
    """Write ``<root>/<profile>/r<repeat>/{records.jsonl,summary.json}``; root defaults to the candidate's."""
    directory = sweep / (root or f"candidates/{candidate}") / profile / f"r{repeat}"
    write_jsonl(directory / "records.jsonl", records)
    ok = [r for r in records if r.ok]
    errors: dict[str, int] = {}
    for r in records:
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
    visible = [r.first_visible_s for r in records]
    duration = max((r.end_s or 0.0) for r in records) if records else 0.0
    summary = ProfileSummary(
        candidate=candidate,
        profile=profile,
        repeat=repeat,
        fingerprint="sha256:" + "0" * 64,
        backend="sim",
        host="sim",
        time_scale=1.0,
        started_at="2025-01-01T00:00:00Z",
        duration_s=duration,
        num_requests=len(records),
        completed=len(ok),
        failed=len(records) - len(ok),
        errors=errors,
        prompt_tokens=sum(r.prompt_tokens or 0 for r in records),
        output_tokens=sum(r.completion_tokens or 0 for r in records),
        prompt_tps=prompt_tps,
        output_tps=output_tps,
        ttft=stats([r.ttft_s for r in records if r.ttft_s is not None]),
        first_visible=stats([v for v in visible if v is not None]),
        first_visible_censored=censored_median(visible),
        itl=stats([0.02]),
        e2e=stats([r.end_s for r in ok if r.end_s is not None]),
        client=ClientHealth(
            dispatch_lag_p50_s=dispatch_lag_p99 / 2,
            dispatch_lag_p99_s=dispatch_lag_p99,
            dispatch_lag_max_s=dispatch_lag_p99,
            chunks_per_read_p99=1.0,
            client_cpu_percent=10.0,
            saturated=False,
        ),
        server=ServerMetrics(
            scrapes=3,
            preemptions=preemptions,
            prompt_tokens=0.0,
            generation_tokens=0.0,
            request_success={},
            peak_waiting=0.0,
            peak_running=0.0,
            peak_kv_cache_usage=0.5,
            waiting_at_end=0.0,
            running_at_end=0.0,
            restart_detected=restart,
            token_mismatch=False,
        )
        if server
        else None,
    )
    write_model(directory / "summary.json", summary)
    return directory


#: What the simulator's launches record about the host (run.json's probe).
SIM_PROBE = HostProbe(driver=False, reason="simulated host", simulated=True)


def write_run(
    sweep: Path,
    candidate: str,
    *,
    ok: bool = True,
    kind: str | None = None,
    matched_line: str | None = None,
    free_gib: list[float] | None = None,
    root: str | None = None,
    is_baseline: bool = False,
    watch: Sequence[WatchEvent] = (),
    follows: str | None = None,
    paired_baseline: str | None = None,
    backend: Literal["vllm", "sim"] = "sim",
    probe: HostProbe | None = SIM_PROBE,
) -> Path:
    path = sweep / (root or f"candidates/{candidate}") / "run.json"
    write_model(
        path,
        CandidateRun(
            candidate=candidate,
            fingerprint="sha256:" + "0" * 64,
            backend=backend,
            host=backend,
            is_baseline=is_baseline,
            phase="recovery" if root == "recovery" else ("baseline" if is_baseline else "candidate"),
            startup=StartupRecord(
                ok=ok,
                kind=kind,
                exit_code=None if ok else 1,
                matched_line=matched_line,
                evidence=[] if ok else ["...", matched_line or "boom"],
                time_to_ready_s=12.0 if ok else None,
            ),
            probe=probe,
            free_gpu_gib_after_warmup=free_gib,
            watch=list(watch),
            follows=follows,
            paired_baseline=paired_baseline,
        ),
    )
    return path


class SweepBuilder:
    """Write a synthetic sweep: runs, loaded/serial/answer profiles, recovery."""

    def __init__(self, root: Path, *, repeats: int = 3) -> None:
        self.root = root
        self.repeats = repeats

    def run(self, name: str, **kwargs: object) -> SweepBuilder:
        write_run(self.root, name, **kwargs)  # type: ignore[arg-type]
        return self

    def loaded(
        self,
        name: str,
        profile: str,
        *,
        output_tps: float,
        prompt_tps: float,
        ttft: float,
        n: int = 64,
        spread: float = 0.5,
        noise: float = 0.01,
        repeats: int | None = None,
        output_tokens: int = 1024,
        prompt_tokens: int = 256,
        failed: Sequence[int] = (),
        preemptions: float = 0.0,
        restart: bool = False,
        server: bool = True,
        root: str | None = None,
    ) -> SweepBuilder:
        for k in range(repeats or self.repeats):
            factor = 1 + noise * REPEAT_OFFSETS[k % len(REPEAT_OFFSETS)]
            ttfts: list[float | None] = list(lognormal_quantiles(ttft / factor, spread, n, shift=k))
            records = make_records(
                ttfts, output_tokens=output_tokens, prompt_tokens=prompt_tokens, failed=failed
            )
            write_repeat(
                self.root,
                name,
                profile,
                k,
                records,
                output_tps=output_tps * factor,
                prompt_tps=prompt_tps * factor,
                root=root,
                preemptions=preemptions,
                restart=restart,
                server=server,
            )
        return self

    def serial(
        self, name: str, *, ttft: float, e2e: float, n: int = 8, spread: float = 0.03, noise: float = 0.01
    ) -> SweepBuilder:
        for k in range(self.repeats):
            factor = 1 + noise * REPEAT_OFFSETS[k % len(REPEAT_OFFSETS)]  # a run-level shift
            ttfts = lognormal_quantiles(ttft / factor, spread, n, shift=k)
            itl = (e2e - ttft) / factor / 256
            records = make_records(list(ttfts), output_tokens=256, prompt_tokens=512, itl_s=itl)
            write_repeat(self.root, name, "serial", k, records, output_tps=256 / e2e, prompt_tps=512 / e2e)
        return self

    def answers(
        self, name: str, visible: Sequence[float | None], *, profile: str = "answer_gate"
    ) -> SweepBuilder:
        ttfts: list[float | None] = [2.0] * len(visible)
        records = make_records(ttfts, output_tokens=4096, prompt_tokens=200, visible=visible, itl_s=0.03)
        write_repeat(self.root, name, profile, 0, records, output_tps=500.0, prompt_tps=50.0)
        return self


# --------------------------------------------------------------------------------------- case study

BASELINE = {
    "decode_heavy": {"output_tps": 10039.0, "prompt_tps": 2510.0, "ttft": 0.347},
    "prefill_10k": {"output_tps": 222.0, "prompt_tps": 34400.0, "ttft": 8.95},
}
CASE_STUDY_VISIBLE = {
    "baseline": [12.3, 30.2, 43.95, 61.0, None],  # greedy: 4/5, censored median 43.95 s
    "spec_probabilistic": [20.1, 76.85, 35.4, None, None],  # probabilistic: 3/5, censored median 76.85 s
}


def baseline_like(
    builder: SweepBuilder, name: str, *, ttft_factor: float = 1.0, tps_factor: float = 1.0
) -> None:
    """Profiles of the case study's baseline, scaled (1.0, 1.0 = identical to it)."""
    for profile, fig in BASELINE.items():
        builder.loaded(
            name,
            profile,
            output_tps=fig["output_tps"] * tps_factor,
            prompt_tps=fig["prompt_tps"] * tps_factor,
            ttft=fig["ttft"] * ttft_factor,
        )
    builder.serial(name, ttft=0.20, e2e=5.0)
    builder.answers(name, CASE_STUDY_VISIBLE["baseline"])


def with_faster(root: Path) -> SweepBuilder:
    """The baseline and ``faster``, the same but with every TTFT 20% shorter: a clear keep."""
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("faster", free_gib=[1.0] * 8)
    baseline_like(b, "faster", ttft_factor=0.8)
    return b


def case_study(root: Path) -> Path:
    """The sweep of the case study: baseline, tp4_dp2, spec_probabilistic, mega_moe, eplb, recovery."""
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0, 0.9, 1.1, 1.0, 0.95, 1.05, 1.0, 0.9])
    baseline_like(b, "baseline")
    # TP4 x DP2: better serial latency, 8x less loaded output, 64.7x worse loaded median TTFT.
    b.run("tp4_dp2", free_gib=[1.2] * 8)
    b.loaded("tp4_dp2", "decode_heavy", output_tps=1197.0, prompt_tps=299.0, ttft=22.45)
    b.loaded("tp4_dp2", "prefill_10k", output_tps=111.0, prompt_tps=17200.0, ttft=17.9)
    b.serial("tp4_dp2", ttft=0.16, e2e=4.1)
    b.answers("tp4_dp2", CASE_STUDY_VISIBLE["baseline"])
    # Probabilistic drafts: throughput within 5%, TTFT about the same, fewer visible answers.
    b.run("spec_probabilistic", free_gib=[1.0] * 8)
    # TTFT 0.322 s vs 0.347 s: "approximately neutral" in the case study. With a log-spread of 0.9, the
    # median of one run's 128 requests moves by about 8% from run to run (1.25 x 0.9 / sqrt(128)).
    b.loaded(
        "spec_probabilistic",
        "decode_heavy",
        output_tps=10158.7,
        prompt_tps=2540.0,
        ttft=0.322,
        spread=0.9,
        noise=0.08,
    )
    b.loaded("spec_probabilistic", "prefill_10k", output_tps=224.0, prompt_tps=34652.0, ttft=8.890)
    b.serial("spec_probabilistic", ttft=0.20, e2e=5.0)
    b.answers("spec_probabilistic", CASE_STUDY_VISIBLE["spec_probabilistic"])
    b.run(
        "mega_moe",
        ok=False,
        kind="incompatible",
        matched_line="RuntimeError: DeepGEMM MegaMoE requires SM100 (Blackwell); found SM90 (H100)",
    )
    b.run(
        "eplb",
        ok=False,
        kind="init-failed",
        matched_line="AssertionError: EPLB is not supported for this model's MoE layer",
    )
    # The restored baseline measured again at the end: no drift.
    b.run("baseline", root="recovery", is_baseline=True)
    for profile, fig in BASELINE.items():
        b.loaded(
            "baseline",
            profile,
            output_tps=fig["output_tps"] * 1.005,
            prompt_tps=fig["prompt_tps"] * 1.005,
            ttft=fig["ttft"],
            repeats=1,
            root="recovery",
        )
    return root


# --------------------------------------------------------------------------------------- sweep config


def sweep_config() -> GauntletConfig:
    """The composed default config, with fewer bootstrap resamples: the suite stays fast, and the
    decisions of these fixtures are far from the edge."""
    from tests.unit.composed import (
        load,  # Hydra composition (kept per input): only the tests that need a config
    )

    cfg, _ = load([])
    # The profiles these fixtures measure, as a sweep's config.yaml would list them (the answer gate's
    # one repeat its own): the judge holds the files to it, and a profile it lists that no file holds
    # makes the verdict incomplete (gates.evidence).
    measured = ["serial", "prefill_10k", "decode_heavy", "answer_gate"]
    answers = dataclasses.replace(cfg.workloads["answer_gate"], repeats=1)
    return dataclasses.replace(
        cfg,
        gates=dataclasses.replace(cfg.gates, bootstrap_resamples=300),
        run=dataclasses.replace(cfg.run, profiles=measured),
        workloads={**cfg.workloads, "answer_gate": answers},
    )


def write_config(sweep: Path, cfg: GauntletConfig) -> None:
    """``<sweep>/config.yaml`` as the sweep writes it (the judge and the report read it back typed)."""
    sweep.mkdir(parents=True, exist_ok=True)
    (sweep / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
