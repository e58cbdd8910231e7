"""Speculative acceptance (issue 44, item 5): vLLM 0.32's spec-decode counters, per draft position where
exported, reduced per run; the report's acceptance by position beside the spec candidates; the optional
``spec_acceptance`` gate (off by default) judging the candidate's acceptance against the baseline's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from contracts.results import CandidateRun, StartupRecord
from contracts.schema import GatesConfig
from contracts.spec_decode import spec_decode_metrics
from contracts.sweepdir import Repeat, Results
from gates.registry import GateContext
from gates.spec_acceptance import SpecAcceptance
from launch.sim.engine import Host
from launch.sim.metrics import render_metrics
from launch.sim.model import check_startup
from load.metrics import filter_scrape, parse_scrape, server_metrics
from report.slo import server_figure_cell, server_figure_rows
from tests.unit.fakes import summary
from tests.unit.sim_fixtures import BASE as SPEC_CFG
from tests.unit.sim_fixtures import PROFILE

VLLM_SCRAPE = """\
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {tokens}
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {p1}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="1",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="1",model_name="m",position="2"}} {p2}
"""


def _scrape(**values: float) -> str:
    return VLLM_SCRAPE.format(**values)


@pytest.mark.parametrize(
    ("before", "after", "per_position", "rates"),
    [
        # per position summed over engines; position 2 only on engine 1
        (
            dict(drafts=0, tokens=0, accepted=0, p0=0, p1=0, p2=0),
            dict(drafts=100, tokens=300, accepted=150, p0=40, p1=30, p2=20),
            [80.0, 30.0, 20.0],
            [0.8, 0.3, 0.2],
        ),
        # deltas over the window, not totals since the server started
        (
            dict(drafts=50, tokens=150, accepted=90, p0=10, p1=5, p2=0),
            dict(drafts=150, tokens=450, accepted=190, p0=50, p1=25, p2=10),
            [80.0, 20.0, 10.0],
            [0.8, 0.2, 0.1],
        ),
    ],
)
def test_acceptance_per_position_from_vllm_counters(
    before: dict[str, float], after: dict[str, float], per_position: list[float], rates: list[float]
) -> None:
    scrapes = [
        parse_scrape(filter_scrape(_scrape(**before)), t_s=0.0, phase="before"),
        parse_scrape(filter_scrape(_scrape(**after)), t_s=1.0, phase="after"),
    ]
    server = server_metrics(scrapes, client_prompt_tokens=0, client_output_tokens=0)
    assert server is not None and server.speculative is not None
    assert server.speculative.accepted_per_position == pytest.approx(per_position)
    assert server.speculative.acceptance_per_position == pytest.approx(rates)


def test_the_simulator_exports_the_names_vllm_does() -> None:
    """The simulator's spec candidates export vLLM 0.32's per-position counter under the same name, one
    position per speculative token, and the scraper reads it."""
    memory = check_startup(PROFILE, SPEC_CFG)
    text = render_metrics(Host(PROFILE, SPEC_CFG, memory), "served", memory)
    scrape = parse_scrape(filter_scrape(text), t_s=0.0, phase="after")
    assert sorted(scrape.spec_accepted_per_pos, key=int) == [str(k) for k in range(7)]


def _results(name: str, runs: Mapping[str, Sequence[float | None]]) -> Results:
    """``name``'s runs: the acceptance rate of each run of each profile (None: no spec-decode counters)."""
    profiles: dict[str, list[Repeat]] = {}
    for profile, rates in runs.items():
        profiles[profile] = []
        for k, rate in enumerate(rates, start=1):
            s = summary(name, profile, k, "f")
            assert s.server is not None
            spec = None if rate is None else spec_decode_metrics(100.0, 300.0, 300.0 * rate)
            s = s.model_copy(update={"server": s.server.model_copy(update={"speculative": spec})})
            rep = Repeat(s, [], f"candidates/{name}/{profile}/r{k}/summary.json", "")
            profiles[profile].append(rep)
    run = CandidateRun(
        candidate=name,
        fingerprint="f",
        backend="sim",
        host="sim",
        is_baseline=name == "baseline",
        startup=StartupRecord(ok=True),
    )
    return Results(name, f"candidates/{name}", run, profiles)


SPREAD = [0.70, 0.71, 0.69]

# (id, candidate's rates per run, baseline's, tolerance, status, words in the message)
GATE = [
    ("off by default", [0.5, 0.5, 0.5], SPREAD, None, "not_run", "not set"),
    ("the same acceptance", [0.70, 0.69, 0.71], SPREAD, 0.02, "pass", "drop +0.0 points"),
    ("10 points lower, beyond noise", [0.60, 0.61, 0.59], SPREAD, 0.02, "fail", "acceptance 60.0% vs 70.0%"),
    ("3 points lower within a 5-point tolerance", [0.67, 0.68, 0.66], SPREAD, 0.05, "pass", "tolerance 5"),
    ("10 points lower, noisy runs", [0.40, 0.80, 0.60], SPREAD, 0.02, "inconclusive", "CI of the drop"),
    ("one run a side, 10 points lower", [0.60], [0.70], 0.02, "inconclusive", "no interval"),
    ("the baseline does not speculate", [0.6, 0.6], [None, None], 0.02, "not_run", "both sides"),
    ("higher acceptance", [0.80, 0.81, 0.79], SPREAD, 0.0, "pass", "drop -10.0 points"),
]


@pytest.mark.parametrize(
    ("cand", "base", "tolerance", "status", "words"), [g[1:] for g in GATE], ids=[g[0] for g in GATE]
)
def test_spec_acceptance_gate(
    cand: list[float | None], base: list[float | None], tolerance: float | None, status: str, words: str
) -> None:
    ctx = GateContext(
        GatesConfig(loaded_profiles=["decode_heavy"], spec_acceptance_tolerance=tolerance),
        _results("baseline", {"decode_heavy": base}),
        _results("fp8_kv", {"decode_heavy": cand}),
    )
    result = SpecAcceptance().evaluate(ctx)
    assert result.status == status, result.message
    assert words in result.message
    if status == "not_run":
        assert result.not_applicable  # off or not applicable: never a gap of the verdict


@pytest.mark.parametrize(
    ("per_position", "cell"),
    [([40.0, 30.0, 20.0], "30% accepted (by position 40%/30%/20%), "), (None, "30% accepted, ")],
)
def test_report_shows_acceptance_by_position(per_position: list[float] | None, cell: str) -> None:
    res = _results("spec", {"decode_heavy": [0.3]})
    rep = res.profiles["decode_heavy"][0]
    assert rep.summary.server is not None
    spec = spec_decode_metrics(100.0, 300.0, 90.0, per_position=per_position)
    s = rep.summary.model_copy(update={"server": rep.summary.server.model_copy(update={"speculative": spec})})
    res.profiles["decode_heavy"][0] = Repeat(s, [], rep.summary_file, "")
    (row,) = server_figure_rows({"spec": res}, ["decode_heavy"])
    text = server_figure_cell(row)
    assert cell in text
