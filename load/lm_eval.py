"""An ``lm_eval`` profile run against one server: lm-eval-harness as a subprocess, its samples read back.

Pipeline position: the load stage's second kind of run, beside :func:`load.runner.run_profile`. lm-eval
runs with its OpenAI-compatible model (``local-completions`` or ``local-chat-completions``) against the
server's endpoint and ``--log_samples``, in the interpreter the profile names (lm-eval pulls torch,
transformers and datasets: it lives in the vLLM environment, not gauntlet's). :func:`lm_eval_argv` and
:func:`lm_eval_env` are pure; the process is the injected ``run`` seam (:class:`RunLmEval`, real default
:func:`run_process`); :func:`classify` reads a failed run's output tail with a table of patterns; the
documents are read by :func:`contracts.lmeval.read_docs` and written as the run's record
(:class:`contracts.layout_lmeval.LmEvalPaths`).

A failure is told by whose fault: lm-eval missing, a task it cannot find, its own crash or a run past
``timeout_s`` is a :class:`HarnessError` (the candidate is incomplete, never blamed); the server refusing
connections or answering with errors is a :class:`LoadError` naming the profile and task (the server's).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from contracts.errors import HarnessError, LoadError
from contracts.layout_lmeval import LmEvalPaths
from contracts.lmeval import LmEvalRun, read_docs
from contracts.lmeval_profile import MODEL_ENDPOINTS, LmEvalProfile

#: The lm-eval release the ``lmeval`` extra pins and CI installs into the vLLM environment.
LM_EVAL_PIN = "lm-eval[api]==0.4.13"
#: The lines of lm-eval's output a failure message carries.
TAIL_LINES = 12


@dataclass(frozen=True)
class Finished:
    """How an lm-eval process ended: its exit code (None: killed at the time limit) and its output."""

    returncode: int | None
    output: str


class RunLmEval(Protocol):
    """The seam that runs lm-eval (a subprocess in :func:`run_process`; a table of outcomes in tests)."""

    def __call__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float, log: Path
    ) -> Finished: ...


def lm_eval_argv(
    profile: LmEvalProfile, *, base_url: str, model: str, output_dir: Path, python: str | None = None
) -> list[str]:
    """lm-eval's command line for one server (pure).

    >>> from contracts.lmeval_profile import LmEvalProfile
    >>> argv = lm_eval_argv(LmEvalProfile(name="g", tasks=["gsm8k"], tokenizer="models/t", python="py"),
    ...                     base_url="http://h:8000", model="m", output_dir=Path("out"))
    >>> argv[:5]
    ['py', '-m', 'lm_eval', '--model', 'local-completions']
    >>> argv[6].split(",")[:2]
    ['model=m', 'base_url=http://h:8000/v1/completions']
    """
    args = [
        f"model={model}",
        f"base_url={base_url.rstrip('/')}{MODEL_ENDPOINTS[profile.model]}",
        f"num_concurrent={profile.num_concurrent}",
        "max_retries=3",
    ]
    if profile.model == "local-completions":
        args += ["tokenized_requests=False", f"tokenizer={profile.tokenizer or model}"]
    argv = [python or profile.python or sys.executable, "-m", "lm_eval", "--model", profile.model]
    argv += ["--model_args", ",".join(args), "--tasks", ",".join(profile.tasks)]
    argv += ["--output_path", str(output_dir), "--log_samples"]
    if profile.model == "local-chat-completions":
        argv.append("--apply_chat_template")
    if profile.local:
        argv += ["--include_path", str(profile.local[0].folder)]
    if profile.limit is not None:
        argv += ["--limit", str(profile.limit)]
    if profile.num_fewshot is not None:
        argv += ["--num_fewshot", str(profile.num_fewshot)]
    if profile.max_gen_toks is not None:
        argv += ["--gen_kwargs", f"max_gen_toks={profile.max_gen_toks}"]
    return argv


def lm_eval_env(
    profile: LmEvalProfile, base: Mapping[str, str], *, api_key: str | None = None
) -> dict[str, str]:
    """lm-eval's environment (pure): the caller's, offline when the profile says so (no hub download), the
    server's API key as ``OPENAI_API_KEY`` (lm-eval's local models send it as a bearer token)."""
    env = dict(base)
    if profile.offline:
        env.update(
            HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1"
        )
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    return env


Fault = Literal["harness", "server"]


@dataclass(frozen=True)
class Failure:
    """One row of :data:`FAILURES`: a pattern of lm-eval's output, whose fault, and what to say."""

    pattern: re.Pattern[str]
    fault: Fault
    words: str  # {python}, {setting} (the setting that chose it), {tasks}: filled in
    on_server: bool = False  # the matching line must name the server (its host and port): not the hub's


