"""The answer_accuracy gate (issue 36): a labelled set read and refused by file:line, answers extracted and
compared, Clopper-Pearson and McNemar's exact test, the gate's decision table, greedy agreement and the
flag on a candidate that claims lossless decoding, and the project's own set as its script writes it."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from scipy.stats import beta

from contracts.errors import ConfigError, HarnessError
from contracts.labelled import LabelledItem, parse_labelled
from contracts.paths import CONF_DIR, PROJECT_ROOT
from contracts.results import LoadSettings, RequestRecord
from contracts.schema import AccuracyGateConfig, GatesConfig
from contracts.sweepdir import Repeat, Results
from contracts.verdicts import GateResult, GateStatus
from gates.agreement import lossless_claim
from gates.answer_accuracy import AnswerAccuracy, accuracy_status, agreement_flag
from gates.answers import correct, extract, number
from gates.noninferiority import paired_drop
from gates.registry import REGISTRY, GateContext
from gates.significance import clopper_pearson, mcnemar
from gates.verdict import decide
from load.plan import make_plan
from load.sse import EventParser, parse_events
from load.workload import BuiltPrompt, load_prompts, plan_requests
from orchestrator.config.validate import validate
from tests.unit.composed import load
from tests.unit.fakes import summary
from tests.unit.load_fixtures import workload

# ------------------------------------------------------------------------------------ the labelled file


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"prompt": "a", "answer": "1"}\nnot json\n', "set.jsonl:2: not JSON"),
        ('["a", "1"]\n', "set.jsonl:1: expected a JSON object"),
        (
            '{"prompt": "a", "answer": "1"}\n\n{"prompt": "b", "answr": 2}\n',
            "set.jsonl:3: unknown key(s) 'answr'",
        ),
        ('{"prompt": "", "answer": "1"}\n', "set.jsonl:1: prompt is '': expected a non-empty string"),
        ('{"prompt": "a"}\n', "set.jsonl:1: answer is None: expected a non-empty string or a number"),
        ('{"prompt": "a", "answer": true}\n', "set.jsonl:1: answer is True"),
        ('{"prompt": "a", "answer": "1", "regex": "(unclosed"}\n', "set.jsonl:1: regex '(unclosed' does not"),
        ("\n\n", "set.jsonl:1: no item"),
    ],
)
def test_a_bad_labelled_set_is_refused_naming_its_line(text: str, fragment: str) -> None:
    with pytest.raises(HarnessError) as info:
        parse_labelled(text, "set.jsonl")
    assert fragment in info.value.message
    assert "allowed are prompt, answer, regex" in info.value.message or "JSONL" in (info.value.hint or "")


def test_a_labelled_set_reads_numbers_as_their_text() -> None:
    items = parse_labelled(
        '{"prompt": "a", "answer": 42.0}\n{"prompt": "b", "answer": -1.5, "regex": "x"}\n', "s"
    )
    assert items == [LabelledItem("a", "42"), LabelledItem("b", "-1.5", "x")]


def test_a_bad_labelled_set_is_refused_when_the_config_is_composed(tmp_path: Path) -> None:
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"prompt": "2 + 2?", "answer": "4"}\n{"prompt": "x", "answr": 3}\n')
    cfg, _ = load([])
    cfg.workloads["accuracy"] = replace(cfg.workloads["accuracy"], prompts_file=str(bad))
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert (
        f"workloads.accuracy.prompts_file = '{bad}': a labelled set, one JSON object a line: {bad}:2: "
        in str(info.value)
    )
    assert "unknown key(s) 'answr': allowed are prompt, answer, regex" in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"temperature": 0.7}, "workloads.accuracy.temperature = 0.7: 0: a labelled set is scored on greedy"),
        (
            {"prompts_file": "answer_gate_prompts.json"},
            "gates.accuracy.profile = 'accuracy': a profile whose",
        ),
    ],
)
def test_the_labelled_profile_is_checked_when_the_sweep_runs_it(
    overrides: dict[str, object], fragment: str
) -> None:
    cfg, _ = load([])
    cfg.workloads["accuracy"] = replace(cfg.workloads["accuracy"], **overrides)  # type: ignore[arg-type]
    validate(cfg)  # not in run.profiles: the gate is not applicable, nothing to refuse
    cfg.run.profiles = [*cfg.run.profiles, "accuracy"]
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert fragment in str(info.value)


def test_a_labelled_set_is_sent_once_per_item() -> None:
    cfg, _ = load([])
    cfg.workloads["accuracy"] = replace(cfg.workloads["accuracy"], num_requests=39)
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert "workloads.accuracy.num_requests = 39: 300: each item of" in str(info.value)


# ------------------------------------------------------------------------------------ extraction


ITEM = LabelledItem("q", "42")


@pytest.mark.parametrize(
    ("answer", "item", "extracted", "right"),
    [
        ("17 + 25 = 42.\n#### 42", ITEM, "42", True),
        ("#### 41\nno wait, 42", ITEM, "41", False),  # the marker decides, not the last number
        ("first 40, then 2 more: 42", ITEM, "42", True),  # no marker: the last number
        ("#### $1,042.00", LabelledItem("q", "1042"), "$1,042.00", True),
        ("#### 42.", ITEM, "42", True),
        ("#### forty-two", ITEM, None, False),
        ("no number at all", ITEM, None, False),
        ("", ITEM, None, False),
        ("The sky is Blue.", LabelledItem("q", "blue"), "The sky is Blue.", False),  # text: the whole answer
        ("...\n####  Blue!\n", LabelledItem("q", "blue"), "Blue!", True),
        ("Answer: B) because", LabelledItem("q", "b", r"Answer:\s*([A-D])"), "B", True),
        ("Answer: C", LabelledItem("q", "b", r"Answer:\s*[A-D]"), "Answer: C", False),  # no group: the match
        ("nothing", LabelledItem("q", "b", r"Answer:\s*([A-D])"), None, False),
        ("1, 2, 3,4", LabelledItem("q", "4"), "4", True),  # a list is not a thousands number
    ],
)
def test_extraction_and_comparison(
    answer: str, item: LabelledItem, extracted: str | None, right: bool
) -> None:
    assert extract(answer, item) == extracted
    assert correct(answer, item) is right


def test_no_answer_is_wrong_and_numbers_compare_by_value() -> None:
    assert correct(None, ITEM) is False
    assert number("-3.50") == number("-3.5")
    assert number("1,2") is None and number("") is None


# ------------------------------------------------------------------------------------ the statistics


@pytest.mark.parametrize(("k", "n"), [(0, 10), (10, 10), (18, 20), (7, 40), (1, 1)])
def test_clopper_pearson_is_the_beta_quantile_interval(k: int, n: int) -> None:
    low, high = clopper_pearson(k, n, 0.95)
    assert low == pytest.approx(0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1))
    assert high == pytest.approx(1.0 if k == n else beta.ppf(0.975, k + 1, n - k))


@pytest.mark.parametrize(
    ("n", "lost", "won", "p", "drop", "drop_low_positive"),
    [
        (40, 6, 0, 0.5**6, 0.15, True),  # 1/64 < 0.025: the drop's lower bound is above 0
        (40, 5, 0, 0.5**5, 0.125, False),  # 1/32 > 0.025: within noise
        (40, 0, 0, 1.0, 0.0, False),  # no discordant item: nothing changed
        (40, 3, 3, 0.65625, 0.0, False),
        (40, 0, 6, 1.0, -0.15, False),  # the candidate is better
        (20, 9, 1, 11 / 1024, 0.4, True),
    ],
)
def test_mcnemar_exact(  # noqa: PLR0917  (one argument per column of the table)
    n: int, lost: int, won: int, p: float, drop: float, drop_low_positive: bool
) -> None:
    r = mcnemar(n, lost, won, confidence=0.95)
    assert r.p_value == pytest.approx(p)
    assert r.drop == pytest.approx(drop)
    assert (r.drop_interval[0] > 0) is drop_low_positive
    assert (r.drop_interval[0] > 0) is (r.p_value < 0.025)  # the interval and the test agree
    assert r.drop_interval[0] <= r.drop <= r.drop_interval[1]


@pytest.mark.parametrize(
    ("n", "lost", "won", "tolerance", "status"),
    [
        (200, 0, 0, 0.02, "pass"),  # no discordant item: upper bound 1.9 points, within 2
        (188, 0, 0, 0.02, "inconclusive"),  # one item short of the 189 the tolerance needs
        (300, 1, 0, 0.02, "pass"),  # one item lost of 300: upper bound 1.86 points
        (200, 1, 0, 0.02, "inconclusive"),  # one item lost of 200: upper bound 2.78 points
        (200, 3, 3, 0.02, "inconclusive"),  # no net drop, but noise wider than the tolerance
        (200, 7, 0, 0.02, "inconclusive"),  # 3.5 points by the estimate, lower bound 1.55: within noise
        (200, 10, 0, 0.02, "fail"),  # lower bound 2.7 points: worse than allowed beyond noise
        (40, 0, 0, 0.0, "inconclusive"),  # a tolerance of 0 is never shown
        (40, 0, 0, 0.02, "inconclusive"),  # the old 40-item set: an identical candidate cannot pass
        (40, 0, 10, 0.02, "pass"),  # clearly better
        (40, 4, 0, 0.25, "pass"),  # a 10-point drop, upper bound 23.1, inside a 25-point tolerance
        (40, 6, 0, 0.2, "inconclusive"),  # 15 points by the estimate, interval [4.9, 29.1] across 20
        (40, 12, 0, 0.1, "fail"),  # interval [18.1, 45.4], all above 10
    ],
)
def test_the_decision_table(n: int, lost: int, won: int, tolerance: float, status: GateStatus) -> None:
    """Non-inferiority: pass only when the drop's upper bound is at or below the tolerance."""
    assert accuracy_status(paired_drop(n, lost, won, confidence=0.95), tolerance) == status


