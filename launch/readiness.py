"""The server's API as the supervisor asks it: ready (``/health`` 200 and the model listed) and ``/health``.

Pipeline position: under :mod:`launch.supervisor` (the readiness wait) and :mod:`launch.watch` (the
watcher's probe). Every request goes through the injected httpx transport with the spec's API key and no
proxy from the environment.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from contracts.http_tls import default_verify
from launch.api_servers import server_urls
from launch.command import auth_headers
from launch.engines import data_parallel_size, missing_engines
from launch.tracking import Server, Tracker

HTTP_TIMEOUT_S = 5.0
#: The shortest wait between two readiness polls (a refused connection and a liveness check each).
MIN_POLL_S = 0.05


def poll_wait_s(elapsed_s: float, poll_s: float) -> float:
    """The wait before the next readiness poll, ``elapsed_s`` after the spawn: a twentieth of the time the
    server has taken so far, at least :data:`MIN_POLL_S` and at most ``poll_s``. A server that is ready
    between two polls is seen at most 5% (or 50 ms) late: a fixed 0.5 s let a one-second simulator start
    wait up to half as long again, while a vLLM start of a minute is still asked every ``poll_s``.

    >>> [poll_wait_s(t, 0.5) for t in (0.0, 1.0, 4.0, 10.0, 60.0)]
    [0.05, 0.05, 0.2, 0.5, 0.5]
    """
    return min(poll_s, max(MIN_POLL_S, elapsed_s / 20))


class NotReady(Exception):
    """Readiness poll: not yet (retried until the deadline)."""


class Exited(Exception):
    """Readiness poll: the process is gone (not retried)."""

    def __init__(self, exit_code: int | None) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


class ServerApi:
    """Clients of a server's API: the injected transport, the spec's API key from ``environ``."""

    def __init__(self, transport: httpx.BaseTransport | None, environ: Mapping[str, str]) -> None:
        self._transport = transport
        self._environ = environ

    def client(self, server: Server, timeout_s: float) -> httpx.Client:
        """A client of the server's API: the injected transport, its API key, no proxy from the env."""
        return httpx.Client(
            base_url=server.base_url,
            transport=self._transport,
            timeout=timeout_s,
            trust_env=False,
            verify=default_verify(trust_env=False),
            headers=auth_headers(server.spec, self._environ),
        )

    def health(self, server: Server, timeout_s: float = HTTP_TIMEOUT_S) -> int | str:
        """``GET /health``: its status code, or why it could not be asked (the one /health probe)."""
        try:
            with self.client(server, timeout_s) as client:
                return client.get("/health").status_code
        except httpx.TransportError as exc:
            return f"{type(exc).__name__}: {exc}"


def follower_urls(server: Server) -> list[str]:
    """The base URLs of a multi-node server's serving followers (hybrid or external DP load balancing;
    none under internal, where only the head serves)."""
    names = [follower.node_name for follower in server.followers]
    return server_urls(server.base_url, server.spec.followers, names)[1:]


def ready_once(server: Server, client: httpx.Client, tracker: Tracker) -> None:
    """One readiness poll: returns when the process is alive, ``/health`` is 200 and ``/v1/models`` lists
    the served model, and for a multi-node server when ``/metrics`` reports every data-parallel rank's
    engine (:mod:`launch.engines`): with one API server per node, every node's server answers ``/health``
    and their ``/metrics`` together report every engine; raises :class:`Exited` (the process is gone) or
    :class:`NotReady`."""
    if tracker.gone(server):
        raise Exited(tracker.exit_code(server))
    try:
        health = client.get("/health")
        if health.status_code != 200:
            raise NotReady(f"/health {health.status_code}")
        models = client.get("/v1/models")
        if models.status_code != 200:
            raise NotReady(f"/v1/models {models.status_code}")
        ids = [item.get("id") for item in models.json().get("data", [])]
        if server.spec.served_model_name not in ids:
            raise NotReady(f"/v1/models lists {ids}, not {server.spec.served_model_name!r}")
        if server.followers:  # every rank, the other nodes' included, must report its engine
            urls = follower_urls(server)  # hybrid or external: every node's own server too
            for url in urls:
                if (code := client.get(f"{url}/health").status_code) != 200:
                    raise NotReady(f"{url}/health {code}")
            texts = [client.get("/metrics"), *(client.get(f"{url}/metrics") for url in urls)]
            if bad := next((m for m in texts if m.status_code != 200), None):
                raise NotReady(f"{bad.url} {bad.status_code}")
            dp = data_parallel_size(server.spec.argv)
            if missing := missing_engines("\n".join(m.text for m in texts), dp):
                where = f" (of {len(texts)} servers)" if urls else ""
                raise NotReady(f"/metrics{where} reports no engine {', '.join(missing)} of {dp}")
    except (httpx.TransportError, ValueError, AttributeError) as exc:
        raise NotReady(str(exc)) from exc
