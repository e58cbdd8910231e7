#!/usr/bin/env bash
# Ready for a lent GPU (issue 44 item 8): NVML energy counters advance under a short load, the candidate-GPU
# mapping resolves, doctor reads the GPUs; one line per check, under 2 minutes, no vLLM needed.
# Exit: 0 all passed, 1 a check failed, 3 no NVIDIA driver. The checks: scripts/gpu_check.py.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${GPU_CHECK_PYTHON:-$root/.venv/bin/python}"
[[ -x "$python" ]] || python="$(command -v python3)"
cd "$root"
exec env PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" timeout 120 "$python" scripts/gpu_check.py
