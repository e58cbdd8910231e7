"""One default TLS context per process for gauntlet's own HTTP clients.

httpx builds a new ``ssl.SSLContext`` for every client it is not given one for, and loading the CA bundle
into it costs about 38 ms of CPU (2026-12-06, this repository's 2-core machine): the watcher's ``/health``
probe every second, the simulator's energy window around every run and each readiness wait paid it, about
a hundred times in one small simulator sweep. :func:`default_verify` is httpx's own default context
(``httpx.create_ssl_context``: certifi's bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR`` when ``trust_env``),
built once per process and shared: what is verified does not change. A client with its own CA or client
certificate (``load.tls``) still builds its own.

Example::

    httpx.Client(base_url=url, verify=default_verify())
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def default_verify(trust_env: bool = True) -> ssl.SSLContext:
    """httpx's default verifying context (``verify=True``), made once per process and ``trust_env``."""
    return httpx.create_ssl_context(verify=True, trust_env=trust_env)
