"""Several API servers, one run (issue 45 item 3c): the load runner sends request i to server i mod n, in
its own loop and through worker processes' routing alike, sums every server's /metrics (engines per server),
refuses a sum that would count an engine twice or miss a server; readiness asks every node's server; the
sweep hands the runner the servers of a hybrid or external candidate only."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from contracts.files import read_jsonl
from contracts.results import RequestRecord
from launch.api_servers import server_urls
from launch.tracking import Server
from load.metrics import parse_scrape
from load.spread import SpreadClient, merge_expositions, server_of
from tests.unit.test_load_runner import FakeServer, run
from tests.unit.test_multinode_journal import SPEC
from tests.unit.test_ready_engines import assert_ready_once

pytestmark = pytest.mark.unit

HYBRID = ("--data-parallel-hybrid-lb", "--data-parallel-size-local", "2")


class Servers:
    """A FakeServer per host (``fake``, the head's, then ``s1``, ``s2``, ...), each reporting its own
    engines (or the ones given)."""

    def __init__(
        self, n: int, engines: list[str] | None = None, metrics_status: dict[int, int] | None = None
    ) -> None:
        self.fakes = [FakeServer() for _ in range(n)]
        self.engines = engines or [str(k) for k in range(n)]
        self.metrics_status = metrics_status or {}
        self.chats: list[tuple[int, int]] = []  # (server, request index)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        k = 0 if request.url.host == "fake" else int(request.url.host.removeprefix("s"))  # the head: fake
        if request.url.path == "/metrics" and k in self.metrics_status:
            return httpx.Response(self.metrics_status[k])
        response = self.fakes[k](request)
        if request.url.path == "/metrics":
            text = response.text.replace('engine="0"', f'engine="{self.engines[k]}"')
            return httpx.Response(200, text=text)
        if request.url.path == "/v1/chat/completions":
            self.chats.append((k, int(json.loads(request.content)["cache_salt"].rsplit("-", 1)[1])))
        return response


@pytest.mark.parametrize("n", [2, 3])
def test_requests_go_to_server_index_mod_n_and_metrics_are_summed(tmp_path: Path, n: int) -> None:
    servers = Servers(n)
    urls = ["http://fake", *(f"http://s{k}" for k in range(1, n))]
    summary = run(tmp_path, servers, servers=urls)
    assert sorted(servers.chats, key=lambda c: c[1]) == [(i % n, i) for i in range(14)]  # warmup first
    answered = dict((index, k) for k, index in servers.chats)
    records = read_jsonl(tmp_path / "records.jsonl", RequestRecord)
    assert [server_of(r.index, urls) for r in records] == [urls[answered[r.index]] for r in records]
    assert summary.server is not None and summary.completed == 12
    generated = sum(fake.generation_total for fake in servers.fakes)
    assert summary.server.generation_tokens == generated - 2 * 32  # the measured window: warmup excluded
    assert not summary.server.token_mismatch
    assert any(f"over {n} API servers" in note for note in summary.notes)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["servers"] == urls and metrics["errors"] == []


@pytest.mark.parametrize(
    ("engines", "status", "said"),
    [
        (["0", "0"], {}, "http://fake and http://s1 both report engine 0"),
        (["0", "1"], {1: 503}, "http://s1: HTTP 503"),
    ],
)
def test_a_scrape_that_cannot_be_summed_is_an_error_never_a_wrong_sum(
    tmp_path: Path, engines: list[str], status: dict[int, int], said: str
) -> None:
    summary = run(tmp_path, Servers(2, engines, status), servers=["http://fake", "http://s1"])
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["scrapes"] == [] and all(said in error for error in metrics["errors"])
    assert summary.server is None and any(said in note for note in summary.notes)


def test_one_server_runs_as_before(tmp_path: Path) -> None:
    summary = run(tmp_path, FakeServer())
    assert json.loads((tmp_path / "metrics.json").read_text())["servers"] == []
    assert not any("API servers" in note for note in summary.notes)


def _exposition(*samples: tuple[str, str, float]) -> str:
    return "".join(f'{name}{{engine="{engine}",model_name="m"}} {value}\n' for name, engine, value in samples)


@pytest.mark.parametrize(
    "split",
    [
        [[("vllm:generation_tokens_total", "0", 5.0)], [("vllm:generation_tokens_total", "1", 7.0)]],
        [[("vllm:num_requests_waiting", "0", 1.0), ("vllm:kv_cache_usage_perc", "0", 0.25)],
         [("vllm:num_requests_waiting", "2", 3.0), ("vllm:kv_cache_usage_perc", "2", 0.5)]],
    ],
)  # fmt: skip
def test_merged_expositions_parse_as_one_server_with_every_engine(
    split: list[list[tuple[str, str, float]]],
) -> None:
    texts = [f"# HELP x y\n{_exposition(*part)}" for part in split]
    merged, why = merge_expositions(["a", "b"], texts)
    assert why is None
    whole = _exposition(*(sample for part in split for sample in part))
    assert parse_scrape(merged, t_s=0, phase="p") == parse_scrape(whole, t_s=0, phase="p")


def test_the_spread_client_routes_by_request_index() -> None:
    a, b = SimpleNamespace(name="a"), SimpleNamespace(name="b")
    spread = SpreadClient([a, b])  # type: ignore[list-item]
    assert [spread.for_request(i) for i in range(5)] == [a, b, a, b, a]


# ---------------------------------------------------------------- readiness and the sweep's servers


def _metrics(*engines: str) -> str:
    return "".join(f'vllm:num_requests_running{{engine="{e}",model_name="m"}} 0\n' for e in engines)


@pytest.mark.parametrize(
    ("follower_argv", "answers", "said"),
    [
        (HYBRID, {8000: (200, _metrics("0", "1")), 8001: (200, _metrics("2", "3"))}, None),
        (HYBRID, {8000: (200, _metrics("0", "1")), 8001: (503, "")}, "http://127.0.0.1:8001/health 503"),
        (HYBRID, {8000: (200, _metrics("0", "1")), 8001: (200, _metrics("2"))}, "no engine 3 of 4"),
        (HYBRID, {8000: (200, _metrics("0", "1")), 8001: (200, "")},
         "of 2 servers\\) reports no engine 2, 3"),
        (("--headless",), {8000: (200, _metrics("0", "1", "2", "3"))}, None),  # internal: the head alone
    ],
)  # fmt: skip
def test_readiness_asks_every_nodes_server(
    tmp_path: Path, follower_argv: tuple[str, ...], answers: dict[int, tuple[int, str]], said: str | None
) -> None:
    follower = (*SPEC.argv, *follower_argv, "--port", "8001")
    spec = replace(SPEC, argv=(*SPEC.argv, "--data-parallel-size", "4"), followers=(follower,),
                   served_model_name="m", port=8000, bind_host="127.0.0.1")  # fmt: skip
    asked: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        port = request.url.port or 8000
        asked.append(port)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        status, text = answers[port]
        return httpx.Response(status, text=text)

    f = Server(spec, 2, 2, 1.0, tmp_path / "f.log", 0.0, node=1, node_name="localhost")
    server = Server(spec, 1, 1, 1.0, tmp_path / "s.log", 0.0, followers=(f,))
    assert_ready_once(server, answer, "http://127.0.0.1:8000", said)
    assert (8001 in asked) == ("--headless" not in follower_argv)


@pytest.mark.parametrize(
    ("followers", "names", "urls"),
    [
        ([["--headless"]], ["localhost"], ["http://127.0.0.1:8000"]),
        ([[*HYBRID, "--port", "8001"]], ["localhost"], ["http://127.0.0.1:8000", "http://127.0.0.1:8001"]),
        ([[*HYBRID, "--port", "8001"]], ["n2"], ["http://127.0.0.1:8000", "http://n2:8001"]),
        ([["--data-parallel-external-lb", "--port", "8001"],
          ["--data-parallel-external-lb", "--port", "8002"]], ["n2", "n3"],
         ["http://127.0.0.1:8000", "http://n2:8001", "http://n3:8002"]),
    ],
)  # fmt: skip
def test_the_servers_of_a_launch(followers: list[list[str]], names: list[str], urls: list[str]) -> None:
    assert server_urls("http://127.0.0.1:8000", followers, names) == urls
