"""Ready for a lent GPU: three checks on a real NVIDIA host, without vLLM, in under 2 minutes.

Run by ``scripts/gpu-check.sh`` (``make gpu-check``). One line per check, then the exit code:

- ``energy``: NVML's total-energy counters advance over a short load on every GPU (``LOAD_S`` seconds;
  the load: a matmul loop on each GPU with torch where torch sees CUDA, else none, and the counters
  advance at the GPUs' idle draw, tens of W: this script brings no CUDA code of its own);
- ``mapping``: the candidate-GPU mapping (:mod:`launch.gpu_select`) resolves on this host: a TP1 launch
  spec given the last GPU's UUID in ``CUDA_VISIBLE_DEVICES`` is metered on that GPU alone, and a spec using
  every GPU by vLLM's default placement on all of them;
- ``doctor``: ``python -m orchestrator doctor`` reads the GPUs (its ``GPUs: N x NAME`` line, N as NVML).

Exit codes: 0 every check passed; 1 a check failed; 3 no NVIDIA driver (each line says so, and nothing
else runs)::

    $ scripts/gpu-check.sh
    energy: no NVIDIA driver (NVML Shared Library Not Found)
    ...
    gpu-check: no NVIDIA driver on this machine (exit 3)
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from launch.nvml import NvmlEnergy, NvmlProbe

EXIT_OK, EXIT_FAILED, EXIT_NO_DRIVER = 0, 1, 3
LOAD_S = 10.0  # seconds of load for the energy check
DOCTOR_TIMEOUT_S = 90.0
CHECKS = ("energy", "mapping", "doctor")

Runner = Callable[[Sequence[str], float], tuple[int, str]]  # argv, timeout -> exit code, output


@dataclass(frozen=True)
class Check:
    """One check's line: its name, whether it passed, and what it saw."""

    name: str
    ok: bool
    text: str

    def line(self) -> str:
        return f"{self.name}: {'ok' if self.ok else 'FAILED'}: {self.text}"


def _run(argv: Sequence[str], timeout_s: float) -> tuple[int, str]:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:g} s"
    return done.returncode, done.stdout + done.stderr


def torch_load(seconds: float) -> str:
    """A matmul loop on every GPU torch sees for ``seconds``; what it did, in words."""
    try:
        import torch  # type: ignore[import-not-found]  # noqa: PLC0415  (optional: torch may be absent)
    except ImportError:
        time.sleep(seconds)
        return "no torch here: no load, the counters read at the GPUs' idle draw"
    if not torch.cuda.is_available():
        time.sleep(seconds)
        return "torch sees no CUDA device: no load, the counters read at the GPUs' idle draw"
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    mats = [torch.randn(4096, 4096, device=d, dtype=torch.float16) for d in devices]
    end, loops = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for m in mats:
            m @ m
        loops += 1
    for d in devices:
        torch.cuda.synchronize(d)
    return f"torch fp16 4096x4096 matmuls on {len(devices)} GPU(s), {loops} rounds"


def check_energy(
    probe: NvmlProbe, load: Callable[[float], str], seconds: float, clock: Callable[[], float]
) -> Check:
    """The counters advance: every GPU's energy over the load is above zero."""
    window = NvmlEnergy(probe, interval_s=0.5, clock=clock).open()
    what = load(seconds)
    energy = window.close()
    if not energy.measured or energy.watts_per_gpu is None or energy.joules is None:
        return Check("energy", False, f"{energy.reason or 'not measured'} ({what})")
    still = [i for i, w in enumerate(energy.watts_per_gpu) if w <= 0]
    watts = f"{min(energy.watts_per_gpu):.0f}-{max(energy.watts_per_gpu):.0f} W per GPU"
    text = (
        f"{energy.gpus} GPU(s), {energy.joules:.0f} J over {energy.duration_s or 0:.1f} s ({energy.method}), "
        f"{watts}; load: {what}"
    )
    if still:
        return Check("energy", False, f"GPU {', '.join(map(str, still))} did not advance: {text}")
    return Check("energy", True, text)


