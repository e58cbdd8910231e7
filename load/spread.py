"""Several API servers, one run: a candidate with one API server per node (hybrid DP load balancing) or
per rank (external), with the load runner as the balancer in front.

Pipeline position: under :mod:`load.runner` and :mod:`load.workers`, given the servers' base URLs (the
head's first; the sweep reads them from the launch spec, :func:`launch.api_servers.server_urls`). Requests
are spread **round-robin by request index**: request ``i`` (its record's ``index``, warmup first) goes to
server ``i mod n``, in the runner's own loop and in every worker process alike, so a record's server is
``servers[record.index % n]`` (:func:`server_of`; the servers are the run's ``settings`` ``servers``). Each
server's ``/metrics`` is scraped at the same moment and the expositions are concatenated: every server
reports its own engines (``engine`` = its global DP ranks), so the parser's sum over engines is the sum over
the servers, and a scrape in which two servers claim the same engine, or one server fails, is an error of
that scrape rather than a wrong sum::

    spread = spread_clients(["http://n1:8000", "http://n2:8001"], transport=None, clock=clock,
                            headers={}, tls=None)
    spread.stream.for_request(3)   # the second server's client
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from contracts.dp_balance import engines_in
from contracts.http_tls import default_verify
from load.client import Clock, Exchange, HttpxStreamClient, RawStreamClient, StreamClient
from load.scrape import Scraper


def server_of(index: int, servers: Sequence[str]) -> str:
    """The server that answered the request of record ``index`` (round-robin by index).

    >>> server_of(3, ["http://n1:8000", "http://n2:8001"])
    'http://n2:8001'
    """
    return servers[index % len(servers)]


class SpreadClient:
    """The servers' stream clients as one: request ``i`` to server ``i mod n`` (:meth:`for_request`)."""

    def __init__(self, clients: Sequence[StreamClient]) -> None:
        if not clients:
            raise ValueError("a spread needs at least one server")
        self.clients = list(clients)
        self._calls = 0

    def for_request(self, index: int) -> StreamClient:
        return self.clients[index % len(self.clients)]

    async def post_stream(self, path: str, body: bytes, *, timeout_s: float) -> Exchange:
        """A request without an index (none the runner sends): the servers in turn."""
        client = self.clients[self._calls % len(self.clients)]
        self._calls += 1
        return await client.post_stream(path, body, timeout_s=timeout_s)

    def reads_received(self) -> int:
        return sum(client.reads_received() for client in self.clients)

    async def preconnect(self, count: int) -> None:
        """Open ``count`` connections in all, spread as the requests will be."""
        n = len(self.clients)
        for k, client in enumerate(self.clients):
            share = count // n + (1 if k < count % n else 0)
            if share and isinstance(client, RawStreamClient):
                await client.preconnect(share)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


def merge_expositions(urls: Sequence[str], texts: Sequence[str]) -> tuple[str, str | None]:
    """The servers' ``/metrics`` as one exposition (comments dropped, samples concatenated), or why they
    cannot be summed: two servers reporting the same engine would count its requests twice."""
    seen: dict[str, str] = {}
    for url, text in zip(urls, texts, strict=True):
        for engine in sorted(engines_in(text)):
            if engine in seen:
                return "", f"{seen[engine]} and {url} both report engine {engine}"
            seen[engine] = url
    lines = [line for text in texts for line in text.splitlines() if line and not line.startswith("#")]
    return "\n".join(lines) + "\n", None


class SpreadScraper(Scraper):
    """Every server's ``/metrics`` at once, merged into one scrape (:func:`merge_expositions`); a scrape
    is recorded only when every server answered it."""

    def __init__(self, urls: Sequence[str], parts: Sequence[Scraper], clock: Clock) -> None:
        super().__init__(parts[0].aux, parts[0].raw, clock)
        self.urls = list(urls)
        self.parts = list(parts)

    async def _get(self) -> tuple[int | None, str, str | None]:
        answers = await asyncio.gather(*(part._get() for part in self.parts))
        texts: list[str] = []
        for url, (status, text, error) in zip(self.urls, answers, strict=True):
            if error is not None:
                return None, "", f"{url}: {error}"
            if status != 200:
                return None, "", f"{url}: HTTP {status}"
            texts.append(text)
        merged, why = merge_expositions(self.urls, texts)
        return (None, "", why) if why is not None else (200, merged, None)

    async def aclose(self) -> None:
        for part in self.parts:
            if part.raw is not None:
                await part.raw.aclose()
            await part.aux.aclose()


@dataclass
class Spread:
    """The clients of a run against several servers."""

    stream: SpreadClient
    scraper: SpreadScraper

    async def aclose(self) -> None:
        await self.stream.aclose()
        await self.scraper.aclose()


def spread_clients(
    urls: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None,
    clock: Clock,
    headers: dict[str, str],
    tls: ssl.SSLContext | None,
) -> Spread:
    """A stream client and a ``/metrics`` scraper per server (through ``transport`` when tests give one)."""
    streams: list[StreamClient] = []
    scrapers: list[Scraper] = []
    for url in urls:
        aux = httpx.AsyncClient(
            base_url=url,
            transport=transport,
            headers=headers,
            verify=tls if tls is not None else default_verify(),
        )
        if transport is not None:
            streams.append(HttpxStreamClient(url, transport=transport, clock=clock, headers=headers))
            scrapers.append(Scraper(aux, None, clock))
        else:
            streams.append(RawStreamClient(url, clock=clock, headers=headers, tls=tls))
            scrapers.append(Scraper(aux, RawStreamClient(url, clock=clock, headers=headers, tls=tls), clock))
    return Spread(SpreadClient(streams), SpreadScraper(urls, scrapers, clock))
