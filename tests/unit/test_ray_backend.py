"""The Ray backend of a candidate spanning nodes (``multinode_backend: ray``): what is rendered per node, what
is refused when the config is validated, how the head reads ``ray status`` and waits for the nodes, the
teardown's ``ray stop`` steps, and how a recorded Ray command line is recognised (contracts/ray_backend.py,
launch/ray_head.py, launch/ray_cluster.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import ConfigError, LaunchError, SpecError
from contracts.placement import NodeLayout
from contracts.ray_backend import backend_problems, joined_nodes, ray_start
from launch.nodes import LocalNodes, slurm_nodes
from launch.preflight import diagnose
from launch.ray_cluster import is_ray, launch_argv, stop_ray
from launch.ray_head import parse, wait_for_nodes
from launch.spec import HEAD_ADDRESS, LaunchSpec, render_spec, resolve_head
from orchestrator.plan import format_plan, plan
from orchestrator.servers.leftovers import runs
from tests.unit.composed import load
from tests.unit.test_doctor import probes as doctor_probes
from tests.unit.test_launch_nodes import JOB, FakeSlurm
from tests.unit.test_supervisor import FakeSystem, Scenario, make, make_spec

RAY = ["python", "-m", "launch.sim.ray"]  # sim_2x8's ray_entrypoint


def _spec(*overrides: str) -> LaunchSpec:
    cfg, _ = load(["host=sim_2x8", "candidate=tp4_dp2", "host.rpc_port=29550", *overrides])
    return render_spec(cfg.service, cfg.candidate, cfg.host)


@pytest.mark.parametrize(
    ("overrides", "vllm_tail", "nodes"),
    [
        # TP8 x PP2: one replica, a stage per node: Ray's executor spans the nodes
        (["candidate.tensor_parallel_size=8", "candidate.data_parallel_size=1",
          "+candidate.extra_args.pipeline-parallel-size=2"], ["--distributed-executor-backend", "ray"], 2),
        # TP16: one replica whose TP spans both nodes
        (["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1"],
         ["--distributed-executor-backend", "ray"], 2),
        # TP8 x DP2: a replica a node, Ray places the DP engines
        (["candidate.tensor_parallel_size=8", "candidate.data_parallel_size=2"],
         ["--data-parallel-backend", "ray", "--data-parallel-size-local", "1", "--data-parallel-address",
          HEAD_ADDRESS], 2),
        # TP4 x DP4: two replicas a node
        (["candidate.tensor_parallel_size=4", "candidate.data_parallel_size=4"],
         ["--data-parallel-backend", "ray", "--data-parallel-size-local", "2", "--data-parallel-address",
          HEAD_ADDRESS], 2),
    ],
)  # fmt: skip
def test_a_ray_candidate_renders_ray_on_every_node_and_one_vllm_serve_on_the_head(
    overrides: list[str], vllm_tail: list[str], nodes: int
) -> None:
    spec = _spec(*overrides, "candidate.multinode_backend=ray")
    serve = list(spec.argv)  # the spec's head command: vLLM's, as its docs write it (doctor checks it)
    assert serve[:3] == ["python", "-m", "launch.sim"] and serve[-len(vllm_tail) :] == vllm_tail
    for absent in ("--headless", "--nnodes", "--node-rank", "--master-addr", "--data-parallel-rpc-port"):
        assert absent not in serve
    head_ray = ["start", "--head", "--node-ip-address", HEAD_ADDRESS, "--port", "29550",
                "--include-dashboard=false", "--resources", '{"gauntlet_node_0":1}', "--disable-usage-stats",
                "--block"]  # fmt: skip
    wrapper = ["python", "-m", "launch.ray_head", "--nodes", str(nodes), "--address", HEAD_ADDRESS,
               "--ray-port", "29550", "--join-timeout-s", "30", "--", *RAY, *head_ray, "--"]  # fmt: skip
    # (the join bound: half sim_2x8's 60 s startup timeout, below RAY_JOIN_TIMEOUT_S)
    assert list(launch_argv(spec)) == [*wrapper, *serve]  # as launched: Ray's head first, on the head node
    followers = [list(f) for f in spec.followers]
    assert followers == [
        [*RAY, "start", "--address", f"{HEAD_ADDRESS}:29550", "--resources", f'{{"gauntlet_node_{k}":1}}',
         "--disable-usage-stats", "--block"]
        for k in range(1, nodes)
    ]  # fmt: skip
    assert spec.rpc_port == 29550 and is_ray(spec)


@pytest.mark.parametrize(
    ("backend", "fingerprint_same_as_default"),
    [("mp", True), ("ray", False)],
)
def test_the_default_backend_renders_as_before_and_ray_differs(
    backend: str, fingerprint_same_as_default: bool
) -> None:
    tp16 = ["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1"]
    default, chosen = _spec(*tp16), _spec(*tp16, f"candidate.multinode_backend={backend}")
    same = default.fingerprint == chosen.fingerprint
    assert same is fingerprint_same_as_default
    assert is_ray(chosen) is (backend == "ray")


@pytest.mark.parametrize(
    ("overrides", "field", "value", "allowed"),
    [
        (["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1",
          "candidate.multinode_backend=grpc"], "multinode_backend", "grpc", "one of mp (head and --headless"),
        (["candidate.tensor_parallel_size=4", "candidate.data_parallel_size=2",
          "candidate.multinode_backend=ray"], "multinode_backend", "ray", "mp: this candidate fits one node"),
        (["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1",
          "+candidate.extra_args.distributed_executor_backend=ray"],
         "extra_args.distributed_executor_backend", "ray", "absent: set multinode_backend"),
        (["candidate.tensor_parallel_size=8", "candidate.data_parallel_size=2",
          "+candidate.extra_args.data-parallel-backend=ray", "candidate.multinode_backend=ray"],
         "extra_args.data-parallel-backend", "ray", "absent: set multinode_backend"),
        (["candidate.tensor_parallel_size=4", "candidate.data_parallel_size=4",
          "candidate.multinode_backend=ray", "candidate.data_parallel_load_balancing=hybrid"],
         "multinode_backend", "ray", "mp with data_parallel_load_balancing 'hybrid'"),
    ],
)  # fmt: skip
def test_validation_refuses_a_backend_that_cannot_run(
    overrides: list[str], field: str, value: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(["host=sim_2x8", "candidate=tp4_dp2", *overrides])
    line = next(line for line in str(caught.value).splitlines() if field in line)
    assert value in line and allowed in line
    assert "tp4_dp2.yaml" in line or "override" in line


@pytest.mark.parametrize(
    ("backend", "extra", "layout", "fields"),
    [
        ("mp", {}, NodeLayout(2, 1), []),
        ("ray", {}, NodeLayout(2, 0, 2), []),
        ("ray", {}, NodeLayout(1, 2), ["multinode_backend"]),
        ("mp", {}, NodeLayout(1, 2), []),
        ("Ray", {}, NodeLayout(2, 1), ["multinode_backend"]),
        ("ray", {"--distributed-executor-backend": "mp"}, NodeLayout(2, 1),
         ["extra_args.--distributed-executor-backend"]),
        ("ray", {}, "TP x DP = 32 needs 4 nodes", []),  # the layout's own refusal is said on its own
        ("mp", {"distributed_executor_backend": "ray"}, NodeLayout(1, 2), []),  # one node: the flag is free
    ],
)  # fmt: skip
def test_backend_problems(
    backend: str, extra: dict[str, str], layout: NodeLayout | str, fields: list[str]
) -> None:
    assert [f for f, _, _ in backend_problems(backend, [extra], layout)] == fields


@pytest.mark.parametrize(
    ("backend", "balancing", "layout", "fields"),
    [
        ("ray", "internal", NodeLayout(2, 0, 2), []),
        ("ray", "hybrid", NodeLayout(2, 0, 2), ["multinode_backend"]),
        ("ray", "external", NodeLayout(2, 0, 2), ["multinode_backend"]),
        ("mp", "hybrid", NodeLayout(2, 0, 2), []),  # one API server per node: mp followers
    ],
)  # fmt: skip
def test_ray_serves_one_api_so_per_node_balancing_is_refused(
    backend: str, balancing: str, layout: NodeLayout, fields: list[str]
) -> None:
    assert [f for f, _, _ in backend_problems(backend, [{}], layout, balancing=balancing)] == fields


def test_render_refuses_a_backend_flag_set_by_the_service() -> None:
    with pytest.raises(SpecError, match=r"extra_args\.data_parallel_backend = 'ray'"):
        _spec("candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1",
              "+service.extra_args.data_parallel_backend=ray")  # fmt: skip


#: `ray status -v` of Ray 2.60.0 on this machine, two nodes started with gauntlet's resources (captured
#: output, node ids shortened).
REAL_STATUS = """\
======== Autoscaler status: 2026-12-07 02:05:10.216781 ========
Node status
---------------------------------------------------------------
Active:
 1 node_c5819b89f877eeb8315cb3a9d98c17fcd8b161fe7057fc0bc24777ed
 1 node_aa5abb59a4310e235e47387af3883b4520c10b9c6374cb3a138dc624
