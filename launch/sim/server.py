"""The simulator's HTTP server: vLLM's OpenAI-compatible surface over asyncio streams.

Pipeline position: the process the launcher starts for the ``sim`` host (``python -m launch.sim``). It
checks the configuration as vLLM would at startup (refusals, memory), then serves ``/health``,
``/v1/models``, ``/version``, ``/tokenize``, ``/metrics``, ``/v1/chat/completions`` and the simulator-only
``/sim/gpu_memory`` and ``/sim/energy``; tokens come from the engine model (:mod:`launch.sim.engine`)
through the runtime's virtual clock. Every log line starts with ``[sim]``; the ``server`` header, the
model's ``owned_by`` and ``/version`` say that it is simulated.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import replace
from typing import Any, TextIO

from launch.sim.answers import labelled_reply
from launch.sim.cli import SimArgs, parse_args
from launch.sim.engine import Host
from launch.sim.metrics import render_metrics
from launch.sim.model import (
    EngineConfig,
    MemoryPlan,
    StartupError,
    chat_text,
    check_startup,
    message_text,
    prompt_digest,
)
from launch.sim.nodes import Followers, NodeRole, follow, join, multinode_profile, node_role
from launch.sim.profile import Profile, ProfileError, load_profile
from launch.sim.ray import RayNodes, ray_role
from launch.sim.requests import BadRequest, error_body, parse_chat, parse_json, tokenize
from launch.sim.runtime import Runtime
from launch.sim.stream import ChatStream

SERVER_HEADER = "gauntlet-sim (simulated vLLM)"
LOG_PREFIX = "[sim]"
#: Paths vLLM's API key protects (vllm/entrypoints/serve/middleware/authenticate.py); /health, /metrics and
#: /tokenize stay open.
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")
_STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def log(level: str, source: str, message: str, stream: TextIO | None = None) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    out = stream or sys.stdout
    out.write(f"{LOG_PREFIX} {level} {stamp} [{source}] {message}\n")
    out.flush()


class SimServer:
    """One simulated vLLM server process."""

    def __init__(
        self,
        args: SimArgs,
        profile: Profile,
        cfg: EngineConfig,
        memory: MemoryPlan,
        *,
        clock: Any = time.monotonic,
    ) -> None:
        self.args = args
        self.profile = profile
        self.cfg = cfg
        self.memory = memory
        self.clock = clock
        self.served_model_name = args.served_model_name
        self.model_names = (args.served_model_name, args.model)  # the names a request may use
        self.host = Host(profile, cfg, memory)
        self.runtime = Runtime(self.host, args.time_scale, clock=clock, coalesce_s=args.coalesce_s)
        self.finished_requests = 0
        self.first_rank = 0  # the first DP rank this server serves (a hybrid or external node's)
        self.dead = False
        self.health_hangs_at: float | None = args.hang_health_after_s
        #: like vLLM: --api-key, else VLLM_API_KEY; paths under GUARDED_PREFIX then need the Bearer token
        self.api_key = args.api_key or os.environ.get("VLLM_API_KEY") or None
        self.error_rng = random.Random(f"sim-errors:{cfg.seed}")
        self.transports: set[asyncio.WriteTransport] = set()
        self.exit_code: asyncio.Future[int] | None = None
        #: a byte of the next request read while watching for the client going away, per connection
        self._pushback: dict[Any, bytes] = {}

    # ---- lifecycle -----------------------------------------------------------------------------------
    def crash(self, reason: str) -> None:
        """The engine dies: vLLM's log lines, /health 503, open streams cut, exit 1 shortly after."""
        if self.dead:
            return
        self.dead = True
        log("ERROR", "core.py", f"EngineCore encountered a fatal error ({reason}).")
        log(
            "ERROR",
            "async_llm.py",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
        )
        self.runtime.stop()
        for transport in list(self.transports):
            transport.close()  # what was written goes out; open streams end without [DONE]
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, self._exit, 1)

    def engine_stopped(self, task: asyncio.Task[None]) -> None:
        """The engine loop must never end on its own: an exception in it is a simulator bug, made loud."""
        if task.cancelled() or self.dead:
            return
        exc = task.exception()
        if exc is not None:
            for line in traceback.format_exception(exc):
                for part in line.rstrip().splitlines():
                    log("ERROR", "core.py", part, sys.stderr)
        self.crash(f"simulator engine loop stopped: {exc!r}")

    def _exit(self, code: int) -> None:
        if self.exit_code is not None and not self.exit_code.done():
            self.exit_code.set_result(code)

    def _request_finished(self) -> None:
        self.finished_requests += 1
        limit = self.args.crash_after_requests
        if limit is not None and self.finished_requests >= limit:
            self.crash(f"--sim-crash-after-requests {limit} reached")

    # ---- HTTP ----------------------------------------------------------------------------------------
    def _headers(self, status: int, content_type: str, length: int | None) -> bytes:
        lines = [
            f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'OK')}",
            f"server: {SERVER_HEADER}",
            f"content-type: {content_type}",
            "x-simulated: true",
        ]
        if length is None:
            lines.append("transfer-encoding: chunked")
        else:
            lines.append(f"content-length: {length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def _send(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str = "application/json"
    ) -> None:
        writer.write(self._headers(status, content_type, len(body)) + body)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = writer.transport
        self.transports.add(transport)
        try:
            while not self.dead:
                try:
                    head = self._pushback.pop(transport, b"") + await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                try:
                    method, target, _version = lines[0].split(" ", 2)
                except ValueError:
                    return
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        key, value = line.split(":", 1)
                        headers[key.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                try:
                    body = await reader.readexactly(length) if length else b""
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                path = target.split("?", 1)[0]
                if not self.authorized(method, path, headers):
                    self._send(writer, 401, json.dumps({"error": "Unauthorized"}).encode())
                    await writer.drain()
                    continue
                keep = await self.route(method, path, body, reader, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
                await writer.drain()
        except ConnectionError:
            return
        finally:
            self._pushback.pop(transport, None)
            self.transports.discard(transport)
            with contextlib.suppress(Exception):
                writer.close()

    def authorized(self, method: str, path: str, headers: dict[str, str]) -> bool:
        """vLLM's AuthenticationMiddleware: guarded paths need ``Authorization: Bearer <key>``."""
        if self.api_key is None or method == "OPTIONS" or not path.startswith(GUARDED_PREFIX):
            return True
        scheme, _, token = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), self.api_key.encode())

    async def route(
        self, method: str, path: str, body: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False closes the connection."""
        if path == "/v1/chat/completions" and method == "POST":
            return await self.chat(body, reader, writer)
        if path == "/health" and method == "GET":
            if self.dead:
                self._send(writer, 503, b"")
                return True
            if self.health_hangs_at is not None and self.runtime.vnow() >= self.health_hangs_at:
                await reader.read()  # never answers; returns when the client goes away
                return False
            self._send(writer, 200, b"")
            return True
        if method == "GET" and path in ("/ping", "/load"):
            self._send(writer, 200, b"{}" if path == "/load" else b"")
            return True
        if path == "/v1/models" and method == "GET":
            self._send(writer, 200, json.dumps(self.models()).encode())
            return True
        if path == "/version" and method == "GET":
            version = {
                "version": f"{self.profile.vllm_version}+sim",
                "simulated": True,
                "profile": self.profile.name,
            }
            self._send(writer, 200, json.dumps(version).encode())
            return True
        if path == "/metrics" and method == "GET":
            text = render_metrics(self.host, self.served_model_name, self.memory, self.first_rank).encode()
            self._send(writer, 200, text, "text/plain; version=0.0.4; charset=utf-8")
            return True
        if path == "/sim/gpu_memory" and method == "GET":
            self._send(writer, 200, json.dumps(self.gpu_memory()).encode())
            return True
        if path == "/sim/energy" and method == "GET":
            self._send(writer, 200, json.dumps(self.energy()).encode())
            return True
        if path == "/tokenize" and method == "POST":
            try:
                result = tokenize(body, self.model_names, self.cfg.max_model_len)
            except BadRequest as exc:
                self._send(writer, exc.status, error_body(exc.status, str(exc), exc.kind, exc.param))
                return True
            self._send(writer, 200, json.dumps(result).encode())
            return True
        known = {
            "/v1/chat/completions",
            "/health",
            "/v1/models",
            "/version",
            "/metrics",
            "/tokenize",
            "/sim/gpu_memory",
            "/sim/energy",
        }
        if path in known:
            self._send(writer, 405, error_body(405, "Method Not Allowed", "MethodNotAllowed"))
        else:
            self._send(writer, 404, json.dumps({"detail": "Not Found"}).encode())
        return True

    def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.served_model_name,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "vllm (simulated by gauntlet)",
                    "root": f"{self.args.model} (simulated)",
                    "parent": None,
                    "max_model_len": self.cfg.max_model_len,
                    "simulated": True,
                    "permission": [],
                }
            ],
        }

    def gpu_memory(self) -> list[dict[str, Any]]:
        """Per-GPU memory after warmup (what NVML would say on a real host)."""
        cfg = self.cfg  # each replica's TP x PP workers hold a GPU each
        used_gpus = cfg.tensor_parallel_size * cfg.pipeline_parallel_size * cfg.data_parallel_size
        out = []
        for i in range(self.profile.gpu.count):
            total = self.memory.total_gib
            if i < used_gpus:
                wobble = 0.03 * (((i * 7 + self.cfg.seed) % 5) - 2)  # allocator slack differs a little
                free = max(0.0, self.memory.free_gib + wobble)
            else:
                free = total - self.profile.memory.cuda_context_gib
            out.append(
                {
                    "index": i,
                    "name": f"{self.profile.gpu.name} (simulated)",
                    "total_gib": round(total, 3),
                    "used_gib": round(total - free, 3),
                    "free_gib": round(free, 3),
                }
            )
        return out

    def energy(self) -> dict[str, Any]:
        """Each GPU's simulated energy counter now (what NVML's total-energy counter would say; the stated
        power model of :meth:`launch.sim.engine.Host.energy_mj`) and the virtual clock it was read at."""
        now = self.runtime.vnow()
        gpu = self.profile.gpu
        return {
            "virtual_s": now,
            "gpus_mj": self.host.energy_mj(now),
            "model": f"simulated: {gpu.idle_w:g} W idle + busy fraction x "
            f"({gpu.tdp_w:g} - {gpu.idle_w:g}) W per GPU",
        }

    async def chat(self, body: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            params = parse_chat(parse_json(body), self.model_names, self.cfg.max_model_len)
        except BadRequest as exc:
            self._send(writer, exc.status, error_body(exc.status, str(exc), exc.kind, exc.param))
            return True
        if self.args.error_rate and self.error_rng.random() < self.args.error_rate:
            message = "Simulated internal server error (--sim-error-rate)."
            self._send(writer, 500, error_body(500, message, "InternalServerError"))
            return True
        stream = ChatStream(
            self.runtime,
            writer.transport if params["stream"] else None,
            model_name=self.served_model_name,
            stall_after=self.args.stall_after_chunks,
            stream=params["stream"],
            include_usage=params["include_usage"],
            prompt_tokens=params["prompt_tokens"],
        )
        reply = labelled_reply(
            message_text(params["messages"][-1].get("content")),
            seed=self.cfg.seed,
            draft_sample_method=self.cfg.draft_sample_method,
            reasoning=self.host.profile.reasoning.normal,
            max_tokens=params["max_tokens"],
        )
        if reply is not None:
            stream.answer = list(reply.pieces)
        req = self.host.new_request(
            stream.rid,
            prompt_tokens=params["prompt_tokens"],
            digest=prompt_digest(chat_text(params["messages"])),
            max_tokens=params["max_tokens"],
            min_tokens=params["min_tokens"],
            ignore_eos=params["ignore_eos"],
            request_seed=params["seed"],
            arrival=self.runtime.vnow(),
            sink=stream,
            plan=reply.plan if reply is not None else None,
        )
        if params["stream"]:
            writer.write(self._headers(200, "text/event-stream; charset=utf-8", None))
        self.runtime.submit(req)
        gone = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait((stream.done, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not gone.done():
                gone.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await gone  # the reader is free again only once the watcher has stopped
            if not gone.cancelled() and gone.exception() is None and gone.result():
                self._pushback[writer.transport] = gone.result()  # the client's next request began
        if not stream.done.done():
            self.runtime.abort(req)  # the client went away
            return False
        if not params["stream"]:
            self._send(writer, 200, json.dumps(stream.response()).encode())
        self._request_finished()
        return not self.dead

    # ---- periodic log --------------------------------------------------------------------------------
    async def log_stats(self, every_s: float = 10.0) -> None:
        last = [(r.stats.prompt_tokens, r.stats.generation_tokens) for r in self.host.replicas]
        while not self.dead:
            await asyncio.sleep(every_s)
            for i, replica in enumerate(self.host.replicas):
                prompt, gen = replica.stats.prompt_tokens, replica.stats.generation_tokens
                if (prompt, gen) == last[i] and not replica.running and not replica.waiting:
                    continue
                sim_s = every_s * self.args.time_scale
                log(
                    "INFO",
                    "loggers.py",
                    f"Engine {i:03d}: Avg prompt throughput: {(prompt - last[i][0]) / sim_s:.1f} tokens/s, "
                    f"Avg generation throughput: {(gen - last[i][1]) / sim_s:.1f} tokens/s, "
                    f"Running: {len(replica.running)} reqs, Waiting: {len(replica.waiting)} reqs, "
                    f"GPU KV cache usage: {replica.kv_usage() * 100:.1f}%, Prefix cache hit rate: 0.0%",
                )
                last[i] = (prompt, gen)


def _startup_failure(exc: StartupError) -> int:
    pid = os.getpid()
    for line in exc.log:
        log("ERROR", "core.py", f"(EngineCore_DP0 pid={pid}) {line}")
    sys.stdout.flush()
    sys.stderr.write(
        f"{LOG_PREFIX} RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {'EngineCore_DP0': 1}\n"
    )
    sys.stderr.flush()
    return 1


async def _start_up(
    args: SimArgs, role: NodeRole | None = None
) -> tuple[Profile, EngineConfig, MemoryPlan] | int:
    """vLLM's startup as its log shows it: the profile, the checks, the warmup; an exit code on refusal.
    The head of a multi-node launch simulates every node's ranks (launch.sim.nodes)."""
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        sys.stderr.write(f"python -m launch.sim: error: {exc}\n")
        return 2
    if role is not None:
        if role.local_gpus > profile.gpu.count:
            gpus = f"{role.local_gpus} GPUs on this node, which has {profile.gpu.count}"
            return _startup_failure(StartupError("init-failed", [f"ValueError: the local ranks need {gpus}"]))
        profile = multinode_profile(profile, role)
    cfg = replace(args.engine, max_model_len=args.max_model_len or profile.model.max_model_len)
    if role is not None and role.serves:  # a hybrid or external node simulates only its own ranks
        cfg = replace(cfg, data_parallel_size=role.local_ranks)
    log(
        "INFO",
        "api_server.py",
        f"vLLM API server version {profile.vllm_version} (SIMULATED by gauntlet, profile {profile.name})",
    )
    shown = {k: v for k, v in args.raw.items() if v not in (None, False) and k != "model_tag"}
    log("INFO", "utils.py", f"non-default args: {shown}")
    log(
        "INFO",
        "config.py",
        f"Simulated host: {profile.gpu.count} x {profile.gpu.name}; time scale {args.time_scale}x",
    )
    await asyncio.sleep(min(args.startup_s, 0.3))
    try:
        memory = check_startup(profile, cfg)
    except StartupError as exc:
        return _startup_failure(exc)
    remaining = max(0.0, args.startup_s - 0.3) + args.slow_start_s
    log("INFO", "gpu_model_runner.py", f"Model loading took {memory.weights_gib:.2f} GiB per GPU (simulated)")
    while remaining > 0:
        step = min(remaining, 1.0)
        await asyncio.sleep(step)
        remaining -= step
        if remaining > 0:
            log("INFO", "gpu_worker.py", "Still starting (simulated warmup)...")
    log("INFO", "gpu_worker.py", f"Available KV cache memory: {memory.kv_gib:.2f} GiB")
    log("INFO", "kv_cache_utils.py", f"GPU KV cache size: {memory.kv_tokens:,} tokens")
    log(
        "INFO",
        "kv_cache_utils.py",
        f"Maximum concurrency for {cfg.max_model_len:,} tokens per request: "
        f"{memory.kv_tokens / cfg.max_model_len:.2f}x",
    )
    return profile, cfg, memory


