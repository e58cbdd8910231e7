"""The load client's TLS settings: the context of an ``https://`` base URL, or the file it cannot use.

Pipeline position: :mod:`load.client` opens its ``https://`` connections with :func:`tls_context`;
composition (:mod:`orchestrator.config.client_inputs`) refuses a config whose TLS files the client cannot
use (:func:`tls_fault`) before anything starts.
"""

from __future__ import annotations

import ssl

from contracts.errors import HarnessError
from contracts.schema import LoadConfig

#: A fault of one of the client's TLS files: (its field, the file, why the client cannot use it).
TlsFault = tuple[str, str, str]


class _Encrypted(Exception):
    """A private key asked for its passphrase (OpenSSL would prompt on the terminal and stall the run)."""


def _no_passphrase() -> str:
    raise _Encrypted


def _tls(load: LoadConfig | None) -> tuple[ssl.SSLContext | None, TlsFault | None]:
    """The TLS context of ``load`` (the system trust store when None), or the first file it cannot use."""
    ca, cert, key = (load.ca_bundle, load.client_cert, load.client_key) if load else (None, None, None)
    for name, path in (("load.ca_bundle", ca), ("load.client_cert", cert), ("load.client_key", key)):
        if path is None:
            continue
        try:
            open(path, "rb").close()  # can this user read it (not a directory, no EACCES)?
        except OSError as exc:
            return None, (name, path, f"cannot be read ({exc.strerror or exc})")
    try:
        context = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        return None, ("load.ca_bundle", str(ca), f"not a PEM CA bundle ({exc})")
    if cert:
        try:
            context.load_cert_chain(cert, key, password=_no_passphrase)
        except _Encrypted:
            why = "an encrypted private key: the client cannot type its passphrase (decrypt it: openssl pkey)"
            return None, ("load.client_key" if key else "load.client_cert", key or cert, why)
        except (OSError, ssl.SSLError) as exc:
            pair = "load.client_key" if key else "the same file"
            return None, (
                "load.client_cert",
                cert,
                f"not a PEM certificate whose private key is {pair} ({exc})",
            )
    context.set_alpn_protocols(["http/1.1"])
    return context, None


def tls_fault(load: LoadConfig | None) -> TlsFault | None:
    """The first of ``load``'s TLS files the client cannot use (missing, unreadable, not PEM, a key that
    does not match its certificate or asks for a passphrase), or None: what composition refuses."""
    return _tls(load)[1]


def tls_context(load: LoadConfig | None) -> ssl.SSLContext:
    """The TLS settings of an ``https://`` base URL: ``load.ca_bundle`` (else the system trust store) and
    ``load.client_cert``/``client_key`` for mutual TLS. A file the client cannot use is the harness's
    fault, never the server's: a HarnessError naming the field and the file."""
    context, fault = _tls(load)
    if fault is not None:
        field_name, path, why = fault
        raise HarnessError(
            f"{field_name} = {path!r}: {why}; the load client's own file, not the server",
            hint=f"point {field_name} at a PEM file this user can read (docs/load-runner.md, TLS)",
        )
    assert context is not None
    return context
