"""Profile → planned requests: lengths, arrival schedule and prompts, all deterministic from the seed.

Pipeline position: the runner turns a :class:`~contracts.schema.WorkloadConfig` into
:class:`PlannedRequest` objects here (pure), then builds each prompt with :class:`PromptBuilder`, which
hits its token target as the *server* counts it by asking the server's ``POST /tokenize`` (the tokenizer
and chat template of the model being measured), never by guessing from characters.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from contracts.errors import HarnessError
from contracts.labelled import is_labelled, parse_labelled
from contracts.schema import LengthConfig, WorkloadConfig

#: Allowed relative error between a prompt's token target and the server's count.
PROMPT_TOLERANCE = 0.02
_CALIBRATION_STEPS = 8  # tokenize calls per prompt at most
_FORBIDDEN_SALT = set("@/\\\x00")

# Plain English words: most tokenizers keep common words whole, so a few probes pin the length down.
_WORD_TEXT = """
time year people way day man thing woman life child world school state family student group
country problem hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book eye
job word business issue side kind head house service friend father power hour game line end
member law car city community name president team minute idea kid body information back parent
face others level office door health person art war history party result change morning reason
research girl guy moment air teacher force education foot boy age policy process music market
sense nation plan college interest death experience effect use class control care field
development role effort rate heart drug show leader light voice wife police mind price report
decision son view relationship town road arm difference value building action model season
society tax director position player record paper space ground form event official matter
center couple site project activity star table need court oil situation cost industry figure
street image phone data picture practice piece land product doctor wall patient worker news
test movie north love support technology step baby computer type attention film tree source
organization hair window evidence population river garden answer train summer winter bridge
letter stone glass paint silver
"""
_WORDS = tuple(_WORD_TEXT.split())


@dataclass(frozen=True)
class PlannedRequest:
    """One request of a profile before its prompt exists."""

    index: int  # position in the profile (warmup first)
    warmup: bool
    target_prompt_tokens: int
    max_tokens: int
    arrival_s: float | None  # open loop: wall seconds after its phase starts; closed loop: None
    fixed_prompt: str | None = None  # from the profile's prompts_file (or a data file's text)
    # Data workloads (load.sources): a shared system prompt, the seed of a generated text that recurs,
    # earlier (role, content) exchanges sent before the prompt, the answer whose length is max_tokens.
    system_prompt_index: int | None = None
    prompt_seed_index: int | None = None
    history: tuple[tuple[str, str], ...] = ()
    output_text: str | None = None


def scaled_counts(workload: WorkloadConfig, scale: float) -> tuple[int, int]:
    """(measured, warmup) request counts after ``scale``; at least one measured request.

    A fixed prompt set (``prompts_file``, e.g. the five answer-gate prompts) is never scaled: a gate that
    compares visible answers on those prompts needs all of them.
    """
    if scale <= 0:
        raise HarnessError(f"scale must be > 0, got {scale}", hint="run.scale multiplies request counts")
    if workload.prompts_file is not None:
        return workload.num_requests, workload.warmup_requests
    measured = max(1, round(workload.num_requests * scale))
    warmup = max(0, round(workload.warmup_requests * scale))
    return measured, warmup


def sample_lengths(config: LengthConfig, count: int, rng: random.Random) -> list[int]:
    """Token lengths drawn from a fixed, uniform or lognormal distribution (clipped to [min, max])."""
    low = max(1, config.min)
    high = config.max if config.max > 0 else None
    if config.kind == "fixed":
        return [max(1, config.mean)] * count
    if config.kind == "uniform":
        top = high if high is not None else max(low, 2 * config.mean - low)
        return [rng.randint(low, top) for _ in range(count)]
    if config.kind == "lognormal":
        if config.mean <= 0 or config.std < 0:
            raise HarnessError(f"lognormal lengths need mean > 0 and std >= 0, got {config}")
        sigma2 = math.log(1 + (config.std / config.mean) ** 2)
        mu = math.log(config.mean) - sigma2 / 2
        values = (round(rng.lognormvariate(mu, math.sqrt(sigma2))) for _ in range(count))
        return [min(max(low, v), high) if high is not None else max(low, v) for v in values]
    raise HarnessError(f"unknown length distribution {config.kind!r}", hint="use fixed, uniform or lognormal")


#: Open-loop arrival processes (``workload.arrivals``).
ARRIVALS = ("poisson", "constant")


def plan_requests(
    workload: WorkloadConfig, *, scale: float = 1.0, prompts: list[str] | None = None
) -> list[PlannedRequest]:
    """Every request of a profile, warmup first, deterministic from ``workload.seed``."""
    measured, warmup = scaled_counts(workload, scale)
    total = measured + warmup
    rng = random.Random(workload.seed)
    prompt_lengths = sample_lengths(workload.prompt_tokens, total, rng)
    output_lengths = sample_lengths(workload.output_tokens, total, rng)
    arrivals: list[float | None] = [None] * total
    if workload.mode == "open":
        if not workload.rate or not (math.isfinite(workload.rate) and workload.rate > 0):
            raise HarnessError(f"profile {workload.name}: open loop needs rate > 0, got {workload.rate}")
        if workload.arrivals not in ARRIVALS:
            raise HarnessError(
                f"profile {workload.name}: arrivals {workload.arrivals!r}",
                hint=f"use one of {', '.join(ARRIVALS)}",
            )
        constant = workload.arrivals == "constant"
        for phase_start, phase_len in ((0, warmup), (warmup, measured)):
            t = 0.0
            for i in range(phase_start, phase_start + phase_len):
                t += 1.0 / workload.rate if constant else rng.expovariate(workload.rate)
                arrivals[i] = t
    elif workload.mode != "closed":
        raise HarnessError(f"profile {workload.name}: mode {workload.mode!r}", hint="use closed or open")
    return [
        PlannedRequest(
            index=i,
            warmup=i < warmup,
            target_prompt_tokens=prompt_lengths[i],
            max_tokens=output_lengths[i],
            arrival_s=arrivals[i],
            fixed_prompt=prompts[i % len(prompts)] if prompts else None,
        )
        for i in range(total)
    ]


def load_prompts(workload: WorkloadConfig, prompts_dir: Path) -> list[str] | None:
    """The profile's fixed prompts (a JSON list of strings, or a labelled set's prompts: a ``.jsonl`` file,
    :mod:`contracts.labelled`), or None when it generates them.

    A file that cannot be read or is not such a list is a :class:`~contracts.errors.HarnessError` (the
    workload's data, not the server: the candidate is incomplete, never unhealthy); validation refuses
    it before anything starts, so this is a file changed or removed since."""
    if not workload.prompts_file:
        return None
    path = prompts_dir / workload.prompts_file
    try:
        text = path.read_text()
    except (OSError, ValueError) as exc:
        raise HarnessError(f"profile {workload.name}: cannot read prompts file {path}: {exc}") from exc
    if is_labelled(workload.prompts_file):  # a labelled set: each item's prompt, in file order
        return [item.prompt for item in parse_labelled(text, str(path))]
    return parse_prompts(text, str(path))


_JSON_KINDS = {dict: "a JSON object", list: "a JSON list", str: "a JSON string", bool: "a JSON boolean"}


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    return _JSON_KINDS.get(type(value), "a JSON number")


def parse_prompts(text: str, where: str) -> list[str]:
    """A prompts file's prompts (pure): a JSON list of non-empty strings. Anything else is a
    :class:`~contracts.errors.HarnessError` naming ``where:line`` and what is there (not JSON, an empty
    list, another JSON type, a prompt that is empty or not a string).

    >>> parse_prompts('["What is 2 + 2?"]', "p.json")
    ['What is 2 + 2?']
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else 1
        raise HarnessError(f"{where}:{line}: not JSON ({exc})", hint=_PROMPTS_HINT) from exc
    starts = _element_lines(text)
    if not isinstance(data, list):
        raise HarnessError(
            f"{where}:{starts[0]}: {_json_kind(data)}: expected a JSON list of non-empty strings",
            hint=_PROMPTS_HINT,
        )
    if not data:
        raise HarnessError(f"{where}:{starts[0]}: an empty list: no prompt to send", hint=_PROMPTS_HINT)
    for n, prompt in enumerate(data):
        if not (isinstance(prompt, str) and prompt):
            what = '""' if prompt == "" else _json_kind(prompt)
            raise HarnessError(
                f"{where}:{starts[n + 1]}: prompt {n + 1} is {what}: expected a non-empty string",
                hint=_PROMPTS_HINT,
            )
    return data


_PROMPTS_HINT = 'a prompts file is a JSON list of non-empty strings: ["first prompt", "second prompt"]'


def _element_lines(text: str) -> list[int]:
    """The 1-based line where valid JSON ``text`` starts, then where each element of its top-level list
    starts (only the first when it is not a list)."""
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    def line(i: int) -> int:
        return text.count("\n", 0, i) + 1

    i = skip(0)
    lines = [line(i)]
    if text[i : i + 1] != "[":
        return lines
    i = skip(i + 1)
    while i < len(text) and text[i] != "]":
        lines.append(line(i))
        _, i = decoder.raw_decode(text, i)
        i = skip(i)
        i = skip(i + 1) if text[i : i + 1] == "," else i
    return lines


def make_salt(run_salt: str, index: int) -> str:
    """A cache_salt unique to the run and the request: no two requests share prefix-cache blocks."""
    salt = f"{run_salt}-{index}"
    if not 1 <= len(salt) <= 128 or _FORBIDDEN_SALT & set(salt):
        raise HarnessError(
            f"cache_salt {salt!r} is not accepted by vLLM",
            hint="a salt is 1-128 characters without '@', '/', '\\' or NUL",
        )
    return salt


def messages_for(
    prompt: str, *, system: str | None = None, history: tuple[tuple[str, str], ...] = ()
) -> list[dict[str, str]]:
    """The chat messages of a request: an optional system prompt, earlier exchanges, the prompt."""
    head = [{"role": "system", "content": system}] if system is not None else []
    return [*head, *({"role": r, "content": c} for r, c in history), {"role": "user", "content": prompt}]


_CACHE_LIMIT = 20_000
_CACHE: dict[tuple[str, int, int, int], BuiltPrompt] = {}  # (tokenizer id, seed, index, target) -> prompt

#: Count the server's prompt tokens of one user message (chat template included); None = unavailable.
TokenCounter = Callable[[str], Awaitable[int | None]]


@dataclass
class BuiltPrompt:
    """A prompt and the server's count of it (None when the server could not count)."""

    text: str
    counted: int | None
    system: str | None = None  # a shared system prompt sent before it (load.sources)


@dataclass
class PromptBuilder:
    """Builds prompts from a word pool and calibrates their length with the server's tokenizer.

    Lengths are fitted as ``overhead + words * tokens_per_word`` from two probes, then each prompt is
    corrected word by word until its count is within :data:`PROMPT_TOLERANCE` (a few calls per prompt).
    Results are cached by tokenizer identity, so repeats and candidates that share a model reuse them.
    """

    count: TokenCounter
    seed: int
    tokenizer_id: str = ""
    notes: list[str] = field(default_factory=list)
    _overhead: float = 0.0
    _per_word: float = 1.0
    _calibrated: bool = False
    _available: bool = True

    @staticmethod
    def words(seed: int, index: int, count: int) -> str:
        rng = random.Random(f"gauntlet-prompt/{seed}/{index}")
        return " ".join(rng.choice(_WORDS) for _ in range(max(1, count)))

    async def _calibrate(self) -> None:
        self._calibrated = True
        small, large = 16, 512
        first = await self.count(self.words(self.seed, -1, small))
        second = await self.count(self.words(self.seed, -1, large))
        if first is None or second is None:
            self._available = False
            self._per_word, self._overhead = 1.3, 10.0
            self.notes.append(
                "the server has no usable /tokenize: prompt lengths are estimates (1.3 tokens per word); "
                "check usage.prompt_tokens in the records"
            )
            return
        self._per_word = max((second - first) / (large - small), 0.05)
        self._overhead = first - self._per_word * small

    async def build(self, index: int, target: int) -> BuiltPrompt:
        key = (self.tokenizer_id, self.seed, index, target)
        if self.tokenizer_id and key in _CACHE:
            return _CACHE[key]
        if not self._calibrated:
            await self._calibrate()
        words = max(1, round((target - self._overhead) / self._per_word))
        if not self._available:
            return BuiltPrompt(self.words(self.seed, index, words), None)
        best: tuple[int, int, int] | None = None  # (error, words, count)
        tried: set[int] = set()
        for _ in range(_CALIBRATION_STEPS):
            tried.add(words)
            counted = await self.count(self.words(self.seed, index, words))
            if counted is None:
                break
            error = abs(counted - target)
            if best is None or error < best[0]:
                best = (error, words, counted)
            if error <= math.floor(PROMPT_TOLERANCE * target / 2):
                break  # within half the tolerance: good enough, and leaves room for drift
            step = round((target - counted) / self._per_word) or (1 if counted < target else -1)
            words = max(1, words + step)
            while words in tried and words > 1:
                words += 1 if counted < target else -1
            if words in tried:
                break
        if best is None:
            return BuiltPrompt(self.words(self.seed, index, words), None)
        built = BuiltPrompt(self.words(self.seed, index, best[1]), best[2])
        if self.tokenizer_id:
            if len(_CACHE) >= _CACHE_LIMIT:
                _CACHE.clear()
            _CACHE[key] = built
        return built


def tokenizer_fingerprint(token_ids: list[int]) -> str:
    return hashlib.sha256(json.dumps(token_ids).encode()).hexdigest()[:16]


async def gather_limited(coros: list[Awaitable[BuiltPrompt]], limit: int = 8) -> list[BuiltPrompt]:
    """Run awaitables with at most ``limit`` at once, keeping order."""
    semaphore = asyncio.Semaphore(limit)

    async def one(coro: Awaitable[BuiltPrompt]) -> BuiltPrompt:
        async with semaphore:
            return await coro

    return list(await asyncio.gather(*(one(c) for c in coros)))