async def serve(args: SimArgs, role: NodeRole | None = None, ray: str | None = None) -> int:
    """Start up (or fail as vLLM would), serve until SIGTERM/SIGINT or a simulated crash; the head of a
    multi-node launch serves only once every follower joined, and dies when one goes away."""
    started = await _start_up(args, role)
    if isinstance(started, int):
        return started
    server = SimServer(args, *started)
    loop = asyncio.get_running_loop()
    server.exit_code = loop.create_future()
    if role is not None and role.serves:
        server.first_rank = role.first_rank
    if role is not None and role.serves and role.node_rank > 0:  # join the head, then serve this node's API
        link = await join(role, log, exit_after_s=args.raw.get("sim_follower_exit_s"))
        if isinstance(link, int):
            return link
        log("INFO", "launcher.py", f"node {role.node_rank} joined; serving ranks {role.first_rank}.."
            f"{role.first_rank + role.local_ranks - 1}")  # fmt: skip
        head_gone = asyncio.ensure_future(link[0].read())
        head_gone.add_done_callback(lambda _gone: _head_gone(server))
    head = role is not None and role.node_rank == 0
    followers = (RayNodes(role, ray, log) if ray else Followers(role, log)) if role and head else None
    if followers is not None:
        try:
            await followers.open()
        except OSError as exc:
            log("ERROR", "coordinator.py", f"cannot open the RPC port {role.port if role else ''}: {exc}")
            return 1
        why = await followers.wait_all()
        if why is not None or followers.lost is None:
            log("ERROR", "coordinator.py", f"RuntimeError: {why}", sys.stderr)
            followers.close()
            return 1
        followers.lost.add_done_callback(lambda lost: server.crash(lost.result()))
        if isinstance(followers, Followers):  # a silent node stalls the engine (launch.sim.nodes)
            followers.on_stall = server.runtime.set_held
    try:
        listener = await asyncio.start_server(
            server.handle, args.host, args.port, limit=1 << 20, backlog=1024
        )
    except OSError as exc:
        log(
            "ERROR",
            "api_server.py",
            f"[Errno {exc.errno}] error while attempting to bind on address "
            f"({args.host!r}, {args.port}): {exc.strerror}",
            sys.stderr,
        )
        return 1
    server.runtime.t0 = server.clock()
    engine_task = asyncio.ensure_future(server.runtime.run())
    engine_task.add_done_callback(server.engine_stopped)
    stats_task = asyncio.ensure_future(server.log_stats())
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server._exit, 0)
    if args.crash_at_s is not None:
        loop.call_later(
            args.crash_at_s / args.time_scale, server.crash, f"--sim-crash-at-s {args.crash_at_s}"
        )
    port = listener.sockets[0].getsockname()[1]
    log("INFO", "api_server.py", f"Starting vLLM API server 0 on http://{args.host}:{port}")
    log("INFO", "launcher.py", "Application startup complete.")
    code = await server.exit_code
    log(
        "INFO",
        "launcher.py",
        "Shutting down FastAPI HTTP server." if code == 0 else "Engine died; shutting down.",
    )
    listener.close()
    for transport in list(server.transports):
        transport.abort()
    server.runtime.stop()
    if followers is not None:
        followers.close()
    for task in (engine_task, stats_task):
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.gather(engine_task, stats_task, return_exceptions=True)
    return code


def _head_gone(server: SimServer) -> None:
    """A serving node's head went away: the node goes too, as a headless follower does."""
    if not server.dead and server.exit_code is not None and not server.exit_code.done():
        log("INFO", "launcher.py", "the head went away; exiting")
        server._exit(0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    eng = args.engine
    shape = (eng.tensor_parallel_size, eng.data_parallel_size, eng.pipeline_parallel_size)
    role, ray = ray_role(args.raw, *shape, os.environ)  # a Ray backend: the nodes are the cluster's
    if ray is None and role is None:
        role = node_role(args.raw, *shape)
    if isinstance(role, str):
        sys.stderr.write(f"python -m launch.sim: error: {role}\n")
        return 2
    if role is not None and role.headless:
        exit_after = args.raw.get("sim_follower_exit_s")
        return asyncio.run(follow(role, log, exit_after_s=exit_after))
    return asyncio.run(serve(args, role, ray))