Pending:
 (no pending nodes)

Node: c5819b89f877eeb8315cb3a9d98c17fcd8b161fe7057fc0bc24777ed (node_c5819b89f877eeb8315cb3a9...)
 Usage:
  0.0/1.0 CPU
  0.0/1.0 gauntlet_node_0
  0B/15.80GiB memory

Node: aa5abb59a4310e235e47387af3883b4520c10b9c6374cb3a138dc624 (node_aa5abb59a4310e235e47387af...)
 Usage:
  0.0/1.0 CPU
  0.0/1.0 gauntlet_node_1
  0B/15.68GiB memory
"""


@pytest.mark.parametrize(
    ("status", "joined"),
    [
        (REAL_STATUS, {0, 1}),
        (REAL_STATUS.split("Node: aa5a", maxsplit=1)[0], {0}),
        ("Active:\n 1 node_c5819b\n", set()),  # without -v: no resources, no node known
        ("  0.0/1.0 gauntlet_node_12\n  0.0/1.0 not_gauntlet_node_3x\n", {12}),
    ],
)
def test_joined_nodes_reads_each_nodes_resource(status: str, joined: set[int]) -> None:
    assert joined_nodes(status) == joined


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _status_at(clock: FakeClock, plan: Sequence[tuple[float, str | None]]) -> Callable[[], str | None]:
    """``ray status``'s answer at each time: the last entry whose time has come."""

    def status() -> str | None:
        answer: str | None = None
        for at, text in plan:
            if clock.t >= at:
                answer = text
        return answer

    return status


