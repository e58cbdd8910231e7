"""gauntlet's own HTTP clients share one default TLS context per process (contracts.http_tls): httpx built a
new one, loading the CA bundle (about 38 ms of CPU), for each client it was not given one for."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from contracts.errors import LaunchError
from contracts.http_tls import default_verify
from launch.readiness import ServerApi
from launch.sim.client import SimEnergy, sim_gpu_memory
from tests.unit.test_supervisor import make_spec

CLOSED = "http://127.0.0.1:9"  # nothing listens: each call fails at once, after its client was made


@dataclass
class _Server:
    spec: Any

    @property
    def base_url(self) -> str:
        return CLOSED


def _gpu_memory() -> None:
    with pytest.raises(LaunchError):
        sim_gpu_memory(CLOSED, timeout_s=1.0)


def _energy_window() -> None:
    window = SimEnergy(CLOSED).open()
    window.edge("start")
    window.edge("end")


def _health() -> None:
    assert isinstance(ServerApi(None, {}).health(_Server(make_spec()), 1.0), str)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("calls", "site"),
    [(3, _gpu_memory), (2, _energy_window), (5, _health)],
    ids=["sim_gpu_memory", "sim energy window", "/health probe"],
)
def test_clients_share_one_default_tls_context(
    monkeypatch: pytest.MonkeyPatch, calls: int, site: Callable[[], None]
) -> None:
    made: list[object] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(args or kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    default_verify.cache_clear()
    for _ in range(calls):
        site()
    assert len(made) <= 1, made  # before: one per client (3, 3 with the window's start read, 5)


@pytest.mark.parametrize("trust_env", [True, False])
def test_the_shared_context_verifies_as_httpx_default_does(trust_env: bool) -> None:
    ctx = default_verify(trust_env)
    assert ctx is default_verify(trust_env)
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert ctx.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded
