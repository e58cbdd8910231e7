"""``/metrics`` during a profile run: fetch, keep only the needed families, parse nothing until the end.

Pipeline position: :func:`load.runner.run_profile` scrapes before the warmup, before the measured window
(the start of the deltas), every second while it runs and at the end; :func:`load.collect.summarize_run`
parses the kept text afterwards (:mod:`load.metrics`). While streams run, a scrape goes through the raw
client (far less loop time than httpx); with a test transport, through httpx.
"""

from __future__ import annotations

import asyncio

import httpx

from load.client import Clock, RawStreamClient
from load.collect import RawScrape
from load.metrics import filter_scrape

SCRAPE_EVERY_S = 1.0
SCRAPE_TIMEOUT_S = 5.0


class Scraper:
    """The scrapes and scrape errors of one run; a server without ``/metrics`` is asked only once."""

    def __init__(self, aux: httpx.AsyncClient, raw: RawStreamClient | None, clock: Clock) -> None:
        self.aux = aux
        self.raw = raw
        self.clock = clock
        self.scrapes: list[RawScrape] = []
        self.errors: list[str] = []
        self._available = True

    async def scrape(self, phase: str) -> None:
        if not self._available:
            return
        at = self.clock()
        status, text, error = await self._get()
        if error is not None:
            self.errors.append(f"{phase}: {error}")
            return
        if status != 200:
            self.errors.append(f"{phase}: HTTP {status}")
            if status in (404, 405) and not self.scrapes:
                self._available = False  # this server has no /metrics: stop asking
            return
        self.scrapes.append((at, phase, filter_scrape(text)))

    async def every_second(self, time_limit_s: float) -> None:
        """Scrape ``during`` once a second, bounded by the profile's time limit (cancelled at the end)."""
        for _ in range(int(time_limit_s / SCRAPE_EVERY_S) + 2):
            await asyncio.sleep(SCRAPE_EVERY_S)
            await self.scrape("during")

    async def _get(self) -> tuple[int | None, str, str | None]:
        """(status, text, transport error)."""
        if self.raw is not None:
            exchange = await self.raw.get("/metrics", timeout_s=SCRAPE_TIMEOUT_S)
            if exchange.ending != "complete" or exchange.status is None:
                return None, "", f"{exchange.ending}: {exchange.detail}"
            return (
                exchange.status,
                b"".join(piece for _, piece in exchange.body).decode("utf-8", "replace"),
                None,
            )
        try:
            response = await self.aux.get("/metrics", timeout=SCRAPE_TIMEOUT_S)
        except httpx.HTTPError as exc:
            return None, "", f"{type(exc).__name__}: {exc}"
        return response.status_code, response.text, None