@pytest.mark.parametrize(
    ("spec", "claim"),
    [
        ({"argv": ["python", "-m", "launch.sim", "--model", "m"]}, "no speculative decoding"),
        (
            {"argv": ["--speculative-config", '{"method":"dspark","draft_sample_method":"greedy"}']},
            "greedy draft sampling",
        ),
        ({"argv": ["--speculative-config", '{"draft_sample_method":"probabilistic"}']}, ""),
        # vLLM's defaults (gates.agreement.SPEC_DEFAULTS, vLLM 0.32): absent draft_sample_method is greedy
        ({"argv": ["--speculative-config", '{"method":"eagle"}']}, "greedy draft sampling (vLLM's default)"),
        ({"argv": ['--speculative-config={"method":"ngram"}']}, "greedy draft sampling (vLLM's default)"),
        ({"argv": ["--speculative-config", '{"rejection_sample_method":"synthetic"}']}, ""),  # lossy
        (
            {
                "argv": [
                    "--speculative-config",
                    '{"draft_sample_method":"greedy","rejection_sample_method":"block"}',
                ]
            },
            "greedy draft sampling, block rejection sampling",
        ),
        ({"argv": ["--speculative-config", '{"rejection_sample_method":"future"}']}, ""),  # unknown: no claim
        ({"argv": ["--speculative-config", "[1, 2]"]}, None),
        (
            {
                "argv": ["vllm", "serve", "--config", "c.yaml"],
                "config_yaml": 'speculative-config: {"draft_sample_method":"greedy"}\n',
            },
            "greedy draft sampling",
        ),
        ({"argv": ["--speculative-config", "{not json"]}, None),
        (None, None),
    ],
)
def test_which_launches_claim_lossless_decoding(spec: dict[str, object] | None, claim: str | None) -> None:
    assert lossless_claim(spec) == claim