def check_mapping(probe: NvmlProbe, spec: Any, uuids: list[str]) -> Check:
    """A TP1 spec on the last GPU's UUID is metered on that GPU; a spec on every GPU, on all of them."""
    n = len(uuids)
    last = replace(spec, argv=(*spec.argv, "--tensor-parallel-size", "1", "--data-parallel-size", "1"))
    last = replace(last, env={**spec.env, "CUDA_VISIBLE_DEVICES": uuids[-1]})
    every = replace(spec, argv=(*spec.argv, "--tensor-parallel-size", str(n), "--data-parallel-size", "1"))
    seen = []
    for name, s, want in (("by UUID", last, [n - 1]), ("default placement", every, list(range(n)))):
        energy = NvmlEnergy(probe, interval_s=None, spec=s, environ={}).open().close()
        got = energy.metering.indices if energy.metering is not None else None
        if got != want:
            return Check("mapping", False, f"{name}: expected GPU {want}, got {got} ({energy.reason or ''})")
        seen.append(f"{name} -> GPU {', '.join(map(str, want))}")
    return Check("mapping", True, "; ".join(seen))


def check_doctor(run: Runner, gpus: int, python: str) -> Check:
    """doctor's GPU line says NVML's count (vLLM and weights are not needed: their lines are not read)."""
    argv = [python, "-m", "orchestrator", "doctor", "host=h100x8", f"host.gpu_count={gpus}"]
    argv += ["host.gpu_name=null", "host.compute_capability=null"]
    code, out = run(argv, DOCTOR_TIMEOUT_S)
    line = next((ln.strip() for ln in out.splitlines() if "GPUs:" in ln), None)
    if line is None or f"GPUs: {gpus} x" not in line:
        tail = " | ".join(out.strip().splitlines()[-3:])
        return Check("doctor", False, f"no 'GPUs: {gpus} x' line (exit {code}): {tail}")
    return Check("doctor", True, line.removeprefix("ok").strip())


def base_spec(gpus: int) -> Any:
    """A launch spec of the project's GPU host on ``gpus`` GPUs, its parallelism flags left to the check."""
    from launch.spec import render_spec  # noqa: PLC0415  (composing loads Hydra: only with a driver)
    from orchestrator.config.compose import load  # noqa: PLC0415

    cfg, _ = load(["host=h100x8", f"host.gpu_count={gpus}", "host.placement=at_most"])
    spec = render_spec(cfg.service, cfg.candidate, cfg.host)
    argv = list(spec.argv)
    for flag in ("--tensor-parallel-size", "--data-parallel-size"):
        if flag in argv:
            i = argv.index(flag)
            del argv[i : i + 2]
    return replace(spec, argv=tuple(argv), config_yaml="")


def main(
    *,
    nvml_module: Any | None = None,
    load: Callable[[float], str] = torch_load,
    run: Runner = _run,
    spec_for: Callable[[int], Any] = base_spec,
    seconds: float = LOAD_S,
    out: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """The three checks, one line each; the exit code."""
    probe = NvmlProbe(nvml_module)
    nvml = probe.module()
    if nvml is None:
        for name in CHECKS:
            out(f"{name}: {probe.reason or 'no NVIDIA driver'}")
        out(f"gpu-check: no NVIDIA driver on this machine (exit {EXIT_NO_DRIVER})")
        return EXIT_NO_DRIVER
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    uuids = [str(u.decode() if isinstance(u, bytes) else u) for u in map(nvml.nvmlDeviceGetUUID, handles)]
    checks = [check_energy(probe, load, seconds, clock)]
    out(checks[-1].line())
    checks.append(check_mapping(probe, spec_for(len(uuids)), uuids))
    out(checks[-1].line())
    checks.append(check_doctor(run, len(uuids), sys.executable))
    out(checks[-1].line())
    failed = [c.name for c in checks if not c.ok]
    code = EXIT_FAILED if failed else EXIT_OK
    out(f"gpu-check: {'FAILED: ' + ', '.join(failed) if failed else 'every check passed'} (exit {code})")
    return code


if __name__ == "__main__":
    sys.exit(main())