#: A failed run's output -> whose fault and what to say. First match wins; no match is the harness's (an
#: lm-eval crash says nothing about the server). A connection error counts against the server only on a
#: line naming the server's host and port (the hub's own, huggingface.co, is the harness's).
FAILURES: tuple[Failure, ...] = (
    Failure(
        re.compile(r"No module named '?lm_eval|^cannot start the interpreter "),
        "harness",
        f"lm-eval is not installed in {{python}}: install it there (pip install '{LM_EVAL_PIN}'), or set "
        "{setting} to an interpreter that has it",
    ),
    Failure(
        re.compile(r"Tasks? (were )?not found|did not recognize", re.IGNORECASE),
        "harness",
        "lm-eval does not know task(s) {tasks}: check the names (python -m lm_eval ls tasks) or the local "
        "task YAML",
    ),
    Failure(
        re.compile(r"API request failed"),  # lm-eval's own words when the endpoint answered an error
        "server",
        "the server failed lm-eval's requests (answered with an error after lm-eval's retries) during "
        "task(s) {tasks}",
    ),
    Failure(
        re.compile(
            r"ConnectionError|ClientConnectorError|Cannot connect to host|Connection refused|"
            r"ServerDisconnectedError|ClientResponseError|ClientPayloadError|HTTPError",
        ),
        "server",
        "the server failed lm-eval's requests (refused, dropped or answered with an error) during task(s) "
        "{tasks}",
        on_server=True,
    ),
    Failure(
        re.compile(r"offline mode|Couldn't reach|LocalEntryNotFoundError|huggingface\.co", re.IGNORECASE),
        "harness",
        "lm-eval could not get the dataset of task(s) {tasks} from the Hugging Face hub: give it network "
        "access (offline: false) or a local task YAML",
    ),
)


def _names_server(line: str, endpoint: tuple[str, str] | None) -> bool:
    return endpoint is not None and all(part in line for part in endpoint)


def classify(output: str, endpoint: tuple[str, str] | None = None) -> tuple[Fault, str]:
    """Whose fault a failed run is, and the words, from its output (pure; :data:`FAILURES`); ``endpoint``:
    the server's (host, port) as a line of the output names them."""
    lines = output.splitlines()
    for row in FAILURES:
        for line in lines:
            if row.pattern.search(line) and (not row.on_server or _names_server(line, endpoint)):
                return row.fault, row.words
    return "harness", "lm-eval failed (its own error, not the server's) during task(s) {tasks}"


def endpoint_of(base_url: str) -> tuple[str, str] | None:
    """(host, port) of a base URL, as lm-eval's errors write them (pure).

    >>> endpoint_of("http://127.0.0.1:8000/")
    ('127.0.0.1', '8000')
    """
    found = re.match(r"^\w+://\[?([^\]/:]+)\]?(?::(\d+))?", base_url)
    if found is None:
        return None
    port = found.group(2) or ("443" if base_url.startswith("https") else "80")
    return found.group(1), port


def _tail(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()][-TAIL_LINES:]


def run_process(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float, log: Path
) -> Finished:
    """Run lm-eval in its own session, its output into ``log``; at the time limit, or on an interrupt, its
    whole process group is killed (nothing is left running)."""
    with log.open("w") as out:
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return Finished(returncode=127, output=f"cannot start the interpreter {argv[0]}: {exc}")
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return Finished(returncode=code, output=log.read_text(errors="replace"))


def run_lm_eval(
    base_url: str,
    model: str,
    profile: LmEvalProfile,
    *,
    candidate: str,
    out_dir: Path,
    python: str | None = None,
    python_setting: str = "",
    api_key: str | None = None,
    run: RunLmEval = run_process,
) -> LmEvalRun:
    """Run ``profile`` against the server at ``base_url`` serving ``model``; write and return the run's
    record (:class:`contracts.layout_lmeval.LmEvalPaths` of ``out_dir``: the record, lm-eval's output
    and its files). ``python`` overrides the profile's interpreter; ``python_setting`` is where it was
    set (a missing lm-eval names it; default: the profile's ``python``)."""
    paths = LmEvalPaths(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    output_dir = paths.output
    argv = lm_eval_argv(
        profile, base_url=base_url, model=model, output_dir=output_dir.resolve(), python=python
    )
    cwd = profile.local[0].folder if profile.local else out_dir
    started = time.monotonic()
    finished = run(
        argv,
        cwd=cwd,
        env=lm_eval_env(profile, os.environ, api_key=api_key),
        timeout_s=profile.timeout_s,
        log=paths.log,
    )
    wall_s = time.monotonic() - started
    where = f"lm_eval profile {profile.name!r} ({profile.source or 'no file'}) against {candidate!r}"
    tasks = ", ".join(profile.tasks)
    setting = python_setting or f"the profile's python ({profile.source or 'its file'})"
    if finished.returncode is None:
        raise HarnessError(
            f"{where}: lm-eval ran past timeout_s = {profile.timeout_s:g} s on task(s) {tasks} and was "
            "stopped",
            hint="raise the profile's timeout_s, or lower its limit",
            evidence=_tail(finished.output),
        )
    if finished.returncode != 0:
        fault, words = classify(finished.output, endpoint_of(base_url))
        error = HarnessError if fault == "harness" else LoadError
        raise error(
            f"{where}: {words.format(python=argv[0], setting=setting, tasks=tasks)} (lm-eval exit code "
            f"{finished.returncode}; "
            f"its output: {paths.log})",
            evidence=_tail(finished.output),
        )
    try:
        docs = read_docs(output_dir, profile.tasks, metric=profile.metric, filter_name=profile.filter)
    except HarnessError as exc:
        raise HarnessError(f"{where}: {exc.message}", hint=exc.hint, evidence=exc.evidence) from exc
    record = LmEvalRun(
        profile=profile.name,
        candidate=candidate,
        base_url=base_url,
        model=model,
        argv=argv,
        tasks=list(profile.tasks),
        docs=docs,
        wall_s=round(wall_s, 3),
    )
    record.write(paths.record)
    return record