ONE = "  0.0/1.0 gauntlet_node_0\n"
TWO = ONE + "  0.0/1.0 gauntlet_node_1\n"


@pytest.mark.parametrize(
    ("plan", "head_exits_at", "expect", "progress"),
    [
        # node 1 joins after 7 s: done, with one progress line on the way
        ([(0.0, None), (2.0, ONE), (7.0, TWO)], None, None,
         ["1 of 2 nodes joined", "waiting for node 1 (n2)"]),
        # node 1 never joins: named, with the bound and who did join
        ([(1.0, ONE)], None, "node 1 (n2) never joined the Ray cluster at 10.0.0.1:29550 within 12 s "
         "(joined: node 0 (n1))", ["1 of 2 nodes joined"]),
        # Ray never answers
        ([], None, "node 0 (n1), node 1 (n2) never joined the Ray cluster at 10.0.0.1:29550 within 12 s "
         "(joined: none; ray status did not answer)", ["0 of 2 nodes joined"]),
        # Ray's head dies while waiting
        ([(1.0, ONE)], 3.0, "Ray's head (ray start --head) exited with code 1 before every node joined", []),
    ],
)  # fmt: skip
def test_the_head_waits_for_every_node_bounded_with_progress(
    plan: list[tuple[float, str | None]], head_exits_at: float | None, expect: str | None, progress: list[str]
) -> None:
    clock, said = FakeClock(), list[str]()
    why = wait_for_nodes(
        nodes=2,
        cluster="10.0.0.1:29550",
        timeout_s=12.0,
        status=_status_at(clock, plan),
        head_exit=lambda: 1 if head_exits_at is not None and clock.t >= head_exits_at else None,
        clock=clock,
        sleep=clock.sleep,
        say=said.append,
        names=["n1", "n2"],
    )
    if expect is None:
        assert why is None and said[-1].startswith("all 2 nodes joined the Ray cluster at 10.0.0.1:29550")
    else:
        assert why is not None and why.startswith(expect)
    for words in progress:
        assert any(words in line for line in said), said
    assert clock.t <= 13.0  # bounded: never past the timeout and one poll


