"""Whether a search's study storage (``search.storage``) can be reached, asked before anything is stopped.

Pipeline position: the sweep's opening (:mod:`orchestrator.app.sweeper`, before the live service is
stopped and the baseline measured) and ``doctor`` (:mod:`orchestrator.doctor`) call
:func:`storage_problem`; around the search itself (:class:`orchestrator.app.search.SearchRun`),
:func:`storage_faults` turns SQLAlchemy's errors (Optuna's RDB storage) into gauntlet's tree. Either way the
message names the URL with its password masked, what failed and what to check; never
"unexpected sqlalchemy.exc.OperationalError ... This is a bug in gauntlet". One connection is opened and
closed (``SELECT``-free); a SQLite file is not created, only its folder checked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from contracts.errors import ConfigError, GauntletError, PreflightError
from contracts.secrets import redacted
from orchestrator.config.secrets import revealed

#: Seconds one connection attempt may take (libpq's and MySQL drivers' ``connect_timeout``).
CONNECT_TIMEOUT_S = 5
#: Dialects whose drivers take ``connect_timeout`` as a connect argument.
_TIMEOUT_DIALECTS = ("postgresql", "mysql", "mariadb")
#: ``scheme://user:password@`` in a URL SQLAlchemy could not parse: the password is masked all the same.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@\s]*)@")
#: Connect once to a URL: raises what SQLAlchemy and the driver raise (the seam tests replace).
Connect = Callable[[str], None]


@dataclass(frozen=True)
class StorageFault:
    """Why ``search.storage`` cannot be used: the masked URL, what failed, what to check."""

    url: str
    what: str
    check: str

    def message(self) -> str:
        return f"search.storage {self.url}: {self.what}"


def masked_url(url: str) -> str:
    """``url`` as a message may show it: the password replaced by ``***``, a reference to the environment
    kept (:func:`contracts.secrets.redacted`, the one masker of every message).

    >>> masked_url("postgresql+psycopg://me:s3cret@db:5432/gauntlet")
    'postgresql+psycopg://me:***@db:5432/gauntlet'
    """
    return redacted(url)


def _real(url: str) -> str:
    """The URL a connection is opened with: a password the sweep moved into its environment put back
    (:func:`orchestrator.config.secrets.revealed`); as it is when there is none to put back."""
    try:
        return revealed(url)
    except ConfigError:
        return url


def connect_once(url: str) -> None:
    """Open one connection to ``url`` and close it; the SQLite file is not created (its folder is checked
    by :func:`storage_problem`)."""
    parsed = make_url(url)
    args = {"connect_timeout": CONNECT_TIMEOUT_S} if parsed.get_backend_name() in _TIMEOUT_DIALECTS else {}
    engine = sqlalchemy.create_engine(parsed, poolclass=NullPool, connect_args=args)
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def storage_problem(url: str | None, *, connect: Connect = connect_once) -> StorageFault | None:
    """Why the study's storage at ``url`` cannot be used now (None: it can, or the search keeps its study in
    the sweep directory, ``url`` None)."""
    if not url:
        return None
    real = _real(url)  # the sweep may hold the password (or the whole URL) in its environment
    shown = masked_url(real)
    try:
        parsed = make_url(real)
    except (ArgumentError, ValueError) as exc:
        return StorageFault(
            shown,
            f"not a database URL ({redacted(str(exc))})",
            "write it as dialect+driver://user@host:port/database (postgresql+psycopg://me@db/gauntlet), "
            "or null for search/study.db in the sweep directory",
        )
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_problem(parsed, shown)
    try:
        connect(real)
    except (SQLAlchemyError, ImportError) as exc:  # a driver's error arrives wrapped by SQLAlchemy
        return storage_fault(exc, real)
    return None


def _sqlite_problem(parsed: URL, shown: str) -> StorageFault | None:
    database = parsed.database or ""
    if database in ("", ":memory:"):
        return StorageFault(
            shown,
            "an in-memory SQLite database is gone when the sweep ends (a resume finds no trials)",
            "name a file (sqlite:////path/study.db), or null for search/study.db in the sweep directory",
        )
    folder = Path(database).expanduser().absolute().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return StorageFault(
            shown,
            f"the SQLite file's folder {folder} does not exist or is not writable",
            "create the folder (or fix its permissions), or null for search/study.db in the sweep directory",
        )
    return None


def storage_fault(exc: BaseException, url: str) -> StorageFault:
    """A foreign exception from connecting to (or using) the study's storage, as gauntlet says it (pure):
    the URL masked, the driver's own first lines (with the password masked, should it quote it), and
    what to check for that kind of failure."""
    real = _real(url)
    shown = masked_url(real)
    password = _password(real)
    detail = str(getattr(exc, "orig", None) or exc).strip()
    if password:
        detail = detail.replace(password, "***")
    detail = " ".join(line.strip() for line in detail.splitlines()[:2] if line.strip())
    if isinstance(exc, ImportError | NoSuchModuleError):
        return StorageFault(
            shown,
            f"its database driver is not installed ({detail})",
            "for PostgreSQL: pip install -e '.[postgres]' (psycopg 3: postgresql+psycopg://...); another "
            "database needs its SQLAlchemy driver",
        )
    if isinstance(exc, OperationalError):
        return StorageFault(
            shown,
            f"cannot connect to the study's database ({detail})",
            f"that a database server runs at {_where(url)} and accepts connections from this machine "
            "(host, port, firewall), that the database exists, and the user and password (PGPASSWORD or "
            "~/.pgpass, never in the URL)",
        )
    kind = type(exc).__name__
    return StorageFault(
        shown,
        f"the study's database refused the search ({kind}: {detail})",
        "the database's own log says why; or set search.storage to null for search/study.db in the "
        "sweep directory",
    )


def storage_refusal(fault: StorageFault) -> PreflightError:
    """The sweep's opening refused on ``fault``: nothing was started or stopped."""
    return PreflightError(
        f"{fault.message()}; nothing was started or stopped",
        hint=f"check {fault.check}; `python -m orchestrator doctor` with the same overrides asks again",
    )


@contextmanager
def storage_faults(url: str) -> Iterator[None]:
    """Around the search: an error of its study's storage (the database went away, a permission) leaves
    as a :class:`GauntletError` naming the masked URL and what to check, not as SQLAlchemy's."""
    try:
        yield
    except SQLAlchemyError as exc:
        fault = storage_fault(exc, url)
        raise GauntletError(
            f"{fault.message()}; the search stopped here (the trials recorded so far stay in the study)",
            hint=f"check {fault.check}; the same command with hydra.sweep.dir=<this sweep> resumes it",
        ) from exc


def _password(url: str) -> str | None:
    try:
        return make_url(url).password
    except (ArgumentError, ValueError):
        found = _USERINFO.search(url)
        return found["password"] if found else None


def _where(url: str) -> str:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return "the URL's host and port"
    return f"{parsed.host or 'localhost'}:{parsed.port or 'its default port'}"