@pytest.mark.parametrize(
    ("agree", "noise", "claim", "flag"),
    [
        ((40, 40), (40, 40), "greedy draft sampling", "pass"),
        ((30, 40), (40, 40), "greedy draft sampling", "inconclusive"),  # beyond the baseline's own noise
        ((37, 40), (38, 40), "no speculative decoding", "pass"),  # as noisy as the baseline itself
        ((39, 40), (0, 0), "no speculative decoding", "inconclusive"),  # noise unmeasured: any difference
        ((40, 40), (0, 0), "no speculative decoding", "pass"),
        ((10, 40), (40, 40), "", None),  # probabilistic sampling claims nothing: reported, not judged
        ((10, 40), (40, 40), None, None),
    ],
)
def test_greedy_agreement_is_judged_only_against_a_lossless_claim(
    agree: tuple[int, int], noise: tuple[int, int], claim: str | None, flag: GateStatus | None
) -> None:
    status, words = agreement_flag(agree, noise, claim, 0.95)
    assert status == flag
    assert words.startswith("FLAGGED") is (flag == "inconclusive")
    assert f"{agree[0]}/{agree[1]}" in words


# ------------------------------------------------------------------------------------ the gate

SIZE = 40
SET = "".join(json.dumps({"prompt": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n" for i in range(SIZE))
# 40 items show an accuracy drop of at most 8.8 points at best (gates.noninferiority): a 10-point tolerance.
CFG = GatesConfig(accuracy=AccuracyGateConfig(profile="accuracy", tolerance=0.1, min_items=20))


def _record(i: int, text: str | None) -> RequestRecord:
    ok = text is not None
    return RequestRecord(
        index=i,
        warmup=False,
        target_prompt_tokens=20,
        target_output_tokens=64,
        scheduled_s=0.0,
        sent_s=0.0,
        ttft_s=0.1 if ok else None,
        first_visible_s=0.1 if ok else None,
        end_s=0.5 if ok else None,
        completion_tokens=len((text or "").split()) if ok else None,
        finish_reason="stop" if ok else None,
        error=None if ok else "http_5xx",
        output_text=text,
    )


def _side(tmp: Path, name: str, runs: Sequence[Sequence[str | None]]) -> Results:
    (tmp / "set.jsonl").write_text(SET)
    settings = LoadSettings(
        base_url="http://h",
        served_model="m",
        salt="s",
        scale=1.0,
        time_scale=1.0,
        prompts_dir=str(tmp),
        workload=workload(name="accuracy", num_requests=SIZE, warmup_requests=0, prompts_file="set.jsonl"),
    )
    root = f"candidates/{name}"
    reps = [
        Repeat(
            summary(name, "accuracy", k, "sha256:0", n=len(texts)).model_copy(update={"settings": settings}),
            [_record(i, t) for i, t in enumerate(texts)],
            f"{root}/accuracy/r{k}/summary.json",
            f"{root}/accuracy/r{k}/records.jsonl",
        )
        for k, texts in enumerate(runs, 1)
    ]
    return Results(name=name, root=root, run=None, profiles={"accuracy": reps})


def _answers(wrong: Sequence[int] = (), missing: Sequence[int] = (), style: str = "") -> list[str | None]:
    return [
        None if i in missing else f"{style}{i} + {i} is\n#### {2 * i + (1 if i in wrong else 0)}"
        for i in range(SIZE)
    ]


def _evaluate(
    tmp: Path, cand: list[list[str | None]], base: list[list[str | None]], claim: str | None = ""
) -> GateResult:
    ctx = GateContext(
        cfg=CFG, baseline=_side(tmp, "baseline", base), candidate=_side(tmp, "c", cand), candidate_claim=claim
    )
    return AnswerAccuracy().evaluate(ctx)


def test_the_gate_is_registered_after_visible_answers() -> None:
    assert REGISTRY["answer_accuracy"].order > REGISTRY["answer_reliability"].order


def test_a_candidate_that_loses_items_beyond_noise_fails(tmp_path: Path) -> None:
    base = [_answers(wrong=[0, 1])]
    result = _evaluate(tmp_path, [_answers(wrong=[0, 1, *range(5, 17)])], base)
    assert result.status == "fail"
    assert "accuracy 26/40 (65%" in result.message and "vs 38/40 (95%" in result.message
    assert "12 item(s) lost, 0 gained (McNemar exact one-sided p 0.00024)" in result.message
    # The message gives the drop, its bounds and the tolerance.
    assert (
        "drop +30.0 points, upper bound +45.4 (95% Tango score interval [+18.1, +45.4]): lower bound above "
        "the 10-point tolerance, worse than allowed beyond noise" in result.message
    )
    assert result.evidence[0].file == "candidates/c/accuracy/r1/records.jsonl"
    assert result.evidence[0].requests == list(range(5, 17))
    # The drop's interval is recorded as data too, for the report's accuracy line (report.accuracy).
    low, high = result.comparisons[0].drop_interval or (0.0, 0.0)
    assert (round(low * 100, 1), round(high * 100, 1)) == (18.1, 45.4)


def test_a_loss_within_noise_is_inconclusive_and_equal_answers_pass(tmp_path: Path) -> None:
    base = [_answers()]
    unsure = _evaluate(tmp_path, [_answers(wrong=[3, 4])], base, claim="greedy draft sampling")
    assert unsure.status == "inconclusive" and unsure.comparisons[1].status == "inconclusive"  # flagged too
    assert "within noise: a larger labelled set would settle it" in unsure.message
    verdict = decide("c", "baseline", [unsure], CFG)
    assert verdict.decision == "inconclusive" and "rerun the missing" not in verdict.reason
    assert _evaluate(tmp_path, [_answers()], base).status == "pass"


def test_too_few_items_scored_is_a_gap_and_the_verdict_is_incomplete(tmp_path: Path) -> None:
    """The baseline failed 25 items: no reference for them (the candidate's own failures would count
    against it: tests/unit/test_unanswered_items.py)."""
    base = [_answers(missing=range(25))]
    result = _evaluate(tmp_path, [_answers()], base)
    assert result.status == "not_run" and not result.not_applicable
    assert "15 of 40 items" in result.message and "gates.accuracy.min_items = 20" in result.message
    assert "baseline: 25 of 40 items unanswered (http_5xx 25)" in result.message
    verdict = decide("c", "baseline", [result], CFG)
    assert verdict.decision == "incomplete"
    assert "answer_accuracy: could not run (15 of 40 items" in verdict.reason


def test_a_sweep_without_the_labelled_profile_is_not_applicable(tmp_path: Path) -> None:
    empty = Results(name="baseline", root="candidates/baseline", run=None, profiles={})
    ctx = GateContext(cfg=CFG, baseline=empty, candidate=_side(tmp_path, "c", [_answers()]))
    result = AnswerAccuracy().evaluate(ctx)
    assert result.status == "not_run"
    assert result.not_applicable == "the sweep measured none of accuracy (run.profiles)"
    assert decide("c", "baseline", [result], CFG).decision != "incomplete"


def test_a_set_changed_since_the_runs_is_not_scored(tmp_path: Path) -> None:
    base, cand = _side(tmp_path, "baseline", [_answers()]), _side(tmp_path, "c", [_answers()])
    (tmp_path / "set.jsonl").write_text(SET + SET)
    result = AnswerAccuracy().evaluate(GateContext(cfg=CFG, baseline=base, candidate=cand))
    assert result.status == "not_run" and "has 80 items, the runs sent 40: it changed" in result.message


def test_a_lossless_candidate_whose_outputs_change_is_flagged_but_not_rejected(tmp_path: Path) -> None:
    """Right answers, worded differently on 12 items: accuracy passes, greedy agreement is flagged against
    the baseline's own two identical repeats."""
    reworded = [f"so {t}" if i < 12 and t else t for i, t in enumerate(_answers())]
    result = _evaluate(tmp_path, [reworded], [_answers(), _answers()], claim="greedy draft sampling")
    assert result.status == "pass"
    agreement = result.comparisons[1]
    assert agreement.metric == "greedy_agreement" and agreement.status == "inconclusive"
    assert "FLAGGED: greedy agreement with the baseline 28/40 (70%)" in result.message
    assert "baseline's own repeat-to-repeat agreement 40/40" in result.message
    assert result.evidence[0].requests == list(range(12))
    plain = _evaluate(tmp_path, [reworded], [_answers(), _answers()], claim="")
    assert len(plain.comparisons) == 1 and "no lossless claim: not judged" in plain.message


# ------------------------------------------------------------------------------------ the load side


def test_the_load_runner_sends_the_set_and_keeps_each_visible_answer(tmp_path: Path) -> None:
    (tmp_path / "set.jsonl").write_text(SET)
    wl = workload(num_requests=SIZE, warmup_requests=0, prompts_file="set.jsonl", temperature=0.0)
    prompts = load_prompts(wl, tmp_path)
    assert prompts is not None and prompts[3] == "What is 3 + 3?"
    planned = plan_requests(wl, prompts=prompts)
    built = [BuiltPrompt(text=p.fixed_prompt or "", counted=10) for p in planned]
    plan = make_plan(wl, planned, built, served_model="m", run_salt="s", max_model_len=None)
    assert all(r.keep_text for r in plan.requests)
    unlabelled = make_plan(
        replace(wl, prompts_file="p.json"), planned, built, served_model="m", run_salt="s", max_model_len=None
    )
    assert not any(r.keep_text for r in unlabelled.requests)


def _sse(*deltas: dict[str, str]) -> list[tuple[int, bytes]]:
    events: list[dict[str, object]] = [{"choices": [{"delta": d, "finish_reason": None}]} for d in deltas]
    events.append({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"completion_tokens": 3}})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return [(1, body)]


@pytest.mark.parametrize(
    ("deltas", "text"),
    [
        (
            ({"reasoning": "hmm"}, {"content": "#### "}, {"content": "42"}),
            "#### 42",
        ),  # reasoning is not visible
        (({"reasoning": "hmm"},), ""),  # finished with no visible answer: scored wrong, not skipped
    ],
)
def test_the_parser_keeps_the_visible_answer_only_when_asked(
    deltas: tuple[dict[str, str], ...], text: str
) -> None:
    assert EventParser(_sse(*deltas), complete=True, keep_text=True).run().text == text
    assert parse_events(_sse(*deltas), complete=True).text is None


# ------------------------------------------------------------------------------------ the project's set


def test_the_shipped_set_is_what_its_script_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "make_accuracy_set", PROJECT_ROOT / "scripts" / "make_accuracy_set.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = (CONF_DIR / "workload" / "accuracy_set.jsonl").read_text()
    assert shipped == module.labelled_set()
    items = parse_labelled(shipped, "accuracy_set.jsonl")
    assert len(items) == 300 and all(number(i.answer) is not None for i in items)