@pytest.mark.parametrize(
    ("argv", "ok"),
    [
        (["--nodes", "2", "--address", "a", "--ray-port", "1", "--join-timeout-s", "5", "--", "ray", "start",
          "--", "vllm", "serve"], True),
        (["--nodes", "2", "--address", "a", "--ray-port", "1", "--", "ray", "--", "vllm"], False),
        (["--nodes", "2", "--address", "a", "--ray-port", "1", "--join-timeout-s", "5", "--", "ray"], False),
        (["--nodes", "2", "--address", "a", "--ray-port", "1", "--join-timeout-s", "5", "--", "--", "v"],
         False),
    ],
)  # fmt: skip
def test_the_head_programs_command_line(argv: list[str], ok: bool) -> None:
    if ok:
        args = parse(argv)
        assert (args.nodes, args.cluster, args.ray_head, args.serve) == (
            2,
            "a:1",
            ["ray", "start"],
            ["vllm", "serve"],
        )
    else:
        with pytest.raises(ValueError):
            parse(argv)


def _ray_spec() -> LaunchSpec:
    return _spec("candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1",
                 "candidate.multinode_backend=ray")  # fmt: skip


@pytest.mark.parametrize(
    ("nodes", "failing", "ran", "notes"),
    [
        # a SLURM job: a `ray stop` step on each node, node 0 too
        ([(0, "n1", "61"), (1, "n2", "61")], set(), ["n1", "n2"],
         ["node 0 (n1): ray stop: Stopped all 3 Ray processes.",
          "node 1 (n2): ray stop: Stopped all 3 Ray processes."]),
        # one node's step fails: named, and the other node still gets its stop
        ([(0, "n1", "61"), (1, "n2", "61")], {"n1"}, ["n1", "n2"],
         ["node 0 (n1): ray stop failed: RuntimeError: exit 1: srun: error: n1 down",
          "node 1 (n2): ray stop: Stopped all 3 Ray processes."]),
        # on this machine (no job): nothing run, the per-node check does it
        ([(0, "localhost", ""), (1, "localhost", "")], set(), [], []),
    ],
)  # fmt: skip
def test_teardown_runs_ray_stop_on_every_slurm_node(
    nodes: list[tuple[int, str, str]], failing: set[str], ran: list[str], notes: list[str]
) -> None:
    calls: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        node = next(a for a in argv if a.startswith("--nodelist=")).removeprefix("--nodelist=")
        if node in failing:
            raise RuntimeError(f"exit 1: srun: error: {node} down")
        return "Stopped all 3 Ray processes.\n"

    assert stop_ray(_ray_spec(), nodes, run) == notes
    assert [c[4].removeprefix("--nodelist=") for c in calls] == ran
    for k, call in enumerate(calls):
        assert call[:4] == ["srun", "--jobid=61", "--nodes=1", "--ntasks=1"] and "--overlap" in call
        assert call[-5:] == [
            sys.executable,
            *RAY[1:],
            "stop",
            "--force",
        ]  # `python` resolved, as a follower's
        assert f"--job-name=gauntlet-raystop{k}-8000" in call


@pytest.mark.parametrize(
    ("cmdline", "found"),
    [
        (["/venv/bin/python", *RAY[1:], "start", "--address", "10.0.0.1:29550", "--resources",
          '{"gauntlet_node_1":1}', "--disable-usage-stats", "--block"], True),
        (["/venv/bin/python", *RAY[1:], "start", "--address", "10.0.0.1:29551", "--resources",
          '{"gauntlet_node_1":1}', "--disable-usage-stats", "--block"], False),
        (["/venv/bin/python", *RAY[1:], "start", "--address", "10.0.0.1:29550", "--resources",
          '{"gauntlet_node_2":1}', "--disable-usage-stats", "--block"], False),
    ],
)  # fmt: skip
def test_a_recorded_ray_node_is_found_by_its_command_line(cmdline: list[str], found: bool) -> None:
    follower = _ray_spec().followers[0]
    assert runs(tuple(cmdline), follower) is found
    assert resolve_head(follower, "10.0.0.1")[5] == "10.0.0.1:29550"


@pytest.mark.parametrize(("resolved", "found"), [(True, True), (False, False)])
def test_a_ray_head_is_found_behind_its_wrapper(resolved: bool, found: bool) -> None:
    spec = _ray_spec()
    launched = list(resolve_head(launch_argv(spec), "10.0.0.1"))
    cmdline = ["/venv/bin/python", *launched[1:]]
    if not resolved:  # another server's head: a different port
        cmdline[cmdline.index("--port", cmdline.index("launch.sim")) + 1] = "9999"
    assert runs(tuple(cmdline), spec.argv) is found


@pytest.mark.parametrize(
    ("environ", "head_address", "follower_prefix", "stopped"),
    [
        # inside a 2-node SLURM job: the head's Ray here (n1), the other node's `ray start` a step on n2,
        # and teardown's `ray stop` on both nodes as steps of the job
        ({**JOB, "SLURMD_NODENAME": "n1"}, "10.0.0.1",
         ["srun", "--jobid=42", "--nodes=1", "--ntasks=1", "--nodelist=n2", "--overlap"],
         [(0, "n1", "42"), (1, "n2", "42")]),
        # on this machine (a simulated host outside SLURM): both local, no job to run `ray stop` in
        ({}, "127.0.0.1", [sys.executable, "-m", "launch.sim.ray"],
         [(0, "localhost", ""), (1, "localhost", "")]),
    ],
)  # fmt: skip
def test_the_job_starts_rays_head_here_and_a_ray_step_on_each_other_node(
    tmp_path: Path,
    environ: dict[str, str],
    head_address: str,
    follower_prefix: list[str],
    stopped: list[tuple[int, str, str]],
) -> None:
    system = FakeSystem(Scenario(ready_after=0.0))
    asked: list[list[tuple[int, str, str]]] = []
    nodes = slurm_nodes(environ, FakeSlurm()) if environ else LocalNodes()

    def ray_stop(spec: LaunchSpec, stop_nodes: Sequence[tuple[int, str, str]]) -> list[str]:
        asked.append(list(stop_nodes))
        return []

    sup, _, _ = make(system=system, nodes=nodes, ray_stop=ray_stop)
    ray = make_spec(followers=(tuple(ray_start(RAY, 1, 29550)),))
    server = sup.start(ray, tmp_path / "server.log")
    head, follower = system.spawned[0], system.spawned[1]
    head_argv = list(head["argv"])  # type: ignore[call-overload]
    assert head_argv[:5] == [sys.executable, "-m", "launch.ray_head", "--nodes", "2"]
    assert head_argv[head_argv.index("--head") + 2] == head_address  # --node-ip-address: the head's
    assert head_argv[-len(ray.argv) - 1 :] == ["--", *ray.argv]  # then the spec's own vllm serve
    assert head["env"]["GAUNTLET_NODE_NAMES"] in ("n1,n2", "localhost,localhost")  # type: ignore[index]
    follower_argv = list(follower["argv"])  # type: ignore[call-overload]
    assert follower_argv[: len(follower_prefix)] == follower_prefix
    assert follower_argv[follower_argv.index("--address") + 1] == f"{head_address}:29550"
    sup.teardown(server)
    assert asked == [stopped]


@pytest.mark.parametrize(("backend", "launched"), [("ray", 1), ("mp", 0)])
def test_plan_shows_how_a_ray_head_is_launched(backend: str, launched: int) -> None:
    tp16 = ["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1"]
    text = format_plan(
        plan(["host=sim_2x8", "candidate=tp4_dp2", *tp16, f"candidate.multinode_backend={backend}"])
    )
    assert text.count("    launched as: python -m launch.ray_head --nodes 2") == launched
    assert text.count("launch.sim.ray start --head") == launched  # node 0's Ray, shown once
    assert text.count("--headless") == (1 - launched)


@pytest.mark.parametrize(("startup_timeout_s", "bound"), [(1800.0, "120"), (60.0, "30"), (240.0, "120")])
def test_the_join_bound_is_120_s_or_half_the_startup_timeout(startup_timeout_s: float, bound: str) -> None:
    spec = replace(_ray_spec(), startup_timeout_s=startup_timeout_s)
    launched = list(launch_argv(spec))
    assert launched[launched.index("--join-timeout-s") + 1] == bound


@pytest.mark.parametrize(
    ("ray_entrypoint", "backend", "problem"),
    [
        ("[ray]", "ray", "tp16: program: multinode_backend ray: the Ray CLI ray (host.ray_entrypoint) cannot "
         "be started here: the server program 'ray' is not on PATH; install Ray where vLLM is"),
        ("[python,-m,launch.sim.ray]", "ray", None),  # the simulator's
        ("[ray]", "mp", None),  # no Ray candidate: the Ray CLI is not asked for
    ],
)  # fmt: skip
def test_doctor_refuses_a_ray_candidate_whose_ray_cli_is_missing(
    ray_entrypoint: str, backend: str, problem: str | None
) -> None:
    cfg, _ = load(["host=sim_2x8", f"host.ray_entrypoint={ray_entrypoint}"])
    shape = ["candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1"]
    overrides = ["host=sim_2x8", "candidate=tp4_dp2", "candidate.name=tp16", *shape]
    cand = load([*overrides, f"candidate.multinode_backend={backend}"])[0].candidate

    def resolve(argv: Sequence[str]) -> list[str]:
        if argv[0] == "ray":
            raise LaunchError("the server program 'ray' is not on PATH", hint="install it")
        return [sys.executable, *argv[1:]]

    found = [p.line() for p in diagnose(cfg, [cand], doctor_probes(resolve=resolve)).problems]
    assert found == ([problem] if problem else [])


@pytest.mark.parametrize(
    ("extra", "drain"),
    [
        (["candidate.multinode_backend=ray"], "0"),  # Ray's SIGTERM drain off on every node
        (["candidate.multinode_backend=mp"], None),  # not a Ray spec: nothing added
        (
            ["candidate.multinode_backend=ray", "+candidate.env.RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S='5'"],
            "5",
        ),
    ],
)
def test_a_ray_spec_turns_rays_sigterm_drain_off(extra: list[str], drain: str | None) -> None:
    spec = _spec("candidate.tensor_parallel_size=16", "candidate.data_parallel_size=1", *extra)
    assert spec.env.get("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S") == drain
